"""The write handle's asyncio runner (services/ledger_client/runners/write.py) with the handle table
(services/ledger_client/handles.py), against fake bookies and an in-memory metadata store on a real
event loop: adds, acknowledgements in entry-id order, an ensemble change when a bookie
fails, close, and a fenced ledger."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest

from services.bookie_client import BookieAddResult
from services.errors import LedgerClosed, LedgerFenced, Unavailable
from services.ledger_client.handles import HandleTable
from services.ledger_client.runners.write import HandleRunner
from services.ledger_client.senders import SenderLimits, SenderTable
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.wire.framing import FramedRecord
from tests.unit.ledger_client.fakes import FakeBookie, FakeBookies, FakeLedgerStore, make_context

POOL = ["b0:1", "b1:1", "b2:1", "b3:1"]


async def settle(condition: Callable[[], bool]) -> None:
    """Let the loop run until ``condition`` holds (bounded)."""
    for _ in range(1_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


async def open_handle(
    bookies: FakeBookies, store: FakeLedgerStore, e: int, w: int, a: int
) -> tuple[HandleTable, HandleRunner]:
    ctx = make_context(bookies, store)
    table = HandleTable(ctx, SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings)))
    created = await store.create(LedgerMetadata.new(5, POOL[:e], w, a))
    return table, table.open(created.metadata, created.version, b"")


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


def test_adds_are_stored_on_their_write_sets_and_acknowledged() -> None:
    """Each add is sent to its write quorum and answered once Qa bookies stored it; the
    LAC the answer carries covers it."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        table, runner = await open_handle(bookies, store, 3, 2, 2)
        outcomes = [await runner.add((b"e%d" % i,)) for i in range(3)]
        assert [(o.first_entry_id, o.last_entry_id) for o in outcomes] == [(0, 0), (1, 1), (2, 2)]
        assert outcomes[-1].lac == 2 and runner.lac == 2
        for entry_id in range(3):
            holders = {b for b, bk in bookies.bookies.items() if (5, entry_id) in bk.entries}
            assert holders == set(runner.handle.metadata.write_set_bookies(entry_id))
        assert table.live(5) is runner and table.writer_lac(5) == 2 and runner.idle
        await table.aclose()

    run(body)


def test_acknowledgements_wait_for_every_lower_entry() -> None:
    """docs/protocol.md: acks to the client are in entry-id order, always. With b0 holding
    back its answers, entry 1 (written to b1, b2) has its ack quorum but is answered only
    after entry 0 (on b0, b1) is."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        table, runner = await open_handle(bookies, store, 3, 2, 2)
        bookies.bookies["b0:1"].gate = gate = asyncio.Event()
        first = asyncio.ensure_future(runner.add((b"zero",)))
        second = asyncio.ensure_future(runner.add((b"one",)))
        b2 = bookies.bookies["b2:1"]
        await settle(lambda: (5, 1) in b2.entries and (5, 1) in bookies.bookies["b1:1"].entries)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not first.done() and not second.done() and runner.lac == -1
        registry = runner.ctx.metrics.registry
        assert registry is not None
        # Entry 0 is in flight to b0 (held back): the gauge, read as a scrape reads it.
        assert registry.get_sample_value("quire_gateway_adds_in_flight") == 1
        gate.set()
        done_first, done_second = await first, await second
        assert (done_first.last_entry_id, done_second.last_entry_id) == (0, 1)
        assert done_second.lac == 1
        assert registry.get_sample_value("quire_gateway_adds_in_flight") == 0
        await table.aclose()

    run(body)


def test_a_failing_bookie_is_replaced_by_an_ensemble_change() -> None:
    """A bookie failing an add is replaced: a new fragment at the first unacknowledged
    entry is written by CAS, the pending entry is re-sent to the replacement, and the
    add is acknowledged; nothing acknowledged before is lost."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        table, runner = await open_handle(bookies, store, 3, 3, 2)
        await runner.add((b"before",))
        bookies.bookies["b2:1"].down = True
        outcome = await runner.add((b"after",))
        assert outcome.last_entry_id == 1
        current = (await store.get(5)).metadata
        assert current.state is LedgerState.OPEN
        assert [f.first_entry_id for f in current.fragments] == [0, 1]
        assert current.ensemble == ("b0:1", "b1:1", "b3:1")
        await settle(lambda: (5, 1) in bookies.bookies["b3:1"].entries)
        assert runner.handle.metadata == current
        assert runner.ctx.metrics.ensemble_changes._value.get() == 1
        await table.aclose()

    run(body)


