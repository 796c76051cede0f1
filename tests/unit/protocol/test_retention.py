"""Retention decisions (services/protocol/retention.py; docs/logs.md "Retention"): the
policy's API form and merge patch, which ledgers each limit removes (a prefix of closed
ledgers, never the last), what durable cursors hold back and what they are told."""

from __future__ import annotations

import pytest

from services.errors import InvalidArgument
from services.protocol import retention as rt
from services.protocol.logs import LogMetadata, Position
from services.protocol.retention import LedgerUsage, RetentionPolicy, plan

NOW = 10_000_000


def closed(ledger_id: int, records: int = 10, size: int = 1_000, age_s: int = 0) -> LedgerUsage:
    return LedgerUsage(ledger_id, True, records, size, 1, NOW - age_s * 1000)


def open_(ledger_id: int) -> LedgerUsage:
    return LedgerUsage(ledger_id, False, 0, 0, 1, None)


def test_a_policy_reads_checks_and_merges() -> None:
    policy = RetentionPolicy.from_api({"max_bytes": 100, "max_age_s": 60})
    assert policy is not None and policy.to_api() == {
        "max_age_s": 60,
        "max_bytes": 100,
        "max_records": None,
        "retain_for_cursors": False,
        "max_backlog_bytes": None,
    }
    # A merge patch: a value sets, null clears, the rest stays.
    patched = policy.patched({"max_bytes": None, "max_records": 5})
    assert patched == RetentionPolicy(max_age_s=60, max_records=5)
    # Nothing left: no policy.
    assert RetentionPolicy(max_bytes=1).patched({"max_bytes": None}) is None
    assert RetentionPolicy.from_api(None) is None and RetentionPolicy.from_api({}) is None
    # An integral JSON number is that integer.
    assert RetentionPolicy.from_api({"max_bytes": 1021.0}) == RetentionPolicy(max_bytes=1021)
    for bad in (
        {"max_bytes": 0},
        {"max_bytes": -1},
        {"max_bytes": 1.5},
        {"max_bytes": True},
        {"max_bytes": "10"},
        {"max_age_s": rt.MAX_AGE_S_MAX + 1},
        {"max_size": 10},
        {"retain_for_cursors": "yes"},
        {"max_backlog_bytes": 10},  # without retain_for_cursors
        [],
    ):
        with pytest.raises(InvalidArgument):
            RetentionPolicy.from_api(bad)
    # A stored value this version cannot read is no policy: nothing removed on a guess.
    assert RetentionPolicy.from_stored({"max_size": 1}) is None


def test_the_policy_lives_in_the_logs_metadata_beside_what_it_does_not_know() -> None:
    log = LogMetadata("l", ledgers=(1, 2, 3), extra={"future": 1})
    with_it = rt.with_policy(log, RetentionPolicy(max_records=9))
    again = LogMetadata.from_json(with_it.to_json())
    assert rt.policy_of(again) == RetentionPolicy(max_records=9)
    assert again.extra["future"] == 1
    assert again.to_api()["retention"]["max_records"] == 9
    assert rt.policy_of(rt.with_policy(again, None)) is None
    # Removing notes the ledgers as to be deleted in the same value; clearing forgets them.
    removed = rt.with_removed(again, (1, 2), 9)
    assert removed.ledgers == (3,) and rt.deleting_of(removed) == (1, 2)
    # A reader just past the end of the last removed ledger goes on at the first listed
    # one; one inside a removed ledger (records it did not read are gone) does not.
    assert rt.resume_at(removed, Position(2, 10)) == Position(3, 0)
    assert rt.resume_at(removed, Position(2, 9)) is None
    assert rt.resume_at(removed, Position(1, 10)) is None
    assert rt.resume_at(again, Position(2, 10)) is None
    assert rt.deleting_of(rt.without_deleting(removed, (1,))) == (2,)
    assert "deleting" not in rt.without_deleting(removed, (1, 2)).extra


