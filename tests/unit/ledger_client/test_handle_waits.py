"""Waits on a write handle (``HandleRunner.wait_lac``): many of them on one handle leave
as they time out without disturbing the rest, and stopping the runner (``aclose``: the
gateway deleting an open ledger, or shutting down) ends every wait, add and close at
once with the error it is given instead of leaving long polls to their time-outs."""

from __future__ import annotations

import asyncio

import pytest

from services.errors import LedgerNotFound, Unavailable
from services.ledger_client.handles import HandleTable
from services.ledger_client.senders import SenderLimits, SenderTable
from services.protocol.metadata import LedgerMetadata
from tests.unit.ledger_client.fakes import FakeBookies, FakeLedgerStore, make_context
from tests.unit.ledger_client.test_idle_handles import POOL, idle_handles, settle


def test_waits_that_time_out_leave_and_the_others_are_woken_by_the_next_add() -> None:
    async def body() -> None:
        idle = await idle_handles(adds=1, count=1, measure=False)
        runner = idle.runners[0]
        short = [asyncio.ensure_future(runner.wait_lac(0, timeout_s=0.05)) for _ in range(500)]
        long = [asyncio.ensure_future(runner.wait_lac(0, timeout_s=30)) for _ in range(500)]
        assert await asyncio.gather(*short) == [0] * 500  # timed out with the LAC they had
        assert not any(w.done() for w in long)
        assert len(runner._waiters or ()) == 500  # the timed-out ones left
        await runner.add((b"wakes",))
        assert await asyncio.wait_for(asyncio.gather(*long), 5) == [1] * 500
        assert runner._waiters is None

    asyncio.run(body())


@pytest.mark.parametrize(
    "error", [LedgerNotFound("ledger 7 was deleted"), None], ids=["delete", "shutdown"]
)
def test_stopping_the_runner_ends_its_waits_adds_and_closes_at_once(
    error: LedgerNotFound | None,
) -> None:
    """A tailing reader's LAC wait of 30 s, an add held by a bookie that does not answer
    and a close behind it all fail with the runner's error as soon as it stops; the
    default error is the shutdown's 503."""

    async def body() -> None:
        idle = await idle_handles(adds=1, count=1, measure=False)
        runner = idle.runners[0]
        waiting = asyncio.ensure_future(runner.wait_lac(0, timeout_s=30))
        bookie = idle.bookies.bookies[runner.metadata.write_set_bookies(1)[0]]
        bookie.gate = asyncio.Event()  # entry 1 gets no ack quorum
        adding = asyncio.ensure_future(runner.add((b"held",)))
        await settle(lambda: not runner.idle)
        closing = asyncio.ensure_future(runner.close())
        await settle(lambda: bool(runner._closes))
        assert not waiting.done() and not adding.done() and not closing.done()
        loop = asyncio.get_running_loop()
        started = loop.time()
        await runner.aclose(error)
        expected = LedgerNotFound if error is not None else Unavailable
        for future in (waiting, adding, closing):
            with pytest.raises(expected):
                await asyncio.wait_for(future, 5)
        assert loop.time() - started < 5
        assert runner._waiters is None
        bookie.gate.set()

    asyncio.run(body())


def test_a_wait_woken_in_the_turn_of_the_stop_still_ends_with_its_error() -> None:
    """A LAC wait woken by an event that did not move the LAC past it (``wake_waiters``),
    then the stop in the same loop turn: it raises the stop's error instead of waiting
    again for its whole time."""

    async def body() -> None:
        idle = await idle_handles(adds=1, count=1, measure=False)
        runner = idle.runners[0]
        waiting = asyncio.ensure_future(runner.wait_lac(0, timeout_s=30))
        await settle(lambda: runner._waiters is not None)
        runner.wake_waiters()  # its future done, its task not run yet
        await runner.aclose(LedgerNotFound("ledger 7 was deleted"))
        with pytest.raises(LedgerNotFound):
            await asyncio.wait_for(waiting, 5)
        assert not runner.live
        with pytest.raises(LedgerNotFound):
            await runner.add((b"after the stop",))
        with pytest.raises(LedgerNotFound):
            await runner.close()

    asyncio.run(body())


def test_an_add_waiting_for_room_ends_with_the_stop_error() -> None:
    """Adds queued behind a bookie that does not answer fill its sender's queue; the
    next add waits for room (admission, up to 30 s here) and fails with the stop's error
    as soon as the runner stops, as do the adds queued before it."""

    async def body() -> None:
        bookies, store = FakeBookies(POOL), FakeLedgerStore()
        ctx = make_context(
            bookies,
            store,
            bookie_requests_in_flight_max=1,
            bookie_batch_entries_max=1,
            admission_wait_ms=30_000,
        )
        senders = SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings))
        table = HandleTable(ctx, senders)
        created = await store.create(
            LedgerMetadata.new(7, POOL, 2, 2, instances={b: bookies.instance_of(b) for b in POOL})
        )
        runner = table.open(created.metadata, created.version, b"")
        for bookie in bookies.bookies.values():
            bookie.gate = asyncio.Event()  # nothing is answered
        adds = []
        for n in range(64):
            adds.append(asyncio.ensure_future(runner.add((b"%d" % n,))))
            await asyncio.sleep(0)
            if runner._admission:
                break
        assert runner._admission, "no add ever waited for room"
        loop = asyncio.get_running_loop()
        started = loop.time()
        await runner.aclose(LedgerNotFound("ledger 7 was deleted"))
        results = await asyncio.wait_for(asyncio.gather(*adds, return_exceptions=True), 5)
        assert all(isinstance(r, LedgerNotFound) for r in results), results
        assert loop.time() - started < 5
        for bookie in bookies.bookies.values():
            bookie.gate.set()
        await senders.aclose()

    asyncio.run(body())
