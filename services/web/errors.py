"""Every error, on every path, as ``{"error", "message"}`` with the API.md status."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

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

    @app.exception_handler(ClientDisconnect)
    async def _gone(_: Request, exc: ClientDisconnect) -> Response:
        # The client left (or its body timed out) mid-request: no one reads an answer,
        # and it is not our error to log.
        return Response(status_code=400)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_json(QuireError("internal error"))
