"""When a bookie was first seen missing: the start of an open ledger's grace."""

from __future__ import annotations

from replicator.openledger import MissingSince


def test_the_grace_runs_from_a_bookies_first_absence_and_restarts_when_it_is_back() -> None:
    """A bookie leaving the registry is missing from then on (a later round does not move
    that time); one that comes back, or answers, starts afresh at its next absence; a
    registered bookie that does not answer is missing from the round that found it; a
    registry change elsewhere does not restart anybody's grace."""
    now = [1_000]
    since = MissingSince(lambda: now[0])
    since.observe(["a", "b", "c"])
    now[0] = 2_000
    since.observe(["a", "c"])  # b leaves
    now[0] = 5_000
    assert since.missing("b") == 2_000
    assert since.missing("c") == 5_000  # registered, not answering: from this round
    now[0] = 6_000
    since.observe(["a", "c", "d"])  # d joins: b and c keep their times
    assert (since.missing("b"), since.missing("c")) == (2_000, 5_000)
    since.observe(["a", "b", "c", "d"])  # b is back
    since.back("c")  # c answers
    now[0] = 7_000
    assert (since.missing("b"), since.missing("c")) == (7_000, 7_000)
