"""Per-bookie add batching (services/ledger_client/senders.py) against a fake bookie
client: records of many ledgers queued while requests are in flight go out together, the
in-flight bound holds, batches respect their bounds, and every outcome reaches each
callback once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import pytest

from services.bookie_client import BookieAddResult
from services.errors import BookieReadOnly, BookieUnavailable, LedgerFenced, QuireError
from services.ledger_client.senders import (
    AddAnswer,
    AddCallback,
    BookieSender,
    SenderLimits,
    add_outcome,
    answer_for,
)
from services.ledger_client.settings import LedgerClientSettings
from services.protocol.messages import BookieAddsDone, RejectReason
from services.request_ids import REQUEST_ID
from services.wire.framing import FramedRecord

DEFAULTS = SenderLimits.from_settings(LedgerClientSettings())


def limits(**bounds: int) -> SenderLimits:
    return replace(DEFAULTS, **bounds)


def rec(lid: int, eid: int, size: int = 1) -> FramedRecord:
    return FramedRecord(lid, eid, eid - 1, b"x" * size)


class FakeClient:
    """Answers each add when the test releases it; remembers every request."""

    def __init__(self) -> None:
        self.requests: list[list[FramedRecord]] = []
        self.gates: list[asyncio.Future] = []
        self.in_flight = 0
        self.in_flight_max = 0
        self.timeouts: list[float | None] = []

    async def add(
        self, records: list[FramedRecord], timeout_s: float | None = None
    ) -> BookieAddResult:
        self.requests.append(list(records))
        self.timeouts.append(timeout_s)
        gate = asyncio.get_running_loop().create_future()
        self.gates.append(gate)
        self.in_flight += 1
        self.in_flight_max = max(self.in_flight_max, self.in_flight)
        try:
            outcome = await gate
        finally:
            self.in_flight -= 1
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def release(self, index: int, outcome: object | None = None) -> None:
        records = self.requests[index]
        self.gates[index].set_result(
            outcome if outcome is not None else BookieAddResult(len(records))
        )


class Calls:
    """Every answer a callback got: (name, stored, rejected, summary reason)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, tuple, RejectReason | None]] = []

    def callback(self, name: str) -> AddCallback:
        def cb(answer: AddAnswer) -> None:
            self.calls.append((name, answer.stored, answer.rejected, answer.reason))

        return cb


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_queued_records_of_many_ledgers_go_out_in_one_request() -> None:
    """With the in-flight bound reached, everything queued meanwhile (several ledgers)
    goes out in the next single request, and each callback hears its own ids."""

    async def run() -> None:
        client, calls = FakeClient(), Calls()
        sender = BookieSender("b1", lambda: client, limits(requests_in_flight_max=1))
        sender.send((rec(1, 0),), calls.callback("first"))
        await settle()
        sender.send((rec(1, 1), rec(1, 2)), calls.callback("l1"))
        sender.send((rec(2, 0),), calls.callback("l2"))
        await settle()
        assert len(client.requests) == 1  # bound: one request in flight
        client.release(0)
        await settle()
        assert len(client.requests) == 2
        assert [(r.ledger_id, r.entry_id) for r in client.requests[1]] == [(1, 1), (1, 2), (2, 0)]
        client.release(1)
        await settle()
        assert calls.calls == [
            ("first", (0,), (), None),
            ("l1", (1, 2), (), None),
            ("l2", (0,), (), None),
        ]
        assert client.in_flight_max == 1
        await sender.aclose()

    asyncio.run(run())


