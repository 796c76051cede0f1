"""Per-bookie add batching, shared by every write handle of the ledger client.

Each bookie gets one ``BookieSender``: handles enqueue records with a callback;
the sender keeps at most ``requests_in_flight_max`` add requests open to that
bookie, and each request takes everything queued meanwhile (bounded by
``batch_entries_max`` and ``batch_bytes_max``), records of many ledgers
together. Under load this turns many small adds into few large requests
(the bookie then group-commits them with one fsync); at light load a record
goes out at once. The per-record outcome is reported back to each callback,
grouped by ledger, once per request: items queued with the same callback are answered
in one call (``_by_callback``).

Pipelining. The first ``requests_in_flight_eager`` (1) requests to a bookie leave as
soon as there is something to send; the others, up to ``requests_in_flight_max`` (4),
only when the queue is deep (``pipeline_entries_min`` entries or ``pipeline_bytes_min``
bytes). Every request costs the gateway and the bookie a fixed share of CPU (an HTTP
exchange, a commit), so small adds are better carried one request at a time in larger
batches, while a deep queue (a stream, JSON batches, large entries) still keeps four
requests, and so four group commits, going. One eager request beat two, and two beat
four, in the bookies' CPU and in adds/s (benchmarks/README.md, "Measured choices").

The queue is bounded (``QUEUED_BATCHES_MAX`` requests' worth of entries and
bytes), and the bound is kept where a client can be made to wait: at admission.
A handle admits an add only when every bookie of its ensemble has room for it
(``has_room``; services/ledger_client/runners/write.py ``_admits``), and an add that must wait
is woken when requests leave that bookie's queue (``when_room``); past
``admission_wait_ms`` it fails as unavailable (503, retry later), and a stream
waiting there stops reading once its credits are spent (gateway/streams/session.py).
``send`` itself refuses nothing: the effect that enqueues is applied synchronously
inside the handle's runner, and a record it sends was admitted already (or is re-sent
after an ensemble change, which only moves records the handle holds, bounded by its own
limits). A full queue is a busy bookie, never a failed one: failing its records
as UNAVAILABLE made every handle replace it by an ensemble change, and with no
spare bookie close its ledger; 256 streams with 256 records in flight each did
that to all three bookies of a cluster at once (issue 35, item 11).

Every add request has its own time-out (shorter than the bookie client's general
one): a bookie that hangs (SIGSTOP, a stuck disk) fails its adds as UNAVAILABLE within
one and a half of it and the handles replace it like a dead one, while a bookie that
is alive but busy (it answers other requests, or ``GET /health`` when asked) is waited
for (services/bookie_client/channel.py). It is ``add_timeout_ms`` plus
``ADD_TIMEOUT_PER_MIB_MS`` for each MiB of payload in flight to that bookie when the
request leaves (its own included): a bookie group-commits what it was sent, so a
request waits behind the bytes sent before it: a flat time-out fired on healthy bookies
under large entries (benchmarks/README.md, "Measured choices"), while a hung bookie with
small requests is still found within about ``add_timeout_ms``.

``answer_for`` is the one mapping of a bookie's answer (or error) to an add, per
record, onto ``BookieAddsDone``'s fields (``add_outcome`` is its summary, used by
the recovery's write-backs). A bookie answers each record of a request on its
own (issue 7 item 8), and each refusal maps to its own reason:

- ``ledger_fenced`` -> FENCED: a recovery started; the handle fails every add.
- ``invalid_argument`` -> CORRUPT: the record's digest did not verify at the
  bookie, so it was damaged between the gateway and the bookie's check. The
  handle treats that bookie as failed *for that ledger only* and replaces it by
  an ensemble change (which re-sends the pending entries to the new bookie). We
  do not re-send to the same bookie: TCP's checksum already let the damage
  through, which points at faulty hardware on that path (a NIC, memory), not a
  one-off; the protocol's answer to a bookie that cannot store an entry is to
  replace it, through the path every other bookie failure takes, with no new
  retry state or timer. Other ledgers in the same request are not affected.
- ``entry_exists`` -> ENTRY_EXISTS: the bookie stores other bytes for that
  entry (the handle re-sends the very record it sealed first, so this is not
  its own retry). Never counted as stored; the bookie is failed for that ledger
  (ensemble change), and the refusal is logged.
- an unknown code -> UNAVAILABLE.

Only the records (and so the ledgers) refused are affected: the others of the
same cross-ledger request are reported stored as usual.

Every answer names the bookie instance that gave it (``BookieAddResult.instance_id``, the
instance header), and ``answer_for`` passes it on: each handle compares it with the
instance its own fragment recorded for that bookie, and a bookie reformatted since is a
failed bookie for that handle's adds (services/protocol/writer.py, "Replaced
instance"). The comparison is per ledger, so it lives in the handle, not here.

Requests leave at once from ``_pump`` (``BookieClient.start_add``: a callback-driven
channel, no task per request) and their answers come back in the same loop turn.

Request ids (services/request_ids.py): each queued item remembers the id of its client
request; an add request to a bookie carries its first item's id, and its answer reaches
the handles with that id set. One that carries several ids logs them at debug level.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from services.bookie_client import BookieAddResult
from services.errors import (
    BookieReadOnly,
    EntryExists,
    InvalidArgument,
    LedgerFenced,
    QuireError,
)
from services.ledger_client.context import BookieApi
from services.ledger_client.lac_sender import LacSender
from services.ledger_client.limits import (
    ADD_TIMEOUT_PER_MIB_MS,
    LOGGED_REFUSALS_MAX,
    LOGGED_REQUEST_IDS_MAX,
    QUEUED_BATCHES_MAX,
)
from services.ledger_client.settings import LedgerClientSettings
from services.protocol.messages import BookieAddsDone, RejectReason
from services.request_ids import REQUEST_ID
from services.wire.framing import FramedRecord

log = logging.getLogger(__name__)

MIB = 1024 * 1024

# A bookie's per-record refusal code -> the reason the handle acts on.
CODE_REASONS: dict[str, RejectReason] = {
    LedgerFenced.code: RejectReason.FENCED,
    InvalidArgument.code: RejectReason.CORRUPT,
    EntryExists.code: RejectReason.ENTRY_EXISTS,
}


@dataclass(frozen=True, slots=True)
class AddAnswer:
    """What became of one handle's records (a part of one add request): ``stored`` are
    durable on the bookie; ``rejected`` were not stored, each for its ``reasons`` entry;
    ``instance_id`` is the instance of the bookie that answered (None: it did not say),
    which the handle compares with the one its fragment recorded."""

    stored: tuple[int, ...] = ()
    rejected: tuple[int, ...] = ()
    reasons: tuple[RejectReason, ...] = ()
    instance_id: str | None = None

    @property
    def reason(self) -> RejectReason | None:
        """The summary: FENCED if any record was refused as fenced (the handle then
        fails everything), else the first refusal's reason; None if all were stored."""
        if not self.rejected:
            return None
        if RejectReason.FENCED in self.reasons:
            return RejectReason.FENCED
        return self.reasons[0]

    def event(self, bookie: str) -> BookieAddsDone:
        return BookieAddsDone(
            bookie, self.stored, self.rejected, self.reason, self.reasons, self.instance_id
        )


