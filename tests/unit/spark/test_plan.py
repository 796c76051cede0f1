"""Planning a Spark read (services/spark/plan.py): partitions are bounded ranges that
cover exactly the snapshot, in log order; an open ledger that is not the last stops a
log read like the gateway's; start/end positions cut the ranges; sizes follow the
partition options."""

from __future__ import annotations

import pytest

from services.protocol.logs import Position
from services.spark.client import QuireSparkError
from services.spark.plan import (
    LedgerView,
    Partition,
    entries_per_partition,
    plan_ledgers,
    plan_log,
)

BIG = 1 << 40


def views(*items: LedgerView) -> dict[int, LedgerView]:
    return {v.ledger_id: v for v in items}


def covered(parts: list[Partition]) -> list[tuple[int, int]]:
    return [(p.ledger_id, e) for p in parts for e in range(p.first, p.last + 1)]


def test_ledgers_in_the_given_order_each_up_to_its_end() -> None:
    """Closed up to its last entry, open up to the LAC seen, empty ledgers give nothing."""
    v = views(
        LedgerView(7, True, 4, 50),
        LedgerView(2, False, 2, 30),
        LedgerView(5, True, -1, 0),
    )
    parts = plan_ledgers([7, 5, 2], v.__getitem__, 100, BIG)
    assert parts == [Partition(7, 0, 4, 4, False), Partition(2, 0, 2, 2, False)]


def test_ranges_are_cut_by_partition_entries() -> None:
    """10 entries at 3 per partition: 0-2, 3-5, 6-8, 9-9; each carries the ledger's end."""
    parts = plan_ledgers([1], views(LedgerView(1, True, 9, 100)).__getitem__, 3, BIG)
    assert [(p.first, p.last, p.end) for p in parts] == [(0, 2, 9), (3, 5, 9), (6, 8, 9), (9, 9, 9)]


def test_partition_bytes_uses_the_average_entry_size() -> None:
    """1,000 entries of 1 KiB with 100 KiB per partition: 100 entries each; never 0."""
    view = LedgerView(1, True, 999, 1000 * 1024)
    assert entries_per_partition(view, 100_000, 100 * 1024) == 100
    assert entries_per_partition(view, 50, 100 * 1024) == 50
    assert entries_per_partition(view, 100, 10) == 1
    assert entries_per_partition(LedgerView(1, False, -1, 0), 100, 10) == 100


def test_a_log_in_list_order_through_closed_ledgers_to_the_open_last() -> None:
    """Closed ledgers whole, the open last one up to its LAC, in the log's order."""
    v = views(LedgerView(9, True, 1, 10), LedgerView(3, True, 0, 5), LedgerView(4, False, 2, 9))
    parts = plan_log("l", [9, 3, 4], v.get, 100, BIG)
    assert covered(parts) == [(9, 0), (9, 1), (3, 0), (4, 0), (4, 1), (4, 2)]
    assert all(p.is_log for p in parts)
    assert [p.end for p in parts] == [1, 0, 2]


def test_an_open_ledger_that_is_not_the_last_stops_the_log_read() -> None:
    """As in gateway/logs/reads.py: read up to its LAC, and nothing after it (a ledger
    after an open one is not read, and not even looked at)."""
    v = views(LedgerView(1, True, 1, 10), LedgerView(2, False, 3, 10))
    asked: list[int] = []

    def view_of(lid: int) -> LedgerView | None:
        asked.append(lid)
        return v.get(lid)

    parts = plan_log("l", [1, 2, 3], view_of, 100, BIG)
    assert covered(parts) == [(1, 0), (1, 1), (2, 0), (2, 1), (2, 2), (2, 3)]
    assert asked == [1, 2]


def test_a_ledger_gone_meanwhile_stops_the_log_read() -> None:
    """A ledger deleted between listing and planning ends the plan (no error)."""
    v = views(LedgerView(1, True, 0, 1))
    assert covered(plan_log("l", [1, 2], v.get, 100, BIG)) == [(1, 0)]


def test_start_and_end_positions_cut_the_ranges() -> None:
    """Start is included, end excluded; ledgers outside [start, end] are not planned."""
    v = views(LedgerView(1, True, 4, 5), LedgerView(2, True, 4, 5), LedgerView(3, True, 4, 5))
    parts = plan_log("l", [1, 2, 3], v.get, 2, BIG, Position(1, 3), Position(2, 2))
    assert covered(parts) == [(1, 3), (1, 4), (2, 0), (2, 1)]
    assert [(p.ledger_id, p.first, p.last) for p in parts] == [(1, 3, 4), (2, 0, 1)]
    # Just past a closed ledger's end is valid: "after ledger 1".
    assert covered(plan_log("l", [1, 2], v.get, 100, BIG, Position(1, 5), Position(2, 1))) == [
        (2, 0)
    ]
    # An end past an open ledger's LAC stops at the LAC (the snapshot).
    v[2] = LedgerView(2, False, 1, 5)
    assert covered(plan_log("l", [1, 2], v.get, 100, BIG, Position(2, 0), Position(2, 9))) == [
        (2, 0),
        (2, 1),
    ]
    # start == end: nothing.
    assert plan_log("l", [1, 2], v.get, 100, BIG, Position(1, 2), Position(1, 2)) == []


def test_an_empty_log_plans_nothing() -> None:
    nothing: dict[int, LedgerView] = {}
    assert plan_log("l", [], nothing.get, 100, BIG) == []


@pytest.mark.parametrize(
    ("ledgers", "start", "end", "words"),
    [
        ([], Position(1, 0), None, "not in log l (it is empty)"),
        ([1, 2], Position(5, 0), None, "'start': position 5:0 is not in log l"),
        ([1, 2], None, Position(5, 0), "'end': position 5:0 is not in log l"),
        ([1, 2], Position(1, 6), None, "past the end of ledger 1 (last entry 4)"),
        ([1, 2], None, Position(2, 9), "past the end of ledger 2"),
        ([1, 2], Position(2, 0), Position(1, 0), "before 'start'"),
    ],
)
def test_positions_outside_the_log_are_refused(
    ledgers: list[int], start: Position | None, end: Position | None, words: str
) -> None:
    """Like the gateway's 400: a position whose ledger is not in the log, or past the
    end of a closed ledger, fails the plan with a message naming the option."""
    v = views(LedgerView(1, True, 4, 5), LedgerView(2, True, 4, 5))
    with pytest.raises(QuireSparkError) as info:
        plan_log("l", ledgers, v.get, 100, BIG, start, end)
    assert info.value.code == "invalid_option"
    assert words in str(info.value)
