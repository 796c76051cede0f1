"""The streaming sink (``writeStream.format("quire")``) through Spark (local[2])
against a real cluster: a file-source query lands each record exactly once; stopped and
restarted from its checkpoint it neither loses nor duplicates, also when it crashed
after the log took a batch but before Spark recorded it (the batch runs again and is
skipped); the sink's commit called twice for one batch id commits once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from services.spark.stream_write import QuireStreamWriter, checkpoint_commit_id
from tests.harness import Cluster
from tests.integration.gateway_support import Gateway, ok
from tests.shared import StandardCluster, unique_name
from tests.spark.write_support import get_log, ledgers_of_log, read_log


@dataclass
class Env:
    cluster: Cluster
    a: Gateway
    b: Gateway
    spark: SparkSession
    base: Path


@pytest.fixture(scope="module")
def env(
    shared_cluster: StandardCluster, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Env]:
    """The standard cluster's two gateways (tests/shared.py); the process's
    SparkSession."""
    base = tmp_path_factory.mktemp("spark-stream-write")
    yield Env(shared_cluster.cluster, shared_cluster.writer, shared_cluster.reader, spark, base)


def drop_file(directory: Path, name: str, lines: list[str]) -> None:
    """A new input file, appearing whole (written aside, then renamed in)."""
    tmp = directory.parent / f".{name}.tmp"
    tmp.write_text("".join(line + "\n" for line in lines))
    tmp.rename(directory / name)


def run_once(env: Env, source: Path, checkpoint: Path, log: str) -> None:
    """One run of the query over what the source holds now (trigger availableNow)."""
    query = (
        env.spark.readStream.format("text")
        .option("maxFilesPerTrigger", 1)
        .load(str(source))
        .selectExpr("value AS data")
        .writeStream.format("quire")
        .option("gateway", env.a.url)
        .option("log", log)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    assert not query.isActive


def test_stream_exactly_once_across_restarts_and_a_lost_batch_record(env: Env) -> None:
    """Three files, one per micro-batch: each record lands once, each batch a file's
    lines in order. Restarted with two new files: only those are added. Then Spark's
    record of the last batch is removed (a crash after the log's commit, before
    Spark's): the restarted query runs that batch again and the log skips it, deleting
    the batch's new ledgers."""
    log = unique_name("stream-once")
    source, checkpoint = env.base / "src", env.base / "ckpt"
    source.mkdir()
    lines = {f"f{i}.txt": [f"file{i}-line{j}" for j in range(20 + i)] for i in range(5)}
    for name in ["f0.txt", "f1.txt", "f2.txt"]:
        drop_file(source, name, lines[name])
    run_once(env, source, checkpoint, log)
    first = read_log(env.a, log)
    expected = [*lines["f0.txt"], *lines["f1.txt"], *lines["f2.txt"]]
    assert Counter(first) == Counter(line.encode() for line in expected)
    cid = checkpoint_commit_id(str(checkpoint))
    recorded = ok(env.a.request("GET", f"/v1/logs/{log}/commits/{cid}"))["sequence"]
    assert recorded == 2  # batches 0, 1, 2

    for name in ["f3.txt", "f4.txt"]:
        drop_file(source, name, lines[name])
    run_once(env, source, checkpoint, log)
    second = read_log(env.a, log)
    assert second[: len(first)] == first
    assert Counter(second) == Counter(line.encode() for f in lines.values() for line in f)
    last = ok(env.a.request("GET", f"/v1/logs/{log}/commits/{cid}"))["sequence"]
    assert last == 4

    # A crash after the log took batch 4, before Spark recorded it: batch 4 runs again.
    commit_file = checkpoint / "commits" / str(last)
    assert commit_file.exists()
    commit_file.unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    ledgers_before = get_log(env.a, log)["ledgers"]
    run_once(env, source, checkpoint, log)
    assert (checkpoint / "commits" / str(last)).exists()  # Spark re-ran and recorded it
    assert read_log(env.a, log) == second
    assert get_log(env.a, log)["ledgers"] == ledgers_before
    left = set(ledgers_of_log(env.a, log)) - set(ledgers_before)
    assert left == set(), f"ledgers of the skipped batch left behind: {left}"


def test_sink_commit_twice_for_one_batch_commits_once(env: Env) -> None:
    """The sink's commit called again with a batch id the log recorded (what a restart
    after a crash does) attaches nothing and deletes that attempt's ledger; the next
    batch id commits; a batch id below the recorded one is skipped too."""
    log = unique_name("stream-twice")
    schema = StructType([StructField("data", StringType())])
    options = {"gateway": env.a.url, "log": log, "commit_id": "query-1"}
    sink = QuireStreamWriter(options, schema, False)

    def batch(lines: list[str]):  # type: ignore[no-untyped-def]
        return [sink.write(iter([{"data": line} for line in lines]))]

    first = batch(["a", "b"])
    sink.commit(first, 7)
    assert read_log(env.a, log) == [b"a", b"b"]
    again = batch(["a", "b"])
    sink.commit(again, 7)
    assert read_log(env.a, log) == [b"a", b"b"]
    assert env.a.request("GET", f"/v1/ledgers/{again[0].ledger_id}").status_code == 404
    sink.commit(batch(["c"]), 8)
    old = batch(["stale"])
    sink.commit(old, 3)
    assert read_log(env.a, log) == [b"a", b"b", b"c"]
    assert env.a.request("GET", f"/v1/ledgers/{old[0].ledger_id}").status_code == 404
    assert ok(env.a.request("GET", f"/v1/logs/{log}/commits/query-1"))["sequence"] == 8


def test_sink_needs_a_commit_id_or_checkpoint(env: Env) -> None:
    """Without commit_id and checkpointLocation the sink refuses, saying why."""
    schema = StructType([StructField("data", StringType())])
    with pytest.raises(Exception, match="checkpointLocation"):
        QuireStreamWriter({"gateway": env.a.url, "log": "x"}, schema, False)
    with pytest.raises(Exception, match="commit_id"):
        QuireStreamWriter({"gateway": env.a.url, "log": "x", "commit_id": "a b"}, schema, False)
    assert checkpoint_commit_id("/tmp/c") == checkpoint_commit_id("file:/tmp/c")
    assert checkpoint_commit_id("/tmp/c") != checkpoint_commit_id("/tmp/d")
