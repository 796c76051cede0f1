"""Per-bookie add batching, shared by every write handle of the gateway.

Each bookie gets one ``BookieSender``: handles enqueue records with a callback;
the sender keeps at most ``requests_in_flight_max`` add requests open to that
bookie, and each request takes everything queued meanwhile (bounded by
``batch_entries_max`` and ``batch_bytes_max``), records of many ledgers
together. Under load this turns many small adds into few large requests
(the bookie then group-commits them with one fsync); at light load a record
goes out at once. The per-record outcome is reported back to each callback,
grouped by ledger.

The queue is bounded (``queued_batches_max`` requests' worth of entries and
bytes). When it is full, the records are failed at once as UNAVAILABLE back to
their handle (on the next loop turn: the handle's runner is feeding an event
when it sends). We fail rather than make admission wait: the queue is shared by
every ledger on that bookie, and the effect that enqueues is applied
synchronously inside the handle's runner, so waiting there would stall every
ledger of the handle; a bookie that cannot drain its queue is a slow bookie,
and the handle's answer to an UNAVAILABLE bookie is the protocol's: replace it
by an ensemble change (acknowledged entries are never lost). Admission already
waits, bounded, on each handle's own in-flight limits.

``add_outcome`` is the one mapping of a bookie's answer (or error) to an add
onto ``BookieAddsDone``'s fields; the recovery's write-backs use it too.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gateway.context import BookieApi
from services.bookie_client import AddResult
from services.errors import BookieReadOnly, LedgerFenced, QuireError
from services.limits import LAC_BATCH_MAX
from services.protocol.messages import RejectReason
from services.settings import GatewaySettings
from services.wire.framing import Record

log = logging.getLogger(__name__)

# How many requests' worth of records (entries and bytes) may wait per bookie.
QUEUED_BATCHES_MAX = 8

# callback(stored_entry_ids, rejected_entry_ids, reason)
AddCallback = Callable[[tuple[int, ...], tuple[int, ...], RejectReason | None], None]
AddOutcome = tuple[tuple[int, ...], tuple[int, ...], RejectReason | None]


def reject_reason(exc: QuireError) -> RejectReason:
    """Why a bookie did not store an add request that failed with ``exc``."""
    if isinstance(exc, BookieReadOnly):
        return RejectReason.READONLY
    if isinstance(exc, LedgerFenced):
        return RejectReason.FENCED
    return RejectReason.UNAVAILABLE  # unreachable, failed, timed out: outcome unknown


def add_outcome(records: Sequence[Record], answer: AddResult | QuireError) -> AddOutcome:
    """``(stored, rejected, reason)`` of ``records`` (a part of one add request) given the
    bookie's answer: a failed request rejects them all (``reject_reason``); a per-entry
    refusal (``ledger_fenced``) rejects that entry as FENCED."""
    ids = tuple(r.entry_id for r in records)
    if isinstance(answer, QuireError):
        return (), ids, reject_reason(answer)
    refused = {(lid, eid) for lid, eid, _ in answer.rejected}
    stored = tuple(r.entry_id for r in records if (r.ledger_id, r.entry_id) not in refused)
    rejected = tuple(r.entry_id for r in records if (r.ledger_id, r.entry_id) in refused)
    return stored, rejected, (RejectReason.FENCED if rejected else None)


@dataclass(frozen=True, slots=True)
class SenderLimits:
    """The bounds of one bookie's sender (STYLE.md §5)."""

    requests_in_flight_max: int
    batch_entries_max: int
    batch_bytes_max: int
    queued_entries_max: int
    queued_bytes_max: int

    @classmethod
    def from_settings(cls, settings: GatewaySettings) -> SenderLimits:
        return cls(
            requests_in_flight_max=settings.bookie_requests_in_flight_max,
            batch_entries_max=settings.bookie_batch_entries_max,
            batch_bytes_max=settings.bookie_batch_bytes_max,
            queued_entries_max=QUEUED_BATCHES_MAX * settings.bookie_batch_entries_max,
            queued_bytes_max=QUEUED_BATCHES_MAX * settings.bookie_batch_bytes_max,
        )


@dataclass(slots=True)
class _Item:
    records: tuple[Record, ...]
    size: int
    callback: AddCallback


