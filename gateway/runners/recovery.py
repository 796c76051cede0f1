"""The asyncio runner of ledger recovery (the protocol core's ``LedgerRecovery``).

Every bookie request has its own time-out (the bookie client's), and the
machine moves on as soon as fencing covers every write set, so one hanging
bookie does not block a recovery. The whole run is bounded by the machine
itself (``recovery_timeout_ms``, reached through the ``Tick`` this runner feeds
by ``next_deadline()``), as the simulator runs it. Requests still outstanding
when the machine finishes are cancelled. Recoveries of one ledger started on the
same gateway share one run: ``gateway.handles.Recoveries``.
"""

from __future__ import annotations

import asyncio
import logging

from gateway.context import GatewayContext
from gateway.runners.base import EffectRunner
from gateway.senders import add_outcome
from services.bookie_client import AddResult
from services.errors import EntryNotFound, LedgerNotFound, QuireError
from services.protocol import messages as m
from services.protocol.metadata import LedgerMetadata
from services.protocol.recovery import LedgerRecovery

log = logging.getLogger(__name__)


class RecoveryRunner(EffectRunner):
    def __init__(self, ctx: GatewayContext, machine: LedgerRecovery) -> None:
        super().__init__(ctx)
        self.machine = machine
        self.result: asyncio.Future[tuple[LedgerMetadata, int]] = (
            asyncio.get_running_loop().create_future()
        )

    def _handle(self, event: m.Event) -> list[m.Effect]:
        return self.machine.handle(event)  # a finished machine takes nothing more

    def _next_deadline(self) -> int | None:
        return self.machine.next_deadline()

    async def run(self) -> tuple[LedgerMetadata, int]:
        self._run(self.machine.start(self.ctx.clock()))
        try:
            return await asyncio.shield(self.result)
        finally:
            await self._stop()

    def _apply(self, effect: m.Effect) -> None:
        if isinstance(effect, m.SendFence):
            self._spawn(self._fence(effect.ledger_id, effect.bookie))
        elif isinstance(effect, m.ReadEntries):
            self._spawn(self._read(effect))
        elif isinstance(effect, m.SendAdds):
            self._spawn(self._write_back(effect))
        elif isinstance(effect, m.ReadWritableBookies):
            # A write-back keeps failing on a bookie: the recovery replaces it.
            self._feed_soon(m.WritableBookies(tuple(self.ctx.writable_bookies())))
        elif isinstance(effect, m.RecoveryDone):
            outcome = "closed" if effect.closed_here else "already_closed"
            self.ctx.metrics.recoveries.labels(outcome).inc()
            if not self.result.done():
                self.result.set_result((effect.metadata, effect.version))
        elif isinstance(effect, m.RecoveryFailed):
            self.ctx.metrics.recoveries.labels("failed").inc()
            if not self.result.done():
                self.result.set_exception(effect.exception())
        else:
            self._unexpected(effect)

    async def _fence(self, ledger_id: int, bookie: str) -> None:
        try:
            info = await self.ctx.bookie(bookie).fence(ledger_id)
        except QuireError as exc:
            log.warning("fence on %s failed: %s", bookie, exc.code)
            self._feed(m.FenceFailed(bookie))
            return
        self._feed(m.FenceDone(bookie, info.lac, info.last_entry_id))

    async def _read(self, effect: m.ReadEntries) -> None:
        client = self.ctx.bookie(effect.bookie)
        for entry_id in effect.entry_ids:
            try:
                record = await client.read_entry(effect.ledger_id, entry_id)
            except (EntryNotFound, LedgerNotFound):
                event = m.EntryRead(effect.bookie, entry_id, m.ReadOutcome.MISSING)
            except QuireError:
                event = m.EntryRead(effect.bookie, entry_id, m.ReadOutcome.ERROR)
            else:
                event = m.EntryRead(effect.bookie, entry_id, m.ReadOutcome.FOUND, record)
            self._feed(event)

    async def _write_back(self, effect: m.SendAdds) -> None:
        answer: AddResult | QuireError
        try:
            answer = await self.ctx.bookie(effect.bookie).add(list(effect.records))
        except QuireError as exc:
            answer = exc
        self._feed(m.BookieAddsDone(effect.bookie, *add_outcome(effect.records, answer)))
