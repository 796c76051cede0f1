"""The HTTP/1.1 server protocol of every Quire service: uvicorn's httptools protocol with
the bounds uvicorn lacks.

Uvicorn has no time limit for reading a request head or body and counts every open
connection against one concurrency limit, so a few thousand sockets that send half a
head and then nothing made every request (``/health`` too) get a plain-text 503 until
they closed. ``BoundedHttpProtocol`` adds, per connection:

- a head timer: the request line and headers must arrive within
  ``header_read_timeout_s`` (a random 50-100 % of it, so that sockets opened together
  do not all time out together) of the connection opening or of the request's first byte
  (an idle keep-alive connection is closed after ``idle_timeout_s`` by uvicorn's own
  keep-alive timer); a partial head then gets a JSON 408 and the connection closes;
- a body timer: the whole body must arrive within ``body_read_timeout_s`` of the head,
  time spent waiting for the server's own memory not counted: a lane request waiting for
  its lane's body budget (services/web/lane.py), or an application that pauses the timer
  through the ``quire.body_timer`` scope extension while it waits for budget
  (services/web/body.py's ``BodyTimer`` and ``take_untimed``);
- bounds on the head: at most ``head_size_max_bytes`` bytes and ``headers_max`` header
  fields, else a JSON 431 ``invalid_argument`` (the parser is fed at most the remaining
  head budget, so an endless header is never buffered whole);
- admission: at most ``connections_per_client_max`` open connections per client address
  and ``connections_max`` in all; one more gets a JSON 503 ``unavailable`` at once and is
  closed. Requests in flight over ``requests_in_flight_max`` get a JSON 503 too;
- malformed HTTP gets a JSON 400 ``invalid_argument`` instead of uvicorn's plain text.

WebSocket: a service that serves WebSocket routes (the gateway's streaming appends) is
configured with a WebSocket protocol class; an ``Upgrade: websocket`` request is then
handed over to it (``handle_websocket_upgrade``), with the head and body timers
disarmed (the WebSocket protocol has its own pings) and the connection still counted in
the table until the WebSocket connection is lost. Without one (every other service) an
upgrade request is served as plain HTTP.

These answers carry ``X-Request-Id`` like the application's (services/web/access.py):
the request's own id when its head was read and the id is sane, else a new one.

Every answer the protocol writes itself ends the connection with a lingering close:
the answer is written, the write side is shut, and what the client still sends is read
and dropped for up to ``LINGER_S`` before the socket closes, so a client still writing
its request reads the answer instead of a reset.

Why not another server: hypercorn, for one, has a read time-out and a bound on an
incomplete head (its documented ``--read-timeout``, ``h11_max_incomplete_size``) but,
as far as its documentation says, no cap on connections per client address and no way
to answer its own errors in our JSON; it was not measured here. Uvicorn with httptools
is the stack the services are measured on (benchmarks/README.md), and subclassing its
protocol keeps that hot path as it was; its time-outs share one lazily re-armed loop
timer per connection (``_arm``). Each answer goes out in one write, head and body
together (services/web/coalesce.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Callable
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from services.request_ids import scope_request_id
from services.web.access import AccessLog
from services.web.body import BODY_TIMER, BodyTimer
from services.web.coalesce import CoalescingTransport, HeadHoldingTransport
from services.web.errors import error_bytes, unavailable_app
from services.web.lane import Lane, LaneCycle, offer, receive_piece, serve
from services.web.limits import HEAD_TIMEOUT_SHARE_MIN, LINGER_S, ConnectionTable, ServerLimits

log = logging.getLogger(__name__)

_jitter = random.Random()
os.register_at_fork(after_in_child=_jitter.seed)  # a forked server draws its own


class HeadTooLarge(Exception):
    """The request head passed a bound (size or header count)."""


_BUSY_APP = unavailable_app("too many requests in flight; retry later")


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with head and body timers, head bounds, per-client
    admission and JSON answers, and the service's lane if it has one
    (services/web/lane.py). ``limits``, ``table``, ``lane`` and ``access`` are set by
    ``protocol_class``."""

    limits: ServerLimits
    table: ConnectionTable
    lane: Lane | None = None
    access: AccessLog

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn's own check counts idle connections too; ours is below.
        self.limit_concurrency = None
        # One timer per connection, re-armed lazily (``_arm``): what is due and when.
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0  # when ``_timer`` fires (loop time)
        self._due: Callable[[], None] | None = None  # run at ``_due_at`` unless disarmed
        self._due_at = 0.0
        self._admitted: str | None = None  # the client address counted in the table
        self._answered = False  # we wrote our own answer: drop whatever comes next
        self._in_head = True  # between requests or inside a head
        self._head_bytes = 0
        self._header_count = 0
        self._body_wait_s = self.limits.body_read_timeout_s  # the current body's bound

    # ---------------------------------------------------------------- connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        client = self.client[0] if self.client else ""
        refusal = self.table.admit(client)
        if refusal is not None:
            self._answer(503, "unavailable", refusal)
            return
        self._admitted = client
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        self._release_lane_cycle()
        if self._admitted is not None:
            self.table.release(self._admitted)
            self._admitted = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._answered:
            return
        self._unset_keepalive_if_required()
        try:
            if self._in_head:
                budget = self.limits.head_size_max_bytes - self._head_bytes
                if len(data) > budget:
                    # Feed no more than the head may still hold: a head that does not end
                    # within it is refused before it is buffered.
                    self.parser.feed_data(data[:budget])
                    if self._in_head:
                        raise HeadTooLarge(
                            f"request head over {self.limits.head_size_max_bytes} bytes"
                        )
                    data = data[budget:]
                else:
                    self._head_bytes += len(data)
            self.parser.feed_data(data)
        except HeadTooLarge as exc:
            self._answer(431, "invalid_argument", str(exc))
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            # else: served as plain HTTP (this service speaks no WebSocket)
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, HeadTooLarge):
                self._answer(431, "invalid_argument", str(exc.__context__))
            else:
                self._answer(400, "invalid_argument", f"malformed HTTP request: {exc}")

    def send_400_response(self, msg: str) -> None:
        self._answer(400, "invalid_argument", msg)

    def handle_websocket_upgrade(self) -> None:
        """Hand the connection over to the WebSocket protocol (uvicorn's), which is
        from then on the transport's protocol: our timers stop, and the connection's
        place in the table is released when the WebSocket connection is lost (this
        protocol's ``connection_lost`` is not called any more)."""
        self._cancel_timer()
        admitted, self._admitted = self._admitted, None
        super().handle_websocket_upgrade()
        protocol = self.transport.get_protocol()
        # Frames written in one loop turn leave in one write (services/web/coalesce.py).
        protocol.transport = CoalescingTransport(self.transport, self.loop)  # type: ignore[attr-defined]
        if admitted is None:
            return
        lost = protocol.connection_lost
        table = self.table

        def connection_lost(exc: Exception | None) -> None:
            try:
                lost(exc)
            finally:
                table.release(admitted)

        protocol.connection_lost = connection_lost  # type: ignore[method-assign]

    # ---------------------------------------------------------------- parser callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._header_count = 0
        if self._due is None or self._due == self.timeout_keep_alive_handler:
            self._arm_head_timer()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.headers_max:
            raise HeadTooLarge(f"more than {self.limits.headers_max} header fields")
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._disarm()
        self._body_wait_s = self.limits.body_read_timeout_s
        self._arm(self._body_wait_s, self._body_timeout)
        if self.lane is not None:
            lane_cycle = offer(self, self.lane)
            if lane_cycle is not None:
                self.cycle = lane_cycle  # type: ignore[assignment]
                wait_s = self.lane.body_read_timeout_s
                if wait_s is not None and wait_s < self._body_wait_s:
                    # The lane's own, shorter bound on the body (the bookie's adds).
                    self._body_wait_s = wait_s
                    self._arm(wait_s, self._body_timeout)
                return
        if len(self.tasks) >= self.limits.requests_in_flight_max:
            app, self.app = self.app, _BUSY_APP
            try:
                super().on_headers_complete()
            finally:
                self.app = app
        else:
            super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and cycle.more_body:
            scope: Any = cycle.scope
            scope.setdefault("extensions", {})[BODY_TIMER] = BodyTimer(self, cycle)
        if cycle is not None and cycle.transport is self.transport:
            # The cycle's task has not run yet: its answer goes out head and body together.
            cycle.transport = HeadHoldingTransport(self.transport, self.loop)  # type: ignore[assignment]

    def on_body(self, body: bytes) -> None:
        cycle: Any = self.cycle
        if type(cycle) is LaneCycle:
            receive_piece(self, cycle, body)
            return
        super().on_body(body)

    def pause_body_timer(self, cycle: Any) -> float | None:
        """Stop ``cycle``'s body time-out while the server waits for its own memory (a
        body budget: services/web/lane.py, body.py); the seconds it had left, or None
        when it was not running."""
        if self.cycle is not cycle or self._due != self._body_timeout:
            return None
        left = self._due_at - self.loop.time()
        self._disarm()
        return left

    def resume_body_timer(self, cycle: Any, left: float | None) -> None:
        """Start ``cycle``'s body time-out again with ``left`` seconds (``pause_body_timer``'s
        answer), if its body is still being read."""
        if (
            left is None
            or self.cycle is not cycle
            or not cycle.more_body
            or self.transport.is_closing()
        ):
            return
        self._arm(max(left, 0.0), self._body_timeout)

    def _release_lane_cycle(self) -> None:
        """A lane request that ends before it is served gives its budget back."""
        cycle: Any = self.cycle
        if type(cycle) is LaneCycle and not cycle.served:
            cycle.disconnected = True
            cycle.release()

    def on_message_complete(self) -> None:
        self._disarm()
        self._in_head = True
        self._head_bytes = 0
        super().on_message_complete()
        cycle: Any = self.cycle
        if type(cycle) is LaneCycle and not cycle.response_started and not cycle.disconnected:
            cycle.served = True
            task = self.loop.create_task(serve(self, cycle))
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)

    # ---------------------------------------------------------------- timers

    def _arm(self, delay_s: float, due: Callable[[], None]) -> None:
        """Run ``due`` in ``delay_s`` unless disarmed or re-armed first. The connection's
        one loop timer is only replaced when it would fire too late: a timer that fires
        early re-arms itself for what is due then, and a disarmed one fires for nothing.
        Every request arms and disarms three times (head, body, keep-alive): as loop
        timers that was three timers made and cancelled per request, a few percent of
        the gateway's CPU per add (benchmarks/README.md, "Measured choices")."""
        due_at = self.loop.time() + delay_s
        self._due, self._due_at = due, due_at
        if self._timer is None or self._timer_at > due_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = due_at
            self._timer = self.loop.call_at(due_at, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        due = self._due
        if due is None:
            return
        if self.loop.time() < self._due_at:
            self._timer_at = self._due_at
            self._timer = self.loop.call_at(self._due_at, self._on_timer)
            return
        self._due = None
        due()

    def _arm_head_timer(self) -> None:
        share = _jitter.uniform(HEAD_TIMEOUT_SHARE_MIN, 1.0)
        self._arm(self.limits.header_read_timeout_s * share, self._head_timeout)

    def _disarm(self) -> None:
        self._due = None

    def _cancel_timer(self) -> None:
        self._due = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # uvicorn's keep-alive timer is this connection's timer too (``_arm``).

    def _unset_keepalive_if_required(self) -> None:
        if self._due == self.timeout_keep_alive_handler:
            self._due = None

    def on_response_complete(self) -> None:
        """uvicorn's, with the keep-alive time-out on the connection's timer; armed only
        when nothing else is (a next request's head or body already being read keeps its
        own time-out)."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._unset_keepalive_if_required()
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        elif self._due is None:
            self._arm(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def _head_timeout(self) -> None:
        if self.transport.is_closing():
            return
        if self._head_bytes == 0 and (self.cycle is None or self.cycle.response_complete):
            # Nothing of a request arrived: an idle connection, closed quietly.
            self.transport.close()
            return
        ms = round(self.limits.header_read_timeout_s * 1000)
        self._answer(
            408,
            "invalid_argument",
            f"request head not complete in {ms} ms (header_read_timeout_ms)",
        )

    def _body_timeout(self) -> None:
        if self.transport.is_closing():
            return
        if self.cycle is not None and self.cycle.response_started:
            # Answered already (without reading the whole body): just end it.
            self.transport.close()
            return
        ms = round(self._body_wait_s * 1000)
        self._answer(
            408,
            "invalid_argument",
            f"request body not complete within {ms} ms (body_read_timeout_ms)",
            request_id=scope_request_id(self.cycle.scope) if self.cycle is not None else None,
        )

    # ---------------------------------------------------------------- our own answers

    def _answer(self, status: int, code: str, message: str, request_id: str | None = None) -> None:
        """Write an error answer and close with a lingering close. A request whose
        answer has started is cut instead (its answer cannot be replaced). Answers
        before a request's head was read get a new request id."""
        self._answered = True
        self._disarm()
        self._release_lane_cycle()
        cycle = self.cycle
        started = cycle is not None and cycle.response_started and not cycle.response_complete
        if cycle is not None and not cycle.response_complete:
            # The application sees the client as gone and writes nothing more.
            cycle.disconnected = True
            cycle.message_event.set()
        if started or self.transport.is_closing():
            self.transport.close()
            return
        self.transport.write(error_bytes(status, code, message, request_id))
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self._arm(LINGER_S, self.transport.close)
        else:
            self.transport.close()


def protocol_class(
    limits: ServerLimits, lane: Lane | None = None, access: AccessLog | None = None
) -> type[BoundedHttpProtocol]:
    """A protocol class for one server: its limits, its connection table, and the lane
    and access log of its service, if any."""
    return type(
        "QuireHttpProtocol",
        (BoundedHttpProtocol,),
        {
            "limits": limits,
            "table": ConnectionTable(limits),
            "lane": lane,
            "access": access or AccessLog(),
        },
    )