def test_items_with_one_callback_are_answered_in_one_call() -> None:
    """Records queued with the same callback (a handle's, per bookie) and carried by one
    request are answered in one call, in queue order; another callback in the same
    request still hears only its own."""

    async def run() -> None:
        client, calls = FakeClient(), Calls()
        sender = BookieSender("b1", lambda: client, limits(requests_in_flight_max=1))
        one, other = calls.callback("l1"), calls.callback("l2")
        sender.send((rec(1, 0),), one)
        await settle()
        sender.send((rec(1, 1),), one)
        sender.send((rec(2, 0),), other)
        sender.send((rec(1, 2), rec(1, 3)), one)
        await settle()
        client.release(0)
        await settle()
        client.release(1, BookieAddResult(4, rejected=[(1, 3, "ledger_fenced")]))
        await settle()
        assert calls.calls == [
            ("l1", (0,), (), None),
            ("l1", (1, 2), (3,), RejectReason.FENCED),
            ("l2", (0,), (), None),
        ]
        await sender.aclose()

    asyncio.run(run())


def test_in_flight_bound_and_batch_bounds() -> None:
    """At most ``requests_in_flight_max`` requests are open; a batch never passes its
    entry or byte bound (an item is never split)."""

    async def run() -> None:
        client, calls = FakeClient(), Calls()
        bounds = limits(
            requests_in_flight_max=2,
            requests_in_flight_eager=2,
            batch_entries_max=3,
            batch_bytes_max=100,
        )
        sender = BookieSender("b1", lambda: client, bounds)
        for i in range(10):
            sender.send((rec(1, i, size=40),), calls.callback(f"r{i}"))
        await settle()
        assert len(client.requests) == 2
        while len(calls.calls) < 10:
            for index, gate in enumerate(client.gates):
                if not gate.done():
                    client.release(index)
            await settle()
        assert client.in_flight_max == 2
        for request in client.requests:
            assert len(request) <= 3
            assert sum(len(r.payload) for r in request) <= 100 or len(request) == 1
        assert sorted(c[1][0] for c in calls.calls) == list(range(10))
        await sender.aclose()

    asyncio.run(run())


def test_requests_past_the_eager_ones_leave_only_with_a_deep_queue() -> None:
    """Two requests leave at once; a third (of four allowed) only once the queue holds
    ``pipeline_entries_min`` entries or ``pipeline_bytes_min`` bytes; a shallow queue
    waits until fewer than two are in flight."""

    async def run() -> None:
        client, calls = FakeClient(), Calls()
        bounds = limits(
            requests_in_flight_max=4,
            requests_in_flight_eager=2,
            pipeline_entries_min=5,
            pipeline_bytes_min=1000,
        )
        sender = BookieSender("b1", lambda: client, bounds)
        for i in range(6):  # 0 and 1 leave alone; 2..5 wait: 4 entries < 5
            sender.send((rec(1, i),), calls.callback(f"r{i}"))
        await settle()
        assert [len(r) for r in client.requests] == [1, 1]
        sender.send((rec(1, 6),), calls.callback("r6"))  # 5 queued: a deep queue
        await settle()
        assert [len(r) for r in client.requests] == [1, 1, 5]
        sender.send((rec(2, 0, size=1000),), calls.callback("big"))  # 1,000 bytes: deep
        await settle()
        assert [len(r) for r in client.requests] == [1, 1, 5, 1]
        sender.send((rec(1, 7),), calls.callback("r7"))  # four in flight: the bound
        await settle()
        assert len(client.requests) == 4
        client.release(0)
        client.release(1)
        await settle()
        assert len(client.requests) == 4  # two in flight, a shallow queue: it waits
        client.release(2)
        await settle()
        assert [(r.ledger_id, r.entry_id) for r in client.requests[4]] == [(1, 7)]
        for index in range(3, 5):
            client.release(index)
        await settle()
        assert len(calls.calls) == 9 and client.in_flight_max == 4
        await sender.aclose()

    asyncio.run(run())
    assert (
        DEFAULTS.requests_in_flight_eager == LedgerClientSettings().bookie_requests_in_flight_eager
    )


