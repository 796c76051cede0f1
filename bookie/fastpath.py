"""The add hot path, shared by the FastAPI route and a bare ASGI fast path.

``store_entries`` is the whole add: parse the framing (a body that does not
parse is refused whole), refuse non-recovery adds on a read-only bookie,
verify crc32c digests and the record checksums of the other digest types (a
record that does not match is refused alone,
``invalid_argument`` in ``rejected``: the gateway batches many ledgers into
one request, and one bad record must not fail the others), hand the good
records to the group-commit writer and build the small JSON answer.

``AddFastPath`` serves ``POST /v1/entries`` straight from ASGI, before FastAPI's
middleware stack, router, dependency solving and per-request wrappers (the app's
``front``, services/web/app.py). Measured on this machine those layers cost about
three quarters of the event loop's time per single-entry add; the entry data path is
the one place where that matters. Errors still go through the one mapping
(``services.http.error_json``) and the route stays in the app for the OpenAPI document
(and works the same without the fast path). What the stack's middleware does to an
add, it does too: a call without the right cluster secret goes on to the stack (whose
``ClusterSecretMiddleware`` answers 401), and every answer carries the instance header
(``InstanceHeaderMiddleware``).

``AddLane`` serves the same adds one level lower, as the HTTP protocol's lane
(services/web/lane.py, as the gateway's ``AddRoutes`` does): a plain request with a body
of at most ``LANE_BODY_MAX_BYTES`` is answered by the protocol itself, without uvicorn's
request/answer cycle, the ASGI middlewares and a task per body chunk. With one add in
flight through a gateway, that cycle and the middlewares were a large share of the
bookie's event-loop time (benchmarks/README.md, "Measured choices"). The lane's body is
whole when the add starts, so its budget is taken at once (``add_body``); its size is
bounded by what uvicorn's protocol holds per connection on the ASGI path anyway before it
stops reading (64 KiB), so the memory bound of services.budget is unchanged. A larger
body, and every request that is not plain, goes to ``AddFastPath``, which takes budget
chunk by chunk.
The lane's body wait is the bookie's ``body_read_timeout_ms``, as the ASGI path's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from functools import partial
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bookie.limits import LANE_BODY_MAX_BYTES
from bookie.node import BookieNode
from bookie.operations import AddOpResult
from services.budget import BudgetShare, ByteBudget
from services.errors import BookieReadOnly, InvalidArgument, PayloadTooLarge, QuireError
from services.limits import BODY_SIZE_MAX_BYTES
from services.web.auth import secret_matches
from services.web.body import content_length, take_untimed
from services.web.errors import error_json
from services.web.lane import JSON_TYPE, Answer, LaneCall, error_answer
from services.wire import digest
from services.wire.framing import FramedRecord, decode

log = logging.getLogger(__name__)

ADD_PATH = "/v1/entries"
_JSON_HEADERS = [(b"content-type", b"application/json")]
SECRET_HEADER = "X-Cluster-Secret"
SECRET_HEADER_RAW = SECRET_HEADER.lower().encode()
INSTANCE_HEADER = "X-Quire-Bookie-Instance"
INSTANCE_HEADER_RAW = INSTANCE_HEADER.lower().encode()


def check_records(
    records: list[FramedRecord],
) -> tuple[list[FramedRecord], list[FramedRecord], int]:
    """Verify crc32c digests and, for the other digest types (a bookie has no HMAC key),
    the framing's record checksum (``decode`` checked it: ``FramedRecord.transit_ok``): the
    good records, the bad ones (refused one by one, issue 7 items 4 and 8), and the good
    ones' payload bytes."""
    size = 0
    record_ok = digest.record_ok
    bad: list[FramedRecord] = []
    for r in records:
        if not r.transit_ok or (r.digest_type == "crc32c" and not record_ok(r)):
            bad.append(r)
        else:
            size += len(r.payload)
    if bad:
        wrong = {id(r) for r in bad}
        records = [r for r in records if id(r) not in wrong]
    return records, bad, size


