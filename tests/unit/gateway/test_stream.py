"""gateway/streams/session.py with a fake connection and a fake target whose adds complete when
the test says: the session stops reading once the records in flight hold its byte bound
(a client that ignores acknowledgements cannot grow the gateway's memory), refuses a
record past its credits, acknowledges in the order records came whatever order their
adds complete in, groups records read together into one add, ends on an error with
the error message and 4000 + status, and, when the gateway shuts down, acknowledges the
records it took before closing with 1012. Streams sharing the gateway's budget wait in
turn while it is spent."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.websockets import WebSocketDisconnect

from gateway.streams.session import (
    StreamRecord,
    StreamSession,
    close_code,
    ledger_ack_json,
    log_ack_json,
    take_group,
)
from services.budget import ByteBudget
from services.errors import LedgerFenced, PayloadTooLarge, Unauthorized
from services.web.websocket import DRAIN, SEND_TEXTS

LOOP_TURNS = 50


class FakeSocket:
    """Messages the client sent (``incoming``), what the session sent (``sent``) and
    its close; ``receives`` counts the session's reads. With ``batched`` its server has
    ``quire.websocket.send_texts`` (services/web/websocket.py); ``sends`` counts the
    session's sends."""

    def __init__(self, batched: bool = True) -> None:
        self.incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sent: list[dict[str, Any]] = []
        self.closed: tuple[int, str] | None = None
        self.receives = 0
        self.sends = 0
        self.scope: dict[str, Any] = {"extensions": {SEND_TEXTS: {}} if batched else {}}

    async def _send(self, message: dict[str, Any]) -> None:
        assert message["type"] == SEND_TEXTS
        self.sends += 1
        self.sent.extend(json.loads(text) for text in message["texts"])

    def record(self, payload: bytes) -> None:
        self.incoming.put_nowait({"type": "websocket.receive", "bytes": payload})

    def drain(self) -> None:
        """What the protocol queues when the server shuts down."""
        self.incoming.put_nowait({"type": "websocket.receive", DRAIN: True})

    def text(self, doc: Any) -> None:
        text = doc if isinstance(doc, str) else json.dumps(doc)
        self.incoming.put_nowait({"type": "websocket.receive", "text": text})

    async def receive(self) -> dict[str, Any]:
        self.receives += 1
        return await self.incoming.get()

    async def send_text(self, text: str) -> None:
        self.sends += 1
        self.sent.append(json.loads(text))

    async def close(self, code: int, reason: str = "") -> None:
        self.closed = (code, reason)

    def acks(self) -> list[dict[str, Any]]:
        return [m for m in self.sent if "seq" in m]


class FakeTarget:
    """Each add's future stays pending until ``complete`` (or ``fail``)."""

    accepts_keys = True

    def __init__(self) -> None:
        self.groups: list[list[StreamRecord]] = []
        self.futures: list[asyncio.Future[list[str]]] = []

    async def submit(self, records: list[StreamRecord]) -> asyncio.Future[list[str]]:
        self.groups.append(records)
        future: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        self.futures.append(future)
        return future

    async def late_auth(self, doc: dict[str, Any]) -> None:
        if doc.get("token") != "good":
            raise Unauthorized("wrong token")

    def complete(self, index: int) -> None:
        group = self.groups[index]
        self.futures[index].set_result([ledger_ack_json(r.seq, r.seq, r.seq) for r in group])

    def submitted(self) -> int:
        return sum(len(g) for g in self.groups)


async def turns(count: int = LOOP_TURNS) -> None:
    """Let the event loop run ``count`` rounds (no wall-clock time involved)."""
    for _ in range(count):
        await asyncio.sleep(0)


def start(
    socket: FakeSocket,
    target: FakeTarget,
    credits: int = 100,
    bytes_max: int = 10_000,
    budget: ByteBudget | None = None,
) -> asyncio.Task[None]:
    session = StreamSession(socket, target, credits, bytes_max, budget)  # type: ignore[arg-type]
    return asyncio.ensure_future(session.run())


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def test_reading_stops_at_the_byte_bound_and_resumes_on_acknowledgements() -> None:
    """With 250 bytes allowed in flight, the session reads three records of 100 bytes
    and then no more, however many wait, until an acknowledgement frees room."""

    async def main() -> None:
        socket, target = FakeSocket(), FakeTarget()
        for i in range(6):
            socket.record(bytes([i]) * 100)
        task = start(socket, target, credits=100, bytes_max=250)
        await turns()
        assert target.submitted() == 3
        assert socket.receives == 3
        assert socket.incoming.qsize() == 3
        await turns()
        assert socket.receives == 3  # still not reading
        target.complete(0)
        await turns()
        assert [a["seq"] for a in socket.acks()] == list(range(len(target.groups[0])))
        assert target.submitted() > 3
        await stop(task)

    asyncio.run(main())


