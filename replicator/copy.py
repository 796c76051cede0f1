"""Copying one fragment's share of a missing bookie to its replacement.

The entries the missing bookie had to hold (``replication.entries_on``) are read
from the surviving replicas of the fragment, every record digest-checked, and
written to the target with the recovery flag (a fenced or closed ledger accepts
them), one add request per batch: at most ``copy_batch_entries_max`` entries and
``copy_batch_bytes_max`` payload bytes (the first record of a batch always goes).

Reads are range reads over the batch's window from one source at a time: the first
entry the batch still lacks is asked of a replica that holds it, and every wanted
entry of the answer is kept, so a fully replicated fragment costs one read per
batch. Bookies in ``last_resort`` (a live bookie being decommissioned: its share is
being replaced, yet until that is done it may hold the only copy, as with Qw=1) are
asked only when no other replica of the entry is left to ask. A source that fails or
times out (``--bookie-request-timeout-ms``, the client's bound) is not asked again
during this copy; a source that answers without an entry, or with a record whose
digest or checksum does not verify, is not asked for that entry again. An entry no
surviving replica yields fails the copy (``BookieUnavailable``): nothing is swapped,
the lock is released and the ledger retried later. A target that fails or refuses a
record ends this copy with ``target_failed`` set: the caller picks another target
and starts over (the entries already sent to the failed one are harmless: no
fragment names it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from services.bookie_client import BookieAddResult, RangeResult
from services.errors import BookieUnavailable, EntryNotFound, LedgerNotFound, QuireError
from services.limits import PAGE_ENTRIES_MAX
from services.protocol.quorum import write_set
from services.wire.digest import record_ok
from services.wire.framing import FramedRecord

log = logging.getLogger(__name__)


class CopyBookie(Protocol):
    """What a copy asks of a bookie (``services.bookie_client.BookieClient``)."""

    async def read_range(
        self, ledger_id: int, first: int, last: int, max_entries: int = ..., max_bytes: int = ...
    ) -> RangeResult: ...

    async def add(
        self, records: list[FramedRecord], timeout_s: float | None = None
    ) -> BookieAddResult: ...


@dataclass(frozen=True, slots=True)
class CopyLimits:
    batch_entries_max: int
    batch_bytes_max: int
    request_timeout_s: float


@dataclass(frozen=True, slots=True)
class CopyJob:
    """Copy ``wanted`` (ascending) of fragment ``bookies`` of ledger ``ledger_id``.

    ``key`` verifies the digests (b"" for crc32c and none); None for an hmac ledger
    whose metadata has no sealed MAC key (written before keys were sealed): then only
    the framing's record checksum is checked."""

    ledger_id: int
    bookies: tuple[str, ...]
    ensemble_size: int
    write_quorum: int
    digest_type: str
    key: bytes | None
    wanted: Sequence[int]
    unusable: frozenset[str]  # bookies never read from (missing ones)
    last_resort: frozenset[str] = frozenset()  # read from only when no other replica is left


@dataclass(slots=True)
class CopyOutcome:
    entries: int = 0
    bytes: int = 0
    target_failed: str | None = None  # why the target failed (another one is chosen)
    aborted: bool = False  # ``keep_going`` said stop (replication disabled, shutdown)


@dataclass(slots=True)
class _Sources:
    failed: set[str] = field(default_factory=set)
    lacking: dict[int, set[str]] = field(default_factory=dict)


def record_verifies(record: FramedRecord, job: CopyJob) -> bool:
    """The record is the wanted ledger's, of its digest type, and intact."""
    if record.ledger_id != job.ledger_id or record.digest_type != job.digest_type:
        return False
    if job.key is None:
        return record.transit_ok
    return record_ok(record, job.key)


