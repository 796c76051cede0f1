"""Per-bookie add batching, shared by every write handle of the gateway.

Each bookie gets one ``BookieSender``: handles enqueue records with a callback;
the sender keeps at most ``requests_in_flight_max`` add requests open to that
bookie, and each request takes everything queued meanwhile (bounded by
``batch_entries_max`` and ``batch_bytes_max``), records of many ledgers
together. Under load this turns many small adds into few large requests
(the bookie then group-commits them with one fsync); at light load a record
goes out at once. The per-record outcome is reported back to each callback,
grouped by ledger.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from services.bookie_client import BookieClient
from services.errors import BookieReadOnly, LedgerFenced, QuireError
from services.limits import LAC_BATCH_MAX
from services.protocol.messages import RejectReason
from services.wire.framing import Record

log = logging.getLogger(__name__)

REQUESTS_IN_FLIGHT_MAX = 4
BATCH_ENTRIES_MAX = 2_000
BATCH_BYTES_MAX = 16 * 1024 * 1024

# callback(stored_entry_ids, rejected_entry_ids, reason)
AddCallback = Callable[[tuple[int, ...], tuple[int, ...], RejectReason | None], None]


@dataclass(slots=True)
class _Item:
    records: tuple[Record, ...]
    size: int
    callback: AddCallback


class BookieSender:
    def __init__(
        self,
        bookie_id: str,
        client: Callable[[], BookieClient],
        requests_in_flight_max: int = REQUESTS_IN_FLIGHT_MAX,
        batch_entries_max: int = BATCH_ENTRIES_MAX,
        batch_bytes_max: int = BATCH_BYTES_MAX,
    ) -> None:
        self.bookie_id = bookie_id
        self._client = client
        self._queue: deque[_Item] = deque()
        self._in_flight = 0
        self._max = requests_in_flight_max
        self._entries_max = batch_entries_max
        self._bytes_max = batch_bytes_max
        self._tasks: set[asyncio.Task] = set()

    def send(self, records: tuple[Record, ...], callback: AddCallback) -> None:
        self._queue.append(_Item(records, sum(len(r.payload) for r in records), callback))
        self._pump()

    def _pump(self) -> None:
        while self._queue and self._in_flight < self._max:
            batch: list[_Item] = []
            entries = size = 0
            while self._queue:
                item = self._queue[0]
                full = entries + len(item.records) > self._entries_max
                if batch and (full or size + item.size > self._bytes_max):
                    break
                batch.append(self._queue.popleft())
                entries += len(item.records)
                size += item.size
            self._in_flight += 1
            task = asyncio.get_running_loop().create_task(self._request(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _request(self, batch: list[_Item]) -> None:
        records = [r for item in batch for r in item.records]
        try:
            try:
                result = await self._client().add(records)
            except BookieReadOnly:
                self._fail(batch, RejectReason.READONLY)
                return
            except LedgerFenced:
                self._fail(batch, RejectReason.FENCED)
                return
            except QuireError as exc:
                log.warning(
                    "add to bookie failed",
                    extra={"fields": {"bookie": self.bookie_id, "error": exc.code,
                                      "message": exc.message}},
                )  # fmt: skip
                self._fail(batch, RejectReason.UNAVAILABLE)
                return
            rejected = {(lid, eid) for lid, eid, _ in result.rejected}
            for item in batch:
                stored, refused = [], []
                for r in item.records:
                    (refused if (r.ledger_id, r.entry_id) in rejected else stored).append(
                        r.entry_id
                    )
                _call(
                    item.callback,
                    tuple(stored),
                    tuple(refused),
                    RejectReason.FENCED if refused else None,
                )
        finally:
            self._in_flight -= 1
            self._pump()

    def _fail(self, batch: list[_Item], reason: RejectReason) -> None:
        for item in batch:
            _call(item.callback, (), tuple(r.entry_id for r in item.records), reason)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _call(callback: AddCallback, stored, rejected, reason) -> None:  # type: ignore[no-untyped-def]
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

    def __init__(self, bookie_id: str, client: Callable[[], BookieClient]) -> None:
        self.bookie_id = bookie_id
        self._client = client
        self._pending: dict[int, int] = {}
        self._task: asyncio.Task | None = None

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

    def __init__(self, client_for: Callable[[str], BookieClient]) -> None:
        self._client_for = client_for
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
            sender = BookieSender(bookie_id, lambda: self._client_for(bookie_id))
            self._senders[bookie_id] = sender
        return sender

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in self._senders.values()))
        await asyncio.gather(*(s.aclose() for s in self._lac_senders.values()))
