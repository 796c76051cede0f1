"""The example jobs (services/spark/jobs) end to end on local[2] against a real cluster:
ingest JSON lines and Parquet into a log, export the log to Parquet, and the streaming
transform from one log to another, exactly once across a restart. The jobs' ``run``
share the test process's SparkSession; one job also runs as ``python -m`` in its own
process, as docs/spark.md shows it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from services.spark.jobs import export_parquet, ingest, transform_stream
from tests.harness import wait_for
from tests.integration.gateway_support import Gateway
from tests.integration.log_support import LogClient
from tests.shared import unique_name
from tests.spark.cluster import JVM_OPTIONS
from tests.spark.stream_support import ROOT, gateway  # noqa: F401 - fixtures


@pytest.fixture(scope="module")
def logs(gateway: Gateway) -> Iterator[LogClient]:  # noqa: F811
    client = LogClient(gateway.url)
    try:
        yield client
    finally:
        client.close()


def data_of(logs: LogClient, name: str) -> list[bytes]:
    return [data for _, data in logs.read_all(name)]


def test_ingest_json_lines_and_parquet_then_export_to_parquet(
    spark: SparkSession,
    gateway: Gateway,  # noqa: F811
    logs: LogClient,
    tmp_path: Path,
) -> None:
    """ingest creates the log and appends every JSON line as it is, in order; a Parquet
    dataset's data column follows; export_parquet writes exactly the log's records
    (positions and bytes)."""
    lines = [json.dumps({"n": i, "name": f"item-{i}"}) for i in range(120)]
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("\n".join(lines) + "\n")
    name = unique_name("jobs-ingest")
    args = ingest.arguments().parse_args(
        ["--gateway", gateway.url, "--log", name, "--input", str(jsonl), "--format", "json"]
    )
    assert ingest.run(spark, args) == 120
    assert data_of(logs, name) == [line.encode() for line in lines]

    binary = [bytes([i % 256]) * (i + 1) for i in range(30)]
    parquet_in = tmp_path / "in.parquet"
    pq.write_table(pa.table({"data": pa.array(binary, pa.binary())}), parquet_in)
    args = ingest.arguments().parse_args(
        ["--gateway", gateway.url, "--log", name, "--input", str(parquet_in)]
    )
    assert ingest.run(spark, args) == 30
    records = logs.read_all(name)
    assert [data for _, data in records] == [line.encode() for line in lines] + binary

    out = tmp_path / "out.parquet"
    args = export_parquet.arguments().parse_args(
        ["--gateway", gateway.url, "--log", name, "--out", str(out)]
    )
    assert export_parquet.run(spark, args) == 150
    table = pq.read_table(out).to_pylist()
    exported = sorted(((r["ledger_id"], r["entry_id"]), r["data"]) for r in table)
    assert exported == records


def test_export_parquet_runs_with_python_m(
    gateway: Gateway,  # noqa: F811
    logs: LogClient,
    tmp_path: Path,
) -> None:
    """``python -m services.spark.jobs.export_parquet`` (its own SparkSession, default
    master local[2]) exports a log's records as text."""
    name = unique_name("jobs-cli")
    logs.create(name)
    logs.take_writer(name)
    logs.append(name, [b"one", b"two", b"three"])
    out = tmp_path / "cli.parquet"
    # Its JVM as light as the tests' own session's (session.py): the client compiler and
    # the serial collector, through the variable pyspark launches spark-submit with.
    submit = f"--driver-java-options {shlex.quote(JVM_OPTIONS)} pyspark-shell"
    env = dict(os.environ, PYTHONPATH=ROOT, PYSPARK_PYTHON=sys.executable)
    env["PYSPARK_SUBMIT_ARGS"] = submit
    done = subprocess.run(
        [sys.executable, "-m", "services.spark.jobs.export_parquet", "--gateway", gateway.url]
        + ["--log", name, "--out", str(out), "--text"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "exported 3 records" in done.stdout
    rows = sorted(pq.read_table(out).to_pylist(), key=lambda r: r["entry_id"])
    assert [r["data"] for r in rows] == ["one", "two", "three"]


def test_transform_stream_writes_each_record_once_across_restarts(
    spark: SparkSession,
    gateway: Gateway,  # noqa: F811
    logs: LogClient,
    tmp_path: Path,
) -> None:
    """transform_stream (upper-case) writes the source's records, transformed, to the
    sink log; run again from the same checkpoint after more appends (and a roll), the
    sink gains exactly the new ones, also when the run before stopped with a batch
    planned and not committed; json-field:NAME projects a field."""
    source, sink = unique_name("jobs-source"), unique_name("jobs-sink")
    logs.create(source)
    logs.take_writer(source)
    logs.append(source, [b"alpha", b"beta"])
    logs.append(source, [b"gamma"])
    checkpoint = tmp_path / "ckpt"
    argv = ["--gateway", gateway.url, "--source", source, "--sink", sink]
    argv += ["--checkpoint", str(checkpoint), "--available-now"]
    transform_stream.run(spark, transform_stream.arguments().parse_args(argv))
    assert data_of(logs, sink) == [b"ALPHA", b"BETA", b"GAMMA"]

    logs.roll(source)
    logs.append(source, [b"delta", b"epsilon"])
    transform_stream.run(spark, transform_stream.arguments().parse_args(argv))
    assert data_of(logs, sink) == [b"ALPHA", b"BETA", b"GAMMA", b"DELTA", b"EPSILON"]
    transform_stream.run(spark, transform_stream.arguments().parse_args(argv))
    assert len(data_of(logs, sink)) == 5  # nothing new: nothing written again

    # A stop between planning a batch and committing it: the last batch's commit marker
    # is gone, so the next run replays that batch first (the sink skips it: committed),
    # and Spark runs a Python source's availableNow as that one batch. The job runs again
    # until nothing is new: the records appended meanwhile still arrive, once.
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda f: int(f.name))
    commits[-1].unlink()
    (checkpoint / "commits" / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    logs.append(source, [b"zeta"])
    transform_stream.run(spark, transform_stream.arguments().parse_args(argv))
    assert data_of(logs, sink) == [b"ALPHA", b"BETA", b"GAMMA", b"DELTA", b"EPSILON", b"ZETA"]

    events, names = unique_name("jobs-events"), unique_name("jobs-names")
    logs.create(events)
    logs.take_writer(events)
    docs = [{"name": "ada", "n": 1}, {"n": 2}, {"name": "bob"}]
    logs.append(events, [json.dumps(d).encode() for d in docs])
    argv = ["--gateway", gateway.url, "--source", events, "--sink", names]
    argv += ["--checkpoint", str(tmp_path / "ckpt2"), "--transform", "json-field:name"]
    argv += ["--trigger-ms", "300", "--timeout-s", "120"]
    args = transform_stream.arguments().parse_args(argv)
    query = transform_stream.start(spark, args)
    try:
        wait_for(lambda: len(data_of(logs, names)) >= 2, 90, "the first names")
        logs.append(events, [json.dumps({"name": "cy"}).encode()])
        wait_for(lambda: len(data_of(logs, names)) >= 3, 90, "the appended name")
    finally:
        query.stop()
    assert data_of(logs, names) == [b"ada", b"bob", b"cy"]
