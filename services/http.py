"""What every FastAPI service shares: error handlers, /health, /metrics, auth helpers."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.errors import (
    InvalidArgument,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    QuireError,
    Unauthorized,
)

log = logging.getLogger(__name__)

# Responses documented on every route (OpenAPI).
ERROR_SCHEMA = {
    "type": "object",
    "required": ["error", "message"],
    "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
}


# FastAPI's telemetry looks up environment variables on every request (about a tenth of
# the gateway's CPU on single-entry adds, measured with py-spy): our services export
# Prometheus metrics instead.
TELEMETRY_OFF = {"tracing": False, "metrics": False, "logs": False}


def new_app(**kwargs: Any) -> FastAPI:
    """A FastAPI application as every Quire service builds it."""
    return FastAPI(telemetry=TELEMETRY_OFF, **kwargs)


def error_response(status: int, description: str) -> dict:
    return {
        status: {
            "description": description,
            "content": {"application/json": {"schema": ERROR_SCHEMA}},
        }
    }


def error_json(exc: QuireError) -> JSONResponse:
    return JSONResponse(exc.to_json(), status_code=exc.http_status)


def install_error_handlers(app: FastAPI) -> None:
    """Map every error to ``{"error", "message"}`` with the API.md status and code."""

    @app.exception_handler(QuireError)
    async def _quire(_: Request, exc: QuireError) -> JSONResponse:
        return error_json(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            parts.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
        return error_json(InvalidArgument("; ".join(parts) or "invalid request"))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            err: QuireError = NotFound("no such route")
        elif exc.status_code == 405:
            err = MethodNotAllowed("method not allowed on this route")
        elif exc.status_code == 413:
            err = PayloadTooLarge(str(exc.detail))
        elif exc.status_code == 401:
            err = Unauthorized(str(exc.detail))
        elif 400 <= exc.status_code < 500:
            err = InvalidArgument(str(exc.detail))
        else:
            err = QuireError(str(exc.detail))
        return error_json(err)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_json(QuireError("internal error"))


def secret_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a presented secret with the expected one."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def bearer_token(request: Request) -> str | None:
    value = request.headers.get("authorization")
    if not value or not value.lower().startswith("bearer "):
        return None
    return value[7:].strip()


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


def add_health_route(app: FastAPI, is_ready: Callable[[], bool]) -> None:
    @app.get(
        "/health",
        tags=["ops"],
        summary="Readiness",
        responses={200: {"description": "ready"}, **error_response(503, "not ready")},
    )
    async def health() -> JSONResponse:
        if is_ready():
            return JSONResponse({"status": "ok"})
        return JSONResponse({"error": "unavailable", "message": "not ready"}, status_code=503)


async def read_body(request: Request, limit: int) -> bytes:
    """The whole request body, refused with 413 as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise InvalidArgument("bad Content-Length")
        if int(declared) > limit:
            raise PayloadTooLarge(f"body of {declared} bytes over the limit of {limit}")
        return await request.body()
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise PayloadTooLarge(f"body over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def is_json(request: Request) -> bool:
    """API.md: a request with ``Content-Type: application/json`` (any parameters) is JSON."""
    content_type = request.headers.get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def install_openapi(app: FastAPI, scheme_name: str, scheme: dict[str, Any]) -> None:
    """Build the app's OpenAPI document our way: ``scheme`` as the security scheme of
    every /v1 operation, and no FastAPI 422 responses (validation errors are 400)."""

    def build() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
            tags=app.openapi_tags,
        )
        doc.setdefault("components", {}).setdefault("securitySchemes", {})[scheme_name] = scheme
        for path, operations in doc.get("paths", {}).items():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
                if path.startswith("/v1"):
                    operation["security"] = [{scheme_name: []}]
        schemas = doc.get("components", {}).get("schemas", {})
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
        app.openapi_schema = doc
        return doc

    app.openapi = build  # type: ignore[method-assign]
