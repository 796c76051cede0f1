"""The garbage-collection rule (bookie/gc.py; docs/operations.md "Space given back"): a
ledger's local data is deleted only when two successful looks at least the grace apart
found its metadata missing and nothing was written to it since the first; a ZooKeeper
error keeps the ledger and every later one; a dry run deletes nothing and moves no
ledger's clock."""

from __future__ import annotations

from bookie.gc import Found, GcRules, Look

GRACE_MS = 1000
STATE = (4, 4, False)


def look(lid: int, found: Found, at_ms: int, state=STATE) -> Look:
    return Look(lid, state, found, at_ms, at_ms + 5, 1_700_000_000_000 + at_ms)


def test_missing_twice_across_the_grace_deletes() -> None:
    rules = GcRules(GRACE_MS)
    first = rules.plan([look(1, Found.MISSING, 0)], 10, dry_run=False)
    assert first.delete == [] and first.waiting == [1]
    second = rules.plan([look(1, Found.MISSING, 5 + GRACE_MS)], 10, dry_run=False)
    assert second.delete == [(1, STATE)]


def test_one_look_or_looks_within_the_grace_keep() -> None:
    rules = GcRules(GRACE_MS)
    rules.plan([look(1, Found.MISSING, 0)], 10, dry_run=False)
    # The second look starts before the grace has passed since the first one answered.
    early = rules.plan([look(1, Found.MISSING, 4 + GRACE_MS)], 10, dry_run=False)
    assert early.delete == [] and early.waiting == [1]
    # The first look stays the first: the clock is not restarted by a look within the grace.
    assert rules.plan([look(1, Found.MISSING, 5 + GRACE_MS)], 10, dry_run=False).delete


def test_present_metadata_clears_the_first_look() -> None:
    rules = GcRules(GRACE_MS)
    rules.plan([look(1, Found.MISSING, 0)], 10, dry_run=False)
    rules.plan([look(1, Found.PRESENT, 500)], 10, dry_run=False)
    assert rules.first_look(1) is None
    later = rules.plan([look(1, Found.MISSING, 5 * GRACE_MS)], 10, dry_run=False)
    assert later.delete == [] and later.waiting == [1]


def test_a_zookeeper_error_keeps_the_ledger_and_stops_the_pass() -> None:
    rules = GcRules(GRACE_MS)
    rules.plan([look(lid, Found.MISSING, 0) for lid in (1, 2, 3)], 10, dry_run=False)
    looks = [look(1, Found.MISSING, 2 * GRACE_MS), look(2, Found.ERROR, 2 * GRACE_MS)]
    plan = rules.plan(looks, 10, dry_run=False)
    assert plan.delete == [(1, STATE)]
    assert plan.error_at == 2
    # Ledgers 2 and 3 keep their first looks: a failed read neither deletes nor restarts.
    assert rules.first_look(2) is not None and rules.first_look(3) is not None


def test_a_write_between_the_looks_keeps_the_ledger() -> None:
    rules = GcRules(GRACE_MS)
    rules.plan([look(1, Found.MISSING, 0), look(2, Found.MISSING, 0)], 10, dry_run=False)
    rules.written([1])  # a commit for ledger 1 reached the event loop
    plan = rules.plan(
        [look(1, Found.MISSING, 2 * GRACE_MS), look(2, Found.MISSING, 2 * GRACE_MS, (5, 5, False))],
        10,
        dry_run=False,
    )
    # Ledger 1: its first look was forgotten; ledger 2: its state changed since. Both
    # start their clocks again.
    assert plan.delete == [] and plan.waiting == [1, 2]
    assert rules.first_look(1).answered_ms == 2 * GRACE_MS + 5
    assert rules.first_look(2).state == (5, 5, False)


def test_a_dry_run_deletes_nothing_and_moves_no_clock() -> None:
    rules = GcRules(GRACE_MS)
    dry = rules.plan([look(1, Found.MISSING, 0)], 10, dry_run=True)
    assert dry.delete == [] and rules.first_look(1) is None
    # A dry run's look does not count as a first look for a real pass ...
    real = rules.plan([look(1, Found.MISSING, 5 * GRACE_MS)], 10, dry_run=False)
    assert real.delete == []
    # ... it answers what a real pass would delete, and changes nothing.
    dry = rules.plan([look(1, Found.MISSING, 7 * GRACE_MS)], 10, dry_run=True)
    assert dry.delete == [(1, STATE)]
    rules.plan([look(1, Found.PRESENT, 7 * GRACE_MS)], 10, dry_run=True)
    assert rules.first_look(1).answered_ms == 5 * GRACE_MS + 5


def test_deletes_per_pass_are_bounded_and_the_rest_pending() -> None:
    rules = GcRules(GRACE_MS)
    rules.plan([look(lid, Found.MISSING, 0) for lid in range(5)], 2, dry_run=False)
    plan = rules.plan(
        [look(lid, Found.MISSING, 2 * GRACE_MS) for lid in range(5)], 2, dry_run=False
    )
    assert [lid for lid, _ in plan.delete] == [0, 1]
    assert plan.pending == [2, 3, 4]


def test_ledgers_no_longer_stored_are_forgotten() -> None:
    rules = GcRules(GRACE_MS)
    rules.plan([look(1, Found.MISSING, 0), look(2, Found.MISSING, 0)], 10, dry_run=False)
    rules.retain([2])
    assert set(rules.missing()) == {2}
