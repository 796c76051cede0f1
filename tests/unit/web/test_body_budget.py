"""Bodies read under a byte budget stop their request's body time-out while they wait
for budget (``take_untimed``, through the server's ``BodyTimer`` scope extension), on the
gateway's ASGI paths and the bookie's add path alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from bookie.fastpath import read_budgeted
from services.budget import ByteBudget
from services.web.body import BODY_TIMER, take_untimed


class FakeTimer:
    """Records the pauses and resumes; 7.5 s left whenever it is paused."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float | None]] = []

    def pause(self) -> float | None:
        self.calls.append(("pause", None))
        return 7.5

    def resume(self, left: float | None) -> None:
        self.calls.append(("resume", left))


def test_a_take_that_fits_leaves_the_timer_alone_and_a_wait_pauses_it() -> None:
    async def main() -> None:
        budget = ByteBudget(100)
        timer = FakeTimer()
        scope = {"extensions": {BODY_TIMER: timer}}
        holder, waiter = budget.open(), budget.open()
        await take_untimed(holder, 90, scope)
        assert timer.calls == []  # no wait, no pause
        task = asyncio.create_task(take_untimed(waiter, 50, scope))
        await asyncio.sleep(0)
        assert timer.calls == [("pause", None)] and not task.done()
        holder.close()
        await asyncio.wait_for(task, 1)
        assert timer.calls == [("pause", None), ("resume", 7.5)]
        assert waiter.held_bytes == 50
        await take_untimed(budget.open(), 10, {})  # a scope without a timer: just takes

    asyncio.run(main())


def test_a_cancelled_wait_still_resumes_the_timer() -> None:
    async def main() -> None:
        budget = ByteBudget(10)
        timer = FakeTimer()
        holder, waiter = budget.open(), budget.open()
        holder.try_take(10)
        task = asyncio.create_task(take_untimed(waiter, 5, {"extensions": {BODY_TIMER: timer}}))
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert timer.calls == [("pause", None), ("resume", 7.5)]
        assert budget.waiting == 0

    asyncio.run(main())


def test_the_bookies_budgeted_read_pauses_the_servers_timer_while_it_waits() -> None:
    """``read_budgeted`` with the request's scope: the server's timer stops while a chunk
    waits for budget (its own time-out, which already leaves such waits out, is not
    reached either)."""

    async def main() -> None:
        budget = ByteBudget(100)
        timer = FakeTimer()
        holder = budget.open()
        holder.try_take(100)

        async def chunks() -> AsyncIterator[bytes]:
            yield b"a" * 30
            yield b"b" * 30

        share = budget.open()
        scope: Any = {"extensions": {BODY_TIMER: timer}}
        task = asyncio.create_task(read_budgeted(chunks(), share, 1000, 0.5, scope))
        await asyncio.sleep(0.7)  # longer than its own time-out: waiting does not count
        assert not task.done() and timer.calls == [("pause", None)]
        holder.close()
        assert await asyncio.wait_for(task, 1) == b"a" * 30 + b"b" * 30
        assert timer.calls == [("pause", None), ("resume", 7.5)]

    asyncio.run(main())
