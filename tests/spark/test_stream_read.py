"""The streaming source (``spark.readStream.format("quire")``) on local[2] against a real
cluster: records appended while a query runs arrive exactly once, in log order; a
query stopped (or failed mid-batch) and restarted from its checkpoint neither loses
nor duplicates; starting positions; a truncated position fails with a clear message.
Also the source's planning with a fake gateway: an end inside an open ledger is moved
back to the end of the last whole batch."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructType

from services.protocol import log_records
from services.protocol.logs import Position
from services.spark.client import QuireSparkError
from services.spark.stream_read import LedgerRange, QuireStreamReader
from tests.harness import wait_for
from tests.integration.gateway_support import Gateway
from tests.integration.log_support import LogClient, Pos
from tests.shared import unique_name
from tests.spark.stream_support import gateway  # noqa: F401 - fixtures

Row = tuple[Pos, bytes]


@pytest.fixture(scope="module")
def logs(gateway: Gateway) -> Iterator[LogClient]:  # noqa: F811
    client = LogClient(gateway.url)
    try:
        yield client
    finally:
        client.close()


class Collector:
    """A foreachBatch sink writing each micro-batch's rows to ``batch-<id>.json`` (a
    replayed batch overwrites its file: the sink is idempotent by batch id, so what the
    files hold is what the source delivered, once per batch)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.fail_batches: set[int] = set()
        self.lock = threading.Lock()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if batch_id in self.fail_batches:
            self.fail_batches.discard(batch_id)
            raise RuntimeError(f"batch {batch_id} fails on purpose")
        rows = [
            [r.ledger_id, r.entry_id, base64.b64encode(bytes(r.data)).decode()]
            for r in df.collect()
        ]
        path = self.directory / f"batch-{batch_id:06d}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rows))
        tmp.replace(path)

    def batches(self) -> dict[int, list[Row]]:
        out: dict[int, list[Row]] = {}
        for path in sorted(self.directory.glob("batch-*.json")):
            rows = json.loads(path.read_text())
            out[int(path.stem.split("-")[1])] = [
                ((lid, eid), base64.b64decode(data)) for lid, eid, data in rows
            ]
        return out

    def rows(self) -> list[Row]:
        """Every delivered row, batch after batch (each batch's rows in log order)."""
        out: list[Row] = []
        for _, rows in sorted(self.batches().items()):
            out += sorted(rows)
        return out


def start(
    spark: SparkSession,
    url: str,
    name: str,
    sink: Collector,
    checkpoint: Path,
    **options: str,
) -> StreamingQuery:
    reader = spark.readStream.format("quire").option("gateway", url).option("log", name)
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="500 milliseconds")
        .start()
    )