def test_close_writes_closed_at_the_lac_and_later_adds_fail() -> None:
    """Close CASes the metadata to CLOSED at the last acknowledged entry; closing again
    answers the same metadata; an add afterwards fails with ledger_closed and the
    handle leaves the live table."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        table, runner = await open_handle(bookies, store, 3, 2, 2)
        await runner.add((b"a", b"bb"))
        closed, version = await runner.close()
        assert closed.state is LedgerState.CLOSED and closed.last_entry_id == 1
        assert (await store.get(5)).metadata == closed and version == 1
        assert (await runner.close())[0] == closed
        with pytest.raises(LedgerClosed):
            await runner.add((b"late",))
        assert table.live(5) is None and table.get(5) is runner and table.live_count == 0
        await table.aclose()

    run(body)


def test_a_fenced_bookie_fails_the_add_with_ledger_fenced() -> None:
    """Once a recovery fenced the ledger on the bookies, the writer's add fails with
    ledger_fenced (outcome unknown) and the handle is no longer live."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        table, runner = await open_handle(bookies, store, 3, 3, 3)
        await runner.add((b"a",))
        for bookie in bookies.bookies.values():
            bookie.fenced.add(5)
        with pytest.raises(LedgerFenced):
            await runner.add((b"b",))
        await settle(lambda: table.live(5) is None)
        await table.aclose()

    run(body)


class RefusingBookie(FakeBookie):
    """A fake bookie that refuses the records named in ``refuse`` with their code, one
    by one, and stores the others of the same request (docs/api.md "Bookie", per-record add
    answers)."""

    def __init__(self, bookie_id: str, refuse: dict[tuple[int, int], str]) -> None:
        super().__init__(bookie_id)
        self.refuse = refuse

    async def add(
        self, records: list[FramedRecord], timeout_s: float | None = None
    ) -> BookieAddResult:
        kept = [r for r in records if (r.ledger_id, r.entry_id) not in self.refuse]
        result = await super().add(kept, timeout_s)
        self.adds[-1] = list(records)
        refused = [
            (r.ledger_id, r.entry_id, self.refuse[(r.ledger_id, r.entry_id)])
            for r in records
            if (r.ledger_id, r.entry_id) in self.refuse
        ]
        return BookieAddResult(result.stored, [*result.rejected, *refused])


@pytest.mark.parametrize("code", ["invalid_argument", "entry_exists"])
def test_a_refused_record_replaces_the_bookie_for_its_ledger_only(code: str) -> None:
    """Issue 7 item 8: ledgers 5 and 6 share a request to b0, which refuses ledger 5's
    entry 1 (a corrupt record, or other bytes stored there) and stores ledger 6's entry.
    Ledger 5 replaces b0 by an ensemble change and its add is acknowledged once the
    replacement stored it; ledger 6's add is acknowledged normally, with no ensemble
    change (E = Qw = Qa = 3: every add needs b0's answer)."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        b0 = bookies.bookies["b0:1"] = RefusingBookie("b0:1", {(5, 1): code})
        ctx = make_context(bookies, store, bookie_requests_in_flight_max=1)
        table = HandleTable(ctx, SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings)))
        runners = {}
        for lid in (5, 6):
            created = await store.create(LedgerMetadata.new(lid, POOL[:3], 3, 3))
            runners[lid] = table.open(created.metadata, created.version, b"")
        b0.gate = gate = asyncio.Event()
        first = asyncio.ensure_future(runners[5].add((b"five-0",)))
        await settle(lambda: len(bookies.bookies["b1:1"].adds) == 1)
        second = asyncio.ensure_future(runners[5].add((b"five-1",)))
        other = asyncio.ensure_future(runners[6].add((b"six-0",)))
        await settle(lambda: len(bookies.bookies["b1:1"].adds) == 3)
        gate.set()
        assert (await first).last_entry_id == 0
        assert (await other).last_entry_id == 0
        assert (await second).last_entry_id == 1
        assert [(r.ledger_id, r.entry_id) for r in b0.adds[1]] == [(5, 1), (6, 0)]
        five, six = (await store.get(5)).metadata, (await store.get(6)).metadata
        assert [f.first_entry_id for f in five.fragments] == [0, 1]
        assert five.ensemble == ("b3:1", "b1:1", "b2:1")
        assert (5, 1) in bookies.bookies["b3:1"].entries and (5, 1) not in b0.entries
        assert len(six.fragments) == 1 and six.ensemble == tuple(POOL[:3])
        assert ctx.metrics.ensemble_changes._value.get() == 1
        await table.aclose()

    run(body)


def test_adds_waiting_for_room_are_admitted_one_by_one_and_never_refused() -> None:
    """Back-pressure: with room for 2 entries in flight and 2 held by a slow bookie, two
    more adds of 2 entries wait; when the room comes back both are woken, but only one
    fits: the other waits again (it is not sent to the handle to be refused there with
    503 "too many adds in flight"), and every add is acknowledged in order."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        ctx = make_context(bookies, store)
        table = HandleTable(ctx, SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings)))
        table.limits = replace(table.limits, adds_in_flight_max=2)
        created = await store.create(LedgerMetadata.new(5, POOL[:3], 2, 2))
        runner = table.open(created.metadata, created.version, b"")
        bookies.bookies["b0:1"].gate = gate = asyncio.Event()
        first = asyncio.ensure_future(runner.add((b"a0", b"a1")))
        await settle(lambda: runner.handle.pending_entries == 2)
        waiting = [asyncio.ensure_future(runner.add((b"%d" % i, b"%d" % i))) for i in (1, 2)]
        for _ in range(20):
            await asyncio.sleep(0)
        assert not any(w.done() for w in waiting)  # no room: both wait, none refused
        gate.set()
        outcomes = [await first] + [await w for w in waiting]
        assert sorted((o.first_entry_id, o.last_entry_id) for o in outcomes) == [
            (0, 1), (2, 3), (4, 5)
        ]  # fmt: skip
        await table.aclose()

    run(body)


