"""A lane below ASGI for a service's hottest calls: the HTTP protocol hands a plain
request (head parsed, body complete) to a ``Lane`` call and writes its answer itself.

Under the application's ASGI stack (services/web/app.py's ``front`` fast paths
included), every request still pays for uvicorn's request/answer cycle: the ASGI scope
finished, a ``receive`` and two ``send`` messages as dicts, header validation, then the
proxy-header, access and methods middlewares, each with its own ``send`` wrapper. For
a single-entry add that was a large share of the gateway's event loop
(benchmarks/README.md, "Measured choices"). A lane serves the same calls with the same answers:

- the service's ``Lane`` says which requests it takes (``take``: from the request's
  scope, with method, path, headers and client), and the call it returns turns the
  complete body into (status, body, headers);
- the protocol (services/web/server.py) offers it only a plain request (``offer``):
  ``HTTP/1.1``, an origin-form path with no query, no percent-escapes and no root path,
  a ``Content-Length`` of at most ``body_max_bytes`` (no chunked body), no
  ``Expect: 100-continue``, no ``X-Forwarded-*`` header (the proxy-header middleware's
  business), no upgrade, no other request of the connection in progress or queued, and
  room under the in-flight bound. Everything else goes to the ASGI application, which
  answers it as it always did;
- ``serve`` runs the call once the body is complete and writes the answer in one
  write, with the server's default headers (``date``, ``server``), ``content-length``,
  the call's headers and ``x-request-id``, in the order the ASGI path writes them;
  ``connection: close`` when the request asked for it or the server is shutting down;
- the request id and the access log are the access middleware's (``REQUEST_ID`` set
  while the call runs, services/web/access.py's ``AccessLog``); the head and body
  timers, the connection table and pipelining are the protocol's, as for any request;
- a lane with a ``body_budget`` (services/budget.py; the gateway's, for all its REST
  bodies) holds a share of it from the head to the answer: the protocol takes budget
  for each piece of the body as it arrives and, while the budget is spent, stops
  reading the socket until the request's turn comes (waiting for budget does not count
  against the body's time-out). The piece that did not fit is already read, so a
  waiting connection holds at most one read beyond the budget, as uvicorn's own buffer
  does on the ASGI path. A body of at most ``body_budget_over_bytes`` (the gateway: 64
  KiB, what uvicorn reads ahead of an application on the ASGI path) is not counted: any
  connection may make the server hold that much, budget or not, and the common small add
  pays nothing for the budget.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from services.budget import BudgetShare, ByteBudget
from services.errors import QuireError
from services.request_ids import REQUEST_ID, scope_request_id
from services.web.errors import error_body

if TYPE_CHECKING:
    from services.web.server import BoundedHttpProtocol

log = logging.getLogger(__name__)

# An answer: the status, the body and the headers after content-length (content-type...).
Answer = tuple[int, bytes, tuple[tuple[bytes, bytes], ...]]
LaneCall = Callable[[bytes], Awaitable[Answer]]

JSON_TYPE: tuple[tuple[bytes, bytes], ...] = ((b"content-type", b"application/json"),)
_INTERNAL_ERROR: Answer = (500, error_body(QuireError("internal error")), JSON_TYPE)
# Request headers that send a request to the ASGI application rather than a lane: the
# proxy-header middleware's, and a body framing other than Content-Length.
_NOT_FOR_LANES = frozenset({b"x-forwarded-for", b"x-forwarded-proto", b"transfer-encoding"})


class Lane(Protocol):
    """The calls a service serves below ASGI (the module docstring)."""

    # Bodies up to this size may be taken (a larger one goes to the application, which
    # refuses it with its own 413, or serves it).
    body_max_bytes: int
    # The longest wait for a taken request's whole body, when shorter than the server's
    # ``body_read_timeout_ms`` (None: the server's); the protocol then answers 408.
    body_read_timeout_s: float | None
    # The bytes of all the lane's bodies held at once (the module docstring), or None;
    # bodies of at most ``body_budget_over_bytes`` are not counted.
    body_budget: ByteBudget | None
    body_budget_over_bytes: int

    def take(self, scope: dict[str, Any]) -> LaneCall | None:
        """The call that serves the request of ``scope`` (method, path, headers and
        client set; its body still to come), or None to leave it to the application."""
        ...


class _NoEvent:
    """What the protocol sets on a cycle when something arrives: a lane cycle waits
    for nothing (its call starts once the body is complete)."""

    __slots__ = ()

    def set(self) -> None:
        pass


_NO_EVENT = _NoEvent()


class LaneCycle:
    """The protocol's current cycle while a lane serves the request: the attributes
    uvicorn's protocol and ours read and set on a cycle, the body as it arrives, and
    the call that will serve it."""

    __slots__ = (
        "scope",
        "call",
        "keep_alive",
        "body",
        "more_body",
        "message_event",
        "disconnected",
        "response_started",
        "response_complete",
        "share",
        "owed",
        "waiting",
        "request",
        "served",
    )

    def __init__(
        self,
        scope: dict[str, Any],
        call: LaneCall,
        keep_alive: bool,
        share: BudgetShare | None = None,
    ) -> None:
        self.scope = scope
        self.call = call
        self.keep_alive = keep_alive
        self.body: list[bytes] = []  # as it arrives: one piece for most (no copy)
        self.more_body = True
        self.message_event = _NO_EVENT
        self.disconnected = False
        self.response_started = False
        self.response_complete = False
        self.share = share  # the request's part of the lane's body budget, if it has one
        self.owed = 0  # body bytes read and not yet covered by budget
        self.waiting: asyncio.Future[None] | None = None  # done once ``owed`` has budget
        self.request: asyncio.Future[None] | None = None  # the share's request for it
        self.served = False  # ``serve`` runs (and gives the share back)

    def release(self) -> None:
        """Give the share back and stop waiting for budget: the request ends unserved
        (``serve`` gives it back itself once it runs)."""
        if self.request is not None:
            self.request.cancel()  # leaves the budget's queue
            self.request = None
        if self.waiting is not None:
            self.waiting.cancel()
            self.waiting = None
        if self.share is not None:
            self.share.close()
            self.share = None


def error_answer(
    exc: Exception, route: str, headers: tuple[tuple[bytes, bytes], ...] = JSON_TYPE
) -> Answer:
    """A lane call's answer for ``exc``: an API error's status and JSON body (the one
    mapping's, ``error_json``); anything else is logged (with ``route``, e.g.
    ``POST /v1/entries``) and answered as a JSON 500."""
    if not isinstance(exc, QuireError):
        log.error("unexpected error on %s", route, exc_info=exc)
        exc = QuireError("internal error")
    return exc.http_status, error_body(exc), headers


def answer_bytes(
    answer: Answer,
    default_headers: list[tuple[bytes, bytes]],
    request_id: bytes,
    keep_alive: bool,
) -> bytes:
    """The whole HTTP/1.1 answer, head and body, as the ASGI path writes it."""
    status, body, headers = answer
    parts = [STATUS_LINE[status]]
    for name, value in default_headers:
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"content-length: %d\r\n" % len(body))
    for name, value in headers:
        parts += (name, b": ", value, b"\r\n")
    parts += (b"x-request-id: ", request_id, b"\r\n")
    if not keep_alive:
        parts.append(b"connection: close\r\n")
    parts += (b"\r\n", body)
    return b"".join(parts)


def offer(protocol: BoundedHttpProtocol, lane: Lane) -> LaneCycle | None:
    """The cycle of the request whose head ``protocol`` just read if ``lane`` takes it
    (it is served once its body is complete: ``serve``), else None; only plain requests
    are offered (the module docstring)."""
    cycle = protocol.cycle
    if (cycle is not None and not cycle.response_complete) or protocol.pipeline:
        return None
    if (
        protocol.expect_100_continue
        or len(protocol.tasks) >= protocol.limits.requests_in_flight_max
    ):
        return None
    parser = protocol.parser
    url = protocol.url
    if (
        parser.get_http_version() != "1.1"
        or parser.should_upgrade()
        or url[:1] != b"/"
        or b"?" in url
        or b"%" in url
        or b"#" in url
        or protocol.root_path
    ):
        return None
    length = -1
    for name, value in protocol.headers:
        if name == b"content-length":
            if length != -1 or not value.isdigit() or len(value) > 12:
                return None
            length = int(value)
        elif name in _NOT_FOR_LANES:
            return None
    if not 0 <= length <= lane.body_max_bytes:
        return None
    scope: Any = protocol.scope
    scope["method"] = parser.get_method().decode("ascii")
    scope["path"] = url.decode("latin-1")
    scope["raw_path"] = url
    scope["query_string"] = b""
    call = lane.take(scope)
    if call is None:
        return None
    budget = lane.body_budget
    share = budget.open() if budget is not None and length > lane.body_budget_over_bytes else None
    return LaneCycle(scope, call, parser.should_keep_alive(), share)


def receive_piece(protocol: BoundedHttpProtocol, cycle: LaneCycle, body: bytes) -> None:
    """A piece of a lane request's body, as the protocol reads it: kept, and covered by
    the lane's budget, if it has one (``wait_for_budget`` when it does not fit)."""
    share = cycle.share
    if share is not None:
        if cycle.waiting is not None:
            cycle.owed += len(body)
        else:
            request = share.request(len(body))
            if request is not None:
                cycle.owed = len(body)
                wait_for_budget(protocol, cycle, request)
    cycle.body.append(body)