AddCallback = Callable[[AddAnswer], None]
AddOutcome = tuple[tuple[int, ...], tuple[int, ...], RejectReason | None]


def reject_reason(exc: QuireError) -> RejectReason:
    """Why a bookie did not store an add request that failed with ``exc``."""
    if isinstance(exc, BookieReadOnly):
        return RejectReason.READONLY
    if isinstance(exc, LedgerFenced):
        return RejectReason.FENCED
    return RejectReason.UNAVAILABLE  # unreachable, failed, timed out: outcome unknown


def answer_for(records: Sequence[FramedRecord], answer: BookieAddResult | QuireError) -> AddAnswer:
    """What the bookie's ``answer`` (to a request holding ``records``, and maybe others)
    means for ``records``: a failed request rejects them all (``reject_reason``); a
    per-record refusal rejects that record for the reason of its code (``CODE_REASONS``,
    UNAVAILABLE for a code we do not know)."""
    ids = tuple(r.entry_id for r in records)
    if isinstance(answer, QuireError):
        return AddAnswer((), ids, (reject_reason(answer),) * len(ids))
    if not answer.rejected:
        return AddAnswer(ids, instance_id=answer.instance_id)
    refused = {(lid, eid): code for lid, eid, code in answer.rejected}
    stored: list[int] = []
    rejected: list[int] = []
    reasons: list[RejectReason] = []
    for r in records:
        code = refused.get((r.ledger_id, r.entry_id))
        if code is None:
            stored.append(r.entry_id)
        else:
            rejected.append(r.entry_id)
            reasons.append(CODE_REASONS.get(code, RejectReason.UNAVAILABLE))
    return AddAnswer(tuple(stored), tuple(rejected), tuple(reasons), answer.instance_id)