def test_adds_wait_for_room_in_a_busy_bookies_queue_instead_of_replacing_it() -> None:
    """A bookie whose add queue is full is busy, not failed (issue 35 item 11): adds past
    the queue's bound wait at admission (none sent, none refused), are woken when
    requests leave the queue, and all are acknowledged with no ensemble change."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        ctx = make_context(bookies, store)
        limits = replace(
            SenderLimits.from_settings(ctx.settings),
            requests_in_flight_max=1, queued_entries_max=2, queued_bytes_max=1 << 20,
        )  # fmt: skip
        table = HandleTable(ctx, SenderTable(ctx.bookie, limits))
        created = await store.create(LedgerMetadata.new(5, POOL[:3], 3, 3))
        runner = table.open(created.metadata, created.version, b"")
        bookies.bookies["b0:1"].gate = gate = asyncio.Event()
        adds = [asyncio.ensure_future(runner.add((b"%d" % i,))) for i in range(6)]
        # Qw = Qa = 3: one request in flight to the gated bookie and two entries queued
        # behind it (its bound) hold the acknowledgements; the other adds wait.
        await settle(lambda: runner.handle.pending_entries == 3)
        for _ in range(20):
            await asyncio.sleep(0)
        assert runner.handle.pending_entries == 3 and not any(a.done() for a in adds)
        assert table.senders.get("b0:1").queued_entries <= limits.queued_entries_max
        gate.set()
        outcomes = [await a for a in adds]
        assert [o.first_entry_id for o in outcomes] == list(range(6))
        assert runner.handle.ensemble_changes == 0
        assert runner.handle.metadata.ensemble == tuple(POOL[:3])
        await table.aclose()

    run(body)


def test_adds_waiting_for_room_are_admitted_in_turn() -> None:
    """Adds that wait for room in a full bookie queue stand in the handle's admission
    queue and are admitted in the order they came: their entry ids ascend in that
    order, none is refused, no bookie is replaced."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        ctx = make_context(bookies, store)
        limits = replace(
            SenderLimits.from_settings(ctx.settings),
            requests_in_flight_max=1, queued_entries_max=1, queued_bytes_max=1 << 20,
        )  # fmt: skip
        table = HandleTable(ctx, SenderTable(ctx.bookie, limits))
        created = await store.create(LedgerMetadata.new(5, POOL[:3], 3, 3))
        runner = table.open(created.metadata, created.version, b"")
        bookies.bookies["b0:1"].gate = gate = asyncio.Event()
        first = [asyncio.ensure_future(runner.add((b"f%d" % i,))) for i in range(2)]
        await settle(lambda: runner.handle.pending_entries == 2)
        waiting = []
        for i in range(10):
            waiting.append(asyncio.ensure_future(runner.add((b"w%d" % i,))))
            await asyncio.sleep(0)
        await settle(lambda: len(runner._admission) == 10)
        gate.set()
        outcomes = [await a for a in [*first, *waiting]]
        assert [o.first_entry_id for o in outcomes] == list(range(12))
        assert not runner._admission and runner.handle.ensemble_changes == 0
        await table.aclose()

    run(body)


def test_an_add_that_finds_no_room_in_time_is_503_naming_the_busy_bookie() -> None:
    """At the edge, an add that waited admission_wait_ms for room in a full bookie queue
    fails as unavailable (503, retriable) naming the busy bookie, not as a failed
    bookie: the ledger stays open on its ensemble and the adds before it succeed."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        ctx = make_context(bookies, store, admission_wait_ms=50)
        limits = replace(
            SenderLimits.from_settings(ctx.settings),
            requests_in_flight_max=1, queued_entries_max=1, queued_bytes_max=1 << 20,
        )  # fmt: skip
        table = HandleTable(ctx, SenderTable(ctx.bookie, limits))
        created = await store.create(LedgerMetadata.new(5, POOL[:3], 3, 3))
        runner = table.open(created.metadata, created.version, b"")
        bookies.bookies["b0:1"].gate = gate = asyncio.Event()
        first = [asyncio.ensure_future(runner.add((b"f%d" % i,))) for i in range(2)]
        await settle(lambda: runner.handle.pending_entries == 2)
        with pytest.raises(Unavailable) as refused:
            await runner.add((b"late",))
        assert refused.value.http_status == 503 and refused.value.retriable
        assert "b0:1" in refused.value.message and "busy, not failed" in refused.value.message
        gate.set()
        assert [(await a).first_entry_id for a in first] == [0, 1]
        assert runner.handle.ensemble_changes == 0 and runner.live
        await table.aclose()

    run(body)
