"""Add requests to one bookie driven by callbacks: ``AddChannel``, the gateway's path for
the adds its senders batch (services/ledger_client/senders.py, ``BookieClient.start_add``).

Through ``StreamTransport`` every add request to a bookie was a task: started on the
loop turn after the sender decided to send, and woken on another turn when the answer
arrived, each a trip through the end of the loop's ready queue, plus a stream reader
and a time-out scope. With 256 REST clients the gateway's loop is never idle, that
queue is long, and both trips delayed the next request to that bookie. Here the
request is written at once from the sender's call, and the protocol's ``data_received``
reads the answer and calls back in the same turn: a stream gained, REST clients stayed
even (benchmarks/README.md, "Measured choices").

The rules are the transport's (services/bookie_client/transport.py):

- a connection carries one request at a time, and is kept for the next only after a
  complete answer that did not say ``Connection: close``; any error or time-out closes
  it, so a half-read answer never reaches the next request. Idle connections are
  reused newest first and dropped after ``IDLE_CONNECTION_MAX_S``;
- a reused connection that the bookie closed before a byte of the answer came (keep-alive
  expiry, restart) sends the request once more on a new connection: adds are
  idempotent (docs/api.md "Bookie");
- every request has its time-out ``timeout_s``, from the call to the answer's last byte
  (the connect included, itself bounded by ``connect_timeout_s``), which tells a hung
  bookie from a busy one (``_timed_out``): a bookie silent for half the time-out is asked
  whether it is alive (``GET /health``); at the time-out, after one more poll of the
  sockets, a bookie that answered anything (a request, the question) within it is alive
  and the request gets another time-out, up to ``BUSY_TIMEOUTS_MAX`` in all; one that
  answered nothing, not even the question within its own time-out, is hung: found within
  one and a half time-outs (one before). Before, a loaded gateway failed healthy
  bookies: uvloop runs due timers before it polls the sockets, so after a loop turn
  longer than the time-out (a burst of 256 streams' records) the time-outs of requests
  whose answers were already in their sockets fired first, and a bookie slowed by the
  load (not hung) missed a 0.8 s time-out; every bookie of the cluster was failed and,
  with no spare, every ledger closed (issue 35, item 11);
- answers are ``Content-Length`` framed (the bookie's always are); anything else, a
  head or body over the bounds, or bytes after the answer fail the request as a
  ``ProtocolError``.

The caller bounds the requests in flight (the sender's ``requests_in_flight_max``), and
so the connections. ``done`` is never called from inside ``start``: a request that
fails at once is answered on the next loop turn. Connections are made in a context of
their own, so their callbacks carry no request's context variables (the request id is
the caller's to pass).
"""

from __future__ import annotations

import asyncio
import contextvars
import ssl
import time
from collections.abc import Callable

from services.bookie_client.limits import (
    BUSY_TIMEOUTS_MAX,
    IDLE_CONNECTION_MAX_S,
    POLL_GRACE_S,
    RESPONSE_BODY_MAX_BYTES,
    RESPONSE_HEAD_MAX_BYTES,
)
from services.bookie_client.transport import HttpResponse, ProtocolError, parse_head

# What a request ends with: the answer, or the error (OSError, TimeoutError,
# ProtocolError) that ended it.
Done = Callable[[HttpResponse | Exception], None]

# What asks a bookie whether it is alive (any complete answer says it is).
PROBE_TARGET = "/health"


# The stages of a request's timer in one window of its time-out (``_timed_out``).
_HALF = 0  # at half the time-out: ask a silent bookie whether it is alive
_END = 1  # at the time-out: the verdict
_LAST = 2  # the question still out at the time-out: its answer is awaited this long


class _Request:
    __slots__ = (
        "data", "done", "started_at", "timeout_s", "timer", "window_at", "stage", "polled",
        "probe",
    )  # fmt: skip

    def __init__(
        self, data: bytes, done: Done, started_at: float, timeout_s: float, probe: bool = False
    ) -> None:
        self.data = data
        self.done = done
        self.started_at = started_at  # loop time
        self.timeout_s = timeout_s
        self.timer: asyncio.TimerHandle | None = None
        self.window_at = started_at  # the start of its current time-out
        self.stage = _END if probe else _HALF  # what its timer decides next
        self.polled = False  # the sockets were polled once since the time-out ran out
        self.probe = probe  # this request asks whether the bookie is alive (never extended)


