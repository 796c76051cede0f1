"""Idle write handles are cheap (issue 42, "many open things"; benchmarks/README.md): a
handle whose adds were all acknowledged and whose LAC went out keeps no timer and is
parked (services/protocol/writer.py, "Parking"): its runner keeps a ``ParkedWriter`` of
about 100 bytes instead of the write handle, so a gateway can hold 100,000 of them in
well under 2 KiB each, and a parked handle behaves as the handle it was made from.

Measured with tracemalloc over many handles on the fakes of ``fakes.py``: everything the
client allocated for them and still holds once the fakes dropped their own copies (the
stored entries, the fake store's nodes), the ledgers' metadata included, made as the
gateway makes it (``gateway/operations.py`` ``create_ledger``). Before parking a handle
kept about 2,500 bytes with its metadata (7,000 before ``e64e1f3``); the breakdown by
line: ``python -m tests.unit.ledger_client.test_idle_handles 10000``."""

from __future__ import annotations

import asyncio
import gc
import sys
import tracemalloc
from dataclasses import dataclass

import pytest

from services.errors import LedgerClosed, LedgerFenced
from services.ledger_client.handles import HandleTable
from services.ledger_client.runners.write import HandleRunner
from services.ledger_client.senders import SenderLimits, SenderTable
from services.protocol.metadata import LedgerMetadata, LedgerState
from tests.unit.ledger_client.fakes import FakeBookies, FakeLedgerStore, make_context

POOL = ["127.0.0.1:40001", "127.0.0.1:40002", "127.0.0.1:40003"]
HANDLES = 2_000
# What an idle open ledger may cost the client here, its metadata included: about 550
# bytes measured with parking, 2,500 before it (a 2x regression fails).
IDLE_HANDLE_BYTES_MAX = 1_100
LAC_DELAY_MS = 20
CREATED_AT_MS = 1_796_000_000_000  # a wall-clock time in ms, as the gateway stamps it


