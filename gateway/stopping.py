"""The gateway's shutdown began (SIGINT/SIGTERM): its long polls answer now.

uvicorn's graceful shutdown waits for every request in progress before the lifespan's
shutdown runs; a tailing reader's empty long poll waits up to 30 s, so a gateway with
readers took that long to stop (longer than many supervisors wait before SIGKILL).

``begin`` is called by the server as its shutdown starts (services/web/serve.py
``FrozenHeapServer.shutdown``: the listeners closed, every connection told to close
after its answer, all before the answers are written). From then on every long poll
answers what it has, as if its ``wait_ms`` had run out: the waits on this gateway's
write handles are woken and check ``began``; the waits on bookies' long polls (a ledger
another gateway writes) are cancelled and the LAC read at once (``unless_stopping``);
the log reads' slices of ``WAIT_SLICE_MS`` (a ledger another gateway writes) look at
``began`` between slices, so those answer within one slice. WebSocket streams drain on
their own (services/web/websocket.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


class Stopping:
    def __init__(self) -> None:
        self.began = False
        # Long polls waiting now (``quire_gateway_long_polls_waiting``): each wait of
        # one is made inside ``with stopping:``.
        self.waiting = 0
        # One future per wait in ``unless_stopping`` (a set, not one shared future:
        # 10,000 waits would each scan a shared future's callbacks when they end).
        self._waits: set[asyncio.Future[None]] = set()
        self._wakes: list[Callable[[], None]] = []

    def __enter__(self) -> None:
        self.waiting += 1

    def __exit__(self, *_exc: object) -> None:
        self.waiting -= 1

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
            try:
                wake()
            except Exception:  # noqa: BLE001 - the other waits must still be woken
                log.exception("waking long polls at shutdown failed")

    async def unless_stopping(self, waiting: Coroutine[Any, Any, T]) -> T | None:
        """``waiting``'s result, or None (``waiting`` cancelled) once the shutdown
        began, before it or while it waits. Its errors are raised as they are."""
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
                # Waits for the cancelled task without raising its CancelledError, so a
                # cancellation of this caller itself still propagates.
                await asyncio.wait((task,))
        return None if task.cancelled() else task.result()