def wait_for_budget(
    protocol: BoundedHttpProtocol, cycle: LaneCycle, request: asyncio.Future[None]
) -> None:
    """Stop reading until ``cycle``'s share has budget for what it read past it (in
    turn: services/budget.py); the body's time-out stops meanwhile. ``cycle.waiting``
    is done once it has (``serve`` waits for it)."""
    protocol.flow.pause_reading()
    left = protocol.pause_body_timer(cycle)
    asked = cycle.owed
    cycle.waiting = protocol.loop.create_future()

    def granted(future: asyncio.Future[None]) -> None:
        nonlocal asked
        share = cycle.share
        if future.cancelled() or share is None:
            return  # released (``LaneCycle.release``): the request ended unserved
        cycle.owed -= asked
        if cycle.owed:  # more was read while it waited
            again = share.request(cycle.owed)
            if again is not None:
                asked = cycle.owed
                cycle.request = again
                again.add_done_callback(granted)
                return
        cycle.request = None
        waiting, cycle.waiting = cycle.waiting, None
        if waiting is not None and not waiting.done():
            waiting.set_result(None)  # ``serve``, if it waits, goes on
        current: Any = protocol.cycle
        if cycle.disconnected or current is not cycle or protocol.transport.is_closing():
            return
        protocol.flow.resume_reading()
        protocol.resume_body_timer(cycle, left)

    cycle.request = request
    request.add_done_callback(granted)


