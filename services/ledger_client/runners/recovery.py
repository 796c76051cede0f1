"""The asyncio runner of ledger recovery (the protocol core's ``LedgerRecovery``).

Every bookie request has its own time-out (the bookie client's), and the
machine moves on as soon as fencing covers every write set, so one hanging
bookie does not block a recovery. The whole run is bounded by the machine
itself (``recovery_timeout_ms``, reached through the ``Tick`` this runner feeds
by ``next_deadline()``), as the simulator runs it. The machine's reads of one
bookie at a time are one range read (``read_entries``), and the machine asks
the next bookie itself when one is silent for ``speculative_read_ms``, so a
hanging bookie costs one speculative delay, not a time-out per entry. Fence and
read answers carry the answering bookie's instance (and the fence the ledger's
lengths) into the machine. Requests still outstanding
when the machine finishes are cancelled. Recoveries of one ledger started on the
same gateway share one run: ``services.ledger_client.handles.Recoveries``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from services.bookie_client import BookieAddResult
from services.errors import EntryNotFound, LedgerNotFound, QuireError
from services.ledger_client.context import BookieApi, LedgerClientContext
from services.ledger_client.runners.base import EffectRunner
from services.ledger_client.senders import add_outcome
from services.limits import PAGE_BYTES_MAX, STORED_ENTRY_SIZE_MAX_BYTES
from services.protocol import messages as m
from services.protocol.metadata import LedgerMetadata
from services.protocol.recovery import LedgerRecovery

log = logging.getLogger(__name__)


class RecoveryRunner(EffectRunner):
    def __init__(self, ctx: LedgerClientContext, machine: LedgerRecovery) -> None:
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
            self._feed_soon(self.ctx.writable_event())
        elif isinstance(effect, m.RecoveryDone):
            outcome = "closed" if effect.closed_here else "already_closed"
            self.ctx.metrics.recoveries.labels(outcome).inc()
            self._count_fenced()
            if not self.result.done():
                self.result.set_result((effect.metadata, effect.version))
        elif isinstance(effect, m.RecoveryFailed):
            self.ctx.metrics.recoveries.labels("failed").inc()
            self._count_fenced()
            if not self.result.done():
                self.result.set_exception(effect.exception())
        else:
            self._unexpected(effect)

    def _count_fenced(self) -> None:
        """A finished run whose fence covered every write set fenced the ledger."""
        if self.machine.fence_complete:
            self.ctx.metrics.ledgers_fenced.inc()

    async def _fence(self, ledger_id: int, bookie: str) -> None:
        try:
            info = await self.ctx.bookie(bookie).fence(ledger_id)
        except QuireError as exc:
            log.warning("fence on %s failed: %s", bookie, exc.code)
            self.ctx.metrics.fence_requests.labels("failed").inc()
            self._feed(m.FenceFailed(bookie))
            return
        self.ctx.metrics.fence_requests.labels("ok").inc()
        self._feed(
            m.FenceDone(
                bookie,
                info.lac,
                info.last_entry_id,
                instance_id=info.instance_id,
                length=info.length,
                lac_length=info.lac_length,
                now=self.ctx.clock(),
            )
        )

    async def _read(self, effect: m.ReadEntries) -> None:
        """One range read for every entry the machine asks of this bookie (the ids of a
        window are a few apart: one request, not one per entry), answered per id with
        the answering bookie's instance."""
        ids = sorted(set(effect.entry_ids))
        if not ids:
            return
        client = self.ctx.bookie(effect.bookie)
        for event in await read_entries(client, effect, ids, self.ctx.clock):
            self._feed(event)

    async def _write_back(self, effect: m.SendAdds) -> None:
        answer: BookieAddResult | QuireError
        try:
            answer = await self.ctx.bookie(effect.bookie).add(list(effect.records))
        except QuireError as exc:
            answer = exc
        self._feed(m.BookieAddsDone(effect.bookie, *add_outcome(effect.records, answer)))


async def read_entries(
    client: BookieApi, effect: m.ReadEntries, ids: list[int], clock: Callable[[], int]
) -> list[m.EntryRead]:
    """The ``EntryRead`` of each id in ``ids`` (ascending) from one range read.

    An id the answer lists is FOUND; an id it skips is MISSING, unless the answer may
    have been cut (by its entry count or byte bound) before it while the bookie stores
    entries beyond the last one returned: then it is an ERROR (re-read alone). No such
    ledger is MISSING for every id; any other failure an ERROR for every id, with the
    instance of the bookie when the failure is its answer."""
    bookie, first, last = effect.bookie, ids[0], ids[-1]
    span = last - first + 1
    try:
        answer = await client.read_range(
            effect.ledger_id, first, last, max_entries=span, max_bytes=PAGE_BYTES_MAX
        )
    except QuireError as exc:
        outcome = (
            m.ReadOutcome.MISSING
            if isinstance(exc, LedgerNotFound | EntryNotFound)
            else m.ReadOutcome.ERROR
        )
        instance = getattr(exc, "bookie_instance_id", None)
        now = clock()
        return [m.EntryRead(bookie, i, outcome, instance_id=instance, now=now) for i in ids]
    records = {r.entry_id: r for r in answer.records if first <= r.entry_id <= last}
    returned_last = answer.records[-1].entry_id if answer.records else first - 1
    payload = sum(len(r.payload) for r in answer.records)
    may_be_cut = (
        len(answer.records) >= span or payload + STORED_ENTRY_SIZE_MAX_BYTES > PAGE_BYTES_MAX
    )
    cut = may_be_cut and answer.last_entry_id > returned_last
    now = clock()
    events = []
    for entry_id in ids:
        record = records.get(entry_id)
        if record is not None:
            outcome, found = m.ReadOutcome.FOUND, record
        elif cut and entry_id > returned_last:
            outcome, found = m.ReadOutcome.ERROR, None
        else:
            outcome, found = m.ReadOutcome.MISSING, None
        events.append(m.EntryRead(bookie, entry_id, outcome, found, answer.instance_id, now))
    return events