def test_failures_map_to_reject_reasons() -> None:
    """Read-only -> READONLY, fenced -> FENCED, any other error -> UNAVAILABLE, for every
    record of the failed request; per-entry fenced rejections reach only their item."""

    async def run() -> None:
        for error, reason in (
            (BookieReadOnly("ro"), RejectReason.READONLY),
            (LedgerFenced("f"), RejectReason.FENCED),
            (BookieUnavailable("down"), RejectReason.UNAVAILABLE),
        ):
            client, calls = FakeClient(), Calls()
            sender = BookieSender("b1", lambda client=client: client, DEFAULTS)
            sender.send((rec(1, 0), rec(1, 1)), calls.callback("a"))
            await settle()
            client.release(0, error)
            await settle()
            assert calls.calls == [("a", (), (0, 1), reason)]
            await sender.aclose()

        client, calls = FakeClient(), Calls()
        sender = BookieSender("b1", lambda: client, limits(requests_in_flight_max=1))
        sender.send((rec(9, 0),), calls.callback("hold"))
        await settle()
        sender.send((rec(1, 5), rec(1, 6)), calls.callback("one"))
        sender.send((rec(2, 5),), calls.callback("two"))
        await settle()
        client.release(0)
        await settle()
        client.release(1, BookieAddResult(2, [(1, 6, "ledger_fenced")]))
        await settle()
        assert calls.calls[1:] == [
            ("one", (5,), (6,), RejectReason.FENCED),
            ("two", (5,), (), None),
        ]
        await sender.aclose()

    asyncio.run(run())


def test_a_failing_callback_does_not_break_the_sender() -> None:
    """One handle's callback raising must not stop the others' answers or later sends."""

    async def run() -> None:
        client, calls = FakeClient(), Calls()
        sender = BookieSender("b1", lambda: client, limits(requests_in_flight_max=1))

        def bad(*_: object) -> None:
            raise RuntimeError("boom")

        sender.send((rec(9, 0),), calls.callback("hold"))
        await settle()
        sender.send((rec(1, 0),), bad)
        sender.send((rec(2, 0),), calls.callback("good"))
        await settle()
        client.release(0)
        await settle()
        client.release(1)
        await settle()
        sender.send((rec(3, 0),), calls.callback("later"))
        await settle()
        client.release(2)
        await settle()
        assert [c[0] for c in calls.calls] == ["hold", "good", "later"]
        await sender.aclose()

    asyncio.run(run())


def test_a_full_queue_refuses_no_record_and_has_no_room_until_requests_leave() -> None:
    """A full queue is a busy bookie, not a failed one (issue 35 item 11): the bound
    (queued_entries_max, queued_bytes_max) is reported by ``has_room`` for admission to
    wait on, ``send`` refuses nothing past it, and every record is answered as stored."""

    async def run() -> None:
        client, calls = FakeClient(), Calls()
        bounds = limits(requests_in_flight_max=1, queued_entries_max=2, queued_bytes_max=10)
        sender = BookieSender("b1", lambda: client, bounds)
        assert sender.has_room(50, 50)  # an empty queue takes any add
        sender.send((rec(1, 0),), calls.callback("in flight"))
        await settle()
        queued = calls.callback("queued")
        sender.send((rec(1, 1),), queued)
        assert sender.has_room(1, 1) and not sender.has_room(2, 1)  # the entries' bound
        sender.send((rec(1, 2),), queued)
        assert not sender.has_room(1, 1)
        sender.send((rec(2, 0),), calls.callback("past the bound"))
        await settle()
        assert calls.calls == [] and sender.queued_entries == 3  # nothing refused
        client.release(0)
        await settle()
        assert sender.queued_entries == 0 and sender.has_room(2, 10)
        client.release(1)
        await settle()
        assert calls.calls == [
            ("in flight", (0,), (), None),
            ("queued", (1, 2), (), None),
            ("past the bound", (0,), (), None),
        ]
        await sender.aclose()

    asyncio.run(run())


