"""The read options of the Spark connector: every option parsed as documented, and
every bad option refused with a message naming it (code ``invalid_option``)."""

from __future__ import annotations

import pickle

import pytest

from services.protocol.logs import Position
from services.spark.client import QuireSparkError
from services.spark.limits import DEFAULT_PARTITION_BYTES, DEFAULT_PARTITION_ENTRIES
from services.spark.options import (
    parse_read_options,
)

GW = "http://127.0.0.1:8080"


def test_a_log_read_with_defaults() -> None:
    """Only gateway and log: no token, no password, default partition sizes."""
    opts = parse_read_options({"gateway": GW + "/", "log": "orders"})
    assert opts.gateway == GW
    assert opts.log == "orders" and opts.ledgers is None
    assert opts.token is None and opts.password is None
    assert opts.start is None and opts.end is None
    assert opts.partition_entries == DEFAULT_PARTITION_ENTRIES == 100_000
    assert opts.partition_bytes == DEFAULT_PARTITION_BYTES


def test_every_option_parsed() -> None:
    """Positions, sizes, token and password as given (keys in any case, as Spark may
    pass them)."""
    opts = parse_read_options(
        {
            "Gateway": GW,
            "log": "a.b-c_d",
            "token": "t0k",
            "password": "pw",
            "start": "3:10",
            "END": "5:0",
            "partition_entries": "1_000",
            "partition_bytes": "4096",
        }
    )
    assert (opts.start, opts.end) == (Position(3, 10), Position(5, 0))
    assert (opts.token, opts.password) == ("t0k", "pw")
    assert (opts.partition_entries, opts.partition_bytes) == (1000, 4096)
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_ledgers_list() -> None:
    """ "1, 2,7" keeps the order given."""
    assert parse_read_options({"gateway": GW, "ledgers": "7, 2,1"}).ledgers == (7, 2, 1)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"log": "x"}, "'gateway' is required"),
        ({"gateway": "localhost:8080", "log": "x"}, "http:// or https://"),
        ({"gateway": GW}, "exactly one of"),
        ({"gateway": GW, "log": "x", "ledgers": "1"}, "exactly one of"),
        ({"gateway": GW, "log": "bad/name"}, "'log'"),
        ({"gateway": GW, "ledgers": ""}, "'ledgers'"),
        ({"gateway": GW, "ledgers": "1,,2"}, "'ledgers'"),
        ({"gateway": GW, "ledgers": "1,x"}, "'ledgers'"),
        ({"gateway": GW, "ledgers": "-1"}, "'ledgers'"),
        ({"gateway": GW, "ledgers": "01"}, "'ledgers'"),
        ({"gateway": GW, "ledgers": "1,2,1"}, "twice"),
        ({"gateway": GW, "ledgers": "99999999999999999999"}, "out of range"),
        ({"gateway": GW, "ledgers": "1", "start": "1:0"}, "for a log"),
        ({"gateway": GW, "log": "x", "start": "1"}, "'start'"),
        ({"gateway": GW, "log": "x", "end": "1:-2"}, "'end'"),
        ({"gateway": GW, "log": "x", "start": "1:5", "end": "1:4"}, "before start"),
        ({"gateway": GW, "log": "x", "partition_entries": "0"}, "'partition_entries'"),
        ({"gateway": GW, "log": "x", "partition_entries": "lots"}, "'partition_entries'"),
        ({"gateway": GW, "log": "x", "partition_bytes": "10"}, "'partition_bytes'"),
        ({"gateway": GW, "log": "x", "startingTimestamp": "yesterday"}, "startingTimestamp"),
        ({"gateway": GW, "log": "x", "startingTimestamp": "2026-11-29T10:00"}, "RFC 3339"),
        ({"gateway": GW, "log": "x", "start": "1:0", "startingTimestamp": "5"}, "instead of"),
        ({"gateway": GW, "ledgers": "1", "startingTimestamp": "5"}, "for a log"),
    ],
)
def test_bad_options_refused_with_a_clear_message(options: dict[str, str], words: str) -> None:
    """Each bad option is a QuireSparkError (invalid_option) whose text names it."""
    with pytest.raises(QuireSparkError) as info:
        parse_read_options(options)
    assert info.value.code == "invalid_option"
    assert words in str(info.value)
    assert str(info.value).startswith("invalid_option: ")


def test_the_error_pickles_with_its_text() -> None:
    """Spark ships exceptions between processes: code, status and text survive."""
    err = QuireSparkError("log_not_found", "log x does not exist", 404)
    back = pickle.loads(pickle.dumps(err))
    assert (back.code, back.status, str(back)) == (
        "log_not_found",
        404,
        "gateway said 404 log_not_found: log x does not exist",
    )


def test_several_gateways() -> None:
    """The gateway option may list several URLs (used in turn); each is checked."""
    opts = parse_read_options({"gateway": f" {GW}/ , https://g2:8443", "log": "x"})
    assert opts.gateway == f"{GW},https://g2:8443"
    with pytest.raises(QuireSparkError, match="g2:8080"):
        parse_read_options({"gateway": f"{GW},g2:8080", "log": "x"})
    with pytest.raises(QuireSparkError, match="is required"):
        parse_read_options({"gateway": ",", "log": "x"})


@pytest.mark.parametrize(
    ("text", "ms"),
    [("1795946400000", 1_795_946_400_000), ("2026-11-29T10:00:00Z", 1_795_946_400_000)],
)
def test_a_starting_timestamp_is_ms_or_rfc3339(text: str, ms: int) -> None:
    """startingTimestamp (any case) takes the gateway's from_time forms, as ms."""
    opts = parse_read_options({"gateway": GW, "log": "x", "startingtimestamp": text})
    assert opts.starting_timestamp == ms and opts.start is None
