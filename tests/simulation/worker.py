"""The simulated replication workers (docs/protocol.md, "Auto-recovery"; issue 8
"Replication workers"): each drives the production ``RepairOp``
(services/protocol/repair.py) and carries its effects out against the simulated world.
What is here is the worker's life and the transport, never a repair decision.

A worker walks the marks when woken (by the auditor after marking, and by its own
timers after a failure or a postponement; the real one also re-walks periodically,
which here would only cost steps), takes the lock of one marked ledger it is not
backing off from, and runs ``RepairOp`` on it. Its effects, carried out here:

- the mark is read and cleared in the ``MarkTable`` (a clear happens only while this
  session holds the lock: the table checks it; and only while the ledger's metadata is
  at the version the operation planned on, checked in the same transaction);
- the metadata is read after a network delay, maybe stale (``LedgerSim.read_metadata``;
  a store failure ends the attempt), and a swap is a compare-and-set on the cell that
  lands even if the worker died meanwhile (the checker judges it: ``on_swap``);
- a probe and a "what do you store" are bookie calls (a lost or late answer is no
  answer); a share is copied in bounded batches (``COPY_BATCH_MAX``) read from the
  effect's sources (digest checked, the next replica on a failure; an entry no replica
  yields ends the attempt) and written to the target with the recovery flag, one
  request per batch (a target that does not store them is a failed target);
- a recovery is the simulator's ``Recoverer`` (fence and close); the grace's promise is
  first checked from the registry itself, as it stood when the operation planned.

The operation's view of the registry (``RepairView``): a bookie leaves the simulated
registry once it has been down for the lost-bookie delay (``Auditor.gone``; a bookie
the real registry drops sooner, a killed one's session expiring, is modelled by the
delay too), a writable bookie is up and not read-only, and the open-ledger grace runs
from when the worker saw a bookie go down, or from its own start if that was before
(``missing_since``, as the real ``MissingSince``), or from when a probe found a
registered bookie silent since it last joined the registry.

Any failure (an effect's error, no source, a metadata failure, a recovery that fails)
releases the lock and backs off for a while; another worker, or this one later, tries
again. A worker "crashes" (its ZooKeeper session is lost): it stops at once, its
requests already sent still land, and its lock frees when the session expires; it
comes back later, with a new session.

The lock, as replicator/worker.py and services/zk/underreplication.py take it: the
lock belongs to the worker's session. A create or a delete of it may answer
ConnectionLoss, landed or not (``lock_connection_loss_p``), leaving the session
SUSPENDED for less than its time-out. A create is then decided by reading the lock
back once reconnected (a lock of this session for this worker is ours); a release
waits the drop out and deletes the lock only while its session owns it, at the
version read. The worker takes no other ledger until its lock is released.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bookie.stored import runs_of
from services.bookie_client import BookieAddResult
from services.errors import InvariantViolation
from services.protocol.messages import RecoveryDone
from services.protocol.metadata import LedgerMetadata
from services.protocol.reads import record_usable
from services.protocol.repair import (
    AskStored,
    ClearMark,
    Copied,
    CopyShare,
    Effect,
    Event,
    Failed,
    Finished,
    MarkCleared,
    MarkRead,
    MetadataRead,
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
from services.protocol.replication import Repair
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
    mark: SimMark | None = None  # the mark the operation read last
    op: RepairOp | None = None
    copy: CopyShare | None = None  # the copy being carried out
    # when the operation last planned, and since when each bookie was missing then, by
    # the registry itself (down) or by a probe (silent): what a recovery is judged on
    planned_at: int = 0
    missing_at_plan: dict[str, int] = field(default_factory=dict)


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
        # registered bookies a probe found silent -> (since, the bookie's crash epoch then)
        self._silent: dict[str, tuple[int, int]] = {}

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
        self._silent = {}
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
        world, lid = self.world, job.ledger.ledger_id
        world.marks.begin_repair(lid, self.name)
        grace_ms = world.config.autorecovery.open_ledger_grace_ms
        job.op = RepairOp(lid, _View(self, job), world.rng, grace_ms)
        self._drive(job, job.op.start(world.scheduler.now))

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

    # ------------------------------------------------------------------ the operation

    def _drive(self, job: Job, effects: list[Effect]) -> None:
        """Carry out ``effects`` in order: reports at once, the action, or the end."""
        if not self._alive(job):
            return
        stats = self.world.stats
        for effect in effects:
            if isinstance(effect, Finished):
                self._finished(job, effect)
                return
            if isinstance(effect, Failed):
                self._abort(job, effect.error.__name__)
                return
            if isinstance(effect, Planned):
                self._planned(job)
                continue
            if isinstance(effect, Repaired):
                if not effect.in_place:
                    continue
                if effect.entries:
                    stats["missing replicas copied back in place"] += 1
                else:
                    stats["named bookie found whole"] += 1
                continue
            self._carry_out(job, effect)

    def _planned(self, job: Job) -> None:
        world = self.world
        job.planned_at = world.scheduler.now
        silent = {b: since for b, (since, _) in self._silent.items()}
        job.missing_at_plan = {**silent, **world.down_since}

    def _answer(self, job: Job, event: Event) -> None:
        """Feed ``event`` to the job's operation (unless the worker died meanwhile)."""
        if not self._alive(job):
            return
        op = job.op
        if op is None:
            raise InvariantViolation("an answer without an operation")
        self._drive(job, op.handle(event, self.world.scheduler.now))

    def _finished(self, job: Job, effect: Finished) -> None:
        if effect.outcome is Outcome.POSTPONED:
            self._finish(job, "postponed (open ledger)", effect.due_ms)
        elif effect.outcome is Outcome.DONE:
            self._finish(job, "repaired")
        elif effect.outcome is Outcome.GONE:
            self._finish(job, "mark gone")
        else:
            self._finish(job, "stopped")

    def _carry_out(self, job: Job, effect: Effect) -> None:
        world, lid = self.world, job.ledger.ledger_id
        if isinstance(effect, ReadMark):
            job.mark = world.marks.get(lid)
            mark = job.mark
            self._answer(job, NoMark() if mark is None else MarkRead(mark.missing, mark.version))
        elif isinstance(effect, ReadMetadata):
            self._read_metadata(job)
        elif isinstance(effect, ClearMark):
            ledger_version = effect.metadata_version
            if ledger_version is not None and job.ledger.cell.version != ledger_version:
                world.stats["mark kept: the metadata changed since the plan"] += 1
                cleared = False  # the transaction's check failed: nothing deleted
            else:
                cleared = world.marks.clear(lid, effect.version, self.session)
            if cleared:
                job.ledger.checker.on_mark_cleared(effect.missing, self.name)
                world.stats["mark cleared by a worker"] += 1
            self._answer(job, MarkCleared(cleared))
        elif isinstance(effect, Probe):
            self._probe(job, effect.bookies)
        elif isinstance(effect, AskStored):
            self._ask_stored(job, effect.bookie)
        elif isinstance(effect, CopyShare):
            job.copy = effect
            wanted = list(effect.wanted)
            self._copy_batch(job, effect.metadata, effect.repair, effect.target, wanted, 0,
                             lambda: self._answer(job, Copied()))  # fmt: skip
        elif isinstance(effect, Swap):
            self._swap(job, effect)
        elif isinstance(effect, Recover):
            self._recover(job, effect)
        else:
            raise InvariantViolation(f"{effect} is not an action")

    def _read_metadata(self, job: Job) -> None:
        """A metadata read from a ZooKeeper follower: maybe stale (a CAS, or the check of
        a mark's clear, catches that)."""
        world, ledger = self.world, job.ledger

        def arrive() -> None:
            if not self._alive(job):
                return
            if world.faults.metadata_fail_p and world.rng.random() < world.faults.metadata_fail_p:
                self._abort(job, "metadata read failed")
                return
            self._answer(job, MetadataRead(*ledger.read_metadata(self.name, stale=True)))

        world.scheduler.after(world.network.delay(), arrive)

    def _probe(self, job: Job, bookies: tuple[str, ...]) -> None:
        """Ask each of ``bookies`` what it stores; those that answer in time answer."""
        lid, pending = job.ledger.ledger_id, len(bookies)
        answering: set[str] = set()

        def answered(bookie: str, result: Any) -> None:
            nonlocal pending
            if isinstance(result, list):
                answering.add(bookie)
            pending -= 1
            if pending == 0:
                self._answer(job, Probed(frozenset(answering)))

        for bookie in bookies:

            def on(result: Any, bookie: str = bookie) -> None:
                answered(bookie, result)

            bookie_call(self.world, self.name, bookie,
                        lambda b, reply: reply(b.stored_ids(lid)), on)  # fmt: skip

    def _ask_stored(self, job: Job, bookie: str) -> None:
        lid = job.ledger.ledger_id

        def answer(result: Any) -> None:
            if isinstance(result, list):
                self._answer(job, StoredRead(tuple(runs_of(result)), corrupt=False))
            else:
                self._answer(job, StoredUnknown())

        bookie_call(self.world, self.name, bookie,
                    lambda b, reply: reply(b.stored_ids(lid)), answer)  # fmt: skip

    def _recover(self, job: Job, effect: Recover) -> None:
        """Fence and close the ledger with the simulator's ``Recoverer``."""
        world = self.world
        # The grace's promise, checked from the registry itself rather than from this
        # worker's view of it: a writer is fenced only once a bookie of its open
        # fragment has been missing for the whole grace (issue 35 item 7), when the
        # operation decided it (its plan; a bookie may be back by the time of the fence).
        planned, grace_ms = job.planned_at, world.config.autorecovery.open_ledger_grace_ms
        known = {b: job.missing_at_plan[b] for b in effect.bookies if b in job.missing_at_plan}
        if known and max(planned - t for t in known.values()) < grace_ms:
            job.ledger.checker.fail(
                f"{self.name} recovers the open ledger before its grace of {grace_ms} ms: "
                f"its last fragment's {sorted(known)} missing only since "
                f"{min(known.values())} ms"
            )
        self._recoveries += 1
        world.stats["open ledger recovered by a worker"] += 1

        def done(result: RecoveryDone | None) -> None:
            if not self._alive(job):
                return
            if result is None:
                self._abort(job, "recovery failed")
            else:
                self._answer(job, Recovered())

        name = f"{self.name}-rec{self._recoveries}"
        recoverer = Recoverer(job.ledger, name, attempts_max=3, on_done=done)
        job.ledger.recoverers.append(recoverer)
        recoverer.start()

    def missing_since(self, job: Job, bookie: str) -> int:
        """Since when this worker has seen ``bookie`` missing: from its leaving the
        registry, or from this worker's start if that was before (the real
        ``MissingSince`` starts empty and only ever makes a worker wait longer); a
        registered bookie, from the probe that first found it silent since it last joined
        the registry (the real one forgets a bookie that registers again: a crash, here a
        new epoch of the bookie, ends its registration). With the old rule
        (``GRACE_FROM_MISSING_SINCE`` off, issue 35 item 7), the mark's ``marked_at``."""
        if not GRACE_FROM_MISSING_SINCE:
            mark = job.mark
            if mark is None:
                raise InvariantViolation("a grace without a mark")
            return mark.marked_at
        down = self.world.down_since.get(bookie)
        if down is not None:
            return max(down, self._started_at)
        epoch, now = self.world.bookies[bookie].epoch, self.world.scheduler.now
        since, seen_in = self._silent.get(bookie, (now, epoch))
        if seen_in != epoch:
            since = now  # it left the registry and joined again since: a new absence
        self._silent[bookie] = (since, epoch)
        return since

    # ------------------------------------------------------------------ copying

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
        spec = job.copy
        if spec is None:
            raise InvariantViolation("copying without a copy effect")
        sources = {
            e: [b for b in md.write_set_bookies(e)
                if b != target and b not in spec.unusable and b not in spec.last_resort]
            + [b for b in md.write_set_bookies(e) if b != target and b in spec.last_resort]
            for e in ids
        }  # fmt: skip

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
                self._answer(job, TargetFailed("the target did not store the copies"))

        bookie_call(self.world, self.name, target,
                    lambda b, reply: b.submit_add(copies, reply), done,
                    duplicable=True)  # fmt: skip

    # ------------------------------------------------------------------ swapping

    def _swap(self, job: Job, effect: Swap) -> None:
        """The compare-and-set: a request already sent lands even if the worker died."""
        world, ledger = self.world, job.ledger

        def arrive() -> None:
            if world.faults.metadata_fail_p and world.rng.random() < world.faults.metadata_fail_p:
                if self._alive(job):
                    self._abort(job, "metadata write failed")
                return
            ok = ledger.cell.compare_and_set(effect.after, effect.version)
            if ok:
                ledger.checker.on_swap(effect.before, effect.repair, effect.target, self.name)
            ledger.checker.after_metadata_write(self.name)
            if ok:
                world.stats["bookie swapped by a worker"] += 1
                self._answer(job, Swapped())
            else:
                world.stats["worker swap conflicted"] += 1
                self._answer(job, SwapConflict())

        world.scheduler.after(world.network.delay(), arrive)