def test_the_bytes_bound_of_the_queue() -> None:
    """``has_room`` counts the queued payload bytes against queued_bytes_max too."""

    async def run() -> None:
        client, calls = FakeClient(), Calls()
        bounds = limits(requests_in_flight_max=1, queued_entries_max=100, queued_bytes_max=10)
        sender = BookieSender("b1", lambda: client, bounds)
        sender.send((rec(1, 0, size=4),), calls.callback("in flight"))
        await settle()
        sender.send((rec(1, 1, size=6),), calls.callback("queued"))
        assert sender.queued_bytes == 6
        assert sender.has_room(1, 4) and not sender.has_room(1, 5)
        client.release(0)
        await settle()
        client.release(1)
        await settle()
        assert [c[0] for c in calls.calls] == ["in flight", "queued"]
        await sender.aclose()

    asyncio.run(run())


def test_room_listeners_are_called_once_when_requests_leave_the_queue() -> None:
    """An add waiting for room registers a listener (``when_room``): it is called once
    when queued requests leave, not while nothing left, and registering it twice
    before then calls it once."""

    async def run() -> None:
        client, calls = FakeClient(), Calls()
        sender = BookieSender("b1", lambda: client, limits(requests_in_flight_max=1))
        woken: list[str] = []
        sender.send((rec(1, 0),), calls.callback("in flight"))
        await settle()
        sender.send((rec(1, 1),), calls.callback("queued"))
        listener = partial(woken.append, "a")
        sender.when_room(listener)
        sender.when_room(listener)
        sender.when_room(partial(woken.append, "b"))
        await settle()
        assert woken == []  # nothing left the queue yet
        client.release(0)
        await settle()
        assert woken == ["a", "b"]  # the queued request left: each listener once
        client.release(1)
        await settle()
        assert woken == ["a", "b"]  # called once only
        await sender.aclose()

    asyncio.run(run())


def test_add_outcome_is_the_one_mapping_of_answers_to_reject_reasons() -> None:
    """One mapping for the senders and the recovery's write-backs: an error rejects every
    record with its reason; a per-entry refusal rejects only that record, as FENCED."""
    records = (rec(1, 5), rec(1, 6), rec(2, 6))
    assert add_outcome(records, BookieReadOnly("ro")) == ((), (5, 6, 6), RejectReason.READONLY)
    assert add_outcome(records, LedgerFenced("f"))[2] is RejectReason.FENCED
    assert add_outcome(records, BookieUnavailable("x"))[2] is RejectReason.UNAVAILABLE
    assert add_outcome(records, BookieAddResult(3)) == ((5, 6, 6), (), None)
    refused = BookieAddResult(2, [(1, 6, "ledger_fenced")])
    assert add_outcome(records, refused) == ((5, 6), (6,), RejectReason.FENCED)


def test_each_refusal_code_maps_to_its_own_reason_per_record() -> None:
    """Issue 7 item 8: a bookie answers each record of an add on its own. ledger_fenced
    -> FENCED, invalid_argument (the record's CRC did not verify: damaged in transit) ->
    CORRUPT, entry_exists (other bytes stored) -> ENTRY_EXISTS, a code we do not know ->
    UNAVAILABLE; records not refused are stored; the summary is FENCED if any record was
    fenced, and the event carries every per-record reason."""
    records = tuple(rec(1, e) for e in range(5))
    answer = BookieAddResult(
        1,
        [
            (1, 1, "invalid_argument"),
            (1, 2, "entry_exists"),
            (1, 3, "something_new"),
            (1, 4, "ledger_fenced"),
            (2, 0, "entry_exists"),  # another ledger's record: not ours
        ],
    )
    result = answer_for(records, answer)
    assert result.stored == (0,)
    assert result.rejected == (1, 2, 3, 4)
    assert result.reasons == (
        RejectReason.CORRUPT,
        RejectReason.ENTRY_EXISTS,
        RejectReason.UNAVAILABLE,
        RejectReason.FENCED,
    )
    assert result.reason is RejectReason.FENCED
    assert answer_for(records[:2], answer).reason is RejectReason.CORRUPT
    event = answer_for(records[:3], answer).event("b1")
    assert event == BookieAddsDone(
        "b1",
        (0,),
        (1, 2),
        RejectReason.CORRUPT,
        reasons=(RejectReason.CORRUPT, RejectReason.ENTRY_EXISTS),
    )
    assert event.rejection_reasons() == (RejectReason.CORRUPT, RejectReason.ENTRY_EXISTS)
    assert add_outcome(records[:3], answer) == ((0,), (1, 2), RejectReason.CORRUPT)