class _AddConnection(asyncio.Protocol):
    """One keep-alive connection of a channel, one request at a time."""

    def __init__(self, channel: AddChannel) -> None:
        self.channel = channel
        self.transport: asyncio.Transport | None = None
        self.request: _Request | None = None
        self.reused = False
        self.received = bytearray()
        self.head: tuple[int, dict[str, str], int] | None = None  # status, headers, body at
        self.length = 0
        self.closed = False
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, request: _Request, reused: bool) -> None:
        self.request, self.reused = request, reused
        self.transport.write(request.data)  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        if self.request is None:
            self.transport.abort()  # type: ignore[union-attr]  # bytes nobody asked for
            return
        received = self.received
        received += data
        if self.head is None:
            end = received.find(b"\r\n\r\n")
            if end < 0:
                if len(received) > RESPONSE_HEAD_MAX_BYTES:
                    self.fail(ProtocolError(f"answer head over {RESPONSE_HEAD_MAX_BYTES} bytes"))
                return
            try:
                status, headers = parse_head(bytes(received[: end + 4]))
                self.length = _content_length(headers)
            except ProtocolError as exc:
                self.fail(exc)
                return
            self.head = (status, headers, end + 4)
        status, headers, body_at = self.head
        answer_end = body_at + self.length
        if len(received) < answer_end:
            return
        if len(received) > answer_end:
            self.fail(ProtocolError("bytes after the answer, with one request in flight"))
            return
        response = HttpResponse(status, headers, bytes(received[body_at:]))
        request = self.finish()
        self.channel.answered_at = asyncio.get_running_loop().time()
        if headers.get("connection", "").lower() == "close":
            self.close()
        else:
            self.channel.release(self)
        request.done(response)

    def detach(self) -> _Request:
        """The request in flight, taken off this connection (its timer still running)."""
        request = self.request
        assert request is not None
        self.request, self.head = None, None
        self.received = bytearray()
        return request

    def finish(self) -> _Request:
        """The request in flight, detached and its timer stopped: it is answered now."""
        request = self.detach()
        if request.timer is not None:
            request.timer.cancel()
            request.timer = None
        return request

    def fail(self, error: Exception) -> None:
        request = self.finish() if self.request is not None else None
        self.close(abort=True)
        if request is not None:
            request.done(error)

    def close(self, abort: bool = False) -> None:
        self.closed = True
        if self.transport is not None and not self.transport.is_closing():
            if abort:
                self.transport.abort()
            else:
                self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.channel.forget(self)
        if self.request is None:
            return
        if self.reused and not self.received:
            # An idle connection the bookie had closed: the request was not served.
            self.channel.connect(self.detach())
            return
        self.fail(ProtocolError("connection closed in the middle of an answer"))


def _content_length(headers: dict[str, str]) -> int:
    value = headers.get("content-length")
    if value is None or not value.isdigit():
        raise ProtocolError("an add answer without a Content-Length")
    length = int(value)
    if length > RESPONSE_BODY_MAX_BYTES:
        raise ProtocolError(f"answer body of {length} bytes over the limit")
    return length


