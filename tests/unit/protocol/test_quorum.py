"""Quorum arithmetic (services/protocol/quorum.py) against docs/protocol.md, for every
E >= Qw >= Qa >= 1 up to E = 7."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.errors import InvalidArgument
from services.protocol import quorum

E_MAX = 7
# Deterministic runs: the same examples every time, nothing kept between runs.
DETERMINISTIC = settings(derandomize=True, database=None, deadline=None)
ALL_SIZES = [
    (e, w, a) for e in range(1, E_MAX + 1) for w in range(1, e + 1) for a in range(1, w + 1)
]


@st.composite
def sizes(draw: st.DrawFn) -> tuple[int, int, int]:
    e = draw(st.integers(1, E_MAX))
    w = draw(st.integers(1, e))
    a = draw(st.integers(1, w))
    return e, w, a


@st.composite
def sizes_and_answered(draw: st.DrawFn) -> tuple[int, int, int, set[int]]:
    e, w, a = draw(sizes())
    return e, w, a, draw(st.sets(st.integers(0, e - 1)))


def test_creation_requires_e_ge_qw_ge_qa_ge_1() -> None:
    """docs/protocol.md Ledgers: creation requires E >= Qw >= Qa >= 1, else a clear error."""
    quorum.check_sizes(3, 2, 2)
    for bad in [(2, 3, 1), (3, 2, 3), (3, 0, 0), (0, 0, 0), (3, 2, 0), (-1, -1, -1)]:
        with pytest.raises(InvalidArgument, match="ensemble_size >= write_quorum"):
            quorum.check_sizes(*bad)
    with pytest.raises(InvalidArgument):
        quorum.check_sizes(3, 2, True)  # a bool is not a size


def test_write_quorum_of_entry_is_striped_round_robin_as_in_the_bookkeeper_example() -> None:
    """docs/protocol.md Ledgers: write quorum of e is B[(e + i) % E] for i in 0..Qw-1
    (the E=4, Qw=3 table of the protocol text)."""
    ensemble = ["B1", "B2", "B3", "B4"]
    expected = [
        ["B1", "B2", "B3"],
        ["B2", "B3", "B4"],
        ["B3", "B4", "B1"],
        ["B4", "B1", "B2"],
        ["B1", "B2", "B3"],
        ["B2", "B3", "B4"],
    ]
    for entry_id, want in enumerate(expected):
        assert [ensemble[i] for i in quorum.write_set(entry_id, 4, 3)] == want


@DETERMINISTIC
@given(sizes(), st.integers(0, 10**12))
def test_every_entry_has_qw_distinct_indexes(s: tuple[int, int, int], entry_id: int) -> None:
    """docs/protocol.md Ledgers: each entry goes to Qw distinct bookies of the ensemble, and
    entries E apart share a write set."""
    e, w, _ = s
    indexes = quorum.write_set(entry_id, e, w)
    assert len(indexes) == w == len(set(indexes))
    assert all(0 <= i < e for i in indexes)
    assert indexes[0] == entry_id % e
    assert quorum.write_set(entry_id + e, e, w) == indexes


@pytest.mark.parametrize(("e", "w", "a"), ALL_SIZES)
def test_there_are_exactly_e_distinct_write_quorums(e: int, w: int, a: int) -> None:
    """docs/protocol.md Ledgers: there are E distinct write quorums (one set when Qw = E)."""
    quorums = quorum.write_quorums(e, w)
    assert len(quorums) == e
    distinct_sets = {frozenset(q) for q in quorums}
    assert len(distinct_sets) == (e if w < e else 1)
    # Every entry's write set is one of them.
    assert {frozenset(quorum.write_set(x, e, w)) for x in range(3 * e)} == distinct_sets


def _unfenced_can_reach_ack_quorum(e: int, w: int, a: int, fenced: set[int]) -> bool:
    return any(sum(1 for i in q if i not in fenced) >= a for q in quorum.write_quorums(e, w))


@DETERMINISTIC
@given(sizes_and_answered())
def test_fencing_coverage_means_no_write_quorum_can_gather_qa_unfenced_acks(
    case: tuple[int, int, int, set[int]],
) -> None:
    """docs/protocol.md fencing step 3: once Qw - Qa + 1 bookies of EVERY write quorum
    answered, no write quorum can gather Qa acks from unfenced bookies; and when the
    coverage is not met, some write quorum still can (the rule is also minimal)."""
    e, w, a, answered = case
    complete = quorum.fencing_complete(e, w, a, answered)
    assert complete == (not _unfenced_can_reach_ack_quorum(e, w, a, answered))


@pytest.mark.parametrize(("e", "w", "a"), ALL_SIZES)
def test_fencing_coverage_exhaustively(e: int, w: int, a: int) -> None:
    """docs/protocol.md fencing step 3, every answered subset of every ensemble up to E = 7."""
    for r in range(e + 1):
        for answered in itertools.combinations(range(e), r):
            complete = quorum.fencing_complete(e, w, a, answered)
            assert complete == (not _unfenced_can_reach_ack_quorum(e, w, a, set(answered)))
    assert quorum.fencing_complete(e, w, a, range(e))  # everyone answering always suffices


@DETERMINISTIC
@given(sizes(), st.integers(0, E_MAX))
def test_entry_absent_after_qw_minus_qa_plus_1_missing(
    s: tuple[int, int, int], missing: int
) -> None:
    """docs/protocol.md recovery step 4: an entry missing from Qw - Qa + 1 bookies of its write
    quorum cannot have been acknowledged (at most Qa - 1 copies); with one missing
    answer fewer, Qa copies are still possible, so it must not be called absent."""
    _, w, a = s
    missing = min(missing, w)
    absent = quorum.entry_absent(w, a, missing)
    copies_possible = w - missing
    assert absent == (copies_possible < a)


@DETERMINISTIC
@given(sizes())
def test_ack_quorum_and_fence_quorum_always_intersect(s: tuple[int, int, int]) -> None:
    """docs/protocol.md fencing: any Qa bookies of a write quorum and any Qw - Qa + 1 of its
    bookies share at least one bookie (why fencing and absence are safe)."""
    _, w, a = s
    threshold = quorum.fence_threshold(w, a)
    members = range(w)
    for acks in itertools.combinations(members, a):
        for fenced in itertools.combinations(members, threshold):
            assert set(acks) & set(fenced)


@DETERMINISTIC
@given(sizes(), st.integers(0, E_MAX), st.integers(0, E_MAX))
def test_ack_quorum_helpers(s: tuple[int, int, int], acked: int, failed: int) -> None:
    """docs/protocol.md Ledgers: an entry is replicated enough once Qa bookies acked it; it can
    still get there while fewer than Qw - Qa + 1 bookies of its write quorum failed."""
    _, w, a = s
    acked, failed = min(acked, w), min(failed, w)
    assert quorum.ack_quorum_reached(a, acked) == (acked >= a)
    assert quorum.ack_quorum_possible(w, a, failed) == (failed < quorum.fence_threshold(w, a))
