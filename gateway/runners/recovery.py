"""The asyncio runner of ledger recovery (the protocol core's ``LedgerRecovery``).

Any gateway may recover any ledger; recoveries of one ledger started on the
same gateway share one run. Every bookie request has its own time-out (the
bookie client's), and the machine moves on as soon as fencing covers every
write set, so one hanging bookie does not block a recovery. Requests still
outstanding when the machine finishes are cancelled.
"""

from __future__ import annotations

import asyncio
import logging

from gateway.context import GatewayContext
from gateway.runners.base import EffectRunner
from services.errors import (
    BookieReadOnly,
    EntryNotFound,
    LedgerFenced,
    LedgerNotFound,
    QuireError,
    QuorumTimeout,
)
from services.protocol import messages as m
from services.protocol.metadata import LedgerMetadata
from services.protocol.recovery import LedgerRecovery

log = logging.getLogger(__name__)

RECOVERY_TIMEOUT_S = 120.0


class RecoveryRunner(EffectRunner):
    def __init__(self, ctx: GatewayContext, machine: LedgerRecovery) -> None:
        super().__init__(ctx)
        self.machine = machine
        self.result: asyncio.Future[tuple[LedgerMetadata, int]] = (
            asyncio.get_running_loop().create_future()
        )

    def _handle(self, event: m.Event) -> list[m.Effect]:
        if self.machine.finished:
            return []
        return self.machine.handle(event)

    async def run(self) -> tuple[LedgerMetadata, int]:
        for effect in self.machine.start():
            self._dispatch(effect)
        try:
            return await asyncio.wait_for(asyncio.shield(self.result), RECOVERY_TIMEOUT_S)
        except TimeoutError as exc:
            raise QuorumTimeout(
                f"recovery of ledger {self.machine.ledger_id} did not finish in "
                f"{RECOVERY_TIMEOUT_S:.0f}s; it can be run again"
            ) from exc
        finally:
            await self._cancel_tasks()

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
            log.error("unexpected recovery effect %r", effect)

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
        ids = tuple(r.entry_id for r in effect.records)
        try:
            result = await self.ctx.bookie(effect.bookie).add(list(effect.records))
        except BookieReadOnly:
            self._feed(m.BookieAddsDone(effect.bookie, (), ids, m.RejectReason.READONLY))
            return
        except LedgerFenced:
            self._feed(m.BookieAddsDone(effect.bookie, (), ids, m.RejectReason.FENCED))
            return
        except QuireError:
            self._feed(m.BookieAddsDone(effect.bookie, (), ids, m.RejectReason.UNAVAILABLE))
            return
        rejected = {eid for _, eid, _ in result.rejected}
        stored = tuple(i for i in ids if i not in rejected)
        reason = m.RejectReason.FENCED if rejected else None
        self._feed(m.BookieAddsDone(effect.bookie, stored, tuple(sorted(rejected)), reason))


class Recoveries:
    """Recoveries running on this gateway, one per ledger at a time."""

    def __init__(self, ctx: GatewayContext) -> None:
        self.ctx = ctx
        self._running: dict[int, asyncio.Future[tuple[LedgerMetadata, int]]] = {}

    async def recover(
        self, metadata: LedgerMetadata, version: int, digest_key: bytes
    ) -> tuple[LedgerMetadata, int]:
        ledger_id = metadata.ledger_id
        running = self._running.get(ledger_id)
        if running is None:
            runner = RecoveryRunner(
                self.ctx, LedgerRecovery(metadata, version, digest_key=digest_key)
            )
            running = asyncio.ensure_future(runner.run())
            self._running[ledger_id] = running
            running.add_done_callback(lambda _: self._running.pop(ledger_id, None))
        return await asyncio.shield(running)
