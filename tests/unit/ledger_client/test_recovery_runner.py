"""The recovery's asyncio runner (services/ledger_client/runners/recovery.py) with ``Recoveries``
(services/ledger_client/handles.py), against fake bookies and an in-memory metadata store on a real
event loop: mark IN_RECOVERY, fence, read forward, write back, close; the time-out
that the machine itself reaches on Tick; one run per ledger."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from services.bookie_client import RangeResult
from services.errors import (
    BookieUnavailable,
    LedgerFenced,
    LedgerNotFound,
    QuireError,
    QuorumTimeout,
)
from services.ledger_client.handles import HandleTable, Recoveries
from services.ledger_client.runners.recovery import read_entries
from services.ledger_client.senders import SenderLimits, SenderTable
from services.protocol import messages as m
from services.protocol.limits import RecoveryLimits
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.wire.digest import seal
from services.wire.framing import FramedRecord
from tests.unit.ledger_client.fakes import FakeBookie, FakeBookies, FakeLedgerStore, make_context

POOL = ["b0:1", "b1:1", "b2:1"]


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


def test_recovery_fences_reads_forward_writes_back_and_closes_at_the_last_entry() -> None:
    """docs/protocol.md "Fencing and recovery" on a live writer's ledger: the metadata goes
    IN_RECOVERY then CLOSED at the last entry the bookies hold (2); the entry a bookie
    of its write set lacked is written back there with the recovery flag; every bookie
    is fenced, so the old writer's next add fails with ledger_fenced."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        ctx = make_context(bookies, store)
        senders = SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings))
        table = HandleTable(ctx, senders)
        created = await store.create(LedgerMetadata.new(5, POOL, 3, 2))
        writer = table.open(created.metadata, created.version, b"")
        for i in range(3):
            await writer.add((b"entry %d" % i,))
        b0 = bookies.bookies["b0:1"]
        del b0.entries[(5, 2)]  # b0 missed entry 2 (Qa = 2 of Qw = 3 stored it)

        current = await store.get(5)
        closed, version = await Recoveries(ctx).recover(current.metadata, current.version, b"")
        assert closed.state is LedgerState.CLOSED and closed.last_entry_id == 2
        assert [m.state for m in store.writes] == [LedgerState.IN_RECOVERY, LedgerState.CLOSED]
        assert (await store.get(5)).version == version == 2
        assert all(5 in b.fenced for b in bookies.bookies.values())
        assert b0.entries[(5, 2)].recovery and b0.entries[(5, 2)].payload == b"entry 2"
        assert ctx.metrics.recoveries.labels("closed")._value.get() == 1
        with pytest.raises(LedgerFenced):
            await writer.add((b"too late",))
        await table.aclose()

    run(body)


def test_a_recovery_that_cannot_finish_times_out_through_its_machine() -> None:
    """The recovery's overall bound is the machine's recovery_timeout_ms, reached by the
    Tick the runner feeds: with one bookie never answering its fence (E=3, Qw=3, Qa=1:
    every bookie must answer) the recovery fails as quorum_timeout, retriable, and
    nothing waits on after it."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        ctx = make_context(bookies, store)
        created = await store.create(LedgerMetadata.new(6, POOL, 3, 1))
        bookies.bookies["b1:1"].gate = asyncio.Event()  # hangs
        recoveries = Recoveries(ctx)
        recoveries.limits = RecoveryLimits(recovery_timeout_ms=100)
        with pytest.raises(QuorumTimeout) as caught:
            await recoveries.recover(created.metadata, created.version, b"")
        assert caught.value.retriable
        assert (await store.get(6)).metadata.state is LedgerState.IN_RECOVERY
        assert ctx.metrics.recoveries.labels("failed")._value.get() == 1

    run(body)


def test_concurrent_recoveries_of_one_ledger_share_one_run() -> None:
    """Two recover calls for the same ledger on one gateway run one recovery: both get
    the same result, and the metadata was marked and closed once."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        ctx = make_context(bookies, store)
        created = await store.create(LedgerMetadata.new(7, POOL, 2, 2))
        recoveries = Recoveries(ctx)
        first, second = await asyncio.gather(
            recoveries.recover(created.metadata, created.version, b""),
            recoveries.recover(created.metadata, created.version, b""),
        )
        assert first == second and first[0].state is LedgerState.CLOSED
        assert first[0].last_entry_id == -1
        assert len(store.writes) == 2

    run(body)


# ---------------------------------------------------------------- issue 7 items 1 and 7