class AddChannel:
    """Callback-driven requests to one bookie on keep-alive connections of its own (the
    module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        connect_timeout_s: float,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.connect_timeout_s = connect_timeout_s
        # TLS as the transport's (services/bookie_client/transport.py).
        self.ssl_context = ssl_context
        self.server_hostname = (server_hostname or host) if ssl_context is not None else None
        self._idle: list[_AddConnection] = []
        self._busy: set[_AddConnection] = set()
        self._connecting: set[asyncio.Task[None]] = set()
        self._context = contextvars.Context()
        self._closed = False
        self.answered_at = -1.0  # loop time of the last complete answer (``_timed_out``)
        self._probe_data = (
            f"GET {PROBE_TARGET} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: 0\r\n\r\n"
        ).encode("latin-1")
        self._probing = False  # a probe is in flight

    def start(self, data: bytes, timeout_s: float, done: Done) -> None:
        """Send ``data`` (a whole request) and call ``done`` with its answer or error,
        within ``timeout_s``."""
        loop = asyncio.get_running_loop()
        request = _Request(data, done, loop.time(), timeout_s)
        if self._closed:
            loop.call_soon(done, ProtocolError("client is closed"))
            return
        self._send(request)

    def _send(self, request: _Request) -> None:
        loop = asyncio.get_running_loop()
        wait_s = request.timeout_s if request.probe else request.timeout_s / 2
        request.timer = loop.call_at(request.started_at + wait_s, self._timed_out, request)
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < IDLE_CONNECTION_MAX_S:
                self._busy.add(conn)
                conn.send(request, reused=True)
                return
            conn.close()
        self.connect(request)

    def connect(self, request: _Request) -> None:
        """Send ``request`` on a new connection (a task, in the channel's own context)."""
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._connect(request), context=self._context)
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    async def _connect(self, request: _Request) -> None:
        """Connect (bounded by ``connect_timeout_s``) and send ``request``. The request's
        own time-out runs meanwhile (``_timed_out``, which tells a busy loop from a hung
        bookie): bounding the connect by what was left of it failed requests whose
        connect a busy loop had merely not seen complete yet."""
        loop = asyncio.get_running_loop()
        wait_s = self.connect_timeout_s
        try:
            async with asyncio.timeout(wait_s):
                _, conn = await loop.create_connection(
                    lambda: _AddConnection(self),
                    self.host,
                    self.port,
                    ssl=self.ssl_context,
                    server_hostname=self.server_hostname,
                )
        except TimeoutError:
            self._end(request, ProtocolError(f"connect timed out after {wait_s:g}s"))
            return
        except OSError as exc:
            self._end(request, exc)
            return
        if request.timer is None or self._closed:  # timed out (or closed) meanwhile
            conn.close()
            return
        self._busy.add(conn)
        conn.send(request, reused=False)

    def _end(self, request: _Request, error: Exception) -> None:
        if request.timer is not None:
            request.timer.cancel()
            request.timer = None
            request.done(error)

    def _timed_out(self, request: _Request) -> None:
        """The request's timer, in windows of its time-out: tell a busy bookie from a hung
        one (module docstring).

        At half the time-out, a bookie that answered nothing since the window began is
        asked whether it is alive (``_probe``). At the time-out, after one more poll of
        the sockets (an answer may be in one, unread while the loop was busy): a bookie
        that answered anything in the window (a request, the question) is alive, and the
        request gets another window; if only the question is still out, its answer is
        awaited to the end of its own time-out. Otherwise, or after ``BUSY_TIMEOUTS_MAX``
        time-outs in all (a bookie alive but stuck on this request), the request fails
        with ``TimeoutError``: a hung bookie within one and a half time-outs."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        timeout_s = request.timeout_s
        if request.stage == _HALF:
            if self.answered_at < request.window_at:
                self._probe(timeout_s)
            request.stage = _END
            request.timer = loop.call_at(request.window_at + timeout_s, self._timed_out, request)
            return
        if not request.polled:
            request.polled = True
            request.timer = loop.call_at(now + POLL_GRACE_S, self._timed_out, request)
            return
        request.polled = False
        if not request.probe and now < request.started_at + BUSY_TIMEOUTS_MAX * timeout_s:
            if self.answered_at >= request.window_at:
                request.window_at, request.stage = now, _HALF
                request.timer = loop.call_at(now + timeout_s / 2, self._timed_out, request)
                return
            if request.stage == _END and self._probing:
                request.stage = _LAST
                request.timer = loop.call_at(now + timeout_s / 2, self._timed_out, request)
                return
        request.timer = None
        for conn in self._busy:
            if conn.request is request:
                conn.request = None  # answered here, not by the connection
                conn.close(abort=True)
                break
        request.done(TimeoutError())

    def _probe(self, timeout_s: float) -> None:
        """Ask the bookie whether it is alive, unless a question is in flight: any complete
        answer sets ``answered_at`` (``_AddConnection.data_received``)."""
        if self._probing or self._closed:
            return
        self._probing = True
        loop = asyncio.get_running_loop()
        self._send(_Request(self._probe_data, self._probed, loop.time(), timeout_s, probe=True))

    def _probed(self, answer: HttpResponse | Exception) -> None:
        self._probing = False

    def release(self, conn: _AddConnection) -> None:
        self._busy.discard(conn)
        if self._closed:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    def forget(self, conn: _AddConnection) -> None:
        """``conn`` closed: it is neither busy nor idle any more."""
        self._busy.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)

    async def aclose(self) -> None:
        """Close every connection; requests in flight are dropped unanswered (their
        sender is closing too)."""
        self._closed = True
        for task in list(self._connecting):
            task.cancel()
        for conn in [*self._idle, *self._busy]:
            if conn.request is not None and conn.request.timer is not None:
                conn.request.timer.cancel()
            conn.request = None
            conn.close(abort=True)
        self._idle, self._busy = [], set()
        await asyncio.gather(*self._connecting, return_exceptions=True)
