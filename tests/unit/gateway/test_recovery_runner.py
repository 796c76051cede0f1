"""The recovery's asyncio runner (gateway/runners/recovery.py) with ``Recoveries``
(gateway/handles.py), against fake bookies and an in-memory metadata store on a real
event loop: mark IN_RECOVERY, fence, read forward, write back, close; the time-out
that the machine itself reaches on Tick; one run per ledger."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from gateway.handles import HandleTable, Recoveries
from gateway.senders import SenderLimits, SenderTable
from services.errors import LedgerFenced, QuorumTimeout
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.recovery import RecoveryLimits
from tests.unit.gateway.fakes import FakeBookies, FakeLedgerStore, make_context

POOL = ["b0:1", "b1:1", "b2:1"]


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


def test_recovery_fences_reads_forward_writes_back_and_closes_at_the_last_entry() -> None:
    """PROTOCOL.md "Fencing and recovery" on a live writer's ledger: the metadata goes
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