def test_streams_wait_in_turn_while_the_gateways_budget_is_spent() -> None:
    """Two streams share a budget of 250 bytes. The first (the oldest, which never waits)
    takes three records of 100 bytes; the second reads one record and waits with it,
    submitting nothing, until the first's acknowledgements give the bytes back; when
    both end, the budget holds nothing."""

    async def main() -> None:
        budget = ByteBudget(250)
        first, second = (FakeSocket(), FakeTarget()), (FakeSocket(), FakeTarget())
        tasks = [start(*first, budget=budget)]
        await turns()
        tasks.append(start(*second, budget=budget))
        for i in range(3):
            first[0].record(bytes([i]) * 100)
        await turns()
        assert first[1].submitted() == 3 and budget.used_bytes == 300
        second[0].record(b"s" * 100)
        second[0].record(b"t" * 100)
        await turns()
        assert second[0].receives == 1 and second[1].submitted() == 0
        for index in range(len(first[1].groups)):
            first[1].complete(index)
        await turns()
        assert second[1].submitted() >= 1
        assert len(first[0].acks()) == 3
        for socket, _ in (first, second):
            socket.text({"end": True})
        await turns()
        for index in range(len(second[1].groups)):
            second[1].complete(index)
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
        assert [a["seq"] for a in second[0].acks()] == [0, 1]
        assert (budget.used_bytes, budget.shares) == (0, 0)

    asyncio.run(main())


def test_a_client_gone_before_its_credits_leaves_no_share_behind() -> None:
    """The client is gone before the credits message could go: the session ends with
    the disconnect, and its share of the gateway's budget is closed (no stream is left
    counted, none is left as the oldest)."""

    class GoneSocket(FakeSocket):
        async def send_text(self, text: str) -> None:
            raise WebSocketDisconnect(1006)

    async def main() -> None:
        budget = ByteBudget(1000)
        with pytest.raises(WebSocketDisconnect):
            await asyncio.wait_for(start(GoneSocket(), FakeTarget(), budget=budget), 10)
        assert (budget.shares, budget.used_bytes) == (0, 0)

    asyncio.run(main())


def test_a_record_past_the_credits_is_a_protocol_error() -> None:
    """Credits 4: four records are taken, the fifth (sent before any acknowledgement)
    ends the stream with invalid_argument and close code 4400, and is never
    submitted."""

    async def main() -> None:
        socket, target = FakeSocket(), FakeTarget()
        for i in range(5):
            socket.record(bytes([i]))
        await asyncio.wait_for(start(socket, target, credits=4), timeout=10)
        assert socket.sent[0] == {"credits": 4}
        assert socket.sent[-1]["error"] == "invalid_argument"
        assert socket.closed is not None and socket.closed[0] == 4400
        assert target.submitted() <= 4

    asyncio.run(main())


@pytest.mark.parametrize("batched", [True, False], ids=["send_texts", "one by one"])
def test_acknowledgements_go_in_record_order(batched: bool) -> None:
    """Two adds complete in reverse order: the acknowledgements still go in the order
    the records came, each once; {"end": true} then closes with 1000. A group's
    acknowledgements leave in one send where the server takes them so."""

    async def main() -> None:
        socket, target = FakeSocket(batched), FakeTarget()
        task = start(socket, target)
        socket.record(b"a")
        await turns()
        socket.record(b"b")
        socket.record(b"c")
        await turns()
        assert [len(g) for g in target.groups] == [1, 2]  # read together: one add
        target.complete(1)
        await turns()
        assert socket.acks() == []
        target.complete(0)
        socket.text({"end": True})
        await asyncio.wait_for(task, timeout=10)
        assert [a["seq"] for a in socket.acks()] == [0, 1, 2]
        assert socket.closed == (1000, "end")
        # The credits message, then the two groups' acknowledgements.
        assert socket.sends == (3 if batched else 4)

    asyncio.run(main())


def test_a_shutdown_acknowledges_the_records_taken_then_closes_with_1012() -> None:
    """The server shuts down with two adds in flight (three records): the session takes
    none of the records that come after, still acknowledges the three once their adds
    complete, in order, and only then closes with 1012 (service restart)."""

    async def main() -> None:
        socket, target = FakeSocket(), FakeTarget()
        task = start(socket, target)
        socket.record(b"a")
        await turns()
        socket.record(b"b")
        socket.record(b"c")
        await turns()
        socket.drain()
        socket.record(b"after the drain")
        await turns()
        assert target.submitted() == 3
        assert socket.incoming.qsize() == 0  # read on, not taken
        assert not task.done() and socket.closed is None
        target.complete(1)
        await turns()
        assert socket.acks() == [] and socket.closed is None
        target.complete(0)
        await asyncio.wait_for(task, timeout=10)
        assert [a["seq"] for a in socket.acks()] == [0, 1, 2]
        assert socket.closed == (1012, "service restart")
        assert not any("error" in m for m in socket.sent)

    asyncio.run(main())