class FragmentCopier:
    def __init__(
        self,
        bookie: Callable[[str], CopyBookie],
        limits: CopyLimits,
        acquire: Callable[[int], Awaitable[None]],
        keep_going: Callable[[], bool],
    ) -> None:
        self.bookie = bookie
        self.limits = limits
        self.acquire = acquire  # the throttle
        self.keep_going = keep_going

    async def copy(
        self,
        job: CopyJob,
        target: str,
        on_batch: Callable[[int, int], Awaitable[None]],
    ) -> CopyOutcome:
        """Copy every wanted entry to ``target``; ``on_batch(entries, bytes)`` after each
        batch is stored there."""
        out = CopyOutcome()
        sources = _Sources()
        got: dict[int, FramedRecord] = {}
        wanted, pos = job.wanted, 0
        while pos < len(wanted):
            if not self.keep_going():
                out.aborted = True
                return out
            window = wanted[pos : pos + self.limits.batch_entries_max]
            in_window = set(window)
            while True:
                batch, size, full = self._prefix(window, got)
                if full:
                    break
                need = window[len(batch)]
                budget = max(1, self.limits.batch_bytes_max - size)
                await self._fetch(job, need, window[-1], budget, in_window, got, sources)
            await self.acquire(size)
            failure = await self._write(target, batch)
            if failure is not None:
                out.target_failed = failure
                return out
            for record in batch:
                got.pop(record.entry_id, None)
            pos += len(batch)
            out.entries += len(batch)
            out.bytes += size
            await on_batch(len(batch), size)
        return out

    def _prefix(
        self, window: Sequence[int], got: dict[int, FramedRecord]
    ) -> tuple[list[FramedRecord], int, bool]:
        """The batch: the longest run of ``window`` already read, within the byte bound.
        ``full`` when it ends at the window's end or at the byte bound (not at a gap)."""
        batch: list[FramedRecord] = []
        size = 0
        for entry_id in window:
            record = got.get(entry_id)
            if record is None:
                return batch, size, False
            if batch and size + len(record.payload) > self.limits.batch_bytes_max:
                return batch, size, True
            batch.append(record)
            size += len(record.payload)
        return batch, size, True

    def _holders(self, job: CopyJob, entry_id: int, sources: _Sources) -> list[str]:
        """The replicas of ``entry_id`` still worth asking, ``last_resort`` ones last."""
        lacking = sources.lacking.get(entry_id, set())
        out = []
        for index in write_set(entry_id, job.ensemble_size, job.write_quorum):
            bookie = job.bookies[index]
            if bookie in job.unusable or bookie in sources.failed or bookie in lacking:
                continue
            out.append(bookie)
        return sorted(out, key=lambda b: b in job.last_resort)

    async def _fetch(
        self,
        job: CopyJob,
        need: int,
        last: int,
        budget: int,
        in_window: set[int],
        got: dict[int, FramedRecord],
        sources: _Sources,
    ) -> None:
        """One range read from a replica of ``need``: every wanted, verified entry of the
        answer goes into ``got``; the source is marked failed or lacking ``need``."""
        holders = self._holders(job, need, sources)
        if not holders:
            raise BookieUnavailable(
                f"ledger {job.ledger_id}: no surviving replica yields entry {need} "
                f"(failed: {sorted(sources.failed)}, lacking or corrupt: "
                f"{sorted(sources.lacking.get(need, set()))})"
            )
        source = holders[0]
        try:
            answer = await self.bookie(source).read_range(
                job.ledger_id,
                need,
                last,
                max_entries=min(PAGE_ENTRIES_MAX, last - need + 1),
                max_bytes=budget,
            )
        except (LedgerNotFound, EntryNotFound):
            sources.lacking.setdefault(need, set()).add(source)
            return
        except QuireError as exc:
            log.warning("copy of ledger %d: source %s failed: %s", job.ledger_id, source, exc)
            sources.failed.add(source)
            return
        for record in answer.records:
            entry_id = record.entry_id
            if entry_id not in in_window or entry_id in got:
                continue
            if record_verifies(record, job):
                got[entry_id] = record
            else:
                log.warning(
                    "copy of ledger %d: entry %d on %s does not verify; another replica is used",
                    job.ledger_id,
                    entry_id,
                    source,
                )
                sources.lacking.setdefault(entry_id, set()).add(source)
        if need not in got:
            sources.lacking.setdefault(need, set()).add(source)

    async def _write(self, target: str, batch: list[FramedRecord]) -> str | None:
        """Store ``batch`` on ``target`` with the recovery flag; why it failed, or None."""
        records = [r._replace(recovery=True) for r in batch]
        try:
            result = await self.bookie(target).add(records, timeout_s=self.limits.request_timeout_s)
        except QuireError as exc:
            log.warning("copy to %s failed: %s", target, exc)
            return exc.code
        if result.rejected:
            ledger_id, entry_id, code = result.rejected[0]
            log.warning(
                "copy to %s: entry %d of ledger %d refused (%s)", target, entry_id, ledger_id, code
            )
            return code
        if result.stored != len(records):
            return "short_add"
        return None
