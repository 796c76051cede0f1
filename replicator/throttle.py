"""A token bucket on copied bytes (``--rereplication-bytes-per-s-max``), shared by every
ledger in flight so that repair as a whole stays under the rate.

A caller reserves its bytes before it sends them and then sleeps off any debt:
reserving first (the bucket may go negative) keeps concurrent callers in order and
lets a batch larger than the bucket through at the rate instead of never. A rate of
0 is unlimited.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from replicator.limits import THROTTLE_BURST_S


class ByteThrottle:
    def __init__(self, bytes_per_s_max: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = bytes_per_s_max
        self.capacity = bytes_per_s_max * THROTTLE_BURST_S
        self._clock = clock
        self._tokens = self.capacity
        self._at = clock()

    def reserve(self, size: int) -> float:
        """Take ``size`` bytes; the seconds to wait before sending them (0 when free)."""
        if self.rate <= 0:
            return 0.0
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= size
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    async def acquire(self, size: int) -> None:
        delay_s = self.reserve(size)
        if delay_s > 0:
            await asyncio.sleep(delay_s)