def declared_length(declared: str | None, limit: int = BODY_SIZE_MAX_BYTES) -> int:
    """The bytes to reserve for a body: its Content-Length (refused with 413 when over
    the limit, before anything is read), or the limit when it is not declared."""
    return limit if declared is None else content_length(declared, limit)


async def read_budgeted(
    chunks: AsyncIterator[bytes],
    share: BudgetShare,
    limit: int,
    timeout_s: float,
    scope: Mapping[str, Any] | None = None,
) -> bytes:
    """The whole body, taking budget for each chunk as it arrives (services.budget).

    At most ``timeout_s`` may be spent waiting for the client's bytes (time spent
    waiting for budget does not count): a slow or stalled body is refused with 400.
    With the request's ``scope``, the server's own body time-out stops too while it
    waits for budget (``take_untimed``; without one it just waits)."""
    parts: list[bytes] = []
    total = 0
    remaining = timeout_s
    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        try:
            async with asyncio.timeout(remaining):
                chunk = await anext(chunks)
        except StopAsyncIteration:
            break
        except TimeoutError:
            raise BodyTimeout(
                f"the request body did not arrive within {timeout_s * 1000:.0f} ms "
                f"(body_read_timeout_ms); {total} bytes received"
            ) from None
        remaining -= loop.time() - started
        if chunk:
            total += len(chunk)
            if total > limit:
                raise PayloadTooLarge(f"body over the limit of {limit} bytes")
            await take_untimed(share, len(chunk), scope or {})
            parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class BodyTimeout(Exception):
    """The request body did not arrive in time. Not a ``QuireError`` of its own: it is
    answered as 400 ``invalid_argument`` (``as_error``), and the fast path also closes
    the connection, since the rest of the body may never come."""

    def as_error(self) -> InvalidArgument:
        return InvalidArgument(str(self))


def _admit(node: BookieNode, declared: str | None) -> None:
    """Refuse an add before its body is read: the store not open, a declared body over
    the limit (each refusal counted by its code)."""
    try:
        node.check_open()
        declared_length(declared)
    except QuireError as exc:
        node.metrics.rejected_adds.labels(exc.code).inc()
        raise


async def add_request(
    node: BookieNode,
    declared: str | None,
    chunks: AsyncIterator[bytes],
    scope: Mapping[str, Any] | None = None,
) -> bytes:
    """A whole add: read the body (budget taken as bytes arrive), store it; the JSON answer."""
    _admit(node, declared)
    share = node.add_budget.open()
    try:
        body = await read_budgeted(
            chunks, share, BODY_SIZE_MAX_BYTES, node.settings.body_read_timeout_ms / 1000, scope
        )
        return await store_entries(node, body)
    finally:
        share.close()


async def add_body(node: BookieNode, body: bytes) -> bytes:
    """A whole add of a body already read (the lane's): its budget taken at once, then
    stored as ``add_request`` stores it; the JSON answer."""
    _admit(node, None)
    share = node.add_budget.open()
    try:
        await share.take(len(body))
        return await store_entries(node, body)
    finally:
        share.close()


async def store_entries(node: BookieNode, body: bytes) -> bytes:
    """Store the framed records of ``body``; the JSON answer once they are durable."""
    try:
        if not body:
            raise InvalidArgument("empty body: expected framed records")
        records = decode(body, copy=False)
        if node.readonly and not all(r.recovery for r in records):
            raise BookieReadOnly("bookie is read-only (disk nearly full): only recovery adds")
    except QuireError as exc:
        node.metrics.rejected_adds.labels(exc.code).inc()
        raise
    started = time.perf_counter()
    records, bad, payload_bytes = check_records(records)
    result = await node.add(records, payload_bytes) if records else AddOpResult(0)
    node.metrics.add_latency.observe(time.perf_counter() - started)
    if not result.rejected and not bad:
        return b'{"stored": %d, "rejected": []}' % result.stored
    refused = [(r.ledger_id, r.entry_id, InvalidArgument.code) for r in bad]
    rejected = []
    for lid, eid, code in [*refused, *result.rejected]:
        node.metrics.rejected_adds.labels(code).inc()
        rejected.append({"ledger_id": lid, "entry_id": eid, "error": code})
    return json.dumps({"stored": result.stored, "rejected": rejected}).encode()


