"""The executor side of a batch read (services/spark/batch_read.py) against a fake
gateway client serving real frames: every entry of a ledger range, a log's visible
records without their envelopes, the read stopping at an append not readable whole,
a short read failing, and Arrow batches bounded in rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest

from services.protocol import log_records
from services.protocol.logs import Position
from services.spark import batch_read
from services.spark import limits as spark_limits
from services.spark.client import QuireSparkError
from services.spark.options import parse_read_options
from services.spark.plan import Partition
from services.wire.entries_stream import FrameDecoder, encode_frames


class FakeClient:
    """Serves ``entries`` ((entry id, stored bytes)) in the binary format, cut into
    chunks of ``chunk`` bytes."""

    def __init__(self, entries: list[tuple[int, bytes]], chunk: int = 100) -> None:
        self.body = encode_frames(entries)
        self.chunk = chunk

    def read_range_spans(
        self, ledger_id: int, first: int, last: int, password: str | None
    ) -> Iterator[tuple[bytes, list[tuple[int, int, int]]]]:
        decoder = FrameDecoder()
        for at in range(0, len(self.body), self.chunk):
            data, spans = decoder.feed_spans(self.body[at : at + self.chunk])
            if spans:
                yield data, spans


def rows(client: FakeClient, part: Partition) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for batch in batch_read.to_batches(
        part.ledger_id, batch_read.read_partition(cast(Any, client), part, None)
    ):
        assert batch.column(0).to_pylist() == [part.ledger_id] * batch.num_rows
        out += zip(batch.column(1).to_pylist(), batch.column(2).to_pylist(), strict=True)
    return out


def test_a_ledger_range_is_every_entry_as_stored() -> None:
    entries = [(i, bytes([i]) * (i % 7)) for i in range(40)]
    assert rows(FakeClient(entries), Partition(3, 0, 39, 39, False)) == entries


def test_a_log_range_is_its_visible_records_without_envelopes() -> None:
    stored = [
        *log_records.encode([b"a", b"bb"], 1),  # entries 0-1
        *log_records.encode([b"k1"], 2, "key", log_records.records_digest([b"k1"])),  # 2
        *log_records.encode([b"c", b"d", b"e"], 3),  # 3-5: the snapshot ends at 4
    ]
    entries = list(enumerate(stored))
    part = Partition(9, 0, 4, 4, True)
    assert rows(FakeClient(entries[:5], chunk=7), part) == [(0, b"a"), (1, b"bb"), (2, b"k1")]


def test_fewer_entries_than_planned_is_a_short_read() -> None:
    entries = [(i, b"x") for i in range(5)]
    with pytest.raises(QuireSparkError, match="served up to 4"):
        rows(FakeClient(entries), Partition(1, 0, 9, 9, False))
    gap = [(0, b"x"), (2, b"x")]
    with pytest.raises(QuireSparkError, match="entry 2 came where 1 was due"):
        rows(FakeClient(gap), Partition(1, 0, 2, 2, False))


def test_batches_are_bounded_in_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_limits, "ARROW_BATCH_ROWS", 4)
    entries = [(i, b"y" * 3) for i in range(10)]
    reading = batch_read.read_partition(
        cast(Any, FakeClient(entries, chunk=1000)), Partition(1, 0, 9, 9, False), None
    )
    sizes = [b.num_rows for b in batch_read.to_batches(1, reading)]
    assert sizes == [4, 4, 2]


class PlanningClient:
    """The driver's calls: a log of two CLOSED ledgers (1: entries 0-9, 2: 0-4) and the
    gateway's answer to a read from a time."""

    def __init__(self, at_time: Position | None) -> None:
        self.at_time = at_time
        self.asked: list[tuple[str, int]] = []

    def position_at_time(self, name: str, from_ms: int) -> Position | None:
        self.asked.append((name, from_ms))
        return self.at_time

    def get_log(self, name: str) -> dict[str, Any]:
        return {"name": name, "ledgers": [1, 2]}

    def ledger(self, ledger_id: int) -> dict[str, Any]:
        return {"state": "CLOSED", "last_entry_id": 9 if ledger_id == 1 else 4, "length": 100}


def test_a_starting_timestamp_plans_from_the_position_the_gateway_finds() -> None:
    """startingTimestamp: one call on the driver (the gateway's from_time search), then
    the plan starts there, as with the option 'start'."""
    options = parse_read_options({"gateway": "http://gw", "log": "orders",
                                  "startingTimestamp": "2026-11-29T10:00:00Z"})  # fmt: skip
    client = PlanningClient(Position(1, 7))
    parts = batch_read.plan(options, cast(Any, client))
    assert client.asked == [("orders", 1_795_946_400_000)]
    assert [(p.ledger_id, p.first, p.last) for p in parts] == [(1, 7, 9), (2, 0, 4)]
    past = batch_read.plan(options, cast(Any, PlanningClient(Position(2, 5))))
    assert [(p.ledger_id, p.first, p.last) for p in past] == []
