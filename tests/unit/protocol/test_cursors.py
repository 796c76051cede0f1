"""A durable cursor's value (services/protocol/cursors.py; docs/api.md "Logs: cursors"):
its znode form, where a read through it starts, the merge of acks (forward only), the
start a cursor is created at, and its lag counted from ledger metadata."""

from __future__ import annotations

import pytest

from services.errors import InvalidArgument
from services.protocol.cursors import (
    CursorStart,
    CursorState,
    LedgerSpan,
    check_cursor_name,
    lag,
    merged,
)
from services.protocol.logs import Position


def test_a_cursor_survives_its_znode_form() -> None:
    """What is written is read back the same, before and after an ack."""
    fresh = CursorState(None, None, 1_000)
    acked = fresh.acked(Position(7, 3), 2_000)
    for state in (fresh, acked):
        assert CursorState.from_json(state.to_json()) == state
    assert acked.to_api("c", 4, 40) == {
        "name": "c",
        "position": "7:3",
        "lag_records": 4,
        "lag_bytes": 40,
        "acked_at": 2_000,
        "skipped_records": 0,
        "skipped_at": None,
    }
    told = acked.skipped(5, 3_000).skipped(2, 4_000)
    assert (told.skipped_records, told.skipped_at) == (7, 4_000)
    assert CursorState.from_json(told.to_json()) == told
    # An ack keeps what the cursor was told.
    assert told.acked(Position(9, 0), 5_000).skipped_records == 7
    with pytest.raises(InvalidArgument):
        CursorState.from_json(b'{"format_version": 1}')


def test_a_read_through_a_cursor_starts_just_after_its_position() -> None:
    """docs/api.md: reads start just after the position; the log's first record before
    any ack (one past a closed ledger's last entry reads on at the next ledger)."""
    assert CursorState(None, None, 0).next() is None
    assert CursorState(Position(7, 3), 1, 0).next() == Position(7, 4)


def test_acks_merge_to_the_highest_and_never_move_back() -> None:
    """The highest ack wins whatever their order; one at or below the stored position
    writes nothing (docs/logs.md "Durable cursors": forward only)."""
    acks = [Position(5, 9), Position(6, 0), Position(5, 10)]
    assert merged(None, acks) == Position(6, 0)
    assert merged(None, list(reversed(acks))) == Position(6, 0)
    assert merged(Position(5, 9), acks) == Position(6, 0)
    assert merged(Position(6, 0), acks) is None
    assert merged(Position(7, 0), acks) is None
    assert merged(Position(7, 0), []) is None
    # Log order is ledger then entry: a later ledger's entry 0 is past any entry before.
    assert merged(Position(5, 1_000), [Position(6, 0)]) == Position(6, 0)


def test_a_start_is_one_of_four_forms() -> None:
    assert CursorStart.from_api("earliest") == CursorStart("earliest")
    assert CursorStart.from_api("latest") == CursorStart("latest")
    assert CursorStart.from_api("3:4") == CursorStart("position", position=Position(3, 4))
    assert CursorStart.from_api({"time": 1_500}) == CursorStart("time", time_ms=1_500)
    assert CursorStart.from_api({"time": "1970-01-01T00:00:02Z"}).time_ms == 2_000
    for bad in ("", "3:", {"time": True}, {"time": 1, "x": 2}, 5, None, ["latest"]):
        with pytest.raises(InvalidArgument):
            CursorStart.from_api(bad)


def test_cursor_names_follow_log_names() -> None:
    assert check_cursor_name("a.b-c_1") == "a.b-c_1"
    assert check_cursor_name("..") == ".."
    for bad in ("", "a/b", "x" * 201, "é"):
        with pytest.raises(InvalidArgument, match="cursor name"):
            check_cursor_name(bad)


def test_lag_counts_the_entries_after_the_position() -> None:
    """Records are exact: the rest of the position's ledger and every later one; bytes
    are ledger lengths, the position's ledger's share by its mean entry size, and an
    open ledger of unknown length by the mean entry size of the others."""
    spans = [
        LedgerSpan(1, 9, 1_000),  # 10 entries of 100 bytes
        LedgerSpan(2, -1, 0),  # empty
        LedgerSpan(3, 4, None),  # open, 5 entries, length unknown
    ]
    assert lag(None, spans) == (15, 1_500)
    assert lag(Position(1, 3), spans) == (11, 1_100)
    assert lag(Position(1, 9), spans) == (5, 500)
    assert lag(Position(3, 4), spans[2:]) == (0, 0)
    assert lag(Position(3, 1), spans[2:]) == (3, 0)  # no length known anywhere
    assert lag(None, []) == (0, 0)