async def settle(condition: object, deadline_s: float = 10.0) -> None:
    """Let the loop run (real time: the explicit LAC delay) until ``condition()``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not condition():  # type: ignore[operator]
        if loop.time() > end:
            raise AssertionError("the condition never held")
        await asyncio.sleep(0.005)


@dataclass
class Idle:
    runners: list[HandleRunner]
    table: HandleTable
    bookies: FakeBookies
    store: FakeLedgerStore
    bytes_per_handle: int  # what the client keeps for each, the fakes' copies dropped
    stats: list[tracemalloc.StatisticDiff]


def lac_went_out(bookies: FakeBookies, runners: list[HandleRunner]) -> bool:
    return all(
        all(b.lacs.get(r.ledger_id, -1) == r.lac for b in bookies.bookies.values()) for r in runners
    )


async def idle_handles(adds: int, count: int = HANDLES, *, measure: bool = True) -> Idle:
    """``count`` handles with ``adds`` acknowledged adds each, left idle until their LAC
    went out; with ``measure``, what their making left allocated in the client, per
    handle, once the fakes dropped the entries they store and their nodes."""
    bookies, store = FakeBookies(POOL), FakeLedgerStore()
    ctx = make_context(bookies, store, explicit_lac_delay_ms=LAC_DELAY_MS)
    table = HandleTable(ctx, SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings)))
    instances = {b: bookies.instance_of(b) for b in POOL}

    def metadata(ledger_id: int) -> LedgerMetadata:
        return LedgerMetadata.new(
            ledger_id, POOL, 2, 2, created_at=CREATED_AT_MS + ledger_id, instances=instances
        )

    warm_created = await store.create(metadata(1_000))
    warm = table.open(warm_created.metadata, warm_created.version, b"")
    for _ in range(adds):
        await warm.add((b"x" * 100,))
    await settle(lambda: lac_went_out(bookies, [warm]))
    gc.collect()
    if measure:
        tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot() if measure else None
        runners = []
        for i in range(count):
            created = await store.create(metadata(1_001 + i))
            runner = table.open(created.metadata, created.version, b"")
            for _ in range(adds):
                await runner.add((b"x" * 100,))
            runners.append(runner)
        await settle(lambda: lac_went_out(bookies, runners))
        await asyncio.sleep(0)  # the runners' last feeds have run
        kept, stats = 0, []
        if before is not None:
            # What the fakes hold a real gateway does not: the entries and LACs the
            # bookies store, the adds they saw, the store's nodes (the metadata stays:
            # each runner holds its ledger's).
            for bookie in bookies.bookies.values():
                bookie.entries.clear()
                bookie.lacs.clear()
                bookie.adds.clear()
            store.nodes.clear()
            gc.collect()
            after = tracemalloc.take_snapshot()
            stats = after.compare_to(before, "lineno")
            kept = sum(stat.size_diff for stat in stats) // count
    finally:
        if measure:
            tracemalloc.stop()
    return Idle(runners, table, bookies, store, kept, stats)


def test_an_idle_handle_is_parked_keeps_no_timer_and_little_memory() -> None:
    """After one add each and the explicit LAC, every handle is parked, with no timer and
    no task, and each open ledger kept at most ``IDLE_HANDLE_BYTES_MAX`` bytes."""

    async def body() -> None:
        idle = await idle_handles(adds=1)
        runners = idle.runners
        assert all(r.lac == 0 and r.idle and r.live and r.parked for r in runners)
        assert all(r._timer is None and not r._tasks for r in runners)
        assert idle.bytes_per_handle <= IDLE_HANDLE_BYTES_MAX, idle.bytes_per_handle

    asyncio.run(body())


def test_a_parked_handle_adds_again_in_order() -> None:
    """A parked handle takes adds again, in entry-id order and stored on their write sets,
    several in flight at once; each record carries the LAC and the length as the handle
    that parked would have sent them; it parks again once idle."""

    async def body() -> None:
        idle = await idle_handles(adds=2, count=20, measure=False)
        runner, bookies = idle.runners[0], idle.bookies
        assert runner.parked and runner.next_entry_id == 2 and runner.length == 200
        outcomes = await asyncio.gather(*(runner.add((b"e%d" % i,)) for i in range(5)))
        assert [o.first_entry_id for o in outcomes] == [2, 3, 4, 5, 6]
        assert runner.lac == 6 and runner.idle
        for entry_id in range(7):
            holders = {
                b
                for b, bookie in bookies.bookies.items()
                if (runner.ledger_id, entry_id) in bookie.entries
            }
            assert holders == set(runner.metadata.write_set_bookies(entry_id))
        first_after = next(
            b.entries[(runner.ledger_id, 2)]
            for b in bookies.bookies.values()
            if (runner.ledger_id, 2) in b.entries
        )
        assert first_after.lac == 1  # the LAC at its send: the parked one
        assert first_after.length == 200 + len(b"e0")
        await settle(lambda: runner.parked)
        assert runner.length == 200 + 5 * 2 and runner.next_entry_id == 7
        # The other idle handles were not touched by these adds.
        assert all(r.lac == 1 and r.parked for r in idle.runners[1:])

    asyncio.run(body())


def test_a_parked_handle_closes_at_its_lac() -> None:
    """Closing a parked handle writes CLOSED at its LAC with its exact length; a second
    close answers the same; a later add answers ``ledger_closed``; the table keeps it
    among the closed handles."""

    async def body() -> None:
        idle = await idle_handles(adds=3, count=5, measure=False)
        runner = idle.runners[2]
        assert runner.parked
        metadata, version = await runner.close()
        assert metadata.state is LedgerState.CLOSED
        assert (metadata.last_entry_id, metadata.length) == (2, 300)
        stored = await idle.store.get(runner.ledger_id)
        assert stored.metadata == metadata and stored.version == version
        assert await runner.close() == (metadata, version)
        with pytest.raises(LedgerClosed):
            await runner.add((b"late",))
        assert not runner.live and not runner.parked
        assert idle.table.get(runner.ledger_id) is runner
        assert idle.table.live(runner.ledger_id) is None

    asyncio.run(body())


def test_a_parked_handle_answers_fenced() -> None:
    """A parked handle whose ledger a recovery fenced: the next add is refused by the
    bookies and fails ``ledger_fenced``; one fenced by this client's own recovery
    (``HandleTable.recovered``) stops being live at once."""

    async def body() -> None:
        idle = await idle_handles(adds=1, count=5, measure=False)
        by_bookies, by_table = idle.runners[0], idle.runners[1]
        for bookie in idle.bookies.bookies.values():
            bookie.fenced.add(by_bookies.ledger_id)
        assert by_bookies.parked
        with pytest.raises(LedgerFenced):
            await by_bookies.add((b"after the fence",))
        assert not by_bookies.live and not by_bookies.parked

        assert by_table.parked
        idle.table.recovered(by_table.ledger_id)
        assert not by_table.live and idle.table.writer_lac(by_table.ledger_id) is None
        with pytest.raises(LedgerFenced):
            await by_table.add((b"after the recovery",))

    asyncio.run(body())


def test_a_parked_handle_is_read_without_being_resumed() -> None:
    """Reads of a parked handle's state (LAC, metadata, length, next entry id, live) do
    not resume it; asking for the write handle itself resumes it, and it parks again
    after the caller's step; a wait for the LAC on a parked handle wakes on the next add."""

    async def body() -> None:
        idle = await idle_handles(adds=1, count=5, measure=False)
        runner = idle.runners[3]
        assert idle.table.writer_lac(runner.ledger_id) == 0 and runner.live
        assert runner.metadata.state is LedgerState.OPEN and runner.length == 100
        assert runner.next_entry_id == 1 and runner.parked
        assert runner.handle.next_entry_id == 1 and not runner.parked
        await asyncio.sleep(0)
        assert runner.parked

        waiting = asyncio.ensure_future(runner.wait_lac(0, timeout_s=10))
        await asyncio.sleep(0)
        assert not waiting.done()
        await runner.add((b"wakes",))
        assert await waiting == 1
        await settle(lambda: runner.parked)

    asyncio.run(body())


