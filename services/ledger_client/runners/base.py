"""What the asyncio runners of the protocol core share.

A runner feeds events to one state machine at a time, on the event loop, and
carries out its effects (docs/style.md §1). This base holds the parts common to
the write handle's and the recovery's runners: feeding (never re-entrant),
the timer that feeds ``Tick`` by the machine's ``next_deadline()``, spawned
tasks, and the metadata effects (a written fragment that could not spread its
write quorums over racks is logged as a warning: ``WriteMetadata.spread``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from services.errors import MetadataConflict, QuireError, invariant
from services.ledger_client.context import LedgerClientContext
from services.protocol import messages as m


class EffectRunner:
    # Slotted (a subclass may add a ``__dict__``): a gateway holds a write runner per open
    # ledger (benchmarks/README.md, "Many open things").
    __slots__ = ("ctx", "_tasks", "_timer", "_timer_at")

    def __init__(self, ctx: LedgerClientContext) -> None:
        self.ctx = ctx
        # None until a task is spawned: an empty set costs 216 bytes in each of the many
        # idle write handles a gateway may hold (benchmarks/README.md, "Many open things").
        self._tasks: set[asyncio.Task[None]] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None

    # Subclasses: the machine's ``handle``, its ``next_deadline`` and what to do with
    # each effect that is not a metadata one.
    def _handle(self, event: m.Event) -> list[m.Effect]:
        raise NotImplementedError

    def _next_deadline(self) -> int | None:
        raise NotImplementedError

    def _apply(self, effect: m.Effect) -> None:
        raise NotImplementedError

    def _after_feed(self) -> None:
        """Called after every event's effects were applied."""

    def _feed(self, event: m.Event) -> None:
        self._run(self._handle(event))

    def _run(self, effects: list[m.Effect]) -> None:
        for effect in effects:
            self._dispatch(effect)
        self._arm_timer()
        self._after_feed()

    def _dispatch(self, effect: m.Effect) -> None:
        if isinstance(effect, m.WriteMetadata):
            self._spawn(self._write_metadata(effect))
        elif isinstance(effect, m.ReadMetadata):
            self._spawn(self._read_metadata(effect.ledger_id))
        else:
            self._apply(effect)

    def _unexpected(self, effect: m.Effect) -> None:
        invariant(False, f"{type(self).__name__} does not carry out {type(effect).__name__}")

    def _feed_soon(self, event: m.Event) -> None:
        asyncio.get_running_loop().call_soon(self._feed, event)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        if self._tasks is None:
            self._tasks = set()
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if self._tasks is not None:
            self._tasks.discard(task)
        self._after_task()

    def _after_task(self) -> None:
        """Called when a spawned task has ended (its last feed, if any, came before)."""

    # ------------------------------------------------------------ time

    def _arm_timer(self) -> None:
        deadline = self._next_deadline()
        if deadline == self._timer_at:
            return
        self._cancel_timer()
        self._timer_at = deadline
        if deadline is None:
            return
        delay_s = max(0.0, (deadline - self.ctx.clock()) / 1000)
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        self._feed(m.Tick(self.ctx.clock()))

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = None

    # ------------------------------------------------------------ metadata

    async def _write_metadata(self, effect: m.WriteMetadata) -> None:
        ledgers = self.ctx.ledgers
        try:
            written = await ledgers.compare_and_set(effect.metadata, effect.expected_version)
        except MetadataConflict:
            await self._read_metadata(effect.metadata.ledger_id, conflicted=True)
            return
        except QuireError as exc:
            self._feed(m.MetadataFailed(exc.code, exc.message, now=self.ctx.clock()))
            return
        if not effect.spread:
            self.ctx.warn_unspread(written.metadata)
        self._feed(m.MetadataWritten(written.metadata, written.version))

    async def _read_metadata(self, ledger_id: int, conflicted: bool = False) -> None:
        try:
            current = await self.ctx.ledgers.get(ledger_id)
        except QuireError as exc:
            self._feed(m.MetadataFailed(exc.code, exc.message, now=self.ctx.clock()))
            return
        event_type = m.MetadataConflicted if conflicted else m.MetadataRead
        self._feed(event_type(current.metadata, current.version))

    async def _stop(self) -> None:
        """Cancel the timer and every task still running."""
        self._cancel_timer()
        tasks = list(self._tasks or ())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
