"""A bound on bytes in flight over many requests or streams (docs/style.md §5): a bookie's
add requests, a gateway's streaming appends, a gateway's REST request bodies (the HTTP
protocol takes budget with ``request``, which needs no coroutine: services/web/lane.py).

Each add request opens a ``BudgetShare`` and takes budget for its body's
bytes AS THEY ARRIVE, chunk by chunk, and gives all of it back after the
answer. A request that declares a large body and sends nothing therefore
holds nothing, and cannot stall the other adds (issue 7 item 12); what a slow
body holds is bounded in time by the body read time-out
(``body_read_timeout_ms``).

While the budget is spent, a request waits before reading its next chunk:
uvicorn then stops reading that socket, so TCP pushes back on the sender and
the bookie's memory stays bounded however many clients send large batches.
Waiters are served in arrival order, so a large request is not starved by a
stream of small ones.

No deadlock: requests that each hold part of the budget could all wait for
more. So the OLDEST open share may always take what it needs, even past the
limit; it finishes (or times out) and gives its bytes back, and the next one
becomes the oldest. Memory stays under the limit plus one body.

A gateway's stream holds its share for as long as it runs, and takes budget for each
record it reads and gives it back (``give``) once the record is acknowledged; its
acknowledgements do not depend on the budget, so the bytes held always come back. The
oldest stream is bounded by its own per-stream bound instead of one body.
"""

from __future__ import annotations

import asyncio
from collections import deque
from functools import partial


class BudgetShare:
    """One request's part of the budget: ``take`` as bytes arrive, ``close`` at the end."""

    __slots__ = ("_budget", "held_bytes", "_waiting")

    def __init__(self, budget: ByteBudget) -> None:
        self._budget = budget
        self.held_bytes = 0
        self._waiting: _Waiter | None = None

    def try_take(self, size: int) -> bool:
        """Take ``size`` bytes of budget if that needs no wait (``take`` without a
        coroutine, for the common case); False, holding nothing more, otherwise."""
        budget = self._budget
        if (not budget._waiters and budget._fits(size)) or budget._oldest() is self:
            budget._grant(self, size)
            return True
        return False

    def request(self, size: int) -> asyncio.Future[None] | None:
        """Take ``size`` bytes of budget now (None), or queue for them in arrival order:
        the future is done once they are taken (for a caller that cannot await, such as
        the HTTP protocol: services/web/lane.py). Cancelling it leaves the queue; one
        request at a time per share."""
        if self.try_take(size):
            return None
        budget = self._budget
        waiter = _Waiter(size, asyncio.get_running_loop().create_future(), self)
        budget._waiters.append(waiter)
        self._waiting = waiter
        waiter.future.add_done_callback(partial(_left_queue, budget, waiter))
        return waiter.future

    async def take(self, size: int) -> None:
        """Take ``size`` bytes of budget, waiting (in arrival order) while it is spent."""
        future = self.request(size)
        if future is not None:
            await future

    def give(self, size: int) -> None:
        """Give back ``size`` of the bytes this share holds."""
        size = min(size, self.held_bytes)
        self.held_bytes -= size
        budget = self._budget
        budget.used_bytes -= size
        if budget._waiters:
            budget._wake()

    def close(self) -> None:
        """Give back everything this share holds (idempotent)."""
        budget = self._budget
        budget.used_bytes -= self.held_bytes
        self.held_bytes = 0
        budget._open.pop(self, None)
        if budget._waiters:  # the oldest share's wait, if any, is among them
            budget._wake()


def _left_queue(budget: ByteBudget, waiter: _Waiter, future: asyncio.Future[None]) -> None:
    """A request's future is done: granted (by ``_wake``), or cancelled (its waiter leaves
    the queue, and the budget goes to the next)."""
    share = waiter.share
    if share._waiting is waiter:
        share._waiting = None
    if future.cancelled():
        try:
            budget._waiters.remove(waiter)
        except ValueError:
            pass
        budget._wake()


class _Waiter:
    __slots__ = ("size", "future", "share")

    def __init__(self, size: int, future: asyncio.Future[None], share: BudgetShare) -> None:
        self.size = size
        self.future = future
        self.share = share


class ByteBudget:
    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.used_bytes = 0
        self._waiters: deque[_Waiter] = deque()
        self._open: dict[BudgetShare, None] = {}  # insertion order = age

    def open(self) -> BudgetShare:
        """A new request's share, holding nothing yet."""
        share = BudgetShare(self)
        self._open[share] = None
        return share

    @property
    def shares(self) -> int:
        """The shares open now."""
        return len(self._open)

    @property
    def waiting(self) -> int:
        """The shares waiting for budget now."""
        return sum(1 for waiter in self._waiters if not waiter.future.done())

    def _oldest(self) -> BudgetShare | None:
        return next(iter(self._open), None)

    def _fits(self, size: int) -> bool:
        return self.used_bytes == 0 or self.used_bytes + size <= self.limit_bytes

    def _grant(self, share: BudgetShare, size: int) -> None:
        self.used_bytes += size
        share.held_bytes += size

    def _wake(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters[0]
            if waiter.future.done():
                waiters.popleft()
                continue
            if not self._fits(waiter.size):
                break
            waiters.popleft()
            self._grant(waiter.share, waiter.size)
            waiter.future.set_result(None)
        oldest = self._oldest()
        if oldest is not None and oldest._waiting is not None:
            waiter = oldest._waiting
            if not waiter.future.done():
                try:
                    waiters.remove(waiter)
                except ValueError:
                    pass
                self._grant(oldest, waiter.size)
                waiter.future.set_result(None)