class _View:
    """``RepairView`` over the simulated registry, for one job of ``worker``."""

    def __init__(self, worker: ReplicationWorker, job: Job) -> None:
        self.worker = worker
        self.world = worker.world
        self.job = job

    @property
    def enabled(self) -> bool:
        return not self.worker.stopped

    @property
    def writable(self) -> Collection[str]:
        world = self.world
        return [
            b.bookie_id for b in world.bookie_list
            if b.bookie_id not in world.down_since and not b.readonly
        ]  # fmt: skip

    @property
    def racks(self) -> dict[str, str | None]:
        """The simulated bookies register no rack: one rack, placement asks nothing."""
        return {b.bookie_id: None for b in self.world.bookie_list if self.usable(b.bookie_id)}

    def usable(self, bookie: str) -> bool:
        auditor = self.world.auditor
        return auditor is None or not auditor.gone(bookie)

    def leaving(self, bookie: str) -> bool:
        return False  # the simulator decommissions nobody

    def instance_of(self, bookie: str) -> str | None:
        return self.world.bookies[bookie].instance_id if self.usable(bookie) else None

    def missing_since(self, bookie: str) -> int:
        return self.worker.missing_since(self.job, bookie)

    def back(self, bookie: str) -> None:
        self.worker._silent.pop(bookie, None)
