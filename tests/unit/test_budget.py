"""The bound on bytes in flight (a bookie's adds, a gateway's streams and REST bodies):
taken as bytes arrive, waits while spent, serves in order, never deadlocks; a stream
gives back part of what it holds as its records are acknowledged."""

from __future__ import annotations

import asyncio

from services.budget import ByteBudget


def test_waits_while_spent_and_serves_in_arrival_order():
    """Takes beyond the budget wait; closes admit them in arrival order, and a big take is
    not overtaken by later small ones."""

    async def main():
        budget = ByteBudget(100)
        first, second = budget.open(), budget.open()
        await first.take(60)
        await second.take(40)
        order: list[str] = []

        async def take(name: str, size: int) -> None:
            share = budget.open()
            await share.take(size)
            order.append(name)

        big = asyncio.create_task(take("big", 90))
        await asyncio.sleep(0)
        small = asyncio.create_task(take("small", 10))
        await asyncio.sleep(0)
        assert order == [] and budget.used_bytes == 100
        second.close()  # 60 used: big (90) does not fit, and small must not overtake it
        await asyncio.sleep(0)
        assert order == []
        first.close()
        await asyncio.gather(big, small)
        assert order == ["big", "small"] and budget.used_bytes == 100

    asyncio.run(main())


def test_a_share_that_received_nothing_holds_nothing():
    """A request that opened a share but has received no byte (a declared 64 MiB body that
    never comes) does not keep any other request from taking the whole budget."""

    async def main():
        budget = ByteBudget(64)
        stalled = budget.open()
        other = budget.open()
        await asyncio.wait_for(other.take(64), 1.0)
        assert stalled.held_bytes == 0 and budget.used_bytes == 64
        other.close()
        stalled.close()
        assert budget.used_bytes == 0

    asyncio.run(main())


def test_oldest_share_always_proceeds_so_partial_holders_never_deadlock():
    """Two requests each holding half the budget and both needing more do not deadlock: the
    older one may take past the limit, finishes, and its close admits the younger."""

    async def main():
        budget = ByteBudget(100)
        old, young = budget.open(), budget.open()
        await old.take(50)
        await young.take(50)
        young_more = asyncio.create_task(young.take(50))
        await asyncio.sleep(0)
        assert not young_more.done()
        await asyncio.wait_for(old.take(50), 1.0)  # the oldest: past the limit
        assert budget.used_bytes == 150
        old.close()
        await asyncio.wait_for(young_more, 1.0)
        assert young.held_bytes == 100 and budget.used_bytes == 100
        young.close()
        assert budget.used_bytes == 0

    asyncio.run(main())


def test_oldest_waiting_share_is_granted_when_it_becomes_the_oldest():
    """A share waiting behind the limit is admitted as soon as every older share closed,
    even though the budget is still spent by younger ones."""

    async def main():
        budget = ByteBudget(100)
        a, b, c = budget.open(), budget.open(), budget.open()
        await a.take(10)
        await c.take(90)
        waiting = asyncio.create_task(b.take(50))
        await asyncio.sleep(0)
        assert not waiting.done()
        a.close()  # b is now the oldest
        await asyncio.wait_for(waiting, 1.0)
        assert budget.used_bytes == 140
        b.close()
        c.close()
        assert budget.used_bytes == 0

    asyncio.run(main())


def test_cancellation_gives_back():
    """A waiter that is cancelled leaves no reservation behind; close gives back all."""

    async def main():
        budget = ByteBudget(10)
        first = budget.open()
        await first.take(50)  # alone: admitted
        second = budget.open()
        waiter = asyncio.create_task(second.take(5))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        second.close()
        first.close()
        assert budget.used_bytes == 0
        third = budget.open()
        await asyncio.wait_for(third.take(10), 1.0)
        assert budget.used_bytes == 10

    asyncio.run(main())


def test_giving_back_part_of_a_share_admits_the_next_waiter():
    """A stream's share gives back the bytes of acknowledged records while it stays open:
    a waiting share is admitted as soon as enough came back, not when the stream ends;
    ``try_take`` takes without waiting, or takes nothing."""

    async def main():
        budget = ByteBudget(100)
        stream, other = budget.open(), budget.open()
        assert stream.try_take(70)
        assert not other.try_take(40) and other.held_bytes == 0
        waiting = asyncio.create_task(other.take(40))
        await asyncio.sleep(0)
        assert not waiting.done() and budget.waiting == 1
        stream.give(5)  # 65 + 40 > 100: still waiting
        await asyncio.sleep(0)
        assert not waiting.done()
        stream.give(10)
        await asyncio.wait_for(waiting, 1.0)
        assert (stream.held_bytes, other.held_bytes, budget.used_bytes) == (55, 40, 95)
        assert budget.waiting == 0
        stream.give(1000)  # never more than it holds
        assert (stream.held_bytes, budget.used_bytes) == (0, 40)
        assert budget.shares == 2
        stream.close()
        other.close()
        assert (budget.used_bytes, budget.shares) == (0, 0)

    asyncio.run(main())


def test_a_request_without_a_coroutine_queues_in_turn_and_a_cancelled_one_leaves():
    """``request`` (the HTTP protocol's, which cannot await): None when the bytes are
    taken at once, else a future done once they are, in arrival order; cancelling it
    leaves the queue and the next waiter gets the budget."""

    async def main():
        budget = ByteBudget(100)
        holder, leaver, next_one = budget.open(), budget.open(), budget.open()
        assert holder.request(90) is None and budget.used_bytes == 90
        left = leaver.request(50)
        waiting = next_one.request(20)
        assert left is not None and waiting is not None
        assert budget.waiting == 2
        left.cancel()
        await asyncio.sleep(0)  # the future's callbacks run
        assert budget.waiting == 1 and not waiting.done() and leaver.held_bytes == 0
        holder.close()
        await asyncio.wait_for(waiting, 1)
        assert next_one.held_bytes == 20 and budget.used_bytes == 20
        leaver.close()
        next_one.close()
        assert (budget.used_bytes, budget.shares, budget.waiting) == (0, 0, 0)

    asyncio.run(main())