async def _receive_chunks(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise InvalidArgument("client disconnected before the body was complete")
        chunk = message.get("body", b"")
        if chunk:
            yield chunk
        if not message.get("more_body", False):
            return


class AddFastPath:
    def __init__(
        self, app: ASGIApp, node: Callable[[], BookieNode | None], secret: str | None = None
    ) -> None:
        self.app = app
        self.node = node
        self.secret = secret

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        node = self.node() if scope["type"] == "http" else None
        if node is None or scope["path"] != ADD_PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        declared = given = None
        for name, value in scope["headers"]:  # the first of each, as the middleware reads
            if name == b"content-length":
                if declared is None:
                    declared = value.decode("latin-1")
            elif name == SECRET_HEADER_RAW and given is None:
                given = value.decode("latin-1")
        if self.secret is not None and not secret_matches(given, self.secret):
            await self.app(scope, receive, send)
            return
        instance = node.instance_id
        headers = [(INSTANCE_HEADER_RAW, instance.encode("latin-1"))] if instance else []
        try:
            answer = await add_request(node, declared, _receive_chunks(receive), scope)
        except Exception as exc:  # noqa: BLE001 - every error is answered, never a 500 page
            await _refuse(exc, scope, receive, with_headers(send, headers) if headers else send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [*_JSON_HEADERS, (b"content-length", b"%d" % len(answer)), *headers],
            }
        )
        await send({"type": "http.response.body", "body": answer})


class AddLane:
    """``POST /v1/entries`` as the HTTP protocol's lane (services/web/lane.py; the module
    docstring): the same checks, answers and errors as ``AddFastPath``."""

    body_max_bytes = LANE_BODY_MAX_BYTES
    # The add budget is taken at once, for the whole body (``add_body``).
    body_budget: ByteBudget | None = None
    body_budget_over_bytes = 0

    def __init__(
        self,
        node: Callable[[], BookieNode | None],
        secret: str | None,
        body_read_timeout_s: float,
    ) -> None:
        self.node = node
        self.secret = secret
        self.body_read_timeout_s: float | None = body_read_timeout_s

    def take(self, scope: Scope) -> LaneCall | None:
        """The add's call, or None for the ASGI application: not an add, no store yet,
        or not the right cluster secret (the stack's middleware answers 401)."""
        if scope["path"] != ADD_PATH or scope["method"] != "POST":
            return None
        node = self.node()
        if node is None:
            return None
        if self.secret is not None:
            given = None
            for name, value in scope["headers"]:  # the first, as the middleware reads
                if name == SECRET_HEADER_RAW:
                    given = value.decode("latin-1")
                    break
            if not secret_matches(given, self.secret):
                return None
        instance = node.instance_id
        headers = (
            JSON_TYPE + ((INSTANCE_HEADER_RAW, instance.encode("latin-1")),)
            if instance
            else JSON_TYPE
        )
        return partial(_lane_add, node, headers)


async def _lane_add(
    node: BookieNode, headers: tuple[tuple[bytes, bytes], ...], body: bytes
) -> Answer:
    try:
        return 200, await add_body(node, body), headers
    except Exception as exc:  # noqa: BLE001 - every error is answered, never a 500 page
        return error_answer(exc, f"POST {ADD_PATH}", headers)


async def _refuse(exc: Exception, scope: Scope, receive: Receive, send: Send) -> None:
    """The answer to an add that failed with ``exc``."""
    if isinstance(exc, BodyTimeout):
        # The rest of the body may never come: do not wait for it on this connection.
        response = error_json(exc.as_error())
        response.headers["connection"] = "close"
    elif isinstance(exc, QuireError):
        response = error_json(exc)
    else:
        log.error("unexpected error on POST %s", ADD_PATH, exc_info=exc)
        response = error_json(QuireError("internal error"))
    await response(scope, receive, send)


def with_headers(send: Send, headers: list[tuple[bytes, bytes]]) -> Send:
    """``send`` that adds ``headers`` to the answer's head (the instance header of the
    fast path's errors and of ``InstanceHeaderMiddleware``)."""

    async def sender(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *headers]}
        await send(message)

    return sender
