"""The gateway's add fast path: ``POST /v1/ledgers/{id}/entries`` and
``POST /v1/logs/{name}/records`` served straight from ASGI, before FastAPI's middleware
stack, router, dependency solving and per-request wrappers (the app's ``front``,
services/web/app.py; the bookie does the same for its adds: bookie/fastpath.py). One
record per request is how most producers write, and those layers cost more than the
add's own work.

The contract is the routes': the token is checked first with the middleware's own
rules (``TokenPolicy.allows``; a call it refuses goes on to the stack, whose
``TokenMiddleware`` answers the 401), the body is read with the same limits and
messages (``services.web.body.read_body``), and the add itself is the route's own code
(``add_answer`` / ``append_answer``), errors mapped by the one mapping (``error_json``).
Only requests the routes would accept as far as their path and headers go are taken: a
path id that is not a canonical integer, a log name or an ``Idempotency-Key`` that is
not valid, a header given twice, a gateway not ready yet — all go on to FastAPI, which
answers them as it always did. The routes stay in the app
(the OpenAPI document, and ``--no-fast-path``)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.passwords import client_address
from gateway.routes.ledgers import add_answer
from gateway.routes.logs import append_answer
from gateway.service import Gateway
from services.errors import PayloadTooLarge, QuireError
from services.limits import BODY_SIZE_MAX_BYTES, ID_MAX
from services.protocol.log_records import KEY_MAX_CHARS
from services.web.body import content_length, is_json_type
from services.web.errors import error_json

log = logging.getLogger(__name__)

_LEDGER_ADD = re.compile(r"/v1/ledgers/(0|[1-9][0-9]{0,18})/entries")
_LOG_APPEND = re.compile(r"/v1/logs/([A-Za-z0-9._-]{1,200})/records")
_KEY = re.compile(f"[ -~]{{1,{KEY_MAX_CHARS}}}")
_HEADERS_READ = {b"content-length", b"content-type", b"x-ledger-password", b"idempotency-key"}


class _Disconnected(Exception):
    """The client left before its body was complete (FastAPI answers an empty 400)."""


class AddFastPath:
    def __init__(
        self,
        app: ASGIApp,
        gateway: Callable[[], Gateway | None],
        allows: Callable[[Scope], bool] = lambda scope: True,
    ) -> None:
        self.app = app
        self.gateway = gateway
        self.allows = allows

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        ledger = _LEDGER_ADD.fullmatch(path) if path.startswith("/v1/ledgers/") else None
        append = _LOG_APPEND.fullmatch(path) if ledger is None else None
        gw = self.gateway() if (ledger or append) and self.allows(scope) else None
        headers = _headers(scope) if gw is not None else None
        if gw is None or headers is None:
            await self.app(scope, receive, send)
            return
        if ledger is not None:
            ledger_id = int(ledger.group(1))
            if ledger_id > ID_MAX:
                await self.app(scope, receive, send)
                return
            password = headers.get(b"x-ledger-password")
            client = scope.get("client")
            client_address.set(client[0] if client else None)
        else:
            key = headers.get(b"idempotency-key")
            if key is not None and _KEY.fullmatch(key) is None:
                await self.app(scope, receive, send)
                return
        try:
            raw = await _body(headers.get(b"content-length"), receive)
            batch = is_json_type(headers.get(b"content-type"))
            if ledger is not None:
                answer = await add_answer(gw, ledger_id, password, raw, batch)
            else:
                answer = await append_answer(gw, append.group(1), key, raw, batch)  # type: ignore[union-attr]
        except QuireError as exc:
            await error_json(exc)(scope, receive, send)
            return
        except _Disconnected:
            await _send(send, 400, b"", [])
            return
        except Exception:  # noqa: BLE001 - never a bare 500 page
            log.exception("unexpected error on POST %s", path)
            await error_json(QuireError("internal error"))(scope, receive, send)
            return
        body = json.dumps(answer, separators=(",", ":")).encode()
        await _send(send, 200, body, [(b"content-type", b"application/json")])


def _headers(scope: Scope) -> dict[bytes, str] | None:
    """The headers the routes read, by lower-case name (latin-1, as Starlette decodes
    them); None when one of them is given twice (FastAPI then decides)."""
    found: dict[bytes, str] = {}
    for name, value in scope["headers"]:
        if name in _HEADERS_READ:
            if name in found:
                return None
            found[name] = value.decode("latin-1")
    return found


async def _body(declared: str | None, receive: Receive) -> bytes:
    """The whole body, with ``read_body``'s limits and messages."""
    limit = BODY_SIZE_MAX_BYTES
    if declared is not None:
        content_length(declared, limit)
    chunks: list[bytes] = []
    total = 0
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        if chunk:
            total += len(chunk)
            if declared is None and total > limit:
                raise PayloadTooLarge(f"body over the limit of {limit} bytes")
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    start = [(b"content-length", b"%d" % len(body)), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})
