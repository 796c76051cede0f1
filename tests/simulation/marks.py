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
- A lock is an ephemeral node: a worker's locks go when its session expires
  (``expire``), which the simulator does some time after the worker "crashes".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SimMark:
    missing: frozenset[str]
    marked_at: int
    version: int


class MarkTable:
    def __init__(self) -> None:
        self.marks: dict[int, SimMark] = {}
        self.locks: dict[int, str] = {}  # ledger id -> worker (session) holding it
        self.created = 0  # how many marks were ever created (for the reach test)
        self.cleared = 0

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

    def clear(self, ledger_id: int, version: int) -> bool:
        """Delete the mark if it is still at ``version``: False when it changed (a bookie
        was merged in: re-read it), True when it is gone (also when it already was)."""
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

    def try_lock(self, ledger_id: int, owner: str) -> bool:
        if ledger_id in self.locks:
            return False
        self.locks[ledger_id] = owner
        return True

    def holds(self, ledger_id: int, owner: str) -> bool:
        return self.locks.get(ledger_id) == owner

    def unlock(self, ledger_id: int, owner: str) -> None:
        if self.locks.get(ledger_id) == owner:
            del self.locks[ledger_id]

    def expire(self, owner: str) -> None:
        """``owner``'s session expired: its ephemeral locks are deleted."""
        for ledger_id in [lid for lid, o in self.locks.items() if o == owner]:
            del self.locks[ledger_id]
