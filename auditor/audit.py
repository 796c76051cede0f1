"""One audit: walk every ledger's metadata, mark what is under-replicated, clear stale marks.

Algorithm. The ledger ids are walked in pages (``LedgerStore.pages``: each znode of
the id hierarchy listed once) and each page's metadata is read in one call
(``LedgerStore.get_many``: ZooKeeper read-only multis of ``MULTI_READ_OPS_MAX`` gets, all
of the page's in flight); a producer task reads the next pages while the current one is
checked (at most ``PAGES_AHEAD_MAX`` pages wait), so the walk is pipelined. What the
audit keeps besides the pages is bounded by the marks, not by the ledgers. For each
ledger:

1. placement: fragments naming a lost or decommissioning bookie, or a bookie registered
   now as another instance than the fragment recorded (formatted since: it lost its
   share; the open last fragment of an open ledger included, which the replica check
   does not look at, and whose writer cannot tell); and fragments whose
   write quorums span too few racks (docs/operations.md "Racks"), counted in the
   report's ``PlacementReport``; when a move to a bookie on another rack can fix a
   settled one, the ledger's mark asks for it (``misplaced``);
2. replicas (full audits only): each live bookie is asked in bulk what it stores of
   the settled spans it must hold (``ReplicaChecker``); a bookie lacking an entry or
   holding a corrupt one is missing too;
3. the ledger is marked (one mark naming the missing bookies, merged by CAS) — or,
   when it was marked before the audit started and is whole now, its mark is deleted
   at the version the audit read when it began: a mark changed since (a bookie merged
   into it by another auditor, which keeps the first ``marked_at``) names what this
   audit did not judge, and stays.

Ordering rule: before each batch of writes (the marks or the deletions of one page),
``confirm()`` reads the election again; when this auditor is no longer elected the
audit stops (``NotElected``) before writing anything more. ``notify_marked`` is bumped
once per batch of marks.

Marks of ledgers the walk did not see are checked last: the mark of a deleted ledger
is deleted. Decommissioning bookies that no fragment names after a complete walk are
returned (``named``), so the caller can set them decommissioned.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from auditor.decisions import (
    StoredView,
    mark_clearable,
    misplaced,
    named_bookies,
    placement_missing,
    replica_missing,
)
from auditor.limits import (
    AUDIT_PAGE_LEDGERS,
    MARKS_READ_BATCH_MAX,
    PAGES_AHEAD_MAX,
    PLACEMENT_REPORT_LEDGERS_MAX,
)
from auditor.replicas import ReplicaChecker
from services.clock import wall_ms
from services.errors import InvalidArgument, LedgerNotFound
from services.protocol.metadata import LedgerMetadata
from services.protocol.placement import rack_counts
from services.protocol.replication import formatted
from services.zk.ledger_store import LedgerStore
from services.zk.underreplication import UnderReplicationStore

log = logging.getLogger(__name__)

LOCK_HOLDER = "auditor"  # the lock's holder while the auditor clears a stale mark

FULL = "full"
PLACEMENT = "placement"


class NotElected(Exception):
    """This auditor is no longer elected: the audit stops before writing more."""


@dataclass
class PlacementReport:
    """The ledgers whose placement breaks the rack policy, as one check found them: how
    many, and the first ``PLACEMENT_REPORT_LEDGERS_MAX`` with their fragments and
    whether a move can fix them (docs/api.md "Admin", ``GET /v1/admin/placement``)."""

    racks: dict[str, int]  # bookies per rack, registered ones
    violations: int = 0
    movable: int = 0
    ledgers: list[dict[str, Any]] = field(default_factory=list)

    def add(self, ledger_id: int, fragments: list[int], movable: bool) -> None:
        self.violations += 1
        self.movable += movable
        if len(self.ledgers) < PLACEMENT_REPORT_LEDGERS_MAX:
            self.ledgers.append(
                {"ledger_id": ledger_id, "fragments": fragments, "movable": movable}
            )

    def to_api(self, checked_at_ms: int) -> dict[str, Any]:
        return {
            "checked_at": checked_at_ms,
            "racks": self.racks,
            "violations": self.violations,
            "movable": self.movable,
            "ledgers": self.ledgers,
            "truncated": self.violations > len(self.ledgers),
        }


@dataclass
class AuditReport:
    kind: str
    started_at_ms: int
    finished_at_ms: int = 0
    duration_s: float = 0.0
    ledgers: int = 0
    marked: int = 0
    cleared: int = 0
    bookies_skipped: list[str] = field(default_factory=list)
    complete: bool = False
    named: set[str] = field(default_factory=set)
    placement: PlacementReport = field(default_factory=lambda: PlacementReport({}))

    def to_api(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "started_at": self.started_at_ms,
            "finished_at": self.finished_at_ms,
            "duration_s": round(self.duration_s, 3),
            "ledgers": self.ledgers,
            "marked": self.marked,
            "cleared": self.cleared,
            "bookies_skipped": sorted(self.bookies_skipped),
            "complete": self.complete,
            "placement_violations": self.placement.violations,
        }


@dataclass(frozen=True)
class AuditView:
    """The bookies as the audit sees them (fixed at its start)."""

    registered: frozenset[str]
    lost: frozenset[str]
    decommissioning: frozenset[str]
    racks: Mapping[str, str | None] = field(default_factory=dict)  # registered -> rack
    writable: frozenset[str] = frozenset()
    instances: Mapping[str, str | None] = field(default_factory=dict)  # registered -> instance

    @property
    def live(self) -> frozenset[str]:
        return self.registered - self.lost


class Audit:
    def __init__(
        self,
        kind: str,
        ledgers: LedgerStore,
        underreplication: UnderReplicationStore,
        view: AuditView,
        confirm: Callable[[], Awaitable[bool]],
        checker: ReplicaChecker | None,
        concurrency: int,
        on_marked: Callable[[int], None] = lambda n: None,
    ) -> None:
        self.kind = kind
        self.ledgers = ledgers
        self.underreplication = underreplication
        self.view = view
        self.confirm = confirm
        self.checker = checker
        self._slots = asyncio.Semaphore(concurrency)
        self.on_marked = on_marked
        self.report = AuditReport(
            kind, wall_ms(), placement=PlacementReport(rack_counts(view.racks))
        )
        self._marked_before: dict[int, int] = {}  # ledger id -> its mark's version then
        # The marked ledgers (of ``_marked_before``) the walk saw: not every ledger seen,
        # which would grow with the ledgers (a million ids are ~60 MB here).
        self._seen: set[int] = set()

    async def run(self) -> AuditReport:
        start = time.monotonic()
        self._marked_before = await self._read_marks()
        pages: asyncio.Queue[list[LedgerMetadata] | None] = asyncio.Queue(PAGES_AHEAD_MAX)
        producer = asyncio.create_task(self._produce(pages), name="audit-walk")
        try:
            while (page := await pages.get()) is not None:
                await self._check_page(page)
            await producer  # re-raises a failure of the walk
        finally:
            producer.cancel()
            await asyncio.gather(producer, return_exceptions=True)
        await self._check_unseen_marks()
        self.report.complete = True
        if self.checker is not None:
            self.report.bookies_skipped = sorted(self.checker.skipped)
        self.report.duration_s = time.monotonic() - start
        self.report.finished_at_ms = wall_ms()
        return self.report

    async def _read_marks(self) -> dict[int, int]:
        """The marks as this audit begins: ledger id -> version. Only a mark still at
        that version may be cleared as stale."""
        ids = await self.underreplication.marked()
        versions: dict[int, int] = {}
        for i in range(0, len(ids), MARKS_READ_BATCH_MAX):
            batch = ids[i : i + MARKS_READ_BATCH_MAX]
            for lid, mark in zip(batch, await self.underreplication.get_marks(batch), strict=True):
                if mark is not None:  # None: cleared since it was listed
                    versions[lid] = mark.version
        return versions

    # ------------------------------------------------------------------ the walk

    async def _produce(self, pages: asyncio.Queue[list[LedgerMetadata] | None]) -> None:
        async for ids in self.ledgers.pages(AUDIT_PAGE_LEDGERS):
            # One read per page (``LedgerStore.get_many``: ZooKeeper read-only multis of
            # ``MULTI_READ_OPS_MAX`` gets, pipelined).
            found: list[LedgerMetadata] = []
            for lid, got in zip(ids, await self.ledgers.get_many(ids), strict=True):
                if isinstance(got, InvalidArgument):
                    log.warning("audit skips ledger %d: unreadable metadata (%s)", lid, got)
                elif got is not None:  # None: deleted since it was listed
                    found.append(got.metadata)
            await pages.put(found)
        await pages.put(None)

    # ------------------------------------------------------------------ one page

    async def _check_page(self, page: Sequence[LedgerMetadata]) -> None:
        view = self.view
        verdicts: dict[int, set[str]] = {}
        moves: set[int] = set()
        for metadata in page:
            lid = metadata.ledger_id
            if lid in self._marked_before:
                self._seen.add(lid)
            self.report.named |= named_bookies(metadata)
            missing = placement_missing(metadata, view.lost, view.decommissioning)
            missing |= formatted(metadata, view.instances.get)
            if missing:
                verdicts[lid] = missing
            fragments, movable = misplaced(metadata, view.racks, view.writable)
            if fragments:
                self.report.placement.add(lid, fragments, movable)
            if movable:
                moves.add(lid)
        self.report.ledgers += len(page)
        whole: set[int] = set()
        if self.checker is not None:
            answers = await self.checker.check(page, view.live)
            for metadata in page:
                lid = metadata.ledger_id
                got: dict[str, StoredView] = answers.get(lid, {})
                lacking, complete = replica_missing(metadata, got)
                if lacking:
                    verdicts.setdefault(lid, set()).update(lacking)
                elif complete:
                    whole.add(lid)
        await self._mark(verdicts, moves)
        if self.checker is not None:
            clearable = [
                m
                for m in page
                if m.ledger_id in self._marked_before
                and m.ledger_id not in verdicts
                and m.ledger_id not in moves
                and mark_clearable(m, view.registered, view.decommissioning, m.ledger_id in whole)
            ]
            await self._clear(clearable)

    async def _mark(self, verdicts: dict[int, set[str]], moves: set[int]) -> None:
        """Mark the ledgers of ``verdicts`` (their missing bookies) and of ``moves``
        (a placement move wanted)."""
        if not verdicts and not moves:
            return
        if not await self.confirm():
            raise NotElected
        at = wall_ms()
        before = await asyncio.gather(
            *(
                self._write_mark(lid, verdicts.get(lid, set()), at, lid in moves)
                for lid in sorted(verdicts.keys() | moves)
            )
        )
        written = sum(before)
        if written:
            await self.underreplication.notify_marked()
            self.report.marked += written
            self.on_marked(written)

    async def _write_mark(self, ledger_id: int, missing: set[str], at: int, move: bool) -> bool:
        """Mark; True when the mark is new, names a bookie it did not name before, or
        asks for a placement move it did not ask for."""
        async with self._slots:
            current = await self.underreplication.get_mark(ledger_id)
            if (
                current is not None
                and missing <= set(current.missing_bookies)
                and current.misplaced >= move
            ):
                return False
            await self.underreplication.mark(ledger_id, missing, at, misplaced=move)
            if missing:
                log.info(
                    "marked ledger %d under-replicated: missing %s", ledger_id, sorted(missing)
                )
            if move:
                log.info("marked ledger %d for a placement move (racks)", ledger_id)
            return True

    async def _clear(self, judged: Collection[LedgerMetadata]) -> None:
        if not judged:
            return
        if not await self.confirm():
            raise NotElected
        results = await asyncio.gather(*(self._clear_one(m) for m in judged))
        self.report.cleared += sum(results)

    async def _clear_one(self, judged: LedgerMetadata) -> bool:
        """Delete a stale mark under the ledger's lock, as a worker would: never while a
        worker repairs it (a worker's version-guarded delete could otherwise remove a
        mark created again after ours, the version restarting at 0), and only while the
        metadata is still what this audit judged whole.

        The lock is this session's (``owner``): if the session ends meanwhile the lock
        goes with it and a worker may take the ledger, so the mark is deleted only while
        ``owner`` still holds the lock, and the release deletes only ``owner``'s lock, at
        the version read, never the worker's."""
        ledger_id = judged.ledger_id
        async with self._slots:
            owner = await self.underreplication.try_lock(ledger_id, LOCK_HOLDER, wall_ms())
            if owner is None:
                return False  # a worker is on it
            try:
                mark = await self.underreplication.get_mark(ledger_id)
                if mark is None:
                    return False
                # Changed since the audit began: a mark merged meanwhile (another
                # auditor's marking keeps the first marked_at, bumps the version) or
                # made again (version 0 again, a newer marked_at) may name a bookie this
                # audit did not judge; keep it.
                if (
                    mark.version != self._marked_before.get(ledger_id)
                    or mark.marked_at > self.report.started_at_ms
                ):
                    return False
                try:
                    current = await self.ledgers.get(ledger_id)
                except LedgerNotFound:
                    current = None
                if current is not None and current.metadata != judged:
                    return False  # changed since it was judged: the next check decides
                if not await self.underreplication.holds(ledger_id, owner):
                    return False  # our session ended: the ledger may be a worker's now
                cleared = await self.underreplication.clear_mark(ledger_id, mark.version)
            finally:
                await self.underreplication.unlock(ledger_id, owner)
            if cleared:
                log.info("cleared the stale mark of ledger %d (whole)", ledger_id)
            return cleared

    async def _check_unseen_marks(self) -> None:
        """Marks of ledgers the walk did not see: a deleted ledger's mark goes."""
        gone: list[int] = []
        for lid in sorted(self._marked_before.keys() - self._seen):
            try:
                await self.ledgers.get(lid)
            except LedgerNotFound:
                gone.append(lid)
        if gone:
            if not await self.confirm():
                raise NotElected
            for lid in gone:
                if await self.underreplication.clear_mark(lid):
                    self.report.cleared += 1
