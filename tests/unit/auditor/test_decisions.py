"""The auditor's pure decisions: lost bookies, placement, replica gaps, clearing marks."""

from __future__ import annotations

from dataclasses import dataclass

from auditor.decisions import (
    BookieWatch,
    InstanceWatch,
    bookie_counts,
    decommission_done,
    mark_clearable,
    misplaced,
    placement_missing,
    replica_missing,
    replica_whole,
    settled_shares,
)
from services.protocol.metadata import Fragment, LedgerMetadata, LedgerState


@dataclass(frozen=True)
class Stored:
    ranges: tuple[tuple[int, int], ...] = ()
    known: bool = True
    corrupt: tuple[int, ...] = ()
    truncated: bool = False

    def holds(self, entry_id: int) -> bool:
        return any(lo <= entry_id <= hi for lo, hi in self.ranges)


def _ledger(fragments: list[tuple[int, tuple[str, ...]]], last: int | None, e: int = 3,
            qw: int = 3) -> LedgerMetadata:  # fmt: skip
    return LedgerMetadata(
        ledger_id=1,
        ensemble_size=e,
        write_quorum=qw,
        ack_quorum=2,
        fragments=tuple(Fragment(first, bookies) for first, bookies in fragments),
        state=LedgerState.CLOSED if last is not None else LedgerState.OPEN,
        last_entry_id=last,
    )


def test_a_bookie_is_lost_only_after_the_delay_and_back_means_nothing() -> None:
    """Gone since first seen missing; lost once the delay passed; reported once; a
    bookie back within the delay is forgotten (a later absence counts afresh)."""
    watch = BookieWatch(delay_ms=1000)
    watch.observe({"a", "b"}, {"a", "b", "c"}, now_ms=0)  # c: cookie, not registered
    assert watch.lost(999) == set()
    assert watch.next_deadline_ms(0) == 1000
    assert watch.newly_lost(1000) == {"c"}
    assert watch.newly_lost(1500) == set()
    watch.observe({"a"}, {"a", "b", "c"}, now_ms=2000)  # b leaves
    watch.observe({"a", "b"}, {"a", "b", "c"}, now_ms=2500)  # and is back within the delay
    assert watch.lost(5000) == {"c"}
    watch.observe({"a"}, {"a", "b", "c"}, now_ms=6000)  # b leaves again: counted anew
    assert watch.lost(6999) == {"c"} and watch.lost(7000) == {"b", "c"}


def test_placement_names_lost_and_decommissioning_bookies_of_any_fragment() -> None:
    """Every fragment counts (an empty one of a CLOSED ledger too), and only lost or
    decommissioning bookies are missing."""
    ledger = _ledger([(0, ("a", "b", "c")), (5, ("a", "b", "d"))], last=4)
    assert placement_missing(ledger, lost={"d"}, decommissioning=()) == {"d"}
    assert placement_missing(ledger, lost=(), decommissioning={"c"}) == {"c"}
    assert placement_missing(ledger, lost={"x"}, decommissioning=()) == set()


def test_settled_shares_skip_the_open_last_fragment() -> None:
    """An open ledger's last fragment is not checked; its earlier ones are."""
    ledger = _ledger([(0, ("a", "b", "c")), (10, ("a", "b", "d"))], last=None)
    shares = settled_shares(ledger)
    assert set(shares) == {"a", "b", "c"}
    assert shares["c"] == [(0, 9, 2)]


def test_replica_gaps_and_corrupt_entries_are_missing() -> None:
    """E=3, Qw=2: bookie index 0 stores entries 0, 2, 3, 5, ...; lacking one of them or
    holding a corrupt one makes it missing; entries it need not hold do not matter."""
    ledger = _ledger([(0, ("a", "b", "c"))], last=5, e=3, qw=2)
    whole = Stored(((0, 0), (2, 3), (5, 5)))
    assert replica_whole(ledger, "a", whole) is True
    assert replica_whole(ledger, "a", Stored(((0, 0), (2, 3)))) is False
    assert replica_whole(ledger, "a", Stored(((0, 5),), corrupt=(1,))) is True
    assert replica_whole(ledger, "a", Stored(((0, 5),), corrupt=(3,))) is False
    assert replica_whole(ledger, "a", Stored(known=False)) is False
    assert replica_whole(ledger, "a", Stored(((0, 0),), truncated=True)) is None


