"""SIGHUP re-reads files in place (docs/security.md): the TLS certificates and keys of a
service, the gateway's token file. A loop has one handler per signal, so every part that
reloads on it registers here (``on_sighup``) and the one handler calls them all, in the
order they registered. Signals belong to the process, so the registry does too."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable

log = logging.getLogger(__name__)

_callbacks: list[Callable[[], None]] = []


def on_sighup(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback`` on the running loop at every SIGHUP until the returned function
    is called. Where the loop cannot take signal handlers (not the main thread), it is
    never called."""
    loop = asyncio.get_running_loop()
    if not _callbacks:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGHUP, _fire)
    _callbacks.append(callback)

    def remove() -> None:
        if callback in _callbacks:
            _callbacks.remove(callback)
        if not _callbacks:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGHUP)

    return remove


def _fire() -> None:
    for callback in list(_callbacks):
        try:
            callback()
        except Exception:  # one reload failing must not stop the others
            log.exception("a reload on SIGHUP failed")