def add_outcome(
    records: Sequence[FramedRecord], answer: BookieAddResult | QuireError
) -> AddOutcome:
    """``(stored, rejected, reason)`` of ``records``: ``answer_for`` summed up (the
    reason is FENCED if any record was refused as fenced)."""
    result = answer_for(records, answer)
    return result.stored, result.rejected, result.reason


@dataclass(frozen=True, slots=True)
class SenderLimits:
    """The bounds of one bookie's sender (docs/style.md §5)."""

    requests_in_flight_max: int
    batch_entries_max: int
    batch_bytes_max: int
    queued_entries_max: int
    queued_bytes_max: int
    add_timeout_ms: int  # one add request, from the wait for a connection to the answer
    add_timeout_per_mib_ms: int = ADD_TIMEOUT_PER_MIB_MS  # and per MiB in flight
    # Requests beyond the first ``requests_in_flight_eager`` leave only when the queue is
    # deep (module docstring, "Pipelining").
    requests_in_flight_eager: int = 1
    pipeline_entries_min: int = 64
    pipeline_bytes_min: int = 512 * 1024

    def add_timeout_s(self, bytes_in_flight: int) -> float:
        """The time-out of an add request that leaves with ``bytes_in_flight`` payload
        bytes in flight to its bookie (its own included)."""
        return (self.add_timeout_ms + self.add_timeout_per_mib_ms * bytes_in_flight / MIB) / 1000

    @classmethod
    def from_settings(cls, settings: LedgerClientSettings) -> SenderLimits:
        return cls(
            requests_in_flight_max=settings.bookie_requests_in_flight_max,
            batch_entries_max=settings.bookie_batch_entries_max,
            batch_bytes_max=settings.bookie_batch_bytes_max,
            queued_entries_max=QUEUED_BATCHES_MAX * settings.bookie_batch_entries_max,
            queued_bytes_max=QUEUED_BATCHES_MAX * settings.bookie_batch_bytes_max,
            add_timeout_ms=settings.bookie_add_timeout_ms,
            requests_in_flight_eager=settings.bookie_requests_in_flight_eager,
            pipeline_entries_min=settings.bookie_pipeline_entries_min,
            pipeline_bytes_min=settings.bookie_pipeline_bytes_min,
        )


