"""The routes every service has: ``/health`` and ``/metrics``."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from services.errors import Unavailable
from services.web.errors import DocumentedError, error_json, error_responses


def add_metrics_route(app: FastAPI, registry: CollectorRegistry) -> None:
    @app.get(
        "/metrics",
        tags=["ops"],
        response_class=Response,
        summary="Prometheus metrics",
        responses={
            200: {
                "description": "Prometheus text exposition format",
                "content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
            }
        },
    )
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def add_health_route(
    app: FastAPI, is_ready: Callable[[], bool], draining: Callable[[], bool] | None = None
) -> None:
    """``/health``: 200 while ``is_ready()``, else 503; 503 too while ``draining()`` (a
    gateway handing its logs to the others: a load balancer sends it nothing more)."""

    @app.get(
        "/health",
        tags=["ops"],
        summary="Readiness",
        responses={
            200: {"description": "ready"},
            **error_responses(DocumentedError(Unavailable, "not ready")),
        },
    )
    async def health() -> Response:
        if draining is not None and draining():
            return error_json(Unavailable("draining: this gateway hands its logs to the others"))
        if is_ready():
            return JSONResponse({"status": "ok"})
        return error_json(Unavailable("not ready"))