def test_a_shutdown_with_nothing_in_flight_closes_with_1012_at_once() -> None:
    async def main() -> None:
        socket, target = FakeSocket(), FakeTarget()
        task = start(socket, target)
        await turns()
        socket.drain()
        await asyncio.wait_for(task, timeout=10)
        assert socket.closed == (1012, "service restart")
        assert socket.sent == [{"credits": 100}]

    asyncio.run(main())


def test_a_client_gone_during_the_shutdown_ends_the_stream() -> None:
    """The client goes away while the session waits for an add after the drain: the
    session ends without waiting for the add (nobody is left to acknowledge)."""

    async def main() -> None:
        socket, target = FakeSocket(), FakeTarget()
        task = start(socket, target)
        socket.record(b"a")
        await turns()
        socket.drain()
        await turns()
        assert not task.done()
        socket.incoming.put_nowait({"type": "websocket.disconnect", "code": 1006})
        await asyncio.wait_for(task, timeout=10)
        assert socket.closed is None and socket.acks() == []

    asyncio.run(main())


def test_a_failed_add_ends_the_stream_with_its_code() -> None:
    """The first add fails with ledger_fenced: the client gets the error and close code
    4409; nothing is acknowledged."""

    async def main() -> None:
        socket, target = FakeSocket(), FakeTarget()
        task = start(socket, target)
        socket.record(b"a")
        await turns()
        target.futures[0].set_exception(LedgerFenced("fenced"))
        await asyncio.wait_for(task, timeout=10)
        assert socket.sent[-1] == {"error": "ledger_fenced", "message": "fenced"}
        assert socket.closed is not None and socket.closed[0] == 4409
        assert socket.acks() == []

    asyncio.run(main())


def test_bad_control_messages_and_keys() -> None:
    """A first auth message is checked (a wrong token is 4401); a key applies to the
    next record only; an oversized record is 4413; text that is not JSON is 4400."""

    async def run(*messages: Any) -> FakeSocket:
        socket, target = FakeSocket(), FakeTarget()
        for message in messages:
            if isinstance(message, bytes):
                socket.record(message)
            else:
                socket.text(message)
        task = start(socket, target)
        await turns()
        if not task.done():
            target.complete(0)
            socket.text({"end": True})
        await asyncio.wait_for(task, timeout=10)
        socket.groups = target.groups  # type: ignore[attr-defined]
        return socket

    async def main() -> None:
        wrong = await run({"token": "bad"})
        assert wrong.closed is not None and wrong.closed[0] == 4401
        keyed = await run({"token": "good"}, {"key": "k1"}, b"x")
        assert keyed.closed == (1000, "end")
        assert keyed.groups[0][0].key == "k1"  # type: ignore[attr-defined]
        two_keys = await run({"key": "k1"}, {"key": "k2"})
        assert two_keys.closed is not None and two_keys.closed[0] == 4400
        not_json = await run("{nope")
        assert not_json.closed is not None and not_json.closed[0] == 4400

    asyncio.run(main())


def test_groups_keep_keyed_records_alone() -> None:
    """A keyed record is a group of its own; keyless records in a row group together."""
    pending = deque(
        [
            StreamRecord(0, b"a"),
            StreamRecord(1, b"b"),
            StreamRecord(2, b"c", "k"),
            StreamRecord(3, b"d"),
            StreamRecord(4, b"e"),
        ]
    )
    assert [r.seq for r in take_group(pending)] == [0, 1]
    assert [r.seq for r in take_group(pending)] == [2]
    assert [r.seq for r in take_group(pending)] == [3, 4]


def test_close_codes_are_4000_plus_the_status() -> None:
    assert close_code(PayloadTooLarge("big")) == 4413
    assert close_code(Unauthorized("no")) == 4401
    assert close_code(LedgerFenced("f")) == 4409


_IDS = st.integers(min_value=-1, max_value=2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(seq=st.integers(min_value=0, max_value=2**63 - 1), first=_IDS, second=_IDS)
def test_ack_texts_are_the_compact_json_of_the_documented_objects(
    seq: int, first: int, second: int
) -> None:
    """The acknowledgements are built with a format, not ``json.dumps``: the texts must
    be exactly what ``json.dumps`` with compact separators writes for the documented
    objects (docs/streaming.md), key order included."""
    compact = (",", ":")
    assert ledger_ack_json(seq, first, second) == json.dumps(
        {"seq": seq, "entry_id": first, "last_add_confirmed": second}, separators=compact
    )
    assert log_ack_json(seq, first, second) == json.dumps(
        {"seq": seq, "position": {"ledger_id": first, "entry_id": second}}, separators=compact
    )