async def serve(protocol: BoundedHttpProtocol, cycle: LaneCycle) -> None:
    """Serve a lane's request on ``protocol`` (its body complete) and write the answer
    in one write; its access line follows."""
    request_id = scope_request_id(cycle.scope)
    REQUEST_ID.set(request_id)  # the serving task's own context
    started = time.perf_counter()
    status = 0
    try:
        if cycle.waiting is not None:
            await cycle.waiting  # budget for the body's last pieces
        pieces, cycle.body = cycle.body, []
        body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        del pieces  # the body alone is held while the call runs
        try:
            answer = await cycle.call(body)
        except Exception:  # noqa: BLE001 - a JSON 500, as the application's own
            scope = cycle.scope
            log.exception("unexpected error on %s %s", scope["method"], scope["path"])
            answer = _INTERNAL_ERROR
        del body
        status = answer[0]
        flow = protocol.flow
        if flow.write_paused and not cycle.disconnected:
            await flow.drain()
        if cycle.disconnected:
            return
        cycle.response_started = True
        protocol.transport.write(
            answer_bytes(
                answer,
                protocol.server_state.default_headers,
                request_id.encode("ascii"),
                cycle.keep_alive,
            )
        )
        cycle.response_complete = True
        if not cycle.keep_alive:
            protocol.transport.close()
        protocol.on_response_complete()
    finally:
        if cycle.share is not None:
            cycle.share.close()
        protocol.access.record(cycle.scope, status, (time.perf_counter() - started) * 1000)
