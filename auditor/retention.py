"""Retention passes: the elected auditor applies each log's retention policy
(services/protocol/retention.py decides; this module reads, writes and paces).

Why the auditor, and not each log's writer gateway: a log's data must expire whether
or not anyone writes it, and a log without a live writer has no writer gateway; the
auditor is already the one elected actor of the cluster (its election is re-read before
every write, so two auditors never remove at once), it outlives gateway restarts and
hand-overs, and its passes keep this work (ZooKeeper reads of every ledger's metadata,
the deletes) off the gateways' append path. The writer's share is only to roll at a
quarter of each limit (gateway/logs/writer.py), so the ledgers are small enough to go.

A pass walks every log, in name order:

1. Ledgers a previous pass removed from the list but did not delete (it died between
   the two, see 3.) are deleted now.
2. The log's ledgers are counted from their metadata (closed ledgers' kept in memory:
   they do not change) and exported as metrics; with a policy, ``plan`` says which go,
   the log's durable cursors read only when something is due.
3. One compare-and-set on the log's znode removes them from the list AND notes them as
   to be deleted (``retention.with_removed``); a writer's roll or a truncate meanwhile
   makes it fail, and the next pass decides again. Then the cursors that had not read
   them are told (``skipped_records`` on the cursor), the ledgers are deleted (the
   metadata, then the entries on each bookie: a bookie that is down frees them by its
   own garbage collection, bookie/collector.py), at most ``--retention-deletes-per-s``,
   and a last compare-and-set clears the note.

A pass removes at most ``RETENTION_LEDGERS_PER_LOG_PASS`` ledgers from one log; the
rest go in the next pass (every ``--retention-interval`` seconds).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from auditor.audit import NotElected
from auditor.limits import (
    RETENTION_CAS_ATTEMPTS_MAX,
    RETENTION_LEDGERS_PER_LOG_PASS,
)
from auditor.metrics import AuditorMetrics
from services.bookie_client import BookieClientPool
from services.clock import wall_ms
from services.errors import (
    CursorNotFound,
    LedgerNotFound,
    LogNotFound,
    MetadataConflict,
    QuireError,
)
from services.limits import LIST_LIMIT_MAX
from services.protocol import retention
from services.protocol.logs import LogMetadata
from services.protocol.metadata import LedgerState
from services.zk.cursor_store import CursorStore
from services.zk.ledger_store import LedgerStore, VersionedLedger
from services.zk.log_store import LogStore, VersionedLog
from services.zk.registry import BookieRegistry

log = logging.getLogger(__name__)


@dataclass
class RetentionReport:
    """What one pass did (the auditor's status shows the last one)."""

    started_at: int
    logs: int = 0
    ledgers_removed: int = 0
    bytes_removed: int = 0
    records_skipped: int = 0
    held: int = 0
    conflicts: int = 0
    duration_s: float = 0.0

    def to_api(self) -> dict[str, Any]:
        return {
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "logs": self.logs,
            "ledgers_removed": self.ledgers_removed,
            "bytes_removed": self.bytes_removed,
            "records_skipped": self.records_skipped,
            "ledgers_held_for_cursors": self.held,
            "conflicts": self.conflicts,
        }


class Retention:
    """The retention passes of the elected auditor (``run_pass``)."""

    def __init__(
        self,
        ledgers: LedgerStore,
        logs: LogStore,
        cursors: CursorStore,
        pool: BookieClientPool,
        registry: BookieRegistry,
        metrics: AuditorMetrics,
        confirm: Callable[[], Awaitable[bool]],
        deletes_per_s: float,
    ) -> None:
        self.ledgers = ledgers
        self.logs = logs
        self.cursors = cursors
        self.pool = pool
        self.registry = registry
        self.metrics = metrics
        self.confirm = confirm
        self.delete_interval_s = 1.0 / deletes_per_s if deletes_per_s > 0 else 0.0
        # Closed ledgers' usage (immutable once CLOSED), and their bookies (to delete).
        self._closed: dict[int, tuple[retention.LedgerUsage, tuple[str, ...]]] = {}
        self._exported: dict[str, set[str]] = {}  # log -> reasons with a removed series
        self._next_delete = 0.0

    async def run_pass(self) -> RetentionReport:
        """One pass over every log (``NotElected`` when the election is lost)."""
        started = time.monotonic()
        report = RetentionReport(started_at=wall_ms())
        seen: set[str] = set()
        listed: set[int] = set()
        keep_all = False  # a log was skipped: its ledgers are not in ``listed``
        after: str | None = None
        while True:
            names, after = await self.logs.list(after, LIST_LIMIT_MAX)
            for name in names:
                try:
                    ledgers = await self._log(name, report)
                except LogNotFound:
                    continue  # deleted meanwhile: its series go below
                except MetadataConflict:
                    # The log changed meanwhile (a roll): the next pass decides; its
                    # series and its closed ledgers' figures stay.
                    report.conflicts += 1
                    seen.add(name)
                    keep_all = True
                    continue
                seen.add(name)
                listed.update(ledgers)
            if after is None:
                break
        report.logs = len(seen)
        for gone in set(self._exported) - seen:
            self._forget_log(gone)
        if not keep_all:
            for ledger_id in set(self._closed) - listed:
                del self._closed[ledger_id]
        report.duration_s = time.monotonic() - started
        return report

    # ------------------------------------------------------------ one log

    async def _log(self, name: str, report: RetentionReport) -> Sequence[int]:
        current = await self.logs.get(name)
        pending = retention.deleting_of(current.log)
        if pending:
            await self._delete(pending)
            current = await self._clear(name, pending)
        self._exported.setdefault(name, set())
        spans, bookies = await self._spans(current.log.ledgers)
        self._export(name, spans)
        policy = retention.policy_of(current.log)
        now = wall_ms()
        limit = RETENTION_LEDGERS_PER_LOG_PASS
        decision = retention.plan(policy, spans, {}, now, limit)
        if decision.remove:
            # The cursors: to hold ledgers back (retain_for_cursors) and to be told.
            positions = {n: c.position for n, c in await self.cursors.get_all(name)}
            decision = retention.plan(policy, spans, positions, now, limit)
        self.metrics.retention_held.labels(name).set(len(decision.held))
        report.held += len(decision.held)
        if not decision.remove:
            return current.log.ledgers
        if not await self.confirm():
            raise NotElected
        removed_spans = [s for s in spans if s.ledger_id in set(decision.remove)]
        updated = retention.with_removed(
            current.log, decision.remove, removed_spans[-1].records - 1
        )
        stored = await self.logs.compare_and_set(updated, current.version)
        size = sum(s.bytes for s in removed_spans)
        log.info(
            "retention removed ledgers from a log",
            extra={"fields": {
                "log": name, "ledgers": list(decision.remove), "bytes": size,
                "reasons": sorted(set(decision.reasons.values())),
                "cursors_skipped": dict(decision.skipped),
            }},
        )  # fmt: skip
        for ledger_id in decision.remove:
            reason = decision.reasons[ledger_id]
            self.metrics.retention_removed.labels(name, reason).inc()
            self._exported[name].add(reason)
        self.metrics.retention_removed_bytes.labels(name).inc(size)
        report.ledgers_removed += len(decision.remove)
        report.bytes_removed += size
        for cursor, records in decision.skipped.items():
            await self._tell(name, cursor, records)
            self.metrics.retention_skipped.labels(name).inc(records)
            report.records_skipped += records
        await self._delete(decision.remove, bookies)
        await self._clear(name, decision.remove, stored)
        self._export(name, [s for s in spans if s.ledger_id not in set(decision.remove)])
        return stored.log.ledgers

    async def _spans(
        self, ledger_ids: Sequence[int]
    ) -> tuple[list[retention.LedgerUsage], dict[int, tuple[str, ...]]]:
        """Each listed ledger's usage, from its metadata (closed ones remembered), and
        the bookies of each."""
        missing = [lid for lid in ledger_ids if lid not in self._closed]
        found = await self.ledgers.get_many(missing) if missing else []
        fresh: dict[int, tuple[retention.LedgerUsage, tuple[str, ...]]] = {}
        for ledger_id, item in zip(missing, found, strict=True):
            if isinstance(item, VersionedLedger):
                fresh[ledger_id] = (_usage_of(item), item.metadata.bookies())
                if item.metadata.state is LedgerState.CLOSED:
                    self._closed[ledger_id] = fresh[ledger_id]
            else:
                # Gone or unreadable: never removed on a guess (the walk stops there).
                unknown = retention.LedgerUsage(ledger_id, False, 0, 0, 0, None)
                fresh[ledger_id] = (unknown, ())
        spans, bookies = [], {}
        for ledger_id in ledger_ids:
            usage, where = self._closed.get(ledger_id) or fresh[ledger_id]
            spans.append(usage)
            bookies[ledger_id] = where
        return spans, bookies

    def _export(self, name: str, spans: Sequence[retention.LedgerUsage]) -> None:
        total = retention.usage(spans)
        self.metrics.log_ledgers.labels(name).set(total.ledgers)
        self.metrics.log_records.labels(name).set(total.records)
        self.metrics.log_bytes.labels(name).set(total.bytes)
        if total.oldest_ms is not None:
            self.metrics.log_oldest.labels(name).set(total.oldest_ms / 1000)

    def _forget_log(self, name: str) -> None:
        for metric in self.metrics.per_log():
            try:
                metric.remove(name)
            except KeyError:
                pass
        for reason in self._exported.pop(name, set()):
            try:
                self.metrics.retention_removed.remove(name, reason)
            except KeyError:
                pass

    # ------------------------------------------------------------ writes

    async def _tell(self, name: str, cursor: str, records: int) -> None:
        """Add ``records`` to the cursor's ``skipped_records`` (compare-and-set)."""
        for _ in range(RETENTION_CAS_ATTEMPTS_MAX):
            try:
                current = await self.cursors.get(name, cursor)
                await self.cursors.compare_and_set(
                    name, cursor, current.cursor.skipped(records, wall_ms()), current.version
                )
                return
            except (CursorNotFound, LogNotFound):
                return  # deleted meanwhile: nobody to tell
            except MetadataConflict:
                continue  # an ack meanwhile: read again
        log.warning(
            "could not tell a cursor that retention removed records it had not read",
            extra={"fields": {"log": name, "cursor": cursor, "records": records}},
        )

    async def _delete(
        self, ledger_ids: Sequence[int], bookies: dict[int, tuple[str, ...]] | None = None
    ) -> None:
        """Delete ledgers no log lists, at the pace set: the metadata, then the entries
        on each bookie (best effort: a bookie that misses it collects it itself)."""
        for ledger_id in ledger_ids:
            await self._pace()
            where = (bookies or {}).get(ledger_id)
            try:
                if not where:
                    where = (await self.ledgers.get(ledger_id)).metadata.bookies()
                await self.ledgers.delete(ledger_id)
            except LedgerNotFound:
                continue
            self._closed.pop(ledger_id, None)
            await asyncio.gather(*(self._delete_on(b, ledger_id) for b in where))

    async def _delete_on(self, bookie: str, ledger_id: int) -> None:
        if bookie not in self.registry.bookies:
            return  # down: its garbage collection frees the ledger when it is back
        try:
            await self.pool.get(bookie, self.registry.address_of(bookie)).delete_ledger(ledger_id)
        except LedgerNotFound:
            pass
        except QuireError as exc:
            log.info(
                "a bookie did not delete a removed ledger now (its garbage collection will)",
                extra={"fields": {"ledger_id": ledger_id, "bookie": bookie, "error": exc.code}},
            )

    async def _pace(self) -> None:
        now = time.monotonic()
        if self._next_delete > now:
            await asyncio.sleep(self._next_delete - now)
        self._next_delete = max(now, self._next_delete) + self.delete_interval_s

    async def _clear(
        self, name: str, deleted: Sequence[int], stored: VersionedLog | None = None
    ) -> VersionedLog:
        """The log without ``deleted`` noted as to be deleted (compare-and-set, read
        again on a conflict)."""
        current = stored or await self.logs.get(name)
        for _ in range(RETENTION_CAS_ATTEMPTS_MAX):
            cleared: LogMetadata = retention.without_deleting(current.log, deleted)
            if cleared == current.log:
                return current
            try:
                return await self.logs.compare_and_set(cleared, current.version)
            except MetadataConflict:
                current = await self.logs.get(name)
        raise MetadataConflict(f"log {name} kept changing while retention cleared its deletes")


def _usage_of(item: VersionedLedger) -> retention.LedgerUsage:
    metadata = item.metadata
    if metadata.state is not LedgerState.CLOSED:
        return retention.LedgerUsage(metadata.ledger_id, False, 0, 0, metadata.created_at, None)
    last = metadata.last_entry_id if metadata.last_entry_id is not None else -1
    # Closed before ``closed_at`` existed: the znode's last change (its close, or a
    # later repair: later, so never early).
    closed_at = metadata.closed_at or item.mtime or None
    return retention.LedgerUsage(
        metadata.ledger_id, True, last + 1, metadata.length, metadata.created_at, closed_at
    )
