"""A service learns that SIGINT/SIGTERM arrived, beside uvicorn's own handlers, so that
its long polls answer at once with what they have instead of holding the graceful
shutdown until they expire (up to 30 s): uvicorn waits for every request in progress
before the lifespan's shutdown runs, and a tailing reader's poll is one."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from typing import Any


def on_shutdown_signal(callback: Callable[[], None]) -> Callable[[], None]:
    """Also call ``callback`` on the running loop when SIGINT/SIGTERM arrives (the
    handlers installed before, uvicorn's, still run). Returns a function that undoes it.
    Not on a thread other than the main one (signals are the main thread's)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    installed: dict[int, tuple[Any, Any]] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        if not callable(previous):
            continue

        def handler(signum: int, frame: Any, previous: Any = previous) -> None:
            loop.call_soon_threadsafe(callback)
            previous(signum, frame)

        signal.signal(sig, handler)
        installed[sig] = (handler, previous)

    def restore() -> None:
        for sig, (handler, previous) in installed.items():
            if signal.getsignal(sig) is handler:
                signal.signal(sig, previous)

    return restore
