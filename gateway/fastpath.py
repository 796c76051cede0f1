"""The gateway's add fast path: ``POST /v1/ledgers/{id}/entries`` and
``POST /v1/logs/{name}/records`` served before FastAPI's middleware stack, router,
dependency solving and per-request wrappers. One record per request is how most
producers write, and those layers cost more than the add's own work. ``AddRoutes``
decides which calls are taken and serves them; it is served on two levels:

- as the HTTP protocol's lane (services/web/lane.py), below ASGI: a plain request (one
  at a time on its connection, a Content-Length body, no proxy headers...) is answered
  by the protocol itself, without uvicorn's request/answer cycle and the ASGI
  middlewares, which were about a fifth of the gateway's loop (benchmarks/README.md,
  "Measured choices");
- as ``AddFastPath``, an ASGI application in front of FastAPI's stack (the app's
  ``front``, services/web/app.py; the bookie does the same for its adds:
  bookie/fastpath.py), for the rest: pipelined and chunked requests, in-process clients.

The tailing read ``GET /v1/logs/{name}/records?from=…&wait_ms=…`` (with ``limit``, and
nothing else) is taken by ``AddFastPath`` too (``AddRoutes.take_read``; it has a query,
which the lane is never offered): a tailing reader asks again as soon as its long poll
is answered, and 10,000 readers cost the gateway a third of a core in polls, most of it
in those layers (benchmarks/README.md, "Many open things"). Its answer is the route's
(``records_answer``, gateway/logs/answers.py). Only a query the route would read the
same way is taken: each of ``from`` (``LID:EID``, its colon possibly escaped),
``limit`` and ``wait_ms`` (canonical decimal integers in range) at most once; anything
else (``from_time``, ``cursor``, a value the route would refuse) goes on to FastAPI.

The contract is the routes': the token is checked first with the middleware's own
rules (``TokenPolicy.allows``; a call it refuses goes on to the stack, whose
``TokenMiddleware`` answers the 401), the body is read with the same limits and
messages (``services.web.body.read_body``), and the add itself is the routes' own code
(``add_answer``, gateway/ledgers/answers.py; ``append_answer``, gateway/logs/answers.py),
errors mapped by the one mapping (``error_json``).
Only requests the routes would accept as far as their path and headers go are taken: a
path id that is not a canonical integer, a log name or an ``Idempotency-Key`` that is
not valid, a header given twice, a gateway not ready yet — all go on to FastAPI, which
answers them as it always did. The routes stay in the app
(the OpenAPI document, and ``--no-fast-path``)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT

from gateway.ledgers.answers import add_answer
from gateway.limits import ANSWER_TEMPLATES_MAX
from gateway.logs.answers import append_answer, records_answer
from gateway.logs.owners import Caller
from gateway.passwords import client_address
from gateway.service import Gateway
from services.budget import BudgetShare, ByteBudget
from services.errors import InvalidArgument, PayloadTooLarge, QuireError
from services.limits import BODY_SIZE_MAX_BYTES, ID_MAX, LIST_LIMIT_MAX
from services.protocol.log_records import KEY_MAX_CHARS
from services.protocol.logs import POSITION_PATTERN, Position
from services.web.body import content_length, is_json_type, take_untimed
from services.web.lane import JSON_TYPE, Answer, LaneCall, error_answer

log = logging.getLogger(__name__)

_LEDGER_ADD = re.compile(r"/v1/ledgers/(0|[1-9][0-9]{0,18})/entries")
_LOG_APPEND = re.compile(r"/v1/logs/([A-Za-z0-9._-]{1,200})/records")
_KEY = re.compile(f"[ -~]{{1,{KEY_MAX_CHARS}}}")
_EXPECTED = re.compile(rf"none|{POSITION_PATTERN[1:-1]}")
_CANONICAL = re.compile(rb"0|[1-9][0-9]{0,18}")
_READ_INTEGERS = (b"limit", b"wait_ms")
_HEADERS_READ = {
    b"content-length",
    b"content-type",
    b"x-ledger-password",
    b"idempotency-key",
    b"expected-last-position",
    b"authorization",
    b"x-quire-forwarded-by",
    b"x-cluster-secret",
}


class _Disconnected(Exception):
    """The client left before its body was complete (FastAPI answers an empty 400)."""


class AddRoutes:
    """Which calls the fast paths take, and the call serving each: the protocol's lane
    (services/web/lane.py: ``AddRoutes`` is the gateway's ``Lane``) and ``AddFastPath``
    (ASGI, for what the lane is not offered) share it."""

    body_max_bytes = BODY_SIZE_MAX_BYTES
    body_read_timeout_s = None  # the server's
    # A lane body up to what uvicorn reads ahead of an application anyway is not counted
    # in the budget (services/web/lane.py).
    body_budget_over_bytes = HIGH_WATER_LIMIT

    def __init__(
        self,
        gateway: Callable[[], Gateway | None],
        allows: Callable[[Scope], bool] = lambda scope: True,
        body_budget: ByteBudget | None = None,
    ) -> None:
        self.gateway = gateway
        self.allows = allows
        # All REST bodies' bytes held at once (``--requests-bytes-in-flight-max``).
        self.body_budget = body_budget

    def take(self, scope: Scope) -> LaneCall | None:
        """The call serving ``scope``'s request (its body to come), or None when FastAPI
        must: not a clean add or append (the module docstring)."""
        if scope["method"] != "POST":
            return None
        path = scope["path"]
        ledger = _LEDGER_ADD.fullmatch(path) if path.startswith("/v1/ledgers/") else None
        append = _LOG_APPEND.fullmatch(path) if ledger is None else None
        if ledger is None and append is None or not self.allows(scope):
            return None
        gw = self.gateway()
        headers = _headers(scope) if gw is not None else None
        if gw is None or headers is None:
            return None
        batch = is_json_type(headers.get(b"content-type"))
        if ledger is not None:
            ledger_id = int(ledger.group(1))
            if ledger_id > ID_MAX:
                return None
            client = scope.get("client")
            return partial(
                _add,
                gw,
                ledger_id,
                headers.get(b"x-ledger-password"),
                client[0] if client else None,
                batch,
                path,
            )
        key = headers.get(b"idempotency-key")
        if key is not None and _KEY.fullmatch(key) is None:
            return None
        expected = headers.get(b"expected-last-position")
        if expected is not None and _EXPECTED.fullmatch(expected) is None:
            return None
        caller = Caller(
            headers.get(b"authorization"),
            headers.get(b"x-quire-forwarded-by"),
            headers.get(b"x-cluster-secret"),
        )
        return partial(
            _append,
            gw,
            append.group(1),  # type: ignore[union-attr]
            key,
            batch,
            path,
            expected,
            caller,
        )

    def take_read(self, scope: Scope) -> Callable[[], Awaitable[Answer]] | None:
        """The call serving ``scope``'s tailing read, or None when FastAPI must (the
        module docstring)."""
        if scope["method"] != "GET":
            return None
        path = scope["path"]
        read = _LOG_APPEND.fullmatch(path) if path.startswith("/v1/logs/") else None
        if read is None or not self.allows(scope):
            return None
        gw = self.gateway()
        query = _read_query(scope.get("query_string", b"")) if gw is not None else None
        if gw is None or query is None:
            return None
        return partial(_read, gw, read.group(1), *query, path)


def _read_query(raw: bytes) -> tuple[Position | None, int, int] | None:
    """``from``, ``limit`` and ``wait_ms`` of a tailing read's query, as the route reads
    them (its defaults: the log's start, 1,000, 0); None when the query holds anything
    else, a name twice, or a value the route would refuse (FastAPI answers it)."""
    start: Position | None = None
    values = {b"limit": LIST_LIMIT_MAX, b"wait_ms": 0}
    seen: set[bytes] = set()
    for part in raw.split(b"&") if raw else ():
        name, equals, value = part.partition(b"=")
        if not equals or name in seen:
            return None
        seen.add(name)
        if name == b"from":
            try:
                start = Position.parse(_unescape_colon(value).decode("ascii"), "from")
            except (InvalidArgument, UnicodeDecodeError):
                return None
        elif name in _READ_INTEGERS and _CANONICAL.fullmatch(value) is not None:
            values[name] = int(value)
            if values[name] > ID_MAX or name == b"limit" and values[name] < 1:
                return None
        else:
            return None
    return start, values[b"limit"], values[b"wait_ms"]


def _unescape_colon(value: bytes) -> bytes:
    """A position as clients send it: httpx and browsers escape its colon."""
    return value.replace(b"%3A", b":").replace(b"%3a", b":") if b"%" in value else value


async def _read(
    gw: Gateway, name: str, start: Position | None, limit: int, wait_ms: int, path: str
) -> Answer:
    try:
        answer = await records_answer(gw, name, start, limit, wait_ms)
    except Exception as exc:  # noqa: BLE001 - every error mapped, never a bare 500 page
        return error_answer(exc, f"GET {path}")
    return 200, json.dumps(answer, separators=(",", ":")).encode(), JSON_TYPE


async def _add(
    gw: Gateway,
    ledger_id: int,
    password: str | None,
    client: str | None,
    batch: bool,
    path: str,
    raw: bytes,
) -> Answer:
    client_address.set(client)
    return await _answer(add_answer(gw, ledger_id, password, raw, batch), path)


async def _append(
    gw: Gateway,
    name: str,
    key: str | None,
    batch: bool,
    path: str,
    expected: str | None,
    caller: Caller,
    raw: bytes,
) -> Answer:
    return await _answer(append_answer(gw, name, key, raw, batch, expected, caller), path)


async def _answer(call: Awaitable[dict[str, Any]], path: str) -> Answer:
    """The answer of a route's call: its JSON, or its error's."""
    try:
        answer = await call
    except Exception as exc:  # noqa: BLE001 - every error mapped, never a bare 500 page
        return error_answer(exc, f"POST {path}")
    return 200, answer_json(answer), JSON_TYPE


def answer_json(answer: dict[str, Any]) -> bytes:
    """``answer`` as ``json.dumps`` with compact separators writes it. An add's answer
    (names of plain ASCII, integer values) is one %-format per set of names, at a
    fraction of ``json.dumps``'s cost per request; anything else goes to ``json.dumps``."""
    values = tuple(answer.values())
    if all(type(value) is int for value in values):
        names = tuple(answer)
        template = _TEMPLATES.get(names)
        if template is None and len(_TEMPLATES) < ANSWER_TEMPLATES_MAX:
            template = "{" + ",".join(f"{json.dumps(name)}:%d" for name in names) + "}"
            _TEMPLATES[names] = template
        if template is not None:
            return (template % values).encode()
    return json.dumps(answer, separators=(",", ":")).encode()


_TEMPLATES: dict[tuple[str, ...], str] = {}


class AddFastPath:
    """The fast path as an ASGI application in front of FastAPI's stack (the app's
    ``front``): it serves what the protocol's lane is not offered (a chunked body, a
    pipelined request...) and every call of an in-process client."""

    def __init__(self, app: ASGIApp, routes: AddRoutes) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        http = scope["type"] == "http"
        call = self.routes.take(scope) if http else None
        if call is None:
            read = self.routes.take_read(scope) if http else None
            if read is not None:
                await _send(send, *await read())
                return
            await self.app(scope, receive, send)
            return
        budget = self.routes.body_budget
        share = budget.open() if budget is not None else None
        try:
            try:
                declared = (_headers(scope) or {}).get(b"content-length")
                raw = await _body(declared, receive, share, scope)
            except QuireError as exc:
                await _send(send, *error_answer(exc, f"POST {scope['path']}"))
                return
            except _Disconnected:
                await _send(send, 400, b"", ())
                return
            await _send(send, *await call(raw))
        finally:
            if share is not None:
                share.close()


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


async def _body(
    declared: str | None, receive: Receive, share: BudgetShare | None, scope: Scope
) -> bytes:
    """The whole body, with ``read_body``'s limits and messages, taking budget for each
    piece as it arrives (while it waits, uvicorn stops reading the socket, and the body's
    time-out stops: ``take_untimed``)."""
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
            if share is not None:
                await take_untimed(share, len(chunk), scope)
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _send(
    send: Send, status: int, body: bytes, headers: tuple[tuple[bytes, bytes], ...]
) -> None:
    start = [(b"content-length", b"%d" % len(body)), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})
