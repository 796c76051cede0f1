"""Auto-recovery's shared state, in memory: the under-replication marks and the
per-ledger replication locks, with the semantics of services/zk/underreplication.py
and ZooKeeper's.

- A mark names the missing bookies of one ledger and carries ``marked_at``. Marking
  again merges the bookies (the node's version grows by one); a mark is deleted
  guarded by the version its deleter read. As in ZooKeeper, a node created again
  after a delete starts at version 0 again, so a delete guarded by a version read
  before somebody else's delete and re-create could remove a newer mark (ABA). The
  simulated auditor and workers avoid that by one rule: a mark is deleted only by
  the holder of the ledger's lock (see ``auditor`` and ``worker``).
- A lock is an ephemeral node owned by a ZooKeeper session (``SimLock.session``), as
  services/zk/underreplication.py holds it: its locks go when the session ends
  (``expire``: some time after a worker "crashes", or the auditor's session ending
  under it), and a lock there after that (at version 0 again) is somebody else's. So a
  holder deletes a lock only while its session owns it, at the version read.

Two invariants are checked here, as they happen: no two workers repair one ledger at
once (``begin_repair``), and a mark is deleted only by the holder of the ledger's lock
(``clear``). That every lock is eventually released is checked at the end of a run
(``Checker.final_replication``: no lock left on a ledger that must end whole).
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.simulation.checker import Violation


@dataclass(frozen=True, slots=True)
class SimMark:
    missing: frozenset[str]
    marked_at: int
    version: int


@dataclass(frozen=True, slots=True)
class SimLock:
    holder: str  # the worker's name (or the auditor's) written in the lock
    session: int  # the ZooKeeper session owning the ephemeral znode
    version: int = 0


class MarkTable:
    def __init__(self) -> None:
        self.marks: dict[int, SimMark] = {}
        self.locks: dict[int, SimLock] = {}
        self.repairing: dict[int, str] = {}  # ledger id -> the worker repairing it now
        self.created = 0  # how many marks were ever created (for the reach test)
        self.cleared = 0
        self._sessions = 0

    # ------------------------------------------------------------------ marks

    def mark(self, ledger_id: int, missing: frozenset[str], now: int) -> SimMark:
        """Create the mark or merge ``missing`` into it (a no-op when already named)."""
        current = self.marks.get(ledger_id)
        if current is None:
            self.created += 1
            new = SimMark(missing, now, 0)
        elif missing <= current.missing:
            return current
        else:
            new = SimMark(current.missing | missing, current.marked_at, current.version + 1)
        self.marks[ledger_id] = new
        return new

    def get(self, ledger_id: int) -> SimMark | None:
        return self.marks.get(ledger_id)

    def clear(self, ledger_id: int, version: int, session: int) -> bool:
        """Delete the mark if it is still at ``version``: False when it changed (a bookie
        was merged in: re-read it), True when it is gone (also when it already was).
        ``session`` must hold the ledger's lock (the invariant of the module docstring)."""
        lock = self.locks.get(ledger_id)
        if lock is None or lock.session != session:
            raise Violation(
                f"ledger {ledger_id}: a mark deleted by session {session}, which does not "
                f"hold the ledger's lock ({lock})"
            )
        current = self.marks.get(ledger_id)
        if current is None:
            return True
        if current.version != version:
            return False
        del self.marks[ledger_id]
        self.cleared += 1
        return True

    def marked(self) -> list[int]:
        return sorted(self.marks)

    # ------------------------------------------------------------------ locks

    def new_session(self) -> int:
        self._sessions += 1
        return self._sessions

    def create_lock(self, ledger_id: int, holder: str, session: int) -> bool:
        """ZooKeeper's create of the ephemeral lock: False when it exists (NodeExists)."""
        if ledger_id in self.locks:
            return False
        self.locks[ledger_id] = SimLock(holder, session)
        return True

    def lock(self, ledger_id: int) -> SimLock | None:
        return self.locks.get(ledger_id)

    def holds(self, ledger_id: int, session: int) -> bool:
        lock = self.locks.get(ledger_id)
        return lock is not None and lock.session == session

    def delete_lock(self, ledger_id: int, version: int) -> bool:
        """ZooKeeper's delete at ``version``: False when the lock is not at it (or gone)."""
        lock = self.locks.get(ledger_id)
        if lock is None or lock.version != version:
            return False
        del self.locks[ledger_id]
        return True

    def expire(self, session: int) -> None:
        """``session`` ended: its ephemeral locks are deleted."""
        for ledger_id in [lid for lid, lock in self.locks.items() if lock.session == session]:
            del self.locks[ledger_id]

    # ------------------------------------------------------------------ the invariant

    def begin_repair(self, ledger_id: int, worker: str) -> None:
        """``worker`` starts repairing, holding the lock: nobody else may be at it."""
        other = self.repairing.get(ledger_id)
        if other is not None and other != worker:
            raise Violation(f"ledger {ledger_id}: {worker} and {other} repair it at once")
        self.repairing[ledger_id] = worker

    def end_repair(self, ledger_id: int, worker: str) -> None:
        """``worker`` stopped repairing (done, failed, or its session ended)."""
        if self.repairing.get(ledger_id) == worker:
            del self.repairing[ledger_id]
