"""A bound on the bytes of add requests in flight (STYLE.md §5).

An add reserves its body's declared size BEFORE the body is read and gives
it back after the answer. While the budget is spent, new adds wait without
reading: uvicorn then stops reading their sockets, so TCP pushes back on the
senders and the bookie's memory stays bounded however many clients send
large batches. A request larger than the whole budget still runs, alone.
Waiters are served in arrival order, so a large request is not starved by a
stream of small ones.
"""

from __future__ import annotations

import asyncio
from collections import deque


class ByteBudget:
    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.used_bytes = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    def _fits(self, size: int) -> bool:
        return self.used_bytes == 0 or self.used_bytes + size <= self.limit_bytes

    async def acquire(self, size: int) -> None:
        if not self._waiters and self._fits(size):
            self.used_bytes += size
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, future)
        self._waiters.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(size)  # granted just as we were cancelled
            else:
                try:
                    self._waiters.remove(entry)
                except ValueError:
                    pass
                self._wake()
            raise

    def release(self, size: int) -> None:
        self.used_bytes -= size
        self._wake()

    def _wake(self) -> None:
        waiters = self._waiters
        while waiters:
            size, future = waiters[0]
            if future.done():
                waiters.popleft()
                continue
            if not self._fits(size):
                return
            waiters.popleft()
            self.used_bytes += size
            future.set_result(None)