class _RangeClient:
    """A bookie client that answers one range read with ``answer`` (or raises it)."""

    def __init__(self, answer: RangeResult | QuireError) -> None:
        self.answer = answer
        self.calls: list[tuple[int, int, int]] = []

    async def read_range(
        self, ledger_id: int, first: int, last: int, max_entries: int = 1_000,
        max_bytes: int = 1 << 23,
    ) -> RangeResult:  # fmt: skip
        self.calls.append((first, last, max_entries))
        if isinstance(self.answer, QuireError):
            raise self.answer
        return self.answer


def _rec(entry_id: int) -> FramedRecord:
    return seal(FramedRecord(5, entry_id, -1, b"x", digest_type="crc32c", length=entry_id + 1))


def test_a_batch_of_entries_is_one_range_read_answered_per_id_with_the_instance() -> None:
    """Issue 7 item 7: the runner reads the ids the machine asks of one bookie with ONE
    range read; listed ids are FOUND, skipped ids MISSING, each with the instance of the
    bookie that answered; ids past a possibly cut answer are ERRORs, not MISSING."""

    async def body() -> None:
        effect = m.ReadEntries(5, "b0:1", (3, 6, 9))
        client = _RangeClient(RangeResult([_rec(3), _rec(9)], 12, "inst-1"))
        events = await read_entries(client, effect, [3, 6, 9], lambda: 7)  # type: ignore[arg-type]
        assert client.calls == [(3, 9, 7)]
        assert [(e.entry_id, e.outcome, e.instance_id, e.now) for e in events] == [
            (3, m.ReadOutcome.FOUND, "inst-1", 7),
            (6, m.ReadOutcome.MISSING, "inst-1", 7),
            (9, m.ReadOutcome.FOUND, "inst-1", 7),
        ]
        short = _RangeClient(RangeResult([_rec(3), _rec(4)], 12, "inst-1"))
        effect = m.ReadEntries(5, "b0:1", (3, 4, 5))
        # max_entries = 3 and only 2 returned: not cut by count, 5 is missing.
        events = await read_entries(short, effect, [3, 4, 5], lambda: 0)  # type: ignore[arg-type]
        assert events[2].outcome is m.ReadOutcome.MISSING

    run(body)


def test_a_range_answer_cut_by_its_bound_makes_the_rest_errors() -> None:
    """An answer that holds as many entries as asked, or so many bytes that the next
    entry may have been left out, while the bookie stores more: the ids after the last
    entry returned are read errors (re-read alone), never "missing"."""

    async def body() -> None:
        big = seal(FramedRecord(5, 3, -1, b"x" * (4 * 1024 * 1024), digest_type="crc32c", length=1))
        client = _RangeClient(RangeResult([big], 12, "i"))
        effect = m.ReadEntries(5, "b0:1", (3, 6))
        events = await read_entries(client, effect, [3, 6], lambda: 0)  # type: ignore[arg-type]
        assert [e.outcome for e in events] == [m.ReadOutcome.FOUND, m.ReadOutcome.ERROR]
        nothing_more = _RangeClient(RangeResult([big], 3, "i"))  # stores nothing past 3
        events = await read_entries(nothing_more, effect, [3, 6], lambda: 0)  # type: ignore[arg-type]
        assert events[1].outcome is m.ReadOutcome.MISSING

    run(body)


def test_not_found_answers_carry_the_instance_and_transport_errors_none() -> None:
    """Issue 7 item 1: a bookie's "no such ledger" is MISSING with the instance that
    said it (the machine counts it only if that is the fenced instance); a failure
    that is no answer (unreachable) is an ERROR naming no instance."""

    async def body() -> None:
        effect = m.ReadEntries(5, "b0:1", (1, 2))
        missing = LedgerNotFound("no ledger")
        missing.bookie_instance_id = "new-instance"  # type: ignore[attr-defined]
        events = await read_entries(_RangeClient(missing), effect, [1, 2], lambda: 0)  # type: ignore[arg-type]
        assert [(e.outcome, e.instance_id) for e in events] == [
            (m.ReadOutcome.MISSING, "new-instance")
        ] * 2
        down = BookieUnavailable("refused")
        events = await read_entries(_RangeClient(down), effect, [1, 2], lambda: 0)  # type: ignore[arg-type]
        assert [(e.outcome, e.instance_id) for e in events] == [(m.ReadOutcome.ERROR, None)] * 2

    run(body)


