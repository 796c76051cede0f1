"""Idle write handles are cheap (issue 42, "many open things"; benchmarks/README.md): a
handle whose adds were all acknowledged and whose LAC went out explicitly keeps no timer
and a bounded amount of memory, so a gateway can hold 100,000 of them.

Measured with tracemalloc over many handles on the fakes of ``fakes.py`` (the handle
objects only; the ledger metadata is made before the measurement starts). Before the
change these tests guard, a handle kept three empty deques (about 600 bytes each), a
table of ten bound methods (about 1 KB), a callback per bookie and two empty sets: about
7 KB a handle after one add."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc

from services.ledger_client.handles import HandleTable
from services.ledger_client.runners.write import HandleRunner
from services.ledger_client.senders import SenderLimits, SenderTable
from services.protocol.metadata import LedgerMetadata
from tests.unit.ledger_client.fakes import FakeBookies, FakeLedgerStore, make_context

POOL = ["127.0.0.1:40001", "127.0.0.1:40002", "127.0.0.1:40003"]
HANDLES = 500
# What an idle handle may cost here: its objects measured about 2,300 bytes after the
# change (with the fakes' own share), 7,200 before.
IDLE_HANDLE_BYTES_MAX = 3_500
LAC_DELAY_MS = 20


async def settle(condition: object, deadline_s: float = 10.0) -> None:
    """Let the loop run (real time: the explicit LAC delay) until ``condition()``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not condition():  # type: ignore[operator]
        if loop.time() > end:
            raise AssertionError("the condition never held")
        await asyncio.sleep(0.005)


async def idle_handles(adds: int) -> tuple[list[HandleRunner], FakeBookies, int]:
    """``HANDLES`` handles with ``adds`` acknowledged adds each, left idle until their
    LAC went out; the bytes their making kept allocated, per handle."""
    bookies, store = FakeBookies(POOL), FakeLedgerStore()
    ctx = make_context(bookies, store, explicit_lac_delay_ms=LAC_DELAY_MS)
    table = HandleTable(ctx, SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings)))
    created = [
        await store.create(LedgerMetadata.new(1_000 + i, POOL, 2, 2)) for i in range(HANDLES + 1)
    ]
    warm = table.open(created[0].metadata, created[0].version, b"")
    for _ in range(adds):
        await warm.add((b"x" * 100,))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        runners = []
        for versioned in created[1:]:
            runner = table.open(versioned.metadata, versioned.version, b"")
            for _ in range(adds):
                await runner.add((b"x" * 100,))
            runners.append(runner)
        await settle(
            lambda: all(
                all(b.lacs.get(r.ledger_id, -1) == r.lac for b in bookies.bookies.values())
                for r in runners
            )
        )
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    kept = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return runners, bookies, kept // HANDLES


def test_an_idle_handle_keeps_no_timer_and_little_memory() -> None:
    """After one add each and the explicit LAC, no handle has a deadline or a timer, and
    each kept at most ``IDLE_HANDLE_BYTES_MAX`` bytes."""

    async def body() -> None:
        runners, _, per_handle = await idle_handles(adds=1)
        assert all(r.lac == 0 and r.idle for r in runners)
        assert all(r.handle.next_deadline() is None for r in runners)
        assert all(r._timer is None for r in runners)
        assert per_handle <= IDLE_HANDLE_BYTES_MAX, per_handle

    asyncio.run(body())


def test_a_handle_that_drained_adds_again_in_order() -> None:
    """A handle that gave back its queues when idle takes adds again, in entry-id order
    and stored on their write sets, several in flight at once."""

    async def body() -> None:
        runners, bookies, _ = await idle_handles(adds=2)
        runner = runners[0]
        outcomes = await asyncio.gather(*(runner.add((b"e%d" % i,)) for i in range(5)))
        assert [o.first_entry_id for o in outcomes] == [2, 3, 4, 5, 6]
        assert runner.lac == 6 and runner.idle
        for entry_id in range(7):
            holders = {
                b
                for b, bookie in bookies.bookies.items()
                if (runner.ledger_id, entry_id) in bookie.entries
            }
            assert holders == set(runner.handle.metadata.write_set_bookies(entry_id))
        # The other idle handles were not touched by these adds.
        assert all(r.lac == 1 for r in runners[1:])

    asyncio.run(body())
