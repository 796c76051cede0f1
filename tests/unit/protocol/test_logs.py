"""Log names, positions, log metadata and truncation (services/protocol/logs.py)."""

from __future__ import annotations

import pytest

from services.errors import InvalidArgument, InvariantViolation
from services.protocol.logs import (
    LOG_LEDGERS_MAX,
    LogMetadata,
    Position,
    WriterRole,
    check_log_name,
    parse_time,
    truncation,
)

ID_MAX = 2**63 - 1


@pytest.mark.parametrize("name", ["a", "A-z_0.9", ".", "..", "-", "x" * 200])
def test_valid_names(name: str) -> None:
    """1-200 characters of A-Za-z0-9._- are names, "." and ".." included."""
    assert check_log_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "x" * 201, "a b", "a/b", "é", "a:b", "a\x00", "a\n", "ａ", "a*"]
)
def test_invalid_names(name: str) -> None:
    """Empty, 201 characters, other ASCII and any non-ASCII: InvalidArgument."""
    with pytest.raises(InvalidArgument):
        check_log_name(name)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0:0", Position(0, 0)),
        ("12:345", Position(12, 345)),
        (f"{ID_MAX}:{ID_MAX}", Position(ID_MAX, ID_MAX)),
    ],
)
def test_position_parse(text: str, expected: Position) -> None:
    """Canonical LID:EID parses, and prints back the same text."""
    assert Position.parse(text) == expected
    assert str(expected) == text == expected.to_api()


@pytest.mark.parametrize(
    "text",
    ["", "1", "1:", ":1", "-1:0", "0:-1", "01:0", "0:00", "+1:0", "1:2:3", " 1:0", "1:0 ",
     "1.0:0", "a:b", "１:0", "²:0", f"{ID_MAX + 1}:0", f"0:{2**64}", "1_0:0"],
)  # fmt: skip
def test_position_parse_refuses_non_canonical_forms(text: str) -> None:
    """No sign, no leading zero, no space, two parts, at most 2^63-1: else 400."""
    with pytest.raises(InvalidArgument):
        Position.parse(text)


def test_position_from_api_and_order() -> None:
    """The JSON object form and the string form; anything else refused. Positions order
    by ledger then entry."""
    assert Position.from_api({"ledger_id": 3, "entry_id": 4}) == Position(3, 4)
    assert Position.from_api("3:4") == Position(3, 4)
    bads: list[object] = [
        {"ledger_id": 3},
        {"ledger_id": -1, "entry_id": 0},
        {"ledger_id": True, "entry_id": 0},
        {"ledger_id": 1, "entry_id": 0, "x": 1},
        {"ledger_id": "1", "entry_id": 0},
        {"ledger_id": ID_MAX + 1, "entry_id": 0},
        5,
        None,
        [1, 2],
    ]
    for bad in bads:
        with pytest.raises(InvalidArgument):
            Position.from_api(bad)
    assert Position(1, 9) < Position(2, 0) < Position(2, 1)


def test_metadata_json_round_trip_keeps_everything() -> None:
    """to_json/from_json round trip, unknown future fields (extra) included; to_api is
    docs/api.md's log object only."""
    log = LogMetadata(
        "name.1",
        ledgers=(5, 3, 9),
        writer=WriterRole("h:1", 4),
        epoch=4,
        ensemble_size=5,
        write_quorum=3,
        ack_quorum=2,
        created_at=123,
        extra={"later": [1, 2]},
    )
    assert LogMetadata.from_json(log.to_json()) == log
    assert log.to_api() == {
        "name": "name.1",
        "ledgers": [5, 3, 9],
        "writer": {"gateway": "h:1", "epoch": 4},
        "retention": None,
    }
    empty = LogMetadata("e")
    assert LogMetadata.from_json(empty.to_json()) == empty
    assert empty.to_api() == {"name": "e", "ledgers": [], "writer": None, "retention": None}


@pytest.mark.parametrize(
    "data",
    [b"not json", b"{}", b"[]", b'{"format_version": 2, "name": "a"}',
     b'{"name": "a b", "ledgers": [], "writer": null, "epoch": 0, "ensemble_size": 3,'
     b' "write_quorum": 2, "ack_quorum": 2}',
     b'{"name": "a", "ledgers": [1, 1], "writer": null, "epoch": 0, "ensemble_size": 3,'
     b' "write_quorum": 2, "ack_quorum": 2}'],
)  # fmt: skip
def test_metadata_from_json_refuses_bad_values(data: bytes) -> None:
    """Garbage, an unknown format, a bad name or a ledger listed twice: InvalidArgument."""
    with pytest.raises(InvalidArgument):
        LogMetadata.from_json(data)


