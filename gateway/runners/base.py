"""What the asyncio runners of the protocol core share.

A runner feeds events to one state machine at a time, on the event loop, and
carries out its effects (STYLE.md §1). This base holds the parts common to
the write handle's and the recovery's runners: feeding (never re-entrant),
spawned tasks, and the metadata effects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from gateway.context import GatewayContext
from services.errors import QuireError
from services.protocol import messages as m

log = logging.getLogger(__name__)


class EffectRunner:
    def __init__(self, ctx: GatewayContext) -> None:
        self.ctx = ctx
        self._tasks: set[asyncio.Task] = set()

    # Subclasses: the machine's ``handle`` and what to do with each effect.
    def _handle(self, event: m.Event) -> list[m.Effect]:
        raise NotImplementedError

    def _apply(self, effect: m.Effect) -> None:
        raise NotImplementedError

    def _after_feed(self) -> None:
        """Called after every event's effects were applied."""

    def _feed(self, event: m.Event) -> None:
        for effect in self._handle(event):
            self._dispatch(effect)
        self._after_feed()

    def _dispatch(self, effect: m.Effect) -> None:
        if isinstance(effect, m.WriteMetadata):
            self._spawn(self._write_metadata(effect))
        elif isinstance(effect, m.ReadMetadata):
            self._spawn(self._read_metadata(effect.ledger_id))
        else:
            self._apply(effect)

    def _feed_soon(self, event: m.Event) -> None:
        asyncio.get_running_loop().call_soon(self._feed, event)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_metadata(self, effect: m.WriteMetadata) -> None:
        try:
            written = await self.ctx.ledgers.compare_and_set(
                effect.metadata, effect.expected_version
            )
        except QuireError as exc:
            if exc.code == "metadata_conflict":
                await self._read_metadata(effect.metadata.ledger_id, conflicted=True)
            else:
                self._feed(m.MetadataFailed(exc.code, exc.message))
            return
        self._feed(m.MetadataWritten(written.metadata, written.version))

    async def _read_metadata(self, ledger_id: int, conflicted: bool = False) -> None:
        try:
            current = await self.ctx.ledgers.get(ledger_id)
        except QuireError as exc:
            self._feed(m.MetadataFailed(exc.code, exc.message))
            return
        event_type = m.MetadataConflicted if conflicted else m.MetadataRead
        self._feed(event_type(current.metadata, current.version))

    async def _cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
