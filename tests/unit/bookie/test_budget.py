"""The bound on add bytes in flight: waits while spent, serves in order, never deadlocks."""

from __future__ import annotations

import asyncio

from bookie.budget import ByteBudget


def test_waits_while_spent_and_serves_in_arrival_order():
    """Requests beyond the budget wait; releases admit them in arrival order, and a big
    request is not overtaken by later small ones."""

    async def main():
        budget = ByteBudget(100)
        await budget.acquire(60)
        await budget.acquire(40)
        order: list[str] = []

        async def take(name: str, size: int) -> None:
            await budget.acquire(size)
            order.append(name)

        big = asyncio.create_task(take("big", 90))
        await asyncio.sleep(0)
        small = asyncio.create_task(take("small", 10))
        await asyncio.sleep(0)
        assert order == [] and budget.used_bytes == 100
        budget.release(40)  # 60 used: big (90) does not fit, and small must not overtake it
        await asyncio.sleep(0)
        assert order == []
        budget.release(60)
        await asyncio.gather(big, small)
        assert order == ["big", "small"] and budget.used_bytes == 100

    asyncio.run(main())


def test_oversize_request_runs_alone_and_cancellation_gives_back():
    """A request larger than the whole budget runs when nothing else is in flight; a waiter
    that is cancelled leaves no reservation behind."""

    async def main():
        budget = ByteBudget(10)
        await budget.acquire(50)  # alone: admitted
        waiter = asyncio.create_task(budget.acquire(5))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        budget.release(50)
        assert budget.used_bytes == 0
        await asyncio.wait_for(budget.acquire(10), 1.0)
        assert budget.used_bytes == 10

    asyncio.run(main())
