"""The bounded HTTP protocol (services/web/server.py) driven through a fake transport:
admission per client address, head size and header count bounds, head and body
timers, malformed requests and overload, each answered in JSON."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from services.budget import ByteBudget
from services.errors import LedgerFenced
from services.request_ids import REQUEST_ID
from services.web.body import BODY_TIMER
from services.web.lane import JSON_TYPE, error_answer
from services.web.limits import ConnectionTable, ServerLimits
from services.web.server import BoundedHttpProtocol, protocol_class


class FakeTransport:
    """What the protocol writes, and whether it shut the write side or closed."""

    def __init__(self, peer: tuple[str, int]) -> None:
        self.peer = peer
        self.written = b""
        self.closed = False
        self.eof = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": self.peer, "sockname": ("127.0.0.1", 8080)}.get(name, default)

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def answer(self) -> tuple[int, dict]:
        head, _, body = self.written.partition(b"\r\n\r\n")
        return int(head.split()[1]), json.loads(body)


async def echo_length(scope: Any, receive: Any, send: Any) -> None:
    """An app that reads the whole body and answers its length."""
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = json.dumps({"length": size}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def run(
    limits: ServerLimits,
    scenario: Callable[[Callable[[str], tuple[BoundedHttpProtocol, FakeTransport]]], Awaitable],
    lane: Any = None,
    keep_alive_s: float = 5,
    app: Any = echo_length,
) -> None:
    """Run ``scenario`` with a factory of connections (client address in, protocol and
    transport out) of one server with ``limits`` (and ``lane``, and uvicorn's keep-alive
    time-out ``keep_alive_s``), echo_length behind it; the server's default headers are
    ``server: test``."""

    async def main() -> None:
        cls = protocol_class(limits, lane)
        config = uvicorn.Config(
            app,
            http=cls,
            log_config=None,
            proxy_headers=False,
            timeout_keep_alive=keep_alive_s,  # type: ignore[arg-type]
        )
        config.load()
        state = ServerState()
        state.default_headers = [(b"server", b"test")]
        port = iter(range(40000, 50000))

        def connect(client: str) -> tuple[BoundedHttpProtocol, FakeTransport]:
            proto = cls(config=config, server_state=state, app_state={})
            transport = FakeTransport((client, next(port)))
            proto.connection_made(transport)  # type: ignore[arg-type]
            return proto, transport

        await scenario(connect)

    asyncio.run(main())


async def settle(predicate: Callable[[], bool], deadline_s: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not predicate():
        assert loop.time() < end, "timed out"
        await asyncio.sleep(0.01)


GET = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


def test_connection_table_counts_per_client_and_in_all() -> None:
    """Admission: per-address cap first met refuses with the address named; another
    address is admitted until the total cap; a release frees a place."""
    table = ConnectionTable(ServerLimits(connections_max=3, connections_per_client_max=2))
    assert table.admit("10.0.0.1") is None
    assert table.admit("10.0.0.1") is None
    refusal = table.admit("10.0.0.1")
    assert refusal is not None and "10.0.0.1" in refusal
    assert table.admit("10.0.0.2") is None
    assert table.admit("10.0.0.3") is not None  # the total cap
    table.release("10.0.0.1")
    assert table.admit("10.0.0.1") is None
    assert (table.total, table.by_client) == (3, {"10.0.0.1": 2, "10.0.0.2": 1})


def test_connection_over_the_client_cap_gets_json_503() -> None:
    """The connection one over the per-client cap is answered with the JSON 503 at once
    and its write side shut; other addresses and, after a close, the same one, pass."""

    async def scenario(connect: Any) -> None:
        first, _ = connect("127.0.0.9")
        connect("127.0.0.9")
        _, refused = connect("127.0.0.9")
        assert refused.answer() == (503, refused.answer()[1])
        assert refused.answer()[1]["error"] == "unavailable" and refused.eof
        _, other = connect("127.0.0.10")
        assert other.written == b""
        first.connection_lost(None)
        _, again = connect("127.0.0.9")
        assert again.written == b""

    run(ServerLimits(connections_per_client_max=2), scenario)


@pytest.mark.parametrize(
    "head",
    [
        b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n",
        b"GET /health HTTP/1.1\r\n" + b"X-H: v\r\n" * 10_000 + b"\r\n",
    ],
    ids=["1 MiB header", "10,000 headers"],
)
def test_oversized_head_is_431(head: bytes) -> None:
    """A head over 64 KiB or over 100 header fields: JSON 431 `invalid_argument`, also
    when it arrives in one piece."""

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        proto.data_received(head)
        assert transport.answer()[0] == 431
        assert transport.answer()[1]["error"] == "invalid_argument"

    run(ServerLimits(), scenario)


def test_small_head_with_large_body_in_one_piece_is_served() -> None:
    """Only the head counts against the head bound: a small head followed by 200 KiB of
    body in the same read is served whole."""
    body = b"b" * 200_000
    request = b"POST /x HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        proto.data_received(request)
        await settle(lambda: b"\r\n\r\n" in transport.written)
        assert transport.written.startswith(b"HTTP/1.1 200")
        assert transport.written.endswith(b'{"length": 200000}')

    run(ServerLimits(), scenario)


def test_malformed_request_is_json_400() -> None:
    """A request line that is not HTTP: JSON 400 `invalid_argument`."""

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        proto.data_received(b"GARBAGE\r\n\r\n")
        assert transport.answer()[0] == 400
        assert transport.answer()[1]["error"] == "invalid_argument"

    run(ServerLimits(), scenario)


def test_head_and_body_timers() -> None:
    """A half head gets a JSON 408 after the head time-out; an idle new connection is
    closed without a word; a body that stops half-way gets a JSON 408."""

    async def scenario(connect: Any) -> None:
        half, half_t = connect("127.0.0.1")
        half.data_received(b"GET /health HTTP/1.1\r\nHost")
        _, idle_t = connect("127.0.0.1")
        body, body_t = connect("127.0.0.1")
        body.data_received(b"POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\n12345")
        await settle(lambda: half_t.written != b"" and idle_t.closed and body_t.written != b"")
        assert half_t.answer()[0] == 408 and body_t.answer()[0] == 408
        assert "head" in half_t.answer()[1]["message"]
        assert "body" in body_t.answer()[1]["message"]
        assert idle_t.written == b""

    run(ServerLimits(header_read_timeout_s=0.05, body_read_timeout_s=0.05), scenario)


def test_an_idle_keep_alive_connection_is_closed_quietly_and_a_next_head_is_timed() -> None:
    """After an answer the connection waits for the keep-alive time-out, then closes
    without a word; a next request's head started meanwhile has the head time-out
    instead (a 408), even when the keep-alive time-out is much longer."""

    async def scenario(connect: Any) -> None:
        idle, idle_t = connect("127.0.0.1")
        idle.data_received(GET)
        await settle(lambda: idle_t.written.startswith(b"HTTP/1.1 200"))
        half, half_t = connect("127.0.0.1")
        half.data_received(GET)
        await settle(lambda: half_t.written.startswith(b"HTTP/1.1 200"))
        answered = half_t.written
        half.data_received(b"GET /health HTTP/1.1\r\nHo")
        await settle(lambda: idle_t.closed and half_t.closed)
        assert half_t.written.startswith(answered) and b"408" in half_t.written[len(answered) :]
        assert idle_t.written.count(b"HTTP/1.1 ") == 1

    # The next head must start within the keep-alive time-out after the answer (the
    # test notices the answer by polling): 1 s is room for a busy machine's stalls; the
    # head time-out (0.3 s) still ends well before the keep-alive one would.
    run(ServerLimits(header_read_timeout_s=0.3), scenario, keep_alive_s=1.0)


class CountingLoop:
    """A loop whose timers are counted (everything else is the running loop's)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.timers = 0

    def call_at(self, when: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
        self.timers += 1
        return self.loop.call_at(when, callback, *args)

    def call_later(self, delay: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
        self.timers += 1
        return self.loop.call_later(delay, callback, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loop, name)


def test_requests_on_one_connection_reuse_its_timer() -> None:
    """A hundred requests on one keep-alive connection, each timed (head, body,
    keep-alive), make at most one new loop timer (the keep-alive time-out is shorter
    than the head timer armed when the connection opened): the connection's one timer
    is replaced only when it would fire too late (services/web/server.py ``_arm``)."""

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        counting = CountingLoop(proto.loop)
        proto.loop = counting  # type: ignore[assignment]
        for n in range(1, 101):
            proto.data_received(b"POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc")
            await settle(lambda n=n: transport.written.count(b"HTTP/1.1 200") == n)
        assert counting.timers <= 1
        assert not transport.closed

    run(ServerLimits(header_read_timeout_s=30, body_read_timeout_s=30), scenario)


def test_requests_over_the_in_flight_bound_get_json_503() -> None:
    """Requests beyond the in-flight bound are answered with the JSON 503 `unavailable`
    (not uvicorn's plain text)."""

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        proto.data_received(GET)
        await settle(lambda: b"\r\n\r\n" in transport.written)
        assert transport.answer() == (503, transport.answer()[1])
        assert transport.answer()[1]["error"] == "unavailable"

    run(ServerLimits(requests_in_flight_max=0), scenario)


def header_of(written: bytes, name: bytes) -> bytes | None:
    head = written.partition(b"\r\n\r\n")[0]
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def test_the_servers_own_answers_carry_a_request_id() -> None:
    """A body time-out answers with the request's own sane id; an answer before any
    head was read (malformed request) and the in-flight 503 with a bad id get a new
    one, never the client's bytes."""

    async def scenario(connect: Any) -> None:
        body, body_t = connect("127.0.0.1")
        body.data_received(
            b"POST /x HTTP/1.1\r\nX-Request-Id: body-7\r\nContent-Length: 10\r\n\r\n12345"
        )
        bad, bad_t = connect("127.0.0.1")
        bad.data_received(b"GARBAGE\r\n\r\n")
        await settle(lambda: body_t.written != b"")
        assert body_t.answer()[0] == 408
        assert header_of(body_t.written, b"x-request-id") == b"body-7"
        assert bad_t.answer()[0] == 400
        assert re.fullmatch(rb"[0-9a-f]{32}", header_of(bad_t.written, b"x-request-id") or b"")

    run(ServerLimits(body_read_timeout_s=0.05), scenario)

    async def busy(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        proto.data_received(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Request-Id: a b\r\n\r\n")
        await settle(lambda: b"\r\n\r\n" in transport.written)
        assert transport.answer()[0] == 503
        given = header_of(transport.written, b"x-request-id") or b""
        assert re.fullmatch(rb"[0-9a-f]{32}", given), given

    run(ServerLimits(requests_in_flight_max=0), busy)


# ---------------------------------------------------------------- the lane


class EchoLane:
    """A lane that takes POSTs to /lane/... (not /lane/none) and answers the body's
    length; it records the request id it was served under."""

    body_max_bytes = 1000
    body_read_timeout_s: float | None = None
    body_budget: ByteBudget | None = None
    body_budget_over_bytes = 0

    def __init__(self) -> None:
        self.seen: list[tuple[str, bytes, str | None]] = []
        self.gate: asyncio.Event | None = None

    def take(self, scope: dict[str, Any]) -> Any:
        if scope["method"] != "POST" or not scope["path"].startswith("/lane/"):
            return None
        if scope["path"] == "/lane/none":
            return None
        path = scope["path"]

        async def call(body: bytes) -> Any:
            self.seen.append((path, body, REQUEST_ID.get()))
            if self.gate is not None:
                await self.gate.wait()
            if path == "/lane/raise":
                raise RuntimeError("boom")
            answer = json.dumps({"lane": len(body)}).encode()
            return 201, answer, ((b"content-type", b"application/json"),)

        return call


def run_lane(
    lane: EchoLane,
    scenario: Callable[[Callable[[str], tuple[BoundedHttpProtocol, FakeTransport]]], Awaitable],
    limits: ServerLimits | None = None,
) -> None:
    run(limits or ServerLimits(), scenario, lane)


def post(path: bytes, body: bytes, *headers: bytes) -> bytes:
    head = b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" % (path, len(body))
    return head + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


def test_a_lane_serves_a_plain_request_in_one_write_with_the_asgi_headers() -> None:
    """A plain POST the lane takes: the call gets the whole body (sent in pieces) under
    the request's id; the answer is one write with the server's default headers,
    content-length, the call's headers and x-request-id, in that order, and the
    connection stays open for the next request."""
    lane = EchoLane()

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        request = post(b"/lane/a", b"0123456789", b"X-Request-Id: lane-1")
        writes: list[bytes] = []
        transport.write = writes.append  # type: ignore[method-assign]
        proto.data_received(request[:-4])
        proto.data_received(request[-4:])
        await settle(lambda: len(writes) == 1)
        assert lane.seen == [("/lane/a", b"0123456789", "lane-1")]
        assert writes[0] == (
            b"HTTP/1.1 201 Created\r\nserver: test\r\ncontent-length: 12\r\n"
            b"content-type: application/json\r\nx-request-id: lane-1\r\n\r\n"
            b'{"lane": 10}'
        )
        assert not transport.closed
        proto.data_received(post(b"/lane/b", b"", b"X-Request-Id: a b"))
        await settle(lambda: len(writes) == 2)
        assert writes[1].startswith(b"HTTP/1.1 201 ")
        new_id = header_of(writes[1], b"x-request-id") or b""
        assert re.fullmatch(rb"[0-9a-f]{32}", new_id) and lane.seen[1][2] == new_id.decode()

    run_lane(lane, scenario)


@pytest.mark.parametrize(
    "request_bytes",
    [
        post(b"/lane/a?x=1", b"abc"),
        post(b"/lane/%61", b"abc"),
        post(b"/lane/none", b"abc"),
        post(b"/lane/a", b"abc", b"X-Forwarded-For: 10.0.0.1"),
        post(b"/lane/a", b"abc", b"Expect: 100-continue"),
        post(b"/lane/a", b"x" * 1001),
        post(b"/lane/a", b"abc").replace(b"HTTP/1.1", b"HTTP/1.0"),
        b"POST /lane/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        b"PUT /lane/a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
    ],
    ids=[
        "query",
        "escape",
        "lane says no",
        "forwarded",
        "expect",
        "over the body bound",
        "HTTP/1.0",
        "chunked",
        "PUT",
    ],
)
def test_anything_but_a_plain_request_goes_to_the_application(request_bytes: bytes) -> None:
    """What the lane is not offered, or refuses, is served by the ASGI application."""
    lane = EchoLane()

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        proto.data_received(request_bytes)
        await settle(lambda: transport.written[-1:] == b"}")
        # (the application's own "100 Continue" first, for the Expect request)
        transport.written = transport.written.removeprefix(b"HTTP/1.1 100 Continue\r\n\r\n")
        assert transport.answer()[0] == 200 and "length" in transport.answer()[1]
        assert lane.seen == []

    run_lane(lane, scenario)


def test_pipelined_requests_are_answered_in_order() -> None:
    """Three requests in one read while the first (a lane's) is still being served: the
    others wait, queued, and the application serves them (a lane takes a request only
    when none of its connection's is in progress); the answers come in order."""
    lane = EchoLane()
    lane.gate = asyncio.Event()

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        proto.data_received(post(b"/lane/a", b"1") + post(b"/x", b"22") + post(b"/lane/c", b"3"))
        await settle(lambda: len(lane.seen) == 1)
        assert transport.written == b""
        lane.gate.set()  # type: ignore[union-attr]
        await settle(lambda: transport.written.count(b"HTTP/1.1 ") == 3)
        bodies = [part.partition(b"\r\n\r\n")[2] for part in transport.written.split(b"HTTP/1.1 ")]
        assert bodies[1:] == [b'{"lane": 1}', b'{"length": 2}', b'{"length": 1}']
        assert len(lane.seen) == 1

    run_lane(lane, scenario)


def test_a_lane_answer_to_connection_close_closes() -> None:
    lane = EchoLane()

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        proto.data_received(post(b"/lane/a", b"x", b"Connection: close"))
        await settle(lambda: transport.closed)
        assert header_of(transport.written, b"connection") == b"close"
        assert transport.written.endswith(b'{"lane": 1}')

    run_lane(lane, scenario)


def test_a_lane_call_that_raises_is_a_json_500_and_a_gone_client_gets_nothing() -> None:
    """An unexpected error in a call: JSON 500 ``internal``; a client gone before the
    answer: nothing is written, and the call still ran to its end."""
    lane = EchoLane()

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        proto.data_received(post(b"/lane/raise", b"x"))
        await settle(lambda: b"\r\n\r\n" in transport.written)
        assert transport.answer() == (
            500,
            {"error": "internal", "message": "internal error"},
        )
        lane.gate = asyncio.Event()
        gone, gone_t = connect("127.0.0.1")
        gone.data_received(post(b"/lane/b", b"x"))
        await settle(lambda: len(lane.seen) == 2)
        gone.connection_lost(None)
        lane.gate.set()
        await settle(lambda: not gone.tasks)
        assert gone_t.written == b""

    run_lane(lane, scenario)


def test_a_lane_request_whose_body_stops_gets_the_body_timeout() -> None:
    """The body timer covers a lane's request as any other: JSON 408 with the request's
    id, and the call is never made."""
    lane = EchoLane()

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        proto.data_received(post(b"/lane/a", b"0123456789", b"X-Request-Id: slow-1")[:-5])
        await settle(lambda: transport.written != b"")
        assert transport.answer()[0] == 408
        assert header_of(transport.written, b"x-request-id") == b"slow-1"
        assert lane.seen == []

    # The time-out restarts with what was left (~0.5 s) once the budget comes: the
    # polls that notice and feed the rest must fit in it, on a busy machine too.
    run_lane(lane, scenario, ServerLimits(body_read_timeout_s=0.5))


def test_a_lane_with_a_shorter_body_bound_times_out_by_it() -> None:
    """A lane's own body bound, shorter than the server's, is the one a taken request
    waits for: the 408 comes after it and names it; a request the lane does not take
    waits the server's bound."""
    lane = EchoLane()
    lane.body_read_timeout_s = 0.05

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        other, other_t = connect("127.0.0.1")
        started = asyncio.get_running_loop().time()
        proto.data_received(post(b"/lane/a", b"0123456789")[:-5])
        other.data_received(post(b"/lane/none", b"0123456789")[:-5])
        await settle(lambda: transport.written != b"")
        assert asyncio.get_running_loop().time() - started < 5.0
        assert transport.answer() == (
            408,
            {
                "error": "invalid_argument",
                "message": "request body not complete within 50 ms (body_read_timeout_ms)",
            },
        )
        assert other_t.written == b""  # still waiting, under the server's 30 s
        assert lane.seen == []

    run_lane(lane, scenario, ServerLimits(body_read_timeout_s=30.0))


def test_a_lane_request_has_its_access_line(caplog: pytest.LogCaptureFixture) -> None:
    """The access log sees a lane's request as the access middleware sees the others:
    method, path and status, with the request's id."""
    lane = EchoLane()

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        proto.data_received(post(b"/lane/logged", b"x", b"X-Request-Id: log-1"))
        await settle(lambda: not proto.tasks and transport.written != b"")

    with caplog.at_level("DEBUG", logger="quire.access"):
        run_lane(lane, scenario)
    lines = [r for r in caplog.records if r.name == "quire.access"]
    assert len(lines) == 1
    fields = lines[0].fields  # type: ignore[attr-defined]
    assert (fields["method"], fields["path"], fields["status"]) == ("POST", "/lane/logged", 201)


def test_a_lane_error_answer_maps_api_errors_and_hides_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An API error keeps its status and JSON body (and the call's headers); anything
    else is a JSON 500 ``internal`` that says nothing of the exception, which is logged."""
    headers = (*JSON_TYPE, (b"x-extra", b"1"))
    status, body, given = error_answer(LedgerFenced("ledger 7 is fenced"), "POST /v1/x", headers)
    assert (status, json.loads(body), given) == (
        409,
        {"error": "ledger_fenced", "message": "ledger 7 is fenced"},
        headers,
    )
    with caplog.at_level("ERROR"):
        status, body, given = error_answer(RuntimeError("db path /secret"), "POST /v1/x")
    assert (status, json.loads(body), given) == (
        500,
        {"error": "internal", "message": "internal error"},
        JSON_TYPE,
    )
    assert any(
        r.exc_info and "db path /secret" in str(r.exc_info[1]) and "POST /v1/x" in r.getMessage()
        for r in caplog.records
    )


# ---------------------------------------------------------------- the lane's body budget


def budget_lane(limit: int) -> tuple[EchoLane, ByteBudget]:
    lane = EchoLane()
    lane.body_budget = ByteBudget(limit)
    lane.gate = asyncio.Event()
    return lane, lane.body_budget


def test_a_lane_body_waits_for_the_budget_unread_and_untimed_then_is_served() -> None:
    """Bodies of lane requests share the lane's budget: a piece that does not fit stops
    the reading of its socket until the request's turn (the body's time-out does not
    run meanwhile); once the first request is answered, the second reads on and is
    served whole, and all the budget comes back."""
    lane, budget = budget_lane(100)

    async def scenario(connect: Any) -> None:
        first, first_t = connect("127.0.0.1")
        second, second_t = connect("127.0.0.1")
        first.data_received(post(b"/lane/a", b"a" * 80))
        await settle(lambda: len(lane.seen) == 1)
        assert budget.used_bytes == 80
        request = post(b"/lane/b", b"b" * 60)
        second.data_received(request[:-30])
        assert not second_t.reading and budget.waiting == 1
        await asyncio.sleep(0.75)  # one and a half body time-outs: none may fire meanwhile
        assert second_t.written == b"" and not second_t.closed
        lane.gate.set()  # type: ignore[union-attr]
        await settle(lambda: second_t.reading)
        assert first_t.answer() == (201, {"lane": 80})
        assert budget.used_bytes == 30
        second.data_received(request[-30:])
        await settle(lambda: second_t.written != b"")
        assert second_t.answer() == (201, {"lane": 60})
        assert lane.seen[1][1] == b"b" * 60
        await settle(lambda: not second.tasks)
        assert (budget.used_bytes, budget.shares, budget.waiting) == (0, 0, 0)

    # The time-out restarts with what was left (~0.5 s) once the budget comes: the
    # polls that notice and feed the rest must fit in it, on a busy machine too.
    run_lane(lane, scenario, ServerLimits(body_read_timeout_s=0.5))


def test_the_oldest_lane_request_never_waits_for_the_budget() -> None:
    """A body larger than the whole budget is still read and served: the oldest open
    request may always take what it needs (services/budget.py), so nothing deadlocks."""
    lane, budget = budget_lane(10)
    lane.gate.set()  # type: ignore[union-attr]

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        request = post(b"/lane/big", b"x" * 500)
        proto.data_received(request[:-250])
        assert transport.reading and budget.used_bytes == 250
        proto.data_received(request[-250:])
        await settle(lambda: transport.written != b"")
        assert transport.answer() == (201, {"lane": 500})
        await settle(lambda: not proto.tasks)
        assert (budget.used_bytes, budget.shares) == (0, 0)

    run_lane(lane, scenario)


def test_a_lane_request_gone_or_timed_out_gives_its_budget_back() -> None:
    """A client that leaves while its request waits for budget takes its share with it
    (the next waiter gets the budget), and so does a request whose body stops after its
    wait: its time-out runs again once it has budget, and its 408 frees the budget."""
    lane, budget = budget_lane(100)

    async def scenario(connect: Any) -> None:
        holder, holder_t = connect("127.0.0.1")
        gone, _ = connect("127.0.0.1")
        slow, slow_t = connect("127.0.0.1")
        holder.data_received(post(b"/lane/a", b"a" * 90))
        await settle(lambda: len(lane.seen) == 1)
        gone.data_received(post(b"/lane/b", b"b" * 50)[:-10])
        slow.data_received(post(b"/lane/c", b"c" * 50)[:-10])
        assert budget.waiting == 2 and budget.shares == 3
        gone.connection_lost(None)
        await settle(lambda: budget.waiting == 1 and budget.shares == 2)
        lane.gate.set()  # type: ignore[union-attr]
        await settle(lambda: slow_t.written != b"")
        assert holder_t.answer() == (201, {"lane": 90})
        assert slow_t.answer()[0] == 408  # the rest of its body never came
        assert lane.seen[1:] == []
        await settle(lambda: not holder.tasks)
        assert (budget.used_bytes, budget.shares, budget.waiting) == (0, 0, 0)

    run_lane(lane, scenario, ServerLimits(body_read_timeout_s=0.3))


def test_a_whole_body_waiting_for_budget_is_still_served_when_its_client_leaves() -> None:
    """A request whose body is complete but not yet covered by budget waits to be served;
    if its client leaves meanwhile, it is served all the same once its turn comes (as an
    add whose body arrived whole is on the ASGI path), nothing is written, and the
    budget comes back."""
    lane, budget = budget_lane(100)

    async def scenario(connect: Any) -> None:
        holder, holder_t = connect("127.0.0.1")
        leaver, leaver_t = connect("127.0.0.1")
        holder.data_received(post(b"/lane/a", b"a" * 80))
        await settle(lambda: len(lane.seen) == 1)
        leaver.data_received(post(b"/lane/b", b"b" * 60))
        assert budget.waiting == 1 and len(leaver.tasks) == 2  # both serves run (one set)
        leaver.connection_lost(None)
        lane.gate.set()  # type: ignore[union-attr]
        await settle(lambda: len(lane.seen) == 2 and not leaver.tasks and not holder.tasks)
        assert lane.seen[1][:2] == ("/lane/b", b"b" * 60)
        assert holder_t.answer() == (201, {"lane": 80}) and leaver_t.written == b""
        assert (budget.used_bytes, budget.shares, budget.waiting) == (0, 0, 0)

    run_lane(lane, scenario)


def test_an_application_may_stop_its_body_time_out_while_it_waits() -> None:
    """The ``quire.body_timer`` scope extension: an application that pauses it (waiting
    for the gateway's body budget) is not cut off by the body time-out meanwhile; once
    resumed, the time that was left runs again, and a body that then stops gets its 408."""
    paused = asyncio.Event()
    resumed = asyncio.Event()

    async def waits_then_echoes(scope: Any, receive: Any, send: Any) -> None:
        timer = scope["extensions"][BODY_TIMER]
        left = timer.pause()
        assert left is not None and 0 < left <= 1.0
        paused.set()
        await asyncio.sleep(left + 0.25)  # past the time it had left
        timer.resume(left)
        resumed.set()
        await echo_length(scope, receive, send)

    async def scenario(connect: Any) -> None:
        proto, transport = connect("127.0.0.1")
        request = post(b"/x", b"0123456789")
        proto.data_received(request[:-5])
        await asyncio.wait_for(resumed.wait(), 5)
        assert transport.written == b""  # no 408 while it waited
        proto.data_received(request[-5:])
        await settle(lambda: transport.written != b"")
        assert transport.answer() == (200, {"length": 10})
        stalled, stalled_t = connect("127.0.0.1")
        paused.clear()
        resumed.clear()
        stalled.data_received(request[:-5])
        await asyncio.wait_for(resumed.wait(), 5)
        await settle(lambda: stalled_t.written != b"")  # the rest never comes
        assert stalled_t.answer()[0] == 408

    # A time-out long enough that the application runs while it is still going on a
    # busy machine (``0 < left``), and that the poll which feeds the rest after
    # ``resume`` fits in what is left.
    run(ServerLimits(body_read_timeout_s=1.0), scenario, app=waits_then_echoes)


def test_small_lane_bodies_are_not_counted_in_the_budget() -> None:
    """A body of at most the lane's ``body_budget_over_bytes`` (the gateway: 64 KiB, what
    the server reads ahead of any application anyway) takes no share of the budget; a
    longer one does."""
    lane, budget = budget_lane(1000)
    lane.body_budget_over_bytes = 100  # type: ignore[misc]

    async def scenario(connect: Any) -> None:
        small, _ = connect("127.0.0.1")
        large, _ = connect("127.0.0.1")
        small.data_received(post(b"/lane/a", b"s" * 100))
        await settle(lambda: len(lane.seen) == 1)
        assert (budget.shares, budget.used_bytes) == (0, 0)
        large.data_received(post(b"/lane/b", b"l" * 101))
        await settle(lambda: len(lane.seen) == 2)
        assert (budget.shares, budget.used_bytes) == (1, 101)
        lane.gate.set()  # type: ignore[union-attr]
        await settle(lambda: not small.tasks)
        assert (budget.shares, budget.used_bytes) == (0, 0)

    run_lane(lane, scenario)