@dataclass(slots=True)
class _Item:
    records: tuple[FramedRecord, ...]
    size: int
    callback: AddCallback
    request_id: str | None = None


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
        self._bytes_in_flight = 0
        # Adds waiting for room in the queue (``when_room``), an ordered set.
        self._room_listeners: dict[Callable[[], None], None] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def send(self, records: tuple[FramedRecord, ...], callback: AddCallback) -> None:
        """Queue ``records`` (admitted already: the queue's bound is kept at admission,
        module docstring) and send what may leave now."""
        size = sum(len(r.payload) for r in records)
        self._queue.append(_Item(records, size, callback, REQUEST_ID.get()))
        self._queued_entries += len(records)
        self._queued_bytes += size
        self._pump()

    @property
    def queued_entries(self) -> int:
        return self._queued_entries

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes

    def has_room(self, entries: int, size: int) -> bool:
        """Whether ``entries`` more records of ``size`` payload bytes fit in the queue
        now. An empty queue takes any add (one larger than the bound still goes)."""
        limits = self.limits
        return not self._queue or (
            self._queued_entries + entries <= limits.queued_entries_max
            and self._queued_bytes + size <= limits.queued_bytes_max
        )

    def when_room(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` once, the next time requests leave the queue (room may have
        been made); registering it again before then changes nothing."""
        self._room_listeners[listener] = None

    def _may_send(self) -> bool:
        """Whether another request may leave now (module docstring, "Pipelining")."""
        limits = self.limits
        if self._in_flight >= limits.requests_in_flight_max:
            return False
        if self._in_flight < limits.requests_in_flight_eager:
            return True
        return (
            self._queued_entries >= limits.pipeline_entries_min
            or self._queued_bytes >= limits.pipeline_bytes_min
        )

    def _pump(self) -> None:
        limits = self.limits
        left = False
        while self._queue and self._may_send():
            left = True
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
            self._bytes_in_flight += size
            timeout_s = limits.add_timeout_s(self._bytes_in_flight)
            self._start(batch, size, timeout_s)
        if left and self._room_listeners:
            listeners, self._room_listeners = self._room_listeners, {}
            for listener in listeners:
                listener()

    def _start(self, batch: list[_Item], size: int, timeout_s: float) -> None:
        """Send one add request now (``start_add``), or in a task for a client without it."""
        records = [r for item in batch for r in item.records]
        request_id = next((i.request_id for i in batch if i.request_id is not None), None)
        _log_carried(batch, self.bookie_id)
        done = partial(self._answered, batch, size, request_id)
        client = self._client()
        start_add = getattr(client, "start_add", None)
        if start_add is not None:
            start_add(records, timeout_s, done, request_id)
            return
        task = asyncio.get_running_loop().create_task(
            _add_in_task(client, records, timeout_s, done, request_id)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _answered(
        self,
        batch: list[_Item],
        size: int,
        request_id: str | None,
        answer: BookieAddResult | QuireError,
    ) -> None:
        """A request's answer reaches its callbacks (with its id set); the next may leave."""
        if self._closed:
            return
        token = REQUEST_ID.set(request_id)
        try:
            if isinstance(answer, QuireError):
                if reject_reason(answer) is RejectReason.UNAVAILABLE:
                    log.warning(
                        "add to bookie failed",
                        extra={"fields": {"bookie": self.bookie_id, "error": answer.code,
                                          "message": answer.message}},
                    )  # fmt: skip
            elif answer.rejected:
                _log_refusals(self.bookie_id, answer.rejected)
            for callback, answered in _by_callback(batch):
                _call(callback, answer_for(answered, answer))
        finally:
            self._in_flight -= 1
            self._bytes_in_flight -= size
            REQUEST_ID.reset(token)
            self._pump()

    async def aclose(self) -> None:
        self._closed = True  # answers still in flight reach no handle (they are closed)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def _add_in_task(
    client: BookieApi,
    records: list[FramedRecord],
    timeout_s: float,
    done: Callable[[BookieAddResult | QuireError], None],
    request_id: str | None,
) -> None:
    """``start_add`` for a client that only has the coroutine ``add`` (the tests' fakes):
    the add in a task of its own, with the request's id set in that task's context."""
    REQUEST_ID.set(request_id)
    try:
        answer: BookieAddResult | QuireError = await client.add(records, timeout_s=timeout_s)
    except QuireError as exc:
        answer = exc
    done(answer)


def _log_carried(batch: Sequence[_Item], bookie_id: str) -> None:
    """With debug logging, a request that carries items of several requests names them
    all (bounded)."""
    if len(batch) > 1 and log.isEnabledFor(logging.DEBUG):
        distinct = list(dict.fromkeys(i.request_id for i in batch if i.request_id is not None))
        if len(distinct) > 1:
            log.debug(
                "add request to bookie carries several requests",
                extra={"fields": {"bookie": bookie_id, "count": len(distinct),
                                  "request_ids": distinct[:LOGGED_REQUEST_IDS_MAX]}},
            )  # fmt: skip


def _by_callback(batch: Sequence[_Item]) -> list[tuple[AddCallback, Sequence[FramedRecord]]]:
    """The batch's records by callback, in order of first appearance: a handle that
    passes one callback per bookie (services/ledger_client/runners/write.py) hears about all its
    records of one request in one call, so it is fed one event instead of one per add
    (the many single-record adds of REST clients and streams)."""
    if len(batch) == 1:
        return [(batch[0].callback, batch[0].records)]
    grouped: dict[AddCallback, list[FramedRecord]] = {}
    for item in batch:
        records = grouped.get(item.callback)
        if records is None:
            grouped[item.callback] = list(item.records)
        else:
            records.extend(item.records)
    return list(grouped.items())


def _call(callback: AddCallback, answer: AddAnswer) -> None:
    try:
        callback(answer)
    except Exception:  # noqa: BLE001 - one handle must not break the sender
        log.exception("add callback failed")


def _log_refusals(bookie_id: str, rejected: Sequence[tuple[int, int, str]]) -> None:
    """One line per refusal code other than ``ledger_fenced`` (a fence is the protocol
    at work): a corrupt record or an entry stored with other bytes is worth a look."""
    by_code: dict[str, list[tuple[int, int]]] = {}
    for lid, eid, code in rejected:
        if code != LedgerFenced.code:
            by_code.setdefault(code, []).append((lid, eid))
    for code, entries in by_code.items():
        log.warning(
            "bookie refused records of an add; their ledgers replace it",
            extra={"fields": {"bookie": bookie_id, "error": code, "count": len(entries),
                              "entries": entries[:LOGGED_REFUSALS_MAX]}},
        )  # fmt: skip


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
