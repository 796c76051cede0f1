"""The simulated replication workers (docs/protocol.md, "Auto-recovery"; issue 8
"Replication workers"), deciding with the pure core services/protocol/replication.py.

A worker walks the marks when woken (by the auditor after marking, and by its own
timers after a failure or a postponement; the real one also re-walks periodically,
which here would only cost steps), takes the
lock of one marked ledger it is not backing off from, and reads the mark (its
missing bookies ``M`` and version). Then, on fresh metadata, for each repair of
``repairs(metadata, M)`` in fragment order:

- the open last fragment of a ledger that is not CLOSED is postponed, unless its
  bookie is up again (the writer uses it); once that bookie has been missing for the
  grace period, counted as the real worker counts it (``replicator.openledger``'s
  ``MissingSince``: from when the worker saw it leave the registry, here
  ``down_since``, or from the worker's start if it was gone before; never from the
  mark's ``marked_at``, which an older mark for another fragment keeps), the worker
  recovers the ledger (the simulator's ``Recoverer``: fence and close) and plans
  again on the CLOSED ledger;
- a bookie that is up is asked which entries it stores: holding its whole share it
  needs no repair (it came back before the repair), lacking some they are copied to
  it; later plans of the job skip it only while it stays up as that instance;
- otherwise a target is chosen (``choose_target``: writable, not in the fragment),
  the missing bookie's share (``entries_on``) is read in bounded batches from the
  other replicas (digest checked, the next replica on a failure), written to the
  target with the recovery flag, one request per batch, and the bookie swapped by
  CAS on fresh metadata (``still_applies``/``replace_bookie``: on a conflict or a
  lost answer re-read; when the repair no longer applies, plan again).

When nothing is left the mark is cleared at the version read (a merge meanwhile:
read it again and go on) and the lock released. Any failure (no source, no target,
a bookie that does not answer, a metadata failure) releases the lock and backs off
for a while; another worker, or this one later, tries again. A worker "crashes"
(its ZooKeeper session is lost): it stops at once, its requests already sent still
land, and its lock frees when the session expires; it comes back later, with a new
session.

The lock, as replicator/worker.py and services/zk/underreplication.py take it: the
lock belongs to the worker's session. A create or a delete of it may answer
ConnectionLoss, landed or not (``lock_connection_loss_p``), leaving the session
SUSPENDED for less than its time-out. A create is then decided by reading the lock
back once reconnected (a lock of this session for this worker is ours); a release
waits the drop out and deletes the lock only while its session owns it, at the
version read. The worker takes no other ledger until its lock is released.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.bookie_client import BookieAddResult
from services.errors import InvariantViolation, NotEnoughBookies
from services.protocol.messages import RecoveryDone
from services.protocol.metadata import LedgerMetadata
from services.protocol.reads import record_usable
from services.protocol.replication import (
    Repair,
    choose_target,
    entries_on,
    repairs,
    replace_bookie,
    spans,
    still_applies,
)
from services.wire.framing import FramedRecord
from tests.simulation.actors import Recoverer
from tests.simulation.calls import bookie_call
from tests.simulation.marks import SimLock, SimMark
from tests.simulation.world import corrupted

if TYPE_CHECKING:
    from tests.simulation.scenario import LedgerSim, Simulation

COPY_BATCH_MAX = 8  # entries per read and per write request
BACKOFF_MS = (100, 600)
LOCK_ATTEMPTS_MAX = 3  # creates of one lock taking (one lost with the connection: again)
# The fixes of issue 35 item 5, switched off by the tests that show the checker catches
# their absence: a lock create answered by ConnectionLoss is read back (and a lock of
# this session for this worker is its own); a release waits a dropped connection out.
LOCK_READ_BACK = True
RELEASE_WAITS_OUT_SUSPENDED = True
# The fix of issue 35 item 7: an open ledger's grace runs from when its last fragment's
# bookie was first seen missing, not from the mark's marked_at (kept through merges).
GRACE_FROM_MISSING_SINCE = True


@dataclass
class Job:
    """One attempt of one worker on one locked ledger."""

    ledger: LedgerSim
    epoch: int
    mark: SimMark | None = None
    # (fragment first id, bookie) found whole or filled in place -> the bookie's instance
    whole: dict[tuple[int, str], str] = field(default_factory=dict)
    recovered: bool = False
    synced: bool = False  # the metadata being planned on is known fresh


class ReplicationWorker:
    def __init__(self, world: Simulation, name: str) -> None:
        self.world = world
        self.name = name
        self.session = world.marks.new_session()
        self.epoch = 0
        self.dead = False
        self.busy = False
        self.stopped = False
        self._backoff: dict[int, int] = {}  # ledger id -> not before (ms)
        self._recoveries = 0
        self._started_at = world.scheduler.now  # it saw nobody leave before this

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        pass  # it waits to be woken: by the auditor's marks, or its own back-off timers

    def wake(self) -> None:
        if not self.dead and not self.busy:
            self.world.scheduler.after(self.world.network.delay(), self._poll)

    def crash(self, session_timeout_ms: int, back_after_ms: int) -> None:
        if self.dead:
            return
        world, marks = self.world, self.world.marks
        held = [lid for lid, lock in marks.locks.items() if lock.session == self.session]
        if self.busy and held:
            world.stats["replication worker crashed holding a lock"] += 1
            for lid in held:
                world.orphaned[lid] = self.name
        for lid in held:
            marks.end_repair(lid, self.name)
        self.dead, self.busy = True, False
        self.epoch += 1
        sched, session = self.world.scheduler, self.session
        sched.after(session_timeout_ms, lambda: marks.expire(session))
        sched.after(max(back_after_ms, session_timeout_ms), self._restart)
        self.world.stats["replication worker crashed"] += 1

    def _restart(self) -> None:
        self.dead = False
        self.session = self.world.marks.new_session()
        self._started_at = self.world.scheduler.now  # what it saw before is forgotten
        self._poll()

    def _alive(self, job: Job) -> bool:
        return not self.dead and not self.stopped and job.epoch == self.epoch

    def _poll(self) -> None:
        world = self.world
        if self.dead or self.busy or self.stopped:
            return
        now, marks = world.scheduler.now, world.marks
        free = [
            lid
            for lid in marks.marked()
            if self._lockable(marks.lock(lid)) and self._backoff.get(lid, 0) <= now
        ]
        if not free:
            return
        lid = world.rng.choice(free)
        self.busy = True
        job = Job(world.ledger(lid), self.epoch)
        world.scheduler.after(world.network.delay(), lambda: self._lock(job))

    # ------------------------------------------------------------------ the lock

    def _lockable(self, lock: SimLock | None) -> bool:
        """Free, or this session's for this worker already (found by a read back)."""
        if lock is None:
            return True
        return LOCK_READ_BACK and lock.session == self.session and lock.holder == self.name

    def _connection_lost(self) -> bool:
        """Whether this lock request answers ConnectionLoss (a fault until healed)."""
        world = self.world
        p = world.config.autorecovery.lock_connection_loss_p
        return bool(p) and world.scheduler.now < world.config.phase1_ms and world.rng.random() < p

    def _suspended_ms(self) -> int:
        """How long the session stays SUSPENDED after a drop (less than its time-out)."""
        timeout_ms = self.world.config.autorecovery.session_timeout_ms
        return self.world.rng.randint(1, max(1, timeout_ms - 1))

    def _lock(self, job: Job, attempt: int = 1) -> None:
        if not self._alive(job):
            return
        world, lid = self.world, job.ledger.ledger_id
        if self._connection_lost():
            world.stats["lock create answered connection loss"] += 1
            if world.rng.random() < 0.5:
                world.marks.create_lock(lid, self.name, self.session)  # it landed
            if not LOCK_READ_BACK:  # taken as a failure: the lock may stay with the session
                self._not_taken(job, world.scheduler.now + world.rng.randint(*BACKOFF_MS))
                return
            world.scheduler.after(self._suspended_ms(), lambda: self._read_back(job, attempt))
            return
        if world.marks.create_lock(lid, self.name, self.session):
            self._begin(job)
        elif LOCK_READ_BACK:
            self._read_back(job, attempt)
        else:
            self._contended(job)

    def _read_back(self, job: Job, attempt: int) -> None:
        """Connected again (or NodeExists): whose is the lock?"""
        world, lid = self.world, job.ledger.ledger_id

        def arrive() -> None:
            if not self._alive(job):
                return
            lock = world.marks.lock(lid)
            if lock is None:
                if attempt < LOCK_ATTEMPTS_MAX:
                    self._lock(job, attempt + 1)  # our create never landed, or it was freed
                else:
                    self._not_taken(job, world.scheduler.now + world.rng.randint(*BACKOFF_MS))
            elif lock.session == self.session and lock.holder == self.name:
                world.stats["a lock read back is the worker's own"] += 1
                self._begin(job)
            else:
                self._contended(job)

        world.scheduler.after(world.network.delay(), arrive)

    def _begin(self, job: Job) -> None:
        self.world.marks.begin_repair(job.ledger.ledger_id, self.name)
        self._next(job)

    def _contended(self, job: Job) -> None:
        self.busy = False
        self.world.stats["replication lock contended"] += 1

    def _not_taken(self, job: Job, backoff_until: int) -> None:
        self.busy = False
        self._backoff[job.ledger.ledger_id] = backoff_until
        self.world.scheduler.at(backoff_until, self.wake)

    def _release(self, job: Job, done: Callable[[], None]) -> None:
        """Delete the lock while this session owns it, at the version read; a dropped
        connection is waited out (the session, and so the lock, survive it)."""
        world, marks, lid = self.world, self.world.marks, job.ledger.ledger_id

        def arrive() -> None:
            if not self._alive(job):
                return  # crashed: the lock goes with the session
            lock = marks.lock(lid)
            if lock is None or lock.session != self.session:
                done()
                return
            if self._connection_lost():
                world.stats["lock release answered connection loss"] += 1
                if world.rng.random() < 0.5:
                    marks.delete_lock(lid, lock.version)  # it landed
                if not RELEASE_WAITS_OUT_SUSPENDED:
                    done()  # given up: the lock stays with the live session
                    return
                world.scheduler.after(self._suspended_ms(), lambda: self._release(job, done))
                return
            marks.delete_lock(lid, lock.version)
            done()

        world.scheduler.after(world.network.delay(), arrive)

    def _finish(self, job: Job, outcome: str, backoff_until: int | None = None) -> None:
        if not self._alive(job):
            return
        world, lid = self.world, job.ledger.ledger_id
        world.marks.end_repair(lid, self.name)
        world.stats[f"replication attempt: {outcome}"] += 1
        crashed = world.orphaned.get(lid)
        if outcome == "repaired" and crashed is not None and crashed != self.name:
            world.stats["ledger repaired after its worker crashed"] += 1
        if backoff_until is not None:
            self._backoff[lid] = backoff_until
            world.scheduler.at(backoff_until, self.wake)

        def released() -> None:
            self.busy = False
            self.wake()

        self._release(job, released)

    def _abort(self, job: Job, why: str) -> None:
        now = self.world.scheduler.now
        self._finish(job, f"failed ({why})", now + self.world.rng.randint(*BACKOFF_MS))

    # ------------------------------------------------------------------ planning

    def _next(self, job: Job) -> None:
        """Read the mark and fresh metadata, then plan."""
        if not self._alive(job):
            return
        job.mark = self.world.marks.get(job.ledger.ledger_id)
        if job.mark is None:
            self._finish(job, "mark gone")
            return
        self._read_metadata(job, lambda md, version: self._plan(job, md, version))

    def _read_metadata(
        self, job: Job, then: Callable[[LedgerMetadata, int], None], *, sync: bool = False
    ) -> None:
        """A metadata read: from a ZooKeeper follower, maybe stale (CAS catches that),
        or after a ``sync`` (fresh: what deciding that nothing is left needs)."""
        world, ledger = self.world, job.ledger

        def arrive() -> None:
            if not self._alive(job):
                return
            if world.faults.metadata_fail_p and world.rng.random() < world.faults.metadata_fail_p:
                self._abort(job, "metadata read failed")
                return
            job.synced = sync
            then(*ledger.read_metadata(self.name, stale=not sync))

        world.scheduler.after(world.network.delay(), arrive)

    def _plan(self, job: Job, md: LedgerMetadata, version: int) -> None:
        if not self._alive(job):
            return
        world, mark = self.world, job.mark
        if mark is None:
            raise InvariantViolation("planning without a mark")
        postponed: list[str] = []  # the open last fragment's missing bookies
        # As the real worker (replicator/repair.py): the mark's bookies, and any bookie a
        # fragment names that is gone (here: for the lost-bookie delay). The auditor may
        # have missed it (a stale read of metadata a swap had just changed: seed 56134)
        # and would mark it only at its next audit.
        auditor = world.auditor
        gone = {b for b in md.bookies() if auditor is not None and auditor.gone(b)}
        missing = mark.missing | gone
        for repair in repairs(md, missing):
            if self._still_whole(job, repair):
                continue
            if repair.is_open_last:
                if repair.bookie not in world.down_since:
                    continue  # back: the writer writes to it (or replaces it itself)
                postponed.append(repair.bookie)
                continue
            if repair.bookie in world.down_since:
                self._copy(job, md, repair)
            else:
                self._check_back(job, md, version, repair)
            return
        if postponed:
            self._postponed(job, postponed)
            return
        if not job.synced:
            # Nothing left on metadata that may be stale (the ledger may have closed
            # meanwhile, settling its last fragment): decide on fresh metadata.
            world.stats["worker re-read metadata before clearing"] += 1
            self._read_metadata(job, lambda md, v: self._plan(job, md, v), sync=True)
            return
        if world.marks.clear(job.ledger.ledger_id, mark.version, self.session):
            job.ledger.checker.on_mark_cleared(frozenset(missing), self.name)
            world.stats["mark cleared by a worker"] += 1
            self._finish(job, "repaired")
        else:
            self._next(job)  # a bookie was merged into the mark meanwhile

    def _still_whole(self, job: Job, repair: Repair) -> bool:
        """Found whole (or filled) earlier in this job, and still registered as the same
        instance, as the real worker has it: one gone since is repaired again (seed 22938:
        a bookie filled in place, then lost for good; the auditor's mark already named it,
        so marking it again changed nothing, and the worker cleared the mark with it still
        named)."""
        instance = job.whole.get((repair.first, repair.bookie))
        if instance is None:
            return False
        bookie = self.world.bookies[repair.bookie]
        return repair.bookie not in self.world.down_since and bookie.instance_id == instance

    def missing_since(self, bookie: str) -> int:
        """Since when this worker has seen ``bookie`` missing (it is down): from its
        leaving the registry, or from this worker's start if that was before (the real
        ``MissingSince`` starts empty and only ever makes a worker wait longer)."""
        return max(self.world.down_since[bookie], self._started_at)

    def _postponed(self, job: Job, bookies: list[str]) -> None:
        """The open last fragment names ``bookies``, down: wait out the grace, counted
        from the first of them seen missing, then recover the ledger."""
        world = self.world
        since = min(self.missing_since(b) for b in bookies) if GRACE_FROM_MISSING_SINCE else None
        if since is None:  # the old rule (issue 35 item 7): the mark's first marked_at
            mark = job.mark
            if mark is None:
                raise InvariantViolation("postponing without a mark")
            since = mark.marked_at
        grace_end = since + world.config.autorecovery.open_ledger_grace_ms
        if world.scheduler.now < grace_end or job.recovered:
            self._finish(job, "postponed (open ledger)", grace_end)
            return
        # The grace's promise, checked from the registry itself rather than from this
        # worker's view of it: a writer is fenced only once a bookie of its open
        # fragment has been missing for the whole grace (issue 35 item 7).
        now, grace_ms = world.scheduler.now, world.config.autorecovery.open_ledger_grace_ms
        if max(now - world.down_since[b] for b in bookies) < grace_ms:
            job.ledger.checker.fail(
                f"{self.name} recovers the open ledger before its grace of {grace_ms} ms: "
                f"its last fragment's {sorted(bookies)} missing only since "
                f"{min(world.down_since[b] for b in bookies)} ms"
            )
        job.recovered = True
        self._recoveries += 1
        world.stats["open ledger recovered by a worker"] += 1

        def done(result: RecoveryDone | None) -> None:
            if not self._alive(job):
                return
            if result is None:
                self._abort(job, "recovery failed")
            else:
                self._next(job)

        name = f"{self.name}-rec{self._recoveries}"
        recoverer = Recoverer(job.ledger, name, attempts_max=3, on_done=done)
        job.ledger.recoverers.append(recoverer)
        recoverer.start()

    def _check_back(self, job: Job, md: LedgerMetadata, version: int, repair: Repair) -> None:
        """``repair.bookie`` is up: ask what it stores; holding its share it stays."""
        lid = job.ledger.ledger_id
        share = set(_share(md, repair))
        instance = self.world.bookies[repair.bookie].instance_id  # the one asked

        def answer(result: Any) -> None:
            if not self._alive(job):
                return
            # Time passed: ``md`` is no longer known fresh, and clearing needs a fresh
            # read (seed 81703: the writer's ensemble change meanwhile settled the open
            # fragment, naming this bookie, which lacks entries of it).
            job.synced = False
            if not isinstance(result, list):
                self._abort(job, "a named bookie did not answer")
            elif share <= set(result):
                job.whole[(repair.first, repair.bookie)] = instance
                self.world.stats["named bookie found whole"] += 1
                self._plan(job, md, version)
            else:
                # It is up and lacks some entries: copy just those back to it (no swap,
                # so no spare bookie is needed).
                lacking = sorted(share - set(result))
                self.world.stats["missing replicas copied back in place"] += 1

                def copied() -> None:
                    job.whole[(repair.first, repair.bookie)] = instance
                    self._plan(job, md, version)

                self._copy_batch(job, md, repair, repair.bookie, lacking, 0, copied)

        bookie_call(self.world, self.name, repair.bookie,
                    lambda b, reply: reply(b.stored_ids(lid)), answer)  # fmt: skip

    # ------------------------------------------------------------------ copying

    def _copy(self, job: Job, md: LedgerMetadata, repair: Repair) -> None:
        world = self.world
        fragment = next(s for s in spans(md) if s.first == repair.first)
        writable = [
            b.bookie_id for b in world.bookie_list if b.bookie_id not in world.down_since
            and not b.readonly
        ]  # fmt: skip
        try:
            target = choose_target(fragment.bookies, repair.bookie, writable, world.rng)
        except NotEnoughBookies:
            self._abort(job, "no target")
            return
        wanted = list(_share(md, repair))

        def copied() -> None:
            self._read_metadata(job, lambda fresh, v: self._swap(job, fresh, v, repair, target))

        self._copy_batch(job, md, repair, target, wanted, 0, copied)

    def _copy_batch(
        self, job: Job, md: LedgerMetadata, repair: Repair, target: str, wanted: list[int],
        pos: int, copied: Callable[[], None],
    ) -> None:  # fmt: skip
        """Copy ``wanted[pos:]`` to ``target`` batch by batch, then ``copied()``."""
        if not self._alive(job):
            return
        ids = wanted[pos : pos + COPY_BATCH_MAX]
        if not ids:
            copied()
            return
        sources = {
            e: [b for b in md.write_set_bookies(e) if b not in (target, repair.bookie)]
            + ([repair.bookie] if repair.bookie != target else [])
            for e in ids
        }

        def write(records: list[FramedRecord]) -> None:
            def on() -> None:
                self._copy_batch(job, md, repair, target, wanted, pos + len(ids), copied)

            self._write(job, target, records, on)

        self._read_round(job, md, sources, {}, write)

    def _read_round(
        self,
        job: Job,
        md: LedgerMetadata,
        sources: dict[int, list[str]],
        found: dict[int, FramedRecord],
        then: Callable[[list[FramedRecord]], None],
    ) -> None:
        """Read every entry not yet found from its next replica; entries of one replica
        in one request."""
        if not self._alive(job):
            return
        world, lid, key = self.world, job.ledger.ledger_id, job.ledger.key
        wanted = [e for e in sources if e not in found]
        if not wanted:
            then([found[e] for e in sorted(found)])
            return
        by_source: dict[str, list[int]] = {}
        for entry_id in wanted:
            if not sources[entry_id]:
                self._abort(job, "no readable replica")
                return
            by_source.setdefault(sources[entry_id].pop(0), []).append(entry_id)
        pending = len(by_source)

        def answered(ids: list[int], result: Any) -> None:
            nonlocal pending
            if isinstance(result, list):
                for entry_id, record in zip(ids, result, strict=True):
                    if record is not None and world.network.corrupt():
                        record = corrupted(record)
                    if record_usable(record, md, entry_id, key):
                        found[entry_id] = record
            pending -= 1
            if pending == 0:
                self._read_round(job, md, sources, found, then)

        for source, ids in sorted(by_source.items()):
            bookie_call(world, self.name, source,
                        lambda b, reply, ids=ids: reply([b.read(lid, e) for e in ids]),
                        lambda result, ids=ids: answered(ids, result))  # fmt: skip

    def _write(
        self, job: Job, target: str, records: list[FramedRecord], then: Callable[[], None]
    ) -> None:
        copies = tuple(r._replace(recovery=True) for r in records)

        def done(result: Any) -> None:
            if not self._alive(job):
                return
            ok = isinstance(result, BookieAddResult) and not result.rejected
            if ok and result.stored == len(copies):
                self.world.stats["entries re-replicated"] += len(copies)
                then()
            else:
                self._abort(job, "target did not store the copies")

        bookie_call(self.world, self.name, target,
                    lambda b, reply: b.submit_add(copies, reply), done,
                    duplicable=True)  # fmt: skip

    # ------------------------------------------------------------------ swapping

    def _swap(
        self, job: Job, fresh: LedgerMetadata, version: int, repair: Repair, target: str
    ) -> None:
        world, ledger = self.world, job.ledger
        new = replace_bookie(fresh, repair.first, repair.bookie, target)
        if new is None or not still_applies(fresh, repair):
            world.stats["copy wasted: the repair no longer applied"] += 1
            self._plan(job, fresh, version)
            return

        def arrive() -> None:
            # A request already sent lands even if the worker died meanwhile.
            if world.faults.metadata_fail_p and world.rng.random() < world.faults.metadata_fail_p:
                if self._alive(job):
                    self._read_metadata(job, lambda md, v: self._swap(job, md, v, repair, target))
                return
            ok = ledger.cell.compare_and_set(new, version)
            if ok:
                ledger.checker.on_swap(fresh, repair, target, self.name)
            ledger.checker.after_metadata_write(self.name)
            if not self._alive(job):
                return
            if ok:
                world.stats["bookie swapped by a worker"] += 1
                job.synced = True  # its own write: the newest metadata
                self._plan(job, new, ledger.cell.version)
            else:
                world.stats["worker swap conflicted"] += 1
                self._read_metadata(job, lambda md, v: self._swap(job, md, v, repair, target))

        world.scheduler.after(world.network.delay(), arrive)


def _share(md: LedgerMetadata, repair: Repair) -> list[int]:
    last = repair.last if repair.last is not None else repair.first - 1
    return list(entries_on(repair.first, last, repair.bookie_index, md.ensemble_size,
                           md.write_quorum))  # fmt: skip
