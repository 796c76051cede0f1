"""The auditor's decisions, pure (docs/style.md §1): no I/O, no clock, no kazoo or asyncio.

- ``InstanceWatch``: which bookies registered again as a new instance (formatted).
- ``BookieWatch``: which bookies are *lost* (gone longer than the lost-bookie delay).
  A bookie is known when it is registered, has a cookie, or a fragment names it; a
  known bookie that is not registered is gone since the auditor first saw it missing
  (``observe`` passes the time in). A bookie back within the delay is forgotten, so it
  causes nothing.
- ``placement_missing``: the bookies of a ledger's fragments that are lost or being
  decommissioned: the ledger's mark names them.
- ``replica_missing``: the bookies that answered for a ledger but lack an entry they
  must hold (their share of each entry's write set) or hold a corrupt one.
- ``misplaced``: the fragments of a ledger that break the rack policy, and whether a
  placement move can fix one (docs/operations.md "Racks"): then the mark asks for it.
- ``mark_clearable``: a mark is cleared when every bookie the ledger's fragments name
  is registered and not decommissioning, and every one answered the replica check
  whole.

Only settled spans are checked for replicas: every fragment of a CLOSED ledger, and
the non-last fragments of one that is not (its last fragment may still grow).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from auditor.limits import REPLICA_WALK_ENTRIES_MAX
from services.protocol.metadata import LedgerMetadata
from services.protocol.placement import Racks
from services.protocol.replication import (
    count_on,
    entries_on,
    holds,
    misplaced_spans,
    placement_moves,
    spans,
)


class StoredView(Protocol):
    """What a bookie said it stores of one ledger (``services.bookie_client.StoredInfo``)."""

    @property
    def known(self) -> bool: ...
    @property
    def ranges(self) -> tuple[tuple[int, int], ...]: ...
    @property
    def corrupt(self) -> tuple[int, ...]: ...
    @property
    def truncated(self) -> bool: ...
    def holds(self, entry_id: int) -> bool: ...


@dataclass
class BookieWatch:
    """Which known bookies are gone, since when, and which are lost (ms clock)."""

    delay_ms: int
    gone_since: dict[str, int] = field(default_factory=dict)
    registered: frozenset[str] = frozenset()
    lost_reported: set[str] = field(default_factory=set)

    def observe(self, registered: Iterable[str], known: Iterable[str], now_ms: int) -> None:
        """The registry now holds ``registered``; ``known`` are the other bookies the
        auditor knows of (cookies, fragments). A bookie back is forgotten."""
        self.registered = frozenset(registered)
        for bookie in list(self.gone_since):
            if bookie in self.registered:
                del self.gone_since[bookie]
                self.lost_reported.discard(bookie)
        for bookie in known:
            if bookie not in self.registered and bookie not in self.gone_since:
                self.gone_since[bookie] = now_ms

    def lost(self, now_ms: int) -> set[str]:
        """Bookies gone for at least the delay."""
        return {b for b, since in self.gone_since.items() if now_ms - since >= self.delay_ms}

    def newly_lost(self, now_ms: int) -> set[str]:
        """Lost bookies not reported before (each is reported once per absence)."""
        fresh = self.lost(now_ms) - self.lost_reported
        self.lost_reported |= fresh
        return fresh

    def next_deadline_ms(self, now_ms: int) -> int | None:
        """When the next gone bookie becomes lost (None: none is pending)."""
        ends = (since + self.delay_ms for since in self.gone_since.values())
        return min((end for end in ends if end > now_ms), default=None)


@dataclass
class InstanceWatch:
    """Each bookie's instance as last registered: one registered again as another was
    formatted, and every fragment that recorded the old one lost its share."""

    seen: dict[str, str] = field(default_factory=dict)

    def renewed(self, registered: Mapping[str, str | None]) -> list[str]:
        """The bookies of ``registered`` (id -> instance) whose instance is not the one
        seen last; what is registered becomes the instance seen."""
        known = {b: i for b, i in registered.items() if i}
        renewed = sorted(b for b, i in known.items() if self.seen.get(b, i) != i)
        self.seen.update(known)
        return renewed


def named_bookies(metadata: LedgerMetadata) -> set[str]:
    return {b for fragment in metadata.fragments for b in fragment.bookies}


def placement_missing(
    metadata: LedgerMetadata, lost: Collection[str], decommissioning: Collection[str]
) -> set[str]:
    """Bookies some fragment names that are lost or being decommissioned. Empty
    fragments of a CLOSED ledger count too: the bookie must leave them as well."""
    return {b for b in named_bookies(metadata) if b in lost or b in decommissioning}


def misplaced(
    metadata: LedgerMetadata, racks: Racks, writable: Collection[str]
) -> tuple[list[int], bool]:
    """The first entry ids of the fragments whose write quorums span fewer racks than the
    policy wants (``racks``: every registered bookie and its rack), and whether a writable
    bookie on another rack can improve a settled one (a placement move)."""
    registered = racks.keys()
    firsts = [span.first for span in misplaced_spans(metadata, racks, registered)]
    if not firsts:
        return [], False
    return firsts, bool(placement_moves(metadata, racks, registered, writable))


def settled_shares(metadata: LedgerMetadata) -> dict[str, list[tuple[int, int, int]]]:
    """For each bookie, the settled spans it must hold part of, as ``(first, last,
    bookie index)``: every fragment of a CLOSED ledger, the non-last ones otherwise."""
    out: dict[str, list[tuple[int, int, int]]] = {}
    for span in spans(metadata):
        if span.last is None or span.empty:
            continue
        e, qw = metadata.ensemble_size, metadata.write_quorum
        for index, bookie in enumerate(span.bookies):
            if count_on(span.first, span.last, index, e, qw):
                out.setdefault(bookie, []).append((span.first, span.last, index))
    return out


def replica_whole(metadata: LedgerMetadata, bookie: str, info: StoredView) -> bool | None:
    """Whether ``bookie`` holds (uncorrupted) every entry of its settled share. None
    when its answer cannot tell (a cut list of runs that does not show them all)."""
    shares = settled_shares(metadata).get(bookie, [])
    if not shares:
        return True
    if not info.known:
        return False
    e, qw = metadata.ensemble_size, metadata.write_quorum
    for entry_id in info.corrupt:
        for first, last, index in shares:
            if first <= entry_id <= last and holds(entry_id, index, e, qw):
                return False
    for first, last, index in shares:
        if last - first + 1 > REPLICA_WALK_ENTRIES_MAX:
            if not _covered(info.ranges, first, last):
                if info.truncated:
                    return None
                if not _share_whole(info, first, last, index, e, qw):
                    return False
            continue
        for entry_id in entries_on(first, last, index, e, qw):
            if not info.holds(entry_id):
                return None if info.truncated else False
    return True


def _covered(ranges: Iterable[tuple[int, int]], first: int, last: int) -> bool:
    return any(lo <= first and last <= hi for lo, hi in ranges)


def _share_whole(info: StoredView, first: int, last: int, index: int, e: int, qw: int) -> bool:
    # A share too long to walk entry by entry, not inside one run: look only at the
    # entries at the edges of the runs that cut it (a gap starts right after a run).
    edges = {first, last}
    for lo, hi in info.ranges:
        for candidate in (lo - 1, hi + 1):
            if first <= candidate <= last:
                edges.add(candidate)
    for entry_id in sorted(edges):
        for k in range(e):  # the next entries after the edge that this bookie stores
            candidate = entry_id + k
            if candidate <= last and holds(candidate, index, e, qw):
                if not info.holds(candidate):
                    return False
                break
    return True


def replica_missing(
    metadata: LedgerMetadata, answers: Mapping[str, StoredView]
) -> tuple[set[str], bool]:
    """The bookies among ``answers`` lacking (or holding corrupt) entries they must hold,
    and whether every bookie with a settled share answered and could tell."""
    missing: set[str] = set()
    complete = True
    for bookie in settled_shares(metadata):
        info = answers.get(bookie)
        if info is None:
            complete = False
            continue
        whole = replica_whole(metadata, bookie, info)
        if whole is None:
            complete = False
        elif not whole:
            missing.add(bookie)
    return missing, complete


def mark_clearable(
    metadata: LedgerMetadata,
    registered: Collection[str],
    decommissioning: Collection[str],
    replicas_whole: bool,
) -> bool:
    """Whether a ledger's mark may be deleted: every bookie its fragments name is
    registered now and not being decommissioned, and the replica check saw every
    settled replica whole. The bookies the mark names do not matter: once no fragment
    names them (a worker swapped them out, then died before deleting the mark), the
    ledger is whole without them."""
    named = named_bookies(metadata)
    if any(b not in registered or b in decommissioning for b in named):
        return False
    return replicas_whole


def decommission_done(decommissioning: Iterable[str], named_anywhere: Collection[str]) -> set[str]:
    """Decommissioning bookies that no fragment of any ledger names any more (known
    only after a complete walk of the ledgers)."""
    return {b for b in decommissioning if b not in named_anywhere}


def bookie_counts(
    registered: Collection[str],
    writable: Collection[str],
    known: Collection[str],
    decommissioned: Collection[str],
) -> dict[str, int]:
    """Bookies by state, as the admin API's cluster object counts them: a registered
    bookie is writable or else readonly (a decommissioning one is never writable); a
    known one (a cookie) that is not registered is unavailable unless it was
    decommissioned."""
    counts = {"writable": 0, "readonly": 0, "unavailable": 0}
    for bookie in registered:
        counts["writable" if bookie in writable else "readonly"] += 1
    counts["unavailable"] = len(set(known) - set(registered) - set(decommissioned))
    return counts