def test_metadata_invariants_and_changes() -> None:
    """Invariants: no duplicate or negative ledgers, valid quorums, the writer's epoch at
    most the log's. Changes: a new writer gets the next epoch and its ledger last; a
    roll needs the role; giving it up keeps the epoch; truncation removes a prefix."""
    with pytest.raises(InvalidArgument):
        LogMetadata("a", ledgers=(-1,))
    with pytest.raises(InvalidArgument):
        LogMetadata("a", ensemble_size=2, write_quorum=3, ack_quorum=2)
    with pytest.raises(InvariantViolation):
        LogMetadata("a", writer=WriterRole("g", 2), epoch=1)
    log = LogMetadata("a", ledgers=(1, 2, 3))
    assert log.to_fence() == (2, 3) and LogMetadata("b", ledgers=(7,)).to_fence() == (7,)
    taken = log.with_new_writer("g:1", 4)
    assert taken.ledgers == (1, 2, 3, 4) and taken.writer == WriterRole("g:1", 1)
    assert taken.held_by("g:1", 1) and not taken.held_by("g:1", 2)
    again = taken.with_new_writer("g:2", 5)
    assert again.epoch == 2 and not again.held_by("g:1", 1)
    with pytest.raises(InvariantViolation):
        again.with_roll("g:1", 1, 6)
    rolled = again.with_roll("g:2", 2, 6)
    assert rolled.ledgers[-1] == 6
    with pytest.raises(InvariantViolation):
        rolled.with_roll("g:2", 2, 6)
    free = rolled.without_writer("g:2", 2)
    assert free.writer is None and free.epoch == 2
    assert free.with_new_writer("g:3", 7).epoch == 3
    assert rolled.without_ledgers((1, 2)).ledgers == (3, 4, 5, 6)
    with pytest.raises(InvariantViolation):
        rolled.without_ledgers((2,))
    full = LogMetadata("f", ledgers=tuple(range(LOG_LEDGERS_MAX)))
    with pytest.raises(InvalidArgument):
        full.with_new_writer("g", LOG_LEDGERS_MAX)


LOG = LogMetadata("t", ledgers=(10, 11, 12, 13))


def test_truncation_removes_closed_ledgers_that_end_before() -> None:
    """Ledgers before the position's ledger go; the position's own ledger goes only when
    the position is just past its end (end + 1 of a CLOSED ledger)."""
    ends = {10: 4, 11: 2, 12: 0, 13: None}
    assert truncation(LOG, Position(10, 0), ends) == ()
    assert truncation(LOG, Position(10, 4), ends) == ()
    assert truncation(LOG, Position(10, 5), ends) == (10,)
    assert truncation(LOG, Position(12, 0), ends) == (10, 11)
    assert truncation(LOG, Position(12, 1), ends) == (10, 11, 12)
    assert truncation(LOG, Position(13, 99), ends) == (10, 11, 12)


def test_truncation_stops_at_an_open_ledger() -> None:
    """Only a prefix of CLOSED ledgers is removed: an open ledger stays, and everything
    after it (an empty closed ledger, end -1, is removable)."""
    ends = {10: 4, 11: None, 12: -1, 13: None}
    assert truncation(LOG, Position(13, 0), ends) == (10,)
    assert truncation(LOG, Position(12, 0), {10: -1, 11: 3, 12: -1}) == (10, 11, 12)


def test_truncation_positions_outside_the_log() -> None:
    """A ledger not in the list, or past end + 1 of a closed ledger: InvalidArgument."""
    ends = {10: 4, 11: 2}
    with pytest.raises(InvalidArgument):
        truncation(LOG, Position(99, 0), ends)
    with pytest.raises(InvalidArgument):
        truncation(LOG, Position(10, 6), ends)
    with pytest.raises(InvalidArgument):
        truncation(LogMetadata("e"), Position(1, 0), {})


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("0", 0),
        ("1795946400123", 1_795_946_400_123),
        ("2026-11-29T10:00:00Z", 1_795_946_400_000),
        ("2026-11-29t10:00:00z", 1_795_946_400_000),
        ("2026-11-29 10:00:00Z", 1_795_946_400_000),
        ("2026-11-29T11:00:00.25+01:00", 1_795_946_400_250),
        ("2026-11-29T05:00:00.123456789-05:00", 1_795_946_400_123),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59Z", 0),
        ("0001-01-01T00:00:00Z", 0),
    ],
)
def test_a_time_is_epoch_ms_or_rfc3339(text: str, ms: int) -> None:
    """``from_time`` (docs/api.md): ms since the epoch, or RFC 3339 with Z or an offset,
    fractions allowed (cut to the millisecond); a time before the epoch is before every
    record, as the epoch is."""
    assert parse_time(text) == ms


@pytest.mark.parametrize(
    "text",
    ["", "-1", "01", "1.5", "x", "2026-11-29", "2026-11-29T10:00:00", "2026-13-29T10:00:00Z",
     "2026-11-29T10:00:00+25:00", "2026-11-29T10:00Z"],
)  # fmt: skip
def test_a_bad_time_is_refused_with_what_it_must_be(text: str) -> None:
    """A time that is neither (a naive time, a date alone, no seconds) is 400."""
    with pytest.raises(InvalidArgument, match="from_time must be ms since the Unix epoch"):
        parse_time(text)