def test_replica_missing_reports_completeness() -> None:
    """A bookie that did not answer leaves the check incomplete (no mark cleared for
    it, no mark written for it either)."""
    ledger = _ledger([(0, ("a", "b", "c"))], last=2)
    full = Stored(((0, 2),))
    assert replica_missing(ledger, {"a": full, "b": full, "c": full}) == (set(), True)
    assert replica_missing(ledger, {"a": full, "b": Stored(((0, 1),))}) == ({"b"}, False)


def test_an_empty_closed_ledger_needs_no_replica() -> None:
    """last_entry_id -1: nothing to hold, so every check is whole."""
    ledger = _ledger([(0, ("a", "b", "c"))], last=-1)
    assert settled_shares(ledger) == {}
    assert replica_missing(ledger, {}) == (set(), True)


def test_a_long_share_is_checked_at_the_run_edges() -> None:
    """A share too long to walk entry by entry: a gap right after a run is found."""
    ledger = _ledger([(0, ("a", "b", "c"))], last=3_000_000)
    assert replica_whole(ledger, "a", Stored(((0, 3_000_000),))) is True
    gap = Stored(((0, 1_000_000), (1_000_002, 3_000_000)))
    assert replica_whole(ledger, "a", gap) is False


def test_a_mark_clears_only_when_every_bookie_is_back_and_whole() -> None:
    """Clearable: every bookie the fragments name is registered and not
    decommissioning, and the replicas were whole. The bookies the mark names do not
    matter once no fragment names them."""
    ledger = _ledger([(0, ("a", "b", "c"))], last=2)
    assert mark_clearable(ledger, {"a", "b", "c"}, (), replicas_whole=True)
    assert not mark_clearable(ledger, {"a", "b", "c"}, (), replicas_whole=False)
    assert not mark_clearable(ledger, {"a", "b"}, (), replicas_whole=True)
    assert not mark_clearable(ledger, {"a", "b", "c"}, {"c"}, replicas_whole=True)


def test_decommission_is_done_when_no_fragment_names_the_bookie() -> None:
    """Only decommissioning bookies absent from every fragment are done."""
    assert decommission_done({"a", "b"}, named_anywhere={"b", "c"}) == {"a"}


def test_bookie_counts_match_the_admin_cluster_object() -> None:
    """Registered bookies are writable or readonly (a decommissioning one is never
    writable); a known bookie that is not registered is unavailable unless it was
    decommissioned."""
    counts = bookie_counts(
        registered=["a:1", "b:1", "c:1"],
        writable=["a:1"],
        known=["a:1", "b:1", "c:1", "d:1", "e:1"],
        decommissioned=["e:1"],
    )
    assert counts == {"writable": 1, "readonly": 2, "unavailable": 1}
    assert bookie_counts([], [], [], []) == {"writable": 0, "readonly": 0, "unavailable": 0}


def test_misplaced_reports_fragments_and_whether_a_move_fixes_them() -> None:
    """docs/operations.md Racks: a fragment with a write quorum on one rack breaks the
    policy; it is movable only while a writable bookie on a rack it lacks exists, and a
    cluster of one rack (no --rack anywhere) has no violation at all."""
    md = LedgerMetadata.new(1, ["a", "b", "c"], 2, 2).closed(9, 90)
    three: dict[str, str | None] = {"a": "r1", "b": "r2", "c": "r1", "d": "r3"}
    assert misplaced(md, three, ["d"]) == ([0], True)
    assert misplaced(md, three, []) == ([0], False)
    two = {"a": "r1", "b": "r2", "c": "r1", "d": "r2"}
    assert misplaced(md, two, ["d"]) == ([0], False)
    assert misplaced(md, {"a": None, "b": None, "c": None}, ["d"]) == ([], False)


def test_a_bookie_registered_again_as_another_instance_is_renewed_once() -> None:
    """A bookie formatted and registered again has a new instance: it is reported once;
    one seen for the first time, one that registered none, or one gone (not registered
    now) are not."""
    watch = InstanceWatch()
    assert watch.renewed({"a": "a1", "b": "b1", "c": None}) == []
    assert watch.renewed({"a": "a2", "b": "b1"}) == ["a"]
    assert watch.renewed({"a": "a2", "b": "b1"}) == []
    assert watch.renewed({"b": "b1", "d": "d1"}) == []
    assert watch.renewed({"a": "a3", "c": "c1"}) == ["a"]