def test_one_bad_record_fails_only_its_ledger_in_a_cross_ledger_request() -> None:
    """Issue 7 item 8: records of three ledgers go to the bookie in one request; one
    record of ledger 1 is corrupt, one of ledger 2 is stored there with other bytes.
    Ledger 1 hears CORRUPT for that record only (its other record stored), ledger 2
    hears ENTRY_EXISTS, and ledger 3 hears that everything was stored: no other ledger
    is told the bookie failed."""

    async def run() -> None:
        client, calls = FakeClient(), Calls()
        sender = BookieSender("b1", lambda: client, limits(requests_in_flight_max=1))
        sender.send((rec(9, 0),), calls.callback("hold"))
        await settle()
        sender.send((rec(1, 0), rec(1, 1)), calls.callback("l1"))
        sender.send((rec(2, 4),), calls.callback("l2"))
        sender.send((rec(3, 7), rec(3, 8)), calls.callback("l3"))
        await settle()
        client.release(0)
        await settle()
        assert [(r.ledger_id, r.entry_id) for r in client.requests[1]] == [
            (1, 0), (1, 1), (2, 4), (3, 7), (3, 8),
        ]  # fmt: skip
        client.release(1, BookieAddResult(3, [(1, 1, "invalid_argument"), (2, 4, "entry_exists")]))
        await settle()
        assert calls.calls[1:] == [
            ("l1", (0,), (1,), RejectReason.CORRUPT),
            ("l2", (), (4,), RejectReason.ENTRY_EXISTS),
            ("l3", (7, 8), (), None),
        ]
        await sender.aclose()

    asyncio.run(run())


def test_adds_are_sent_with_the_add_timeout() -> None:
    """Issue 7 item 8b: every add request carries its own time-out to the bookie client:
    add_timeout_ms plus add_timeout_per_mib_ms for each MiB of payload in flight to that
    bookie when it leaves (its own included), so a hung bookie fails the add quickly
    while a bookie busy with large requests has time to commit them; a timed-out add
    is UNAVAILABLE."""

    async def run() -> None:
        client, calls = FakeClient(), Calls()
        bounds = limits(add_timeout_ms=750, add_timeout_per_mib_ms=100)
        sender = BookieSender("b1", lambda: client, bounds)
        mib = 1024 * 1024
        sender.send((rec(1, 0, size=mib),), calls.callback("a"))
        sender.send((rec(1, 1, size=mib),), calls.callback("b"))
        await settle()
        assert client.timeouts == [pytest.approx(0.85), pytest.approx(0.95)]
        client.release(0, BookieUnavailable("b1: add: no answer within 0.85s"))
        client.release(1)
        await settle()
        sender.send((rec(1, 2),), calls.callback("c"))  # nothing else in flight now
        await settle()
        assert client.timeouts[2] == pytest.approx(0.75, abs=0.001)
        client.release(2)
        await settle()
        assert calls.calls == [
            ("a", (), (0,), RejectReason.UNAVAILABLE),
            ("b", (1,), (), None),
            ("c", (2,), (), None),
        ]
        await sender.aclose()

    asyncio.run(run())
    assert DEFAULTS.add_timeout_ms == LedgerClientSettings().bookie_add_timeout_ms