class BookieSender:
    def __init__(
        self, bookie_id: str, client: Callable[[], BookieApi], limits: SenderLimits
    ) -> None:
        self.bookie_id = bookie_id
        self.limits = limits
        self._client = client
        self._queue: deque[_Item] = deque()
        self._queued_entries = 0
        self._queued_bytes = 0
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, records: tuple[Record, ...], callback: AddCallback) -> None:
        size = sum(len(r.payload) for r in records)
        limits = self.limits
        full = self._queue and (
            self._queued_entries + len(records) > limits.queued_entries_max
            or self._queued_bytes + size > limits.queued_bytes_max
        )
        if full:
            log.warning(
                "add queue to bookie full",
                extra={"fields": {"bookie": self.bookie_id, "entries": self._queued_entries}},
            )
            ids = tuple(r.entry_id for r in records)
            asyncio.get_running_loop().call_soon(_call, callback, (), ids, RejectReason.UNAVAILABLE)
            return
        self._queue.append(_Item(records, size, callback))
        self._queued_entries += len(records)
        self._queued_bytes += size
        self._pump()

    @property
    def queued_entries(self) -> int:
        return self._queued_entries

    def _pump(self) -> None:
        limits = self.limits
        while self._queue and self._in_flight < limits.requests_in_flight_max:
            batch: list[_Item] = []
            entries = size = 0
            while self._queue:
                item = self._queue[0]
                full = entries + len(item.records) > limits.batch_entries_max
                if batch and (full or size + item.size > limits.batch_bytes_max):
                    break
                batch.append(self._queue.popleft())
                entries += len(item.records)
                size += item.size
            self._queued_entries -= entries
            self._queued_bytes -= size
            self._in_flight += 1
            task = asyncio.get_running_loop().create_task(self._request(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _request(self, batch: list[_Item]) -> None:
        records = [r for item in batch for r in item.records]
        answer: AddResult | QuireError
        try:
            try:
                answer = await self._client().add(records)
            except QuireError as exc:
                if reject_reason(exc) is RejectReason.UNAVAILABLE:
                    log.warning(
                        "add to bookie failed",
                        extra={"fields": {"bookie": self.bookie_id, "error": exc.code,
                                          "message": exc.message}},
                    )  # fmt: skip
                answer = exc
            for item in batch:
                _call(item.callback, *add_outcome(item.records, answer))
        finally:
            self._in_flight -= 1
            self._pump()

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _call(
    callback: AddCallback,
    stored: tuple[int, ...],
    rejected: tuple[int, ...],
    reason: RejectReason | None,
) -> None:
    try:
        callback(stored, rejected, reason)
    except Exception:  # noqa: BLE001 - one handle must not break the sender
        log.exception("add callback failed")


class LacSender:
    """Explicit LAC updates to one bookie, coalesced across ledgers.

    An idle ledger tells each bookie of its ensemble its LAC (so tailing readers
    see the last entry). With many ledgers that was one request per ledger and
    bookie; here updates queued while a request is in flight go out together in
    the next one (``POST /v1/lacs``), keeping only the highest LAC per ledger.
    At most one request is in flight per bookie, and at most
    ``lac_batch_max`` ledgers go in one. Updates are best effort: a failed one
    is dropped (the next add carries the LAC anyway)."""

    def __init__(self, bookie_id: str, client: Callable[[], BookieApi]) -> None:
        self.bookie_id = bookie_id
        self._client = client
        self._pending: dict[int, int] = {}
        self._task: asyncio.Task[None] | None = None

    def update(self, ledger_id: int, lac: int) -> None:
        if lac > self._pending.get(ledger_id, -2):
            self._pending[ledger_id] = lac
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch: dict[int, int] = {}
                for ledger_id in list(self._pending)[:LAC_BATCH_MAX]:
                    batch[ledger_id] = self._pending.pop(ledger_id)
                try:
                    await self._client().write_lacs(batch)
                except QuireError as exc:
                    log.debug("LAC update to %s failed: %s", self.bookie_id, exc.code)
        finally:
            self._task = None

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class SenderTable:
    """One ``BookieSender`` and one ``LacSender`` per bookie id, created on first use."""

    def __init__(self, client_for: Callable[[str], BookieApi], limits: SenderLimits) -> None:
        self._client_for = client_for
        self.limits = limits
        self._senders: dict[str, BookieSender] = {}
        self._lac_senders: dict[str, LacSender] = {}

    def lac(self, bookie_id: str) -> LacSender:
        sender = self._lac_senders.get(bookie_id)
        if sender is None:
            sender = LacSender(bookie_id, lambda: self._client_for(bookie_id))
            self._lac_senders[bookie_id] = sender
        return sender

    def get(self, bookie_id: str) -> BookieSender:
        sender = self._senders.get(bookie_id)
        if sender is None:
            sender = BookieSender(bookie_id, lambda: self._client_for(bookie_id), self.limits)
            self._senders[bookie_id] = sender
        return sender

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in self._senders.values()))
        await asyncio.gather(*(s.aclose() for s in self._lac_senders.values()))
