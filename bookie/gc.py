"""The rule that decides which ledgers a bookie may garbage-collect (docs/operations.md,
"Space given back"). Pure: no I/O and no clock; the runner (bookie/collector.py) reads
ZooKeeper and the store, passes the times in, and carries the plan out.

A bookie keeps a ledger's entries until the ledger's metadata is gone from ZooKeeper: a
gateway deletes the znode first, then asks each bookie to delete; a bookie that was down
then keeps the data, and garbage collection gives that space back. Ledger metadata is
created before any entry reaches a bookie and a ledger id is never reused, so a ledger
this bookie stores has metadata until someone deletes it. What must never happen is
deleting a ledger whose metadata merely is not visible yet (a lagging ZooKeeper
server, a session that is reconnecting). The rule:

- a ledger's local data is deleted only when its metadata was found missing by two
  reads at least the grace apart (measured from the moment the first read answered to
  the moment the second one started), both successful and both made while the session
  was connected (the runner syncs the server with the leader before reading);
- and only when the bookie got no write for the ledger since the first of those reads
  (``written`` forgets its first look; the ledger's state must also be the one seen at
  the first look, and the delete itself is conditional on it: bookie/apply.py).

A ZooKeeper error ends the pass: the ledger it was about and every later one are kept,
with their first looks untouched. A dry run applies the same rule to the same looks but
records nothing: it neither starts nor clears a ledger's clock, so it can never make a
later real pass delete sooner than the rule allows. Deletes are bounded per pass; a
ledger past the grace beyond the bound is pending and deleted by a later pass (after a
new second look).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bookie.operations import Snapshot


class Found(enum.Enum):
    """What one read of a ledger's metadata found."""

    PRESENT = "present"
    MISSING = "missing"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Look:
    """One read of a ledger's metadata: when it started and answered (monotonic ms), the
    wall time it answered (ms since the epoch, for the report), and the ledger's local
    state when the pass listed it."""

    ledger_id: int
    state: Snapshot
    found: Found
    started_ms: int
    answered_ms: int
    wall_ms: int


@dataclass(frozen=True, slots=True)
class FirstLook:
    """The first successful read that found a ledger's metadata missing."""

    answered_ms: int
    wall_ms: int
    state: Snapshot


@dataclass(slots=True)
class Plan:
    """What a pass decided: ledgers to delete now (within the bound) with the state each
    must still have, ledgers past the grace left for a later pass, ledgers waiting for
    their second look, and the error that ended the looks, if any."""

    delete: list[tuple[int, Snapshot]] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    error_at: int | None = None


class GcRules:
    """The first looks of ledgers whose metadata was found missing, and the rule."""

    def __init__(self, grace_ms: int) -> None:
        self.grace_ms = grace_ms
        self._first: dict[int, FirstLook] = {}

    def first_look(self, ledger_id: int) -> FirstLook | None:
        return self._first.get(ledger_id)

    def missing(self) -> dict[int, FirstLook]:
        """Every ledger found missing and not deleted yet, by id (a copy)."""
        return dict(self._first)

    def written(self, ledger_ids: Iterable[int]) -> None:
        """The bookie committed a write (or a delete) for these ledgers: their clocks
        start again at the next look."""
        first = self._first
        if first:
            for lid in ledger_ids:
                first.pop(lid, None)

    def deleted(self, ledger_id: int) -> None:
        self._first.pop(ledger_id, None)

    def retain(self, ledger_ids: Iterable[int]) -> None:
        """Forget the ledgers this bookie no longer stores (deleted by a gateway)."""
        keep = set(ledger_ids)
        for lid in [lid for lid in self._first if lid not in keep]:
            del self._first[lid]

    def due(self, first: FirstLook, now_ms: int) -> bool:
        """Whether a look starting at ``now_ms`` would be the second look of the rule."""
        return now_ms - first.answered_ms >= self.grace_ms

    def plan(self, looks: Sequence[Look], deletes_max: int, *, dry_run: bool) -> Plan:
        """Apply the rule to a pass's looks, in order. The looks end at the first error
        (the runner stops reading there); that ledger and those after it are kept."""
        out = Plan()
        for look in looks:
            lid = look.ledger_id
            if look.found is Found.ERROR:
                out.error_at = lid
                break
            if look.found is Found.PRESENT:
                if not dry_run:
                    self._first.pop(lid, None)
                continue
            first = self._first.get(lid)
            if first is None or first.state != look.state:
                # A first look (or a write changed the ledger since the last one).
                if not dry_run:
                    self._first[lid] = FirstLook(look.answered_ms, look.wall_ms, look.state)
                out.waiting.append(lid)
            elif look.started_ms - first.answered_ms < self.grace_ms:
                out.waiting.append(lid)
            elif len(out.delete) < deletes_max:
                out.delete.append((lid, look.state))
            else:
                out.pending.append(lid)
        return out