def test_each_limit_removes_the_oldest_closed_ledgers_never_the_last() -> None:
    spans = [closed(1, age_s=100), closed(2, age_s=50), closed(3, age_s=10), open_(4)]
    assert plan(RetentionPolicy(max_age_s=40), spans, {}, NOW).remove == (1, 2)
    assert plan(RetentionPolicy(max_age_s=40), spans, {}, NOW).reasons == {1: "age", 2: "age"}
    # 3 000 bytes held: at most 1 500 leaves one closed ledger... and the open one.
    assert plan(RetentionPolicy(max_bytes=1_500), spans, {}, NOW).remove == (1, 2)
    assert plan(RetentionPolicy(max_bytes=3_000), spans, {}, NOW).remove == ()
    assert plan(RetentionPolicy(max_records=19), spans, {}, NOW).remove == (1, 2)
    assert plan(RetentionPolicy(max_records=20), spans, {}, NOW).remove == (1,)
    # The last ledger stays even when closed and expired (the tail a writer fences).
    all_closed = [closed(1, age_s=100), closed(2, age_s=100)]
    assert plan(RetentionPolicy(max_age_s=1), all_closed, {}, NOW).remove == (1,)
    # An open ledger stops the walk: nothing after it goes.
    gap = [closed(1, age_s=100), open_(2), closed(3, age_s=100), open_(4)]
    assert plan(RetentionPolicy(max_age_s=1), gap, {}, NOW).remove == (1,)
    # A ledger whose close time is not known is not removed by age.
    unknown = [LedgerUsage(1, True, 1, 1, 1, None), open_(2)]
    assert plan(RetentionPolicy(max_age_s=1), unknown, {}, NOW).remove == ()
    # The pace: at most ``limit`` ledgers.
    assert plan(RetentionPolicy(max_age_s=1), spans, {}, NOW, limit=1).remove == (1,)
    assert plan(None, spans, {}, NOW).remove == ()


def test_cursors_hold_back_only_with_retain_for_cursors() -> None:
    spans = [closed(1, age_s=100), closed(2, age_s=100), closed(3, age_s=100), open_(4)]
    behind = {"slow": Position(1, 4), "done": Position(3, 9)}
    # Without retain_for_cursors: removed, and the cursor behind is told what it missed.
    free = plan(RetentionPolicy(max_age_s=1), spans, behind, NOW)
    assert free.remove == (1, 2, 3)
    assert free.skipped == {"slow": 5 + 10 + 10}
    # With it: what the slowest cursor has not read to the end stays.
    held = plan(RetentionPolicy(max_age_s=1, retain_for_cursors=True), spans, behind, NOW)
    assert held.remove == () and held.held == (1, 2, 3) and held.skipped == {}
    # Acked to the end of ledger 1: it goes, the rest stays.
    at_end = {"slow": Position(1, 9)}
    part = plan(RetentionPolicy(max_age_s=1, retain_for_cursors=True), spans, at_end, NOW)
    assert part.remove == (1,) and part.held == (2, 3) and part.skipped == {}
    # A cursor that acked nothing, or acked in a ledger removed since, holds everything.
    for position in (None, Position(99, 0)):
        nothing = plan(
            RetentionPolicy(max_age_s=1, retain_for_cursors=True), spans, {"c": position}, NOW
        )
        assert nothing.remove == ()


def test_the_backlog_bound_drops_the_oldest_held_ledgers_and_tells_the_cursor() -> None:
    spans = [closed(i, age_s=100) for i in range(1, 5)] + [open_(5)]
    policy = RetentionPolicy(max_age_s=1, retain_for_cursors=True, max_backlog_bytes=2_000)
    decision = plan(policy, spans, {"slow": Position(1, 2)}, NOW)
    # Four ledgers of 1 000 bytes held; the bound keeps two of them.
    assert decision.remove == (1, 2) and decision.held == (3, 4)
    assert decision.reasons == {1: "backlog", 2: "backlog"}
    assert decision.skipped == {"slow": 7 + 10}


def test_a_log_with_a_policy_rolls_at_a_quarter_of_each_limit() -> None:
    policy = RetentionPolicy(max_bytes=1 << 30, max_records=1_000, max_age_s=3_600)
    assert policy.roll_limits(256 << 20, 1_000_000, 3_600.0) == (256 << 20, 250, 900.0)
    tiny = RetentionPolicy(max_bytes=1_000, max_records=4, max_age_s=1)
    assert tiny.roll_limits(256 << 20, 1_000_000, 3_600.0) == (
        rt.ROLL_BYTES_MIN,
        rt.ROLL_ENTRIES_MIN,
        rt.ROLL_AGE_S_MIN,
    )


def test_usage_counts_a_logs_ledgers() -> None:
    spans = [closed(1), closed(2), open_(3)]
    assert rt.usage(spans).to_api() == {
        "ledgers": 3,
        "records": 20,
        "bytes": 2_000,
        "oldest_ms": 1,
    }
    assert rt.usage([]).oldest_ms is None