def test_a_handle_with_adds_in_flight_is_not_parked() -> None:
    """A handle is not parked while an add is in flight, nor before its LAC went out."""

    async def body() -> None:
        idle = await idle_handles(adds=1, count=2, measure=False)
        runner = idle.runners[0]
        # Adds to a bookie of entry 1's write set wait (Qa = Qw: no ack quorum without it).
        bookie = idle.bookies.bookies[runner.metadata.write_set_bookies(1)[0]]
        bookie.gate = asyncio.Event()
        pending = asyncio.ensure_future(runner.add((b"held",)))
        await asyncio.sleep(0.05)
        assert not pending.done() and not runner.parked
        bookie.gate.set()
        bookie.gate = None
        assert (await pending).first_entry_id == 1
        await settle(lambda: runner.parked)  # once the handle sent its LAC (1) out
        await settle(lambda: lac_went_out(idle.bookies, [runner]))
        assert runner.lac == 1

    asyncio.run(body())


def test_a_handle_resumed_by_a_late_failure_parks_again_after_its_ensemble_change() -> None:
    """Qw 3, Qa 2: an add acknowledged by two bookies while the third is slow; the handle
    parks. The third then fails: the handle is resumed, replaces the bookie (a metadata
    write in a task of its own) and, once idle again, parks again (it stayed resumed for
    good when the task's end was not looked at)."""

    async def body() -> None:
        spare = "127.0.0.1:40004"
        bookies, store = FakeBookies([*POOL, spare]), FakeLedgerStore()
        ctx = make_context(bookies, store, explicit_lac_delay_ms=LAC_DELAY_MS)
        table = HandleTable(ctx, SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings)))
        instances = {b: bookies.instance_of(b) for b in POOL}
        created = await store.create(LedgerMetadata.new(7, POOL, 3, 2, instances=instances))
        runner = table.open(created.metadata, created.version, b"")
        slow = bookies.bookies[POOL[2]]
        slow.gate = asyncio.Event()
        assert (await runner.add((b"acked by two",))).lac == 0
        await settle(lambda: runner.parked)
        slow.down = True
        slow.gate.set()
        await settle(lambda: POOL[2] not in runner.metadata.ensemble)
        assert spare in runner.metadata.ensemble
        await settle(lambda: runner.parked and not runner._tasks)
        assert (await store.get(7)).metadata.ensemble == runner.metadata.ensemble
        assert (await runner.add((b"after the change",))).first_entry_id == 1

    asyncio.run(body())


def main(count: int) -> None:
    """Print where the bytes of ``count`` idle open ledgers go, by source line."""

    async def body() -> None:
        idle = await idle_handles(adds=1, count=count)
        print(f"{count} idle open ledgers: {idle.bytes_per_handle} bytes each")
        for stat in idle.stats[:25]:
            if abs(stat.size_diff) >= count * 4:
                frame = stat.traceback[0]
                print(
                    f"{stat.size_diff / count:8.1f} B  {stat.count_diff / count:6.2f} blocks  "
                    f"{frame.filename}:{frame.lineno}"
                )

    asyncio.run(body())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else HANDLES)