class _HangingReads(FakeBookie):
    """Answers its fence, then never answers a read."""

    async def read_range(self, *args: object, **kw: object) -> RangeResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_hanging_fenced_bookie_costs_one_speculative_delay_in_the_runner() -> None:
    """Issue 7 item 7 through the runner: b2 is fenced, then hangs on reads; 50 entries
    past the floor are recovered in about one speculative_read_ms, far below the bookie
    client's 10 s time-out per request (bound relative to the delay, not wall-clock)."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        hanging = _HangingReads("b2:1")
        bookies.bookies["b2:1"] = hanging
        ctx = make_context(bookies, store, speculative_read_ms=200)
        created = await store.create(LedgerMetadata.new(5, POOL, 3, 2))
        for entry_id in range(50):
            rec = seal(
                FramedRecord(5, entry_id, -1, b"e", digest_type="crc32c", length=entry_id + 1)
            )
            for bookie in bookies.bookies.values():
                bookie.entries[(5, entry_id)] = rec
        recoveries = Recoveries(ctx)
        assert recoveries.limits.speculative_read_ms == 200
        loop = asyncio.get_running_loop()
        started = loop.time()
        closed, _ = await recoveries.recover(created.metadata, created.version, b"")
        elapsed_ms = (loop.time() - started) * 1000
        assert (closed.last_entry_id, closed.length) == (49, 50)
        assert 5 in hanging.fenced
        assert elapsed_ms < 5 * 200, elapsed_ms  # one delay and some slack; 10 s before

    run(body)


def test_a_bookie_reformatted_before_the_recovery_does_not_close_the_ledger_short() -> None:
    """Issue 7 item 1 across runs, through the runner and the registry view: the ledger
    records the instances the gateway's registry gave (E=Qw=3, Qa=2); entry 7 is only on
    b0 and b1; b0 is reformatted (new, empty instance) and b1 hangs. The recovery must not
    close at 6 (it times out, retriable, the ledger stays IN_RECOVERY); once b1 answers, a
    second run closes at 7."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        ctx = make_context(bookies, store)
        writable = ctx.writable_event()
        assert writable.instance_map() == {b: f"{b}#1" for b in POOL}
        md = LedgerMetadata.new(8, POOL, 3, 2, instances=writable.instance_map())
        created = await store.create(md)
        senders = SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings))
        writer = HandleTable(ctx, senders).open(created.metadata, created.version, b"")
        for i in range(8):
            await writer.add((b"entry %d" % i,))
        b0, b1, b2 = (bookies.bookies[b] for b in POOL)
        del b2.entries[(8, 7)]  # entry 7 acknowledged on b0 and b1 only
        b0.reformat()
        b1.gate = asyncio.Event()  # slow
        recoveries = Recoveries(ctx)
        recoveries.limits = RecoveryLimits(recovery_timeout_ms=300)
        current = await store.get(8)
        with pytest.raises(QuorumTimeout):
            await recoveries.recover(current.metadata, current.version, b"")
        assert (await store.get(8)).metadata.state is LedgerState.IN_RECOVERY  # not closed
        b1.gate.set()
        current = await store.get(8)
        closed, _ = await recoveries.recover(current.metadata, current.version, b"")
        assert closed.state is LedgerState.CLOSED and closed.last_entry_id == 7

    run(body)


def test_a_recovery_by_the_writers_own_client_fences_its_stuck_write_handle() -> None:
    """Fencing and recovery (docs/protocol.md) on the writer's own gateway: an add stuck
    on a bookie that never answers it (Qa = Qw = 3) while this client recovers and closes
    the ledger at the entry the other bookies hold. Told by ``HandleTable.recovered``,
    the handle is fenced at once: the stuck add fails ``ledger_fenced`` (its outcome is
    unknown; here the ledger holds it) and the handle is no longer live, so reads stop
    ending at its LAC (1) rather than at the closed ledger's last entry (2). The chaos
    suite found a gateway serving a CLOSED ledger short this way (tests/chaos/)."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        ctx = make_context(bookies, store)
        senders = SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings))
        table = HandleTable(ctx, senders)
        created = await store.create(LedgerMetadata.new(8, POOL, 3, 3))
        writer = table.open(created.metadata, created.version, b"")
        for i in range(2):
            await writer.add((b"entry %d" % i,))
        b2 = bookies.bookies["b2:1"]
        plain_add = b2.add

        async def hang_normal_adds(
            records: list[FramedRecord], timeout_s: float | None = None
        ) -> object:
            if any(not r.recovery for r in records):
                await asyncio.Event().wait()
            return await plain_add(records, timeout_s)

        b2.add = hang_normal_adds  # type: ignore[method-assign]
        stuck = await writer.submit((b"entry 2",))
        for _ in range(100):
            await asyncio.sleep(0)
        assert not stuck.done() and table.writer_lac(8) == 1

        current = await store.get(8)
        closed, _ = await Recoveries(ctx).recover(current.metadata, current.version, b"")
        assert closed.last_entry_id == 2
        table.recovered(8)
        with pytest.raises(LedgerFenced):
            await stuck
        assert table.live(8) is None and table.writer_lac(8) is None
        await table.aclose()

    run(body)
