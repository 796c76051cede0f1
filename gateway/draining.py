"""The gateway's shutdown began (SIGINT/SIGTERM): its long polls answer now.

uvicorn's graceful shutdown waits for every request in progress before the lifespan's
shutdown runs; a tailing reader's empty long poll waits up to 30 s, so a gateway with
readers took that long to stop (longer than many supervisors wait before SIGKILL).
Once ``begin`` is called, every long poll answers what it has, as if its ``wait_ms`` had
run out: the waits on this gateway's write handles are woken and check ``began``; the
waits on bookies' long polls (a ledger another gateway writes) are left, their answer
then read at once (``unless_draining``); the log reads' slices of ``WAIT_SLICE_MS``
look at ``began`` between slices. WebSocket streams drain on their own
(services/web/websocket.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Draining:
    def __init__(self) -> None:
        self.began = False
        # Long polls waiting now (``quire_gateway_long_polls_waiting``), counted by the
        # waits themselves.
        self.waiting = 0
        # One future per wait in ``unless_draining`` (set, not one shared future: 10,000
        # waits would each scan a shared future's callbacks when they end).
        self._waits: set[asyncio.Future[None]] = set()
        self._wakes: list[Callable[[], None]] = []

    def on_begin(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` when the shutdown begins (wakes waits that check ``began``)."""
        self._wakes.append(wake)

    def begin(self) -> None:
        if self.began:
            return
        self.began = True
        for wait in self._waits:
            if not wait.done():
                wait.set_result(None)
        for wake in self._wakes:
            wake()

    async def unless_draining(self, waiting: Coroutine[Any, Any, T]) -> T | None:
        """``waiting``'s result, or None (``waiting`` cancelled) once the shutdown
        began, before it or while it waits."""
        if self.began:
            waiting.close()
            return None
        task = asyncio.ensure_future(waiting)
        stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waits.add(stop)
        try:
            await asyncio.wait((task, stop), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._waits.discard(stop)
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        return None if task.cancelled() else task.result()
