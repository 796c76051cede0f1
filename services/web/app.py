"""The FastAPI application as every Quire service builds it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.telemetry import TelemetryConfig
from starlette.types import ASGIApp, Receive, Scope, Send

from services.web.lane import Lane

# FastAPI's telemetry looks up environment variables on every request, a visible share
# of the gateway's CPU on single-entry adds (benchmarks/README.md, "Measured choices"):
# our services export Prometheus metrics instead.
TELEMETRY_OFF: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}


class QuireApp(FastAPI):
    """A FastAPI application whose OpenAPI document can be built our way
    (``services.web.openapi.install_openapi`` sets ``openapi_builder``), and which may
    serve the calls of its hot routes before FastAPI's own stack: ``front`` is an ASGI
    app that answers the requests it takes and passes every other one to ``stack``
    (FastAPI's middleware, router and routes). The fast paths of adds sit there: below
    it, every request pays for about ten middleware layers and their ``send`` wrappers
    (Starlette's error and exception layers, FastAPI's body limit and telemetry, ours),
    which on a single-entry add cost more than the add itself. Below ASGI, the server's
    protocol may serve the same calls through the app's ``lane`` (services/web/lane.py),
    when the request is a plain one."""

    openapi_builder: Callable[[], dict[str, Any]] | None = None
    front: ASGIApp | None = None
    lane: Lane | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        front = self.front
        if front is None:
            await super().__call__(scope, receive, send)
        else:
            await front(scope, receive, send)

    async def stack(self, scope: Scope, receive: Receive, send: Send) -> None:
        """FastAPI's own handling of a call (the one ``front`` passes on)."""
        await super().__call__(scope, receive, send)

    def openapi(self) -> dict[str, Any]:
        if self.openapi_builder is None:
            return super().openapi()
        return self.openapi_builder()


def operation_id(route: APIRoute) -> str:
    """An operation's id is its route function's name (``create_ledger``), not FastAPI's
    default of name, path and method: generated clients name their calls after it."""
    return route.name


def new_app(**kwargs: Any) -> QuireApp:
    """A FastAPI application as every Quire service builds it."""
    kwargs.setdefault("generate_unique_id_function", operation_id)
    return QuireApp(telemetry=TELEMETRY_OFF, **kwargs)
