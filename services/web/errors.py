"""Every error, on every path, as ``{"error", "message"}`` with the docs/api.md status.

``error_body`` is the one place that body is built; ``error_json`` wraps it in a
response, which raw ASGI middlewares (the token and secret checks, the bookie's
add fast path) send themselves: ``await error_json(exc)(scope, receive, send)``.
``install_error_handlers`` maps every exception a FastAPI route raises through it.
``error_bytes`` and ``unavailable_app`` are the HTTP protocol's own answers
(services/web/server.py: a whole answer it writes itself, and the 503 it serves instead
of the application when too many requests are in flight), in the same shape.
``error_responses`` documents a route's error answers from the classes it may raise.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from services.errors import (
    ERRORS_BY_CODE,
    InvalidArgument,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    QuireError,
    Unauthorized,
    invariant,
)
from services.request_ids import REQUEST_ID_HEADER_RAW, new_request_id, scope_request_id

log = logging.getLogger(__name__)


# Codes of the metadata store's vocabulary, of start-up and of the CLI: never the code of
# an answer (services/errors.py), so not in the documents' enum.
NOT_ANSWERED_CODES = frozenset(
    {
        "node_not_found",
        "node_exists",
        "node_not_empty",
        "cookie_mismatch",
        "bookie_running",
        "data_dir_in_use",
        "gateway_unreachable",
        "stream_broken",
    }
)

# Every code an answer may carry, in the order of the hierarchy (services/errors.py).
ERROR_CODES: tuple[str, ...] = tuple(
    code for code in ERRORS_BY_CODE if code not in NOT_ANSWERED_CODES
)

ERROR_SCHEMA_NAME = "Error"
# The one error body of every service (docs/api.md "Errors"), a component of every document
# (``services.web.openapi.install_openapi`` adds it) that error responses refer to.
ERROR_SCHEMA: dict[str, Any] = {
    "title": ERROR_SCHEMA_NAME,
    "type": "object",
    "description": "Every error answer: the docs/api.md error code and a human-readable message",
    "required": ["error", "message"],
    "properties": {
        "error": {
            "type": "string",
            "enum": list(ERROR_CODES),
            "description": "The error code (docs/api.md); the HTTP status follows from it",
        },
        "message": {"type": "string", "description": "What went wrong, for people"},
    },
}
ERROR_SCHEMA_REF: dict[str, Any] = {"$ref": f"#/components/schemas/{ERROR_SCHEMA_NAME}"}


# A word of a description that may be an error code.
_WORD = re.compile(r"[a-z_]+")


@dataclass(frozen=True)
class DocumentedError:
    """An error a route may answer, as the route's OpenAPI description words it: the
    error's code with a note (``noted``) or a detail (``explained``), or the route's own
    words (a bare class in ``error_responses`` is named by its code). The words name no
    other error's code, so they cannot disagree with the class, whose status decides
    where they are listed."""

    error: type[QuireError]
    text: str

    def __post_init__(self) -> None:
        others = {w for w in _WORD.findall(self.text) if w in ERRORS_BY_CODE} - {self.error.code}
        invariant(
            not others,
            f"the description {self.text!r} of {self.error.__qualname__} names {sorted(others)}",
        )


def noted(error: type[QuireError], note: str) -> DocumentedError:
    """``error`` as ``code (note)``: a qualifier, such as "outcome unknown"."""
    return DocumentedError(error, f"{error.code} ({note})")


def explained(error: type[QuireError], detail: str) -> DocumentedError:
    """``error`` as ``code: detail``: what the route refuses with it."""
    return DocumentedError(error, f"{error.code}: {detail}")


def error_responses(
    *errors: type[QuireError] | DocumentedError,
) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` entries of the errors a route may answer: one per HTTP
    status the errors' classes have, its description their codes (or words) in the order
    given, joined by " / ", its body the ``Error`` schema."""
    by_status: dict[int, list[str]] = {}
    for error in errors:
        doc = error if isinstance(error, DocumentedError) else DocumentedError(error, error.code)
        by_status.setdefault(doc.error.http_status, []).append(doc.text)
    return {
        status: {
            "description": " / ".join(texts),
            "content": {"application/json": {"schema": ERROR_SCHEMA_REF}},
        }
        for status, texts in by_status.items()
    }


def error_body(exc: QuireError) -> bytes:
    """The JSON body of an error answer: ``{"error": CODE, "message": TEXT}``, compact
    UTF-8 as FastAPI's ``JSONResponse`` renders it."""
    return json.dumps(
        exc.to_json(), ensure_ascii=False, allow_nan=False, separators=(",", ":")
    ).encode("utf-8")


def error_json(exc: QuireError, headers: Mapping[str, str] | None = None) -> Response:
    """The answer for ``exc``: its status and ``error_body``, plus ``headers``. It is an
    ASGI application too, for middlewares that answer before routing."""
    return Response(
        error_body(exc), status_code=exc.http_status, headers=headers, media_type="application/json"
    )


def install_error_handlers(app: FastAPI) -> None:
    """Map every error to ``{"error", "message"}`` with the docs/api.md status and code."""

    @app.exception_handler(QuireError)
    async def _quire(_: Request, exc: QuireError) -> Response:
        return error_json(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> Response:
        parts = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            parts.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
        return error_json(InvalidArgument("; ".join(parts) or "invalid request"))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> Response:
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
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_json(QuireError("internal error"))


def error_bytes(status: int, code: str, message: str, request_id: str | None = None) -> bytes:
    """A whole HTTP/1.1 answer with a docs/api.md error body that closes the connection;
    its ``X-Request-Id`` is ``request_id`` (a sane id) or a new one."""
    body = json.dumps({"error": code, "message": message}, separators=(",", ":")).encode()
    return b"".join(
        [
            STATUS_LINE[status],
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"x-request-id: %s\r\n" % (request_id or new_request_id()).encode("ascii"),
            b"connection: close\r\n\r\n",
            body,
        ]
    )


def unavailable_app(message: str) -> Any:
    """An ASGI app answering every request with the JSON 503 ``unavailable`` (and the
    request's id: it runs instead of the whole application, access middleware included)."""
    body = json.dumps({"error": "unavailable", "message": message}, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        request_id = (REQUEST_ID_HEADER_RAW, scope_request_id(scope).encode("ascii"))
        await send(
            {"type": "http.response.start", "status": 503, "headers": [*headers, request_id]}
        )
        await send({"type": "http.response.body", "body": body})

    return app
