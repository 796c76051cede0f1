"""The FastAPI application as every Quire service builds it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.telemetry import TelemetryConfig

# FastAPI's telemetry looks up environment variables on every request (about a tenth of
# the gateway's CPU on single-entry adds, measured with py-spy): our services export
# Prometheus metrics instead.
TELEMETRY_OFF: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}


class QuireApp(FastAPI):
    """A FastAPI application whose OpenAPI document can be built our way
    (``services.web.openapi.install_openapi`` sets ``openapi_builder``)."""

    openapi_builder: Callable[[], dict[str, Any]] | None = None

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