def test_each_add_request_carries_the_id_of_its_first_item(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An add request to a bookie runs with the request id of its first item, not the
    id of whoever started its task; one that carries items of several requests names
    them all at debug level."""
    seen: list[str | None] = []

    class IdClient(FakeClient):
        async def add(
            self, records: list[FramedRecord], timeout_s: float | None = None
        ) -> BookieAddResult:
            seen.append(REQUEST_ID.get())
            return await super().add(records, timeout_s)

    def send_as(sender: BookieSender, request_id: str, record: FramedRecord, calls: Calls) -> None:
        token = REQUEST_ID.set(request_id)
        try:
            sender.send((record,), calls.callback(request_id))
        finally:
            REQUEST_ID.reset(token)

    async def run() -> None:
        client, calls = IdClient(), Calls()
        sender = BookieSender("b1", lambda: client, limits(requests_in_flight_max=1))
        send_as(sender, "req-a", rec(1, 0), calls)
        await settle()
        send_as(sender, "req-b", rec(1, 1), calls)
        send_as(sender, "req-c", rec(2, 0), calls)
        await settle()
        # The next request's task is started from req-a's answer, in req-a's context.
        client.release(0)
        await settle()
        client.release(1)
        await settle()
        assert seen == ["req-a", "req-b"]
        assert [name for name, *_ in calls.calls] == ["req-a", "req-b", "req-c"]
        await sender.aclose()

    with caplog.at_level(logging.DEBUG, logger="services.ledger_client.senders"):
        asyncio.run(run())
    carried = [r for r in caplog.records if r.getMessage().startswith("add request to bookie")]
    assert len(carried) == 1
    assert carried[0].fields["request_ids"] == ["req-b", "req-c"]  # type: ignore[attr-defined]


class CallbackClient:
    """A client with ``start_add`` (as ``BookieClient``): remembers each request's
    records, request id and ``done``, which the test calls."""

    def __init__(self) -> None:
        self.started: list[tuple[list[FramedRecord], str | None, Callable]] = []

    def start_add(
        self,
        records: list[FramedRecord],
        timeout_s: float,
        done: Callable[[BookieAddResult | QuireError], None],
        request_id: str | None = None,
    ) -> None:
        self.started.append((list(records), request_id, done))

    async def add(
        self, records: list[FramedRecord], timeout_s: float | None = None
    ) -> BookieAddResult:
        raise AssertionError("a client with start_add is not driven through add")


def test_a_callback_client_is_sent_to_at_once_and_answers_after_close_reach_no_one() -> None:
    """With ``start_add`` the request leaves from ``send`` itself (no task), carrying its
    item's request id; its answer frees the slot for the next request; once the sender is
    closed, an answer still in flight reaches no callback."""

    async def main() -> None:
        client, calls = CallbackClient(), Calls()
        sender = BookieSender("b1", lambda: client, limits(requests_in_flight_max=1))
        token = REQUEST_ID.set("req-1")
        sender.send((rec(1, 0),), calls.callback("a"))
        REQUEST_ID.reset(token)
        sender.send((rec(1, 1),), calls.callback("a"))
        assert [(len(r), rid) for r, rid, _ in client.started] == [(1, "req-1")]
        client.started[0][2](BookieAddResult(1))
        assert calls.calls == [("a", (0,), (), None)]
        assert len(client.started) == 2  # the queued record left once the slot was free
        await sender.aclose()
        client.started[1][2](BookieAddResult(1))
        assert len(calls.calls) == 1

    asyncio.run(main())


def test_the_answering_instance_reaches_the_handles_event() -> None:
    """Issue 35 item 3: the instance a bookie answered an add under (BookieAddResult.instance_id)
    goes with each handle's part of the answer into BookieAddsDone, so the handle can
    compare it with the instance its fragment recorded; a failed request names none."""
    records = [rec(1, 0), rec(2, 0), rec(2, 1)]
    answer = BookieAddResult(2, [(2, 1, "ledger_fenced")], "b1#2")
    assert answer_for(records[:1], answer).event("b1") == BookieAddsDone(
        "b1", (0,), instance_id="b1#2"
    )
    event = answer_for(records[1:], answer).event("b1")
    assert (event.stored, event.rejected, event.instance_id) == ((0,), (1,), "b1#2")
    failed = answer_for(records, BookieUnavailable("down")).event("b1")
    assert failed.instance_id is None and failed.rejected == (0, 0, 1)
