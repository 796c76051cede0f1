"""Repairing one locked ledger: plan from the mark and fresh metadata, copy, swap, clear.

The worker holds the ledger's lock while this runs. Each round re-reads the mark and
the metadata and plans again (``replication.repairs``): the missing bookies are the
mark's plus every fragment bookie that is not registered or is being decommissioned.
Every repair of a CLOSED ledger, and of a fragment of an OPEN ledger that is not its
last, is done at once, in fragment order: choose a target (writable, registered, not
decommissioning, not missing, not in the fragment), copy the missing bookie's share
to it (``replicator.copy``, from the fragment's other bookies and, last, from a live
bookie being decommissioned, which may hold the only copy; a failed target is
replaced by another, up to ``TARGETS_TRIED_MAX``), then swap the bookie in that
fragment by compare-and-set on freshly read metadata, only while the repair still
applies (same fragment, same span, same bookie): a concurrent ensemble change or
close is never overwritten; when the span changed the round ends and the next one
re-plans. A repair of the open-ended last fragment waits for the grace period,
counted from when its bookie was first seen missing, and then recovers the ledger
(``replicator.openledger``).

A bookie the mark names that is registered again (back after the lost-bookie delay,
or alive and found lacking entries by the auditor's replica check), not being
decommissioned and still the instance the fragment recorded, is FILLED IN PLACE:
the entries of its share it lacks (``stored``) are copied to it and the metadata
stays as it is. That is the only repair possible when every bookie of the cluster is
in the fragment, and it costs nothing when the bookie came back whole. A bookie that
refuses the copy (an entry stored with other bytes: corrupt) is replaced as above.
In an OPEN ledger's last fragment such a bookie is left to the writer: fencing a
healthy ledger would gain nothing. Later rounds skip a bookie filled in place only while
it is registered as the instance filled: one that left meanwhile is replaced (the
auditor's mark already names it, so its marking changes nothing).

When a round finds nothing to repair the mark is deleted at the version read at the
round's start; if the mark changed meanwhile (the auditor added a bookie), the next round re-plans.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from replicator.copy import CopyJob, FragmentCopier
from replicator.metrics import ReplicatorMetrics
from replicator.openledger import (
    MissingSince,
    OpenLedgers,
    digest_key,
    grace_due_ms,
    last_fragment_affected,
)
from services.bookie_client import BookieClient, BookieClientPool
from services.errors import LedgerNotFound, MetadataConflict, NotEnoughBookies, QuireError
from services.protocol.metadata import LedgerMetadata
from services.protocol.replication import (
    Repair,
    choose_target,
    entries_on,
    repairs,
    replace_bookie,
    spans,
    still_applies,
)
from services.settings import ReplicatorSettings
from services.zk.ledger_store import LedgerStore
from services.zk.registry import BookieRegistry
from services.zk.underreplication import Mark, UnderReplicationStore

log = logging.getLogger(__name__)

# Bounds (docs/style.md §5).
ROUNDS_MAX = 20  # plans of one ledger under one lock before giving up (retried later)
TARGETS_TRIED_MAX = 4  # targets tried for one fragment before giving up
SWAP_ATTEMPTS_MAX = 20  # compare-and-set attempts of one swap
PROGRESS_INTERVAL_S = 0.5  # the lock's progress is written at most this often


class Outcome(StrEnum):
    DONE = "done"  # the mark was cleared: the ledger is whole
    GONE = "gone"  # no mark (or no ledger) any more
    POSTPONED = "postponed"  # an open ledger's last fragment waits for the grace period
    STOPPED = "stopped"  # replication was disabled (or the worker stops): nothing finished


class _Step(StrEnum):
    SWAPPED = "swapped"
    REPLAN = "replan"
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class RepairResult:
    outcome: Outcome
    due_ms: int | None = None  # POSTPONED: when to come back (wall-clock ms)


@dataclass(slots=True)
class Progress:
    fragments_done: int = 0
    fragments_total: int = 0
    entries_copied: int = 0
    bytes_copied: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "fragments_done": self.fragments_done,
            "fragments_total": self.fragments_total,
            "entries_copied": self.entries_copied,
            "bytes_copied": self.bytes_copied,
        }


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class RepairContext:
    """What every ledger repair of a worker shares, built once."""

    settings: ReplicatorSettings
    marks: UnderReplicationStore
    ledgers: LedgerStore
    registry: BookieRegistry
    bookies: BookieClientPool
    copier: FragmentCopier
    open_ledgers: OpenLedgers
    metrics: ReplicatorMetrics
    enabled: Callable[[], bool]
    rng: random.Random = field(default_factory=random.Random)
    now_ms: Callable[[], int] = wall_ms
    missing_since: MissingSince = field(init=False)

    def __post_init__(self) -> None:
        """Follow the registry from now on: the open-ledger grace runs from a bookie's
        first absence (``replicator.openledger.MissingSince``)."""
        self.missing_since = MissingSince(self.now_ms)
        self.registry.add_listener(self._observe_registry)

    def _observe_registry(self) -> None:
        registry = self.registry
        self.missing_since.observe(
            [b for b in registry.bookies if b not in registry.decommissioned]
        )


class LedgerRepair:
    def __init__(
        self,
        ctx: RepairContext,
        ledger_id: int,
        report: Callable[[Progress], Awaitable[None]],
    ) -> None:
        self.ctx = ctx
        self.ledger_id = ledger_id
        self.progress = Progress()
        self._report = report
        self._reported_at = 0.0
        # (fragment first id, bookie) filled in place -> the instance it was filled as
        self._filled: dict[tuple[int, str], str | None] = {}

    async def run(self) -> RepairResult:
        ctx, ledger_id = self.ctx, self.ledger_id
        for _ in range(ROUNDS_MAX):
            if not ctx.enabled():
                return RepairResult(Outcome.STOPPED)
            mark = await ctx.marks.get_mark(ledger_id)
            if mark is None:
                return RepairResult(Outcome.GONE)
            try:
                current = await ctx.ledgers.get(ledger_id)
            except LedgerNotFound:
                if await ctx.marks.clear_mark(ledger_id, mark.version):
                    return RepairResult(Outcome.GONE)
                continue
            metadata = current.metadata
            missing = self._missing(mark, metadata)
            planned = [r for r in repairs(metadata, missing) if not self._still_filled(r)]
            back = await self._back({r.bookie for r in planned if r.is_open_last})
            plan = [r for r in planned if not (r.is_open_last and r.bookie in back)]
            for bookie in back:
                ctx.missing_since.back(bookie)
            # The grace runs from the first absence of the last fragment's missing
            # bookie, never from the mark's time: an old mark (another fragment's
            # bookie) must not let a bookie that is restarting now fence its writer.
            open_missing_since = min(
                (ctx.missing_since.missing(r.bookie) for r in plan if r.is_open_last),
                default=None,
            )
            if not plan:
                if await ctx.marks.clear_mark(ledger_id, mark.version):
                    return RepairResult(Outcome.DONE)
                continue
            self.progress.fragments_total = self.progress.fragments_done + len(plan)
            await self._publish(force=True)
            step = _Step.SWAPPED
            for repair in (r for r in plan if not r.is_open_last):
                step = await self._repair(metadata, repair, missing)
                if step is not _Step.SWAPPED:
                    break
            if step is _Step.STOP:
                return RepairResult(Outcome.STOPPED)
            if step is _Step.REPLAN:
                continue
            if open_missing_since is not None:
                due = grace_due_ms(open_missing_since, ctx.settings.open_ledger_grace)
                if ctx.now_ms() < due:
                    return RepairResult(Outcome.POSTPONED, due)
                await self._recover(missing)
        raise MetadataConflict(f"ledger {ledger_id}: still changing after {ROUNDS_MAX} plans")

    def _usable(self, bookie: str) -> bool:
        """Registered and not being decommissioned."""
        registry = self.ctx.registry
        return bookie in registry.bookies and bookie not in registry.decommissioned

    def _still_filled(self, repair: Repair) -> bool:
        """Filled in place earlier in this run and still registered as that instance. One
        gone since (or formatted) is repaired again: the auditor's mark already names it,
        so its marking changes nothing, and a mark cleared with it named would leave the
        fragment short until the periodic audit."""
        key = (repair.first, repair.bookie)
        return (
            key in self._filled
            and self._usable(repair.bookie)
            and self.ctx.registry.instance_of(repair.bookie) == self._filled[key]
        )

    def _leaving(self, bookie: str) -> bool:
        """Registered and being decommissioned: replaced everywhere, yet read from (last)
        while its share is copied, for it may hold the only copy (Qw=1)."""
        registry = self.ctx.registry
        return bookie in registry.bookies and bookie in registry.decommissioned

    def _client(self, bookie: str) -> BookieClient:
        return self.ctx.bookies.get(bookie, self.ctx.registry.address_of(bookie))

    @property
    def _timeout_s(self) -> float:
        return self.ctx.settings.bookie_request_timeout_ms / 1000

    async def _back(self, bookies: set[str]) -> set[str]:
        """Those of ``bookies`` that are usable and answer: a killed bookie stays
        registered until its ZooKeeper session expires."""
        candidates = [b for b in bookies if self._usable(b)]
        answers = await asyncio.gather(*(self._answers(b) for b in candidates))
        return {b for b, alive in zip(candidates, answers, strict=True) if alive}

    async def _answers(self, bookie: str) -> bool:
        """Whether ``bookie`` answers a call about this ledger now (404 counts)."""
        try:
            await self._client(bookie).stored(self.ledger_id, timeout_s=self._timeout_s)
        except LedgerNotFound:
            return True
        except QuireError:
            return False
        return True

    async def _fill_in_place(self, metadata: LedgerMetadata, repair: Repair, job: CopyJob) -> bool:
        """Copy to ``repair.bookie`` itself the entries of its share it lacks; False when
        it cannot be (another instance now, unreachable, or it refuses an entry)."""
        ctx = self.ctx
        fragment = next(f for f in metadata.fragments if f.first_entry_id == repair.first)
        recorded = fragment.instances[repair.bookie_index] if fragment.instances else None
        instance = ctx.registry.instance_of(repair.bookie)
        if recorded is not None and recorded != instance:
            return False  # formatted since: its share is gone, replace it
        try:
            stored = await self._client(repair.bookie).stored(
                self.ledger_id, timeout_s=self._timeout_s
            )
            lacking = [e for e in job.wanted if not stored.holds(e)]
            if stored.corrupt:
                return False
        except LedgerNotFound:
            lacking = list(job.wanted)
        except QuireError as exc:
            log.warning("ledger %d: %s cannot be asked what it stores: %s", self.ledger_id,
                        repair.bookie, exc)  # fmt: skip
            return False
        if lacking:
            fill = replace(job, wanted=lacking, unusable=job.unusable | {repair.bookie})
            outcome = await ctx.copier.copy(fill, repair.bookie, self._on_batch)
            if outcome.aborted or outcome.target_failed is not None:
                return False
        self._filled[(repair.first, repair.bookie)] = instance
        self.progress.fragments_done += 1
        await self._publish(force=True)
        log.info("ledger %d: fragment at %d: %s filled in place (%d entries copied)",
                 self.ledger_id, repair.first, repair.bookie, len(lacking))  # fmt: skip
        return True

    def _missing(self, mark: Mark, metadata: LedgerMetadata) -> set[str]:
        """The mark's bookies, and every fragment bookie that is not usable."""
        return set(mark.missing_bookies) | {b for b in metadata.bookies() if not self._usable(b)}

    async def _recover(self, missing: set[str]) -> None:
        """Fence and close the ledger, unless its writer replaced the bookie itself."""
        current = await self.ctx.ledgers.get(self.ledger_id)
        if not last_fragment_affected(current.metadata, missing):
            return
        try:
            await self.ctx.open_ledgers.recover(current.metadata, current.version)
        except Exception:  # cancelled (shutdown, lost lock) is no failed recovery
            self.ctx.metrics.recoveries.labels("failed").inc()
            raise
        self.ctx.metrics.recoveries.labels("completed").inc()

    async def _repair(self, metadata: LedgerMetadata, repair: Repair, missing: set[str]) -> _Step:
        ctx = self.ctx
        span = next(s for s in spans(metadata) if s.first == repair.first)
        last = repair.last if repair.last is not None else repair.first - 1
        leaving = {b for b in missing if self._leaving(b)}
        wanted = list(
            entries_on(
                repair.first,
                last,
                repair.bookie_index,
                metadata.ensemble_size,
                metadata.write_quorum,
            )
        )
        job = CopyJob(
            ledger_id=self.ledger_id,
            bookies=span.bookies,
            ensemble_size=metadata.ensemble_size,
            write_quorum=metadata.write_quorum,
            digest_type=metadata.digest_type,
            key=digest_key(metadata, ctx.settings.cluster_secret),
            wanted=wanted,
            unusable=frozenset(missing - leaving),
            last_resort=frozenset(leaving),
        )
        if self._usable(repair.bookie):
            if await self._fill_in_place(metadata, repair, job):
                return _Step.SWAPPED
            if not ctx.enabled():
                return _Step.STOP
        excluded: set[str] = set()
        for _ in range(TARGETS_TRIED_MAX):
            target = choose_target(
                span.bookies, repair.bookie, ctx.registry.writable, ctx.rng, missing | excluded
            )
            instance = ctx.registry.instance_of(target)  # the instance the copy goes to
            outcome = await ctx.copier.copy(job, target, self._on_batch)
            if outcome.aborted:
                return _Step.STOP
            if outcome.target_failed is not None:
                log.warning(
                    "ledger %d: target %s failed (%s); choosing another",
                    self.ledger_id,
                    target,
                    outcome.target_failed,
                )
                excluded.add(target)
                continue
            step = await self._swap(repair, target, instance)
            if step is _Step.SWAPPED:
                self.progress.fragments_done += 1
                await self._publish(force=True)
                log.info(
                    "ledger %d: fragment at %d: %s replaced by %s (%d entries copied)",
                    self.ledger_id,
                    repair.first,
                    repair.bookie,
                    target,
                    len(wanted),
                )
            return step
        raise NotEnoughBookies(
            f"ledger {self.ledger_id}: {TARGETS_TRIED_MAX} targets failed for the fragment at "
            f"{repair.first}"
        )

    async def _swap(self, repair: Repair, target: str, instance: str | None) -> _Step:
        """Replace the bookie by CAS on freshly read metadata, while the repair applies;
        the fragment records ``instance`` (the target's when the copy began) for it."""
        ctx = self.ctx
        for _ in range(SWAP_ATTEMPTS_MAX):
            if not ctx.enabled():
                return _Step.STOP
            fresh = await ctx.ledgers.get(self.ledger_id)
            if not still_applies(fresh.metadata, repair):
                return _Step.REPLAN
            if replace_bookie(fresh.metadata, repair.first, repair.bookie, target) is None:
                return _Step.REPLAN
            swapped = fresh.metadata.replace_bookie(repair.first, repair.bookie, target, instance)
            try:
                await ctx.ledgers.compare_and_set(swapped, fresh.version)
            except MetadataConflict:
                continue
            return _Step.SWAPPED
        return _Step.REPLAN

    async def _on_batch(self, entries: int, size: int) -> None:
        self.progress.entries_copied += entries
        self.progress.bytes_copied += size
        self.ctx.metrics.entries_replicated.inc(entries)
        self.ctx.metrics.bytes_replicated.inc(size)
        await self._publish()

    async def _publish(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._reported_at >= PROGRESS_INTERVAL_S:
            self._reported_at = now
            await self._report(self.progress)