def payloads(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


def wait_rows(sink: Collector, expected: list[Row], deadline_s: float = 60.0) -> None:
    wait_for(lambda: len(sink.rows()) >= len(expected), deadline_s, f"{len(expected)} rows")


def stop(query: StreamingQuery) -> None:
    """Stop a query (it returns once the query's thread ended; a failed one stays so)."""
    query.stop()
    assert not query.isActive


def test_records_appended_while_the_query_runs_arrive_exactly_once(
    spark: SparkSession,
    gateway: Gateway,  # noqa: F811
    logs: LogClient,
    tmp_path: Path,
) -> None:
    """Records already in the log and records appended (single, in batches, across a
    roll) while the query runs all arrive, once each, exactly as the log serves them."""
    name = unique_name("tail-once")
    logs.create(name)
    logs.take_writer(name)
    logs.append(name, payloads("before", 3))
    sink = Collector(tmp_path / "out")
    query = start(spark, gateway.url, name, sink, tmp_path / "ckpt")
    try:
        wait_rows(sink, logs.read_all(name))
        for i in range(5):
            logs.append(name, [f"single-{i}".encode()])
        logs.append(name, payloads("batch", 40))
        logs.roll(name)
        logs.append(name, payloads("after-roll", 7))
        expected = logs.read_all(name)
        assert len(expected) == 3 + 5 + 40 + 7
        wait_rows(sink, expected)
        assert query.exception() is None
    finally:
        stop(query)
    assert sink.rows() == expected
    assert len(sink.batches()) >= 2  # the appends came in later micro-batches


def test_a_query_stopped_or_failed_and_restarted_neither_loses_nor_duplicates(
    spark: SparkSession,
    gateway: Gateway,  # noqa: F811
    logs: LogClient,
    tmp_path: Path,
) -> None:
    """Stopped, then records appended (and a roll) while it is down: the restarted query
    (same checkpoint) reads exactly the new ones. Then a micro-batch fails after the
    source planned it: the query restarted replays that batch with the same range."""
    name = unique_name("restart-once")
    logs.create(name)
    logs.take_writer(name)
    logs.append(name, payloads("first", 10))
    sink = Collector(tmp_path / "out")
    checkpoint = tmp_path / "ckpt"
    query = start(spark, gateway.url, name, sink, checkpoint)
    try:
        wait_rows(sink, logs.read_all(name))
    finally:
        stop(query)
    logs.append(name, payloads("while-down", 6))
    logs.roll(name)
    logs.append(name, payloads("while-down-2", 4))
    query = start(spark, gateway.url, name, sink, checkpoint)
    try:
        wait_rows(sink, logs.read_all(name))
        # The next micro-batch fails once in the sink, after its offsets were logged.
        sink.fail_batches.add(max(sink.batches()) + 1)
        logs.append(name, payloads("failing", 5))
        wait_for(lambda: query.exception() is not None, 60, "the failing batch")
    finally:
        stop(query)
    logs.append(name, payloads("after-failure", 3))
    query = start(spark, gateway.url, name, sink, checkpoint)
    try:
        expected = logs.read_all(name)
        assert len(expected) == 10 + 6 + 4 + 5 + 3
        wait_rows(sink, expected)
    finally:
        stop(query)
    assert sink.rows() == expected


def test_starting_positions(
    spark: SparkSession,
    gateway: Gateway,  # noqa: F811
    logs: LogClient,
    tmp_path: Path,
) -> None:
    """startingPosition "latest" reads only what is appended after the query started;
    "LID:EID" starts at that record; startingTimestamp starts at the first record
    stamped at or after it; a position not in the log fails the query."""
    name = unique_name("positions")
    logs.create(name)
    logs.take_writer(name)
    logs.append(name, payloads("old", 4))
    old = logs.read_all(name)

    latest = Collector(tmp_path / "latest")
    query = start(spark, gateway.url, name, latest, tmp_path / "c1", startingPosition="latest")
    try:
        wait_for(lambda: query.lastProgress is not None, 60, "a first micro-batch")
        logs.append(name, payloads("new", 3))
        expected = logs.read_all(name)[len(old) :]
        wait_rows(latest, expected)
    finally:
        stop(query)
    assert latest.rows() == expected

    (lid, eid), _ = old[2]
    at = Collector(tmp_path / "at")
    query = start(spark, gateway.url, name, at, tmp_path / "c2", startingPosition=f"{lid}:{eid}")
    try:
        everything = logs.read_all(name)
        wait_rows(at, everything[2:])
    finally:
        stop(query)
    assert at.rows() == everything[2:]

    times = [r["time"] for r in logs.read(name).json()["records"]]
    since = Collector(tmp_path / "since")
    query = start(spark, gateway.url, name, since, tmp_path / "c4",
                  startingTimestamp=str(times[4]))  # fmt: skip
    try:
        from_time = [r for r, t in zip(everything, times, strict=True) if t >= times[4]]
        wait_rows(since, from_time)
    finally:
        stop(query)
    assert since.rows() == from_time

    query = start(spark, gateway.url, name, at, tmp_path / "c3", startingPosition="999999:0")
    with pytest.raises(Exception, match="startingPosition 999999:0 is not in log positions"):
        query.awaitTermination(60)


def test_a_checkpoint_whose_position_was_truncated_fails_clearly(
    spark: SparkSession,
    gateway: Gateway,  # noqa: F811
    logs: LogClient,
    tmp_path: Path,
) -> None:
    """A query restarted from a checkpoint whose position lies in a ledger truncated
    meanwhile fails with a message naming the position and the truncation."""
    name = unique_name("truncated")
    logs.create(name)
    first = logs.take_writer(name)["ledger_id"]
    logs.append(name, payloads("a", 3))
    sink = Collector(tmp_path / "out")
    checkpoint = tmp_path / "ckpt"
    query = start(spark, gateway.url, name, sink, checkpoint)
    try:
        wait_rows(sink, logs.read_all(name))
    finally:
        stop(query)
    second = logs.roll(name)
    logs.append(name, payloads("b", 2))
    logs.wait_closed(first)
    logs.truncate(name, (second, 0))
    query = start(spark, gateway.url, name, sink, checkpoint)
    with pytest.raises(Exception, match=f"position {first}:3 is no longer in log {name}"):
        query.awaitTermination(60)


# ---------------------------------------------------------------- planning, no gateway


class FakeClient:
    """Ledgers as lists of stored entries (enveloped records); ``lacs`` for open ones."""

    def __init__(self, ledgers: dict[int, list[bytes]], lacs: dict[int, int]) -> None:
        self.ledgers = ledgers
        self.lacs = lacs
        self.reads: list[tuple[int, int, int]] = []

    def log(self, name: str) -> list[int]:
        return list(self.ledgers)

    def ledger(self, ledger_id: int) -> tuple[bool, int]:
        if ledger_id in self.lacs:
            return False, -1
        return True, len(self.ledgers[ledger_id]) - 1

    def lac(self, ledger_id: int) -> int:
        return self.lacs[ledger_id]

    def read_range(self, ledger_id: int, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        self.reads.append((ledger_id, first, last))
        for eid in range(first, last + 1):
            yield eid, self.ledgers[ledger_id][eid]

    def close(self) -> None:
        pass


def fake_reader(client: FakeClient, **options: str) -> QuireStreamReader:
    reader = QuireStreamReader(
        {"gateway": "http://127.0.0.1:1", "log": "x", **options}, StructType()
    )
    reader.client = client  # type: ignore[assignment]
    return reader


def entries(*batches: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for batch in batches:
        out += log_records.encode(batch, 1)
    return out


def read_all(reader: QuireStreamReader, start: Any, end: Any) -> list[tuple[int, int, bytes]]:
    return [row for p in reader.partitions(start, end) for row in reader.read(p)]


def test_an_end_inside_an_open_ledger_is_the_end_of_the_last_whole_batch() -> None:
    """LAC in the middle of a 100-record batch: the latest offset stops before that
    batch (found by reading back from the LAC), and the batch shows whole in the next
    micro-batch once the LAC passes its end — nothing is skipped."""
    big = [f"big-{i}".encode() for i in range(100)]
    stored = entries([b"a"], [b"b", b"c"], big)
    client = FakeClient({7: entries([b"closed"]), 9: stored}, {9: 3 + 70})
    reader = fake_reader(client)
    start = reader.initialOffset()
    assert start == {"position": "7:0"}
    end = reader.latestOffset()
    assert end == {"position": "9:3"}
    assert [r[2] for r in read_all(reader, start, end)] == [b"closed", b"a", b"b", b"c"]
    client.lacs[9] = len(stored) - 1
    later = reader.latestOffset()
    assert later == {"position": f"9:{len(stored)}"}
    assert [r[2] for r in read_all(reader, end, later)] == big


class TimedClient(FakeClient):
    """A ``FakeClient`` whose gateway answers a read from a time with ``at_time``."""

    def __init__(self, at_time: Position | None) -> None:
        super().__init__({7: entries([b"a"], [b"b"])}, {})
        self.gateway = self
        self.at_time = at_time
        self.asked: list[tuple[str, int]] = []

    def position_at_time(self, name: str, from_ms: int) -> Position | None:
        self.asked.append((name, from_ms))
        return self.at_time


def test_a_starting_timestamp_starts_where_the_gateway_search_says() -> None:
    """startingTimestamp (ms or RFC 3339): the initial offset is the position the
    gateway's from_time search answers (one call on the driver); not with
    startingPosition."""
    client = TimedClient(Position(7, 1))
    reader = fake_reader(client, startingTimestamp="2026-11-29T10:00:00Z")
    assert reader.initialOffset() == {"position": "7:1"}
    assert client.asked == [("x", 1_795_946_400_000)]
    reader = fake_reader(TimedClient(None), startingTimestamp="5")
    assert reader.initialOffset() == {"position": None}
    with pytest.raises(QuireSparkError, match="not both"):
        fake_reader(client, startingTimestamp="5", startingPosition="latest")
    with pytest.raises(QuireSparkError, match="startingTimestamp"):
        fake_reader(client, startingTimestamp="soon")


def test_partitions_are_bounded_ranges_and_a_cut_short_batch_never_shows() -> None:
    """A range across closed ledgers splits into partitions of at most partitionEntries;
    a batch cut short at the end of a closed ledger (a crashed writer) never shows and
    the next ledger follows."""
    cut = log_records.encode([b"x", b"y", b"z"], 1)[:2]
    client = FakeClient(
        {1: entries(*[[f"r{i}".encode()] for i in range(10)]), 2: [*entries([b"k"]), *cut]},
        {},
    )
    reader = fake_reader(client, partitionEntries="4")
    end = reader.latestOffset()
    assert end == {"position": "2:3"}
    parts = reader.partitions({"position": "1:1"}, end)
    assert parts == [
        LedgerRange(1, 1, 4, 9),
        LedgerRange(1, 5, 8, 9),
        LedgerRange(1, 9, 9, 9),
        LedgerRange(2, 0, 2, 2),
    ]
    rows = [row for p in parts for row in reader.read(p)]
    assert [r[2] for r in rows] == [f"r{i}".encode() for i in range(1, 10)] + [b"k"]
    with pytest.raises(QuireSparkError, match="position 5:0 is no longer in log x"):
        reader.partitions({"position": "5:0"}, end)
