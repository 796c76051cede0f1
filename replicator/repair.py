"""Repairing one locked ledger: the asyncio runner of ``services.protocol.repair.RepairOp``.

The operation decides (what is missing, fill in place or replace, which target, when to
give up, the swap, the open last fragment's grace and recovery, clearing the mark; its
docstring has the algorithm); this runner carries its effects out against ZooKeeper
(``services.zk``: the mark, the metadata), the bookies (``stored``, and
``replicator.copy`` for a share's bounded batches from the sources to the target) and
``replicator.openledger`` (the recovery), and feeds the answers back with the
wall-clock time. It also reports progress, counts the metrics and writes the logs. The
lock is the worker's (``replicator.worker``), taken before and released after.

An error the operation has no event for (a copy no source can feed, a store that
fails, a recovery that fails) propagates: the worker releases the lock and backs off.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from replicator.copy import CopyJob, FragmentCopier
from replicator.limits import LOCK_PROGRESS_INTERVAL_S
from replicator.metrics import ReplicatorMetrics
from replicator.openledger import MissingSince, OpenLedgers, digest_key
from services.bookie_client import BookieClient, BookieClientPool
from services.clock import wall_ms
from services.errors import InvariantViolation, LedgerNotFound, MetadataConflict, QuireError
from services.protocol.repair import (
    AskStored,
    ClearMark,
    Copied,
    CopyAborted,
    CopyShare,
    Effect,
    Event,
    Failed,
    Finished,
    MarkCleared,
    MarkRead,
    MetadataRead,
    NoLedger,
    NoMark,
    Outcome,
    Planned,
    Probe,
    Probed,
    ReadMark,
    ReadMetadata,
    Recover,
    Recovered,
    Repaired,
    RepairOp,
    StoredRead,
    StoredUnknown,
    Swap,
    SwapConflict,
    Swapped,
    TargetFailed,
)
from services.settings import ReplicatorSettings
from services.zk.ledger_store import LedgerStore
from services.zk.registry import BookieRegistry
from services.zk.underreplication import UnderReplicationStore

log = logging.getLogger(__name__)


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


class WorkerView:
    """The operation's ``RepairView``: the worker's registry cache, its ``MissingSince``
    and whether replication is enabled."""

    def __init__(self, ctx: RepairContext) -> None:
        self.ctx = ctx

    @property
    def enabled(self) -> bool:
        return self.ctx.enabled()

    @property
    def writable(self) -> Collection[str]:
        return self.ctx.registry.writable

    @property
    def racks(self) -> Mapping[str, str | None]:
        return self.ctx.registry.racks

    def usable(self, bookie: str) -> bool:
        registry = self.ctx.registry
        return bookie in registry.bookies and bookie not in registry.decommissioned

    def leaving(self, bookie: str) -> bool:
        registry = self.ctx.registry
        return bookie in registry.bookies and bookie in registry.decommissioned

    def instance_of(self, bookie: str) -> str | None:
        return self.ctx.registry.instance_of(bookie)

    def missing_since(self, bookie: str) -> int:
        return self.ctx.missing_since.missing(bookie)

    def back(self, bookie: str) -> None:
        self.ctx.missing_since.back(bookie)


class LedgerRepair:
    """Runs one ``RepairOp`` of ledger ``ledger_id`` to its end."""

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
        grace_ms = int(ctx.settings.open_ledger_grace * 1000)
        self.op = RepairOp(ledger_id, WorkerView(ctx), ctx.rng, grace_ms)

    async def run(self) -> RepairResult:
        ctx = self.ctx
        effects = self.op.start(ctx.now_ms())
        while True:
            event: Event | None = None
            for effect in effects:
                if isinstance(effect, Finished):
                    return RepairResult(effect.outcome, effect.due_ms)
                if isinstance(effect, Failed):
                    raise effect.exception()
                event = await self._carry_out(effect)
            if event is None:
                raise InvariantViolation("the repair asked for nothing and did not end")
            effects = self.op.handle(event, ctx.now_ms())

    async def _carry_out(self, effect: Effect) -> Event | None:
        """Carry one effect out: its answer, or None for a report."""
        ctx, ledger_id = self.ctx, self.ledger_id
        if isinstance(effect, Planned):
            self.progress.fragments_total = self.progress.fragments_done + effect.repairs
            await self._publish(force=True)
            return None
        if isinstance(effect, Repaired):
            await self._repaired(effect)
            return None
        if isinstance(effect, ReadMark):
            mark = await ctx.marks.get_mark(ledger_id)
            if mark is None:
                return NoMark()
            return MarkRead(frozenset(mark.missing_bookies), mark.version, mark.misplaced)
        if isinstance(effect, ReadMetadata):
            try:
                current = await ctx.ledgers.get(ledger_id)
            except LedgerNotFound:
                return NoLedger()
            return MetadataRead(current.metadata, current.version)
        if isinstance(effect, ClearMark):
            cleared = await ctx.marks.clear_mark(
                ledger_id, effect.version, ledger_version=effect.metadata_version
            )
            return MarkCleared(cleared)
        if isinstance(effect, Probe):
            answers = await asyncio.gather(*(self._answers(b) for b in effect.bookies))
            return Probed(
                frozenset(b for b, alive in zip(effect.bookies, answers, strict=True) if alive)
            )
        if isinstance(effect, AskStored):
            return await self._stored(effect.bookie)
        if isinstance(effect, CopyShare):
            return await self._copy(effect)
        if isinstance(effect, Swap):
            try:
                await ctx.ledgers.compare_and_set(effect.after, effect.version)
            except MetadataConflict:
                return SwapConflict()
            return Swapped()
        if isinstance(effect, Recover):
            return await self._recover(effect)
        raise InvariantViolation(f"{effect} ends the repair: nothing to carry out")

    def _client(self, bookie: str) -> BookieClient:
        return self.ctx.bookies.get(bookie, self.ctx.registry.address_of(bookie))

    @property
    def _timeout_s(self) -> float:
        return self.ctx.settings.bookie_request_timeout_ms / 1000

    async def _answers(self, bookie: str) -> bool:
        """Whether ``bookie`` answers a call about this ledger now (404 counts)."""
        try:
            await self._client(bookie).stored(self.ledger_id, timeout_s=self._timeout_s)
        except LedgerNotFound:
            return True
        except QuireError:
            return False
        return True

    async def _stored(self, bookie: str) -> StoredRead | StoredUnknown:
        try:
            stored = await self._client(bookie).stored(self.ledger_id, timeout_s=self._timeout_s)
        except LedgerNotFound:
            return StoredRead((), corrupt=False)
        except QuireError as exc:
            log.warning("ledger %d: %s cannot be asked what it stores: %s", self.ledger_id,
                        bookie, exc)  # fmt: skip
            return StoredUnknown()
        return StoredRead(stored.ranges, corrupt=bool(stored.corrupt))

    async def _copy(self, effect: CopyShare) -> Copied | TargetFailed | CopyAborted:
        metadata = effect.metadata
        job = CopyJob(
            ledger_id=self.ledger_id,
            bookies=effect.bookies,
            ensemble_size=metadata.ensemble_size,
            write_quorum=metadata.write_quorum,
            digest_type=metadata.digest_type,
            key=digest_key(metadata, self.ctx.settings.cluster_secret),
            wanted=effect.wanted,
            unusable=effect.unusable,
            last_resort=effect.last_resort,
        )
        outcome = await self.ctx.copier.copy(job, effect.target, self._on_batch)
        if outcome.aborted:
            return CopyAborted()
        if outcome.target_failed is not None:
            if effect.target != effect.repair.bookie:
                log.warning(
                    "ledger %d: target %s failed (%s); choosing another",
                    self.ledger_id,
                    effect.target,
                    outcome.target_failed,
                )
            return TargetFailed(outcome.target_failed)
        return Copied()

    async def _recover(self, effect: Recover) -> Recovered:
        """Fence and close the ledger (its writer did not replace the bookie itself)."""
        try:
            await self.ctx.open_ledgers.recover(effect.metadata, effect.version)
        except Exception:  # cancelled (shutdown, lost lock) is no failed recovery
            self.ctx.metrics.recoveries.labels("failed").inc()
            raise
        self.ctx.metrics.recoveries.labels("completed").inc()
        return Recovered()

    async def _repaired(self, effect: Repaired) -> None:
        self.progress.fragments_done += 1
        await self._publish(force=True)
        repair = effect.repair
        if effect.in_place:
            log.info("ledger %d: fragment at %d: %s filled in place (%d entries copied)",
                     self.ledger_id, repair.first, repair.bookie, effect.entries)  # fmt: skip
        else:
            log.info(
                "ledger %d: fragment at %d: %s replaced by %s (%d entries copied)",
                self.ledger_id,
                repair.first,
                repair.bookie,
                effect.target,
                effect.entries,
            )

    async def _on_batch(self, entries: int, size: int) -> None:
        self.progress.entries_copied += entries
        self.progress.bytes_copied += size
        self.ctx.metrics.entries_replicated.inc(entries)
        self.ctx.metrics.bytes_replicated.inc(size)
        await self._publish()

    async def _publish(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._reported_at >= LOCK_PROGRESS_INTERVAL_S:
            self._reported_at = now
            await self._report(self.progress)
