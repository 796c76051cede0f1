"""Batch reads through the Spark connector (real Spark local[2], a real cluster): a log
and ledgers come out exactly as the gateway serves them (bytes and order), a read is
a snapshot while a writer keeps appending (and never fences it), any partitioning
gives the same rows, start/end positions cut the read, and bad options fail the job
with a message that carries the gateway's error code."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import Gateway
from tests.integration.log_support import LogClient, Pos
from tests.shared import StandardCluster, unique_name

TOKEN = "spark-read-token"
PASSWORD = "s3cret"
Row3 = tuple[int, int, bytes]


@dataclass
class Env:
    cluster: Cluster
    gw: Gateway
    logs: LogClient


@pytest.fixture(scope="module")
def env(shared_cluster: StandardCluster) -> Iterator[Env]:
    """The standard cluster's gateway with an API token (tests/shared.py)."""
    gw = shared_cluster.gateway(["--api-token", TOKEN], TOKEN)
    logs = LogClient(gw.url)
    logs.http.headers["Authorization"] = f"Bearer {TOKEN}"
    yield Env(shared_cluster.cluster, gw, logs)
    logs.close()


def quire(spark: SparkSession, env: Env, **options: Any) -> DataFrame:
    reader = spark.read.format("quire").option("gateway", env.gw.url).option("token", TOKEN)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def rows(df: DataFrame) -> list[Row3]:
    return [(r.ledger_id, r.entry_id, bytes(r.data)) for r in df.collect()]


def gateway_log(env: Env, name: str) -> list[Row3]:
    """The log as GET /v1/logs/{name}/records serves it, in log order."""
    return [(lid, eid, data) for (lid, eid), data in env.logs.read_all(name)]


def payload(n: int, size: int = 40) -> bytes:
    head = f"rec-{n}-".encode()
    return head + bytes((n + i) % 256 for i in range(size - len(head)))


def fill_log(env: Env, name: str, rolls: int = 1) -> None:
    """Single records and batches (one with an idempotency key) over ``rolls + 1``
    ledgers, the last one open."""
    env.logs.create(name)
    env.logs.take_writer(name)
    n = 0
    for part in range(rolls + 1):
        for size in (1, 5, 1, 7, 3):
            env.logs.append(name, [payload(n + i, 20 + 13 * i) for i in range(size)])
            n += size
        env.logs.append(name, [payload(n + i) for i in range(4)], key=f"{name}-k{part}")
        n += 4
        if part < rolls:
            old = env.logs.show(name)["ledgers"][-1]
            env.logs.roll(name)
            env.logs.wait_closed(old)


def log_order(env: Env, name: str, got: list[Row3]) -> list[Row3]:
    """Rows sorted by their position in the log (ledger's place in the list, entry)."""
    place = {lid: i for i, lid in enumerate(env.logs.show(name)["ledgers"])}
    return sorted(got, key=lambda r: (place[r[0]], r[1]))


def test_a_log_reads_exactly_as_the_gateway_serves_it(spark: SparkSession, env: Env) -> None:
    """Closed and open ledgers, single records and batches: the same (ledger, entry,
    bytes) as the gateway's log read, in log order; the envelopes are stripped; the
    writer can still append afterwards (nothing was fenced)."""
    name = unique_name("read-log")
    fill_log(env, name, rolls=2)
    want = gateway_log(env, name)
    assert len({lid for lid, _, _ in want}) == 3
    df = quire(spark, env, log=name)
    assert df.schema.simpleString() == "struct<ledger_id:bigint,entry_id:bigint,data:binary>"
    got = rows(df)
    assert got == want
    assert log_order(env, name, got) == want
    env.logs.append(name, [b"after the read"])
    assert gateway_log(env, name)[-1][2] == b"after the read"


def test_any_partitioning_gives_the_same_rows(spark: SparkSession, env: Env) -> None:
    """Partitions of 2 entries (boundaries inside batches) or of a few bytes: many
    partitions, the same rows as the gateway's read."""
    name = unique_name("read-parts")
    fill_log(env, name, rolls=1)
    want = gateway_log(env, name)
    small = quire(spark, env, log=name, partition_entries=2)
    assert small.rdd.getNumPartitions() >= len(want) // 2
    assert rows(small) == want
    by_bytes = quire(spark, env, log=name, partition_bytes=1024)
    assert by_bytes.rdd.getNumPartitions() > 1
    assert log_order(env, name, rows(by_bytes)) == want


def test_ledgers_read_exactly_as_the_gateway_serves_them(spark: SparkSession, env: Env) -> None:
    """Ledgers in the order given: a closed one, an open one (up to its LAC), an empty
    one; raw entries, bytes as the gateway's range read; a password ledger with the
    password option."""
    a = env.gw.create()["ledger_id"]
    env.gw.add_batch(a, [payload(i, 10 + i) for i in range(25)])
    env.gw.close(a)
    b = env.gw.create()["ledger_id"]
    for i in range(6):
        env.gw.add(b, payload(100 + i, 3000))
    empty = env.gw.create()["ledger_id"]
    want = [(b, e, d) for e, d in env.gw.read_all(b)] + [(a, e, d) for e, d in env.gw.read_all(a)]
    got = rows(quire(spark, env, ledgers=f"{b},{empty},{a}", partition_entries=4))
    assert got == want
    assert len(got) == 31
    secret = env.gw.create(password=PASSWORD)["ledger_id"]
    env.gw.add_batch(secret, [b"one", b"two", b"three"], password=PASSWORD)
    got = rows(quire(spark, env, ledgers=str(secret), password=PASSWORD))
    assert got == [(secret, 0, b"one"), (secret, 1, b"two"), (secret, 2, b"three")]


def test_start_and_end_positions_cut_the_read(spark: SparkSession, env: Env) -> None:
    """start is included, end excluded, across a ledger boundary; the same rows as the
    gateway's log read between them."""
    name = unique_name("read-cut")
    fill_log(env, name, rolls=1)
    want = gateway_log(env, name)
    i, j = 5, len(want) - 4
    start, end = want[i][:2], want[j][:2]
    assert start[0] != end[0]
    got = rows(
        quire(spark, env, log=name, start=f"{start[0]}:{start[1]}", end=f"{end[0]}:{end[1]}")
    )
    assert got == want[i:j]


def test_a_snapshot_while_a_writer_keeps_appending(spark: SparkSession, env: Env) -> None:
    """A writer appends batches all along: the job reads exactly a prefix of the log
    (every record up to the end it planned, whole batches, no gap), at least what was
    acknowledged before the job started; the writer is never fenced and goes on."""
    name = unique_name("read-live")
    env.logs.create(name)
    env.logs.take_writer(name)
    acked: list[Pos] = []
    errors: list[str] = []
    stop = threading.Event()

    def write() -> None:
        client = LogClient(env.gw.url)
        client.http.headers["Authorization"] = f"Bearer {TOKEN}"
        n = 0
        try:
            while not stop.is_set():
                r = client.append_raw(name, [payload(n + i) for i in range(3)], batch=True)
                if r.status_code != 200:
                    errors.append(f"{r.status_code} {r.text}")
                    return
                acked.append((r.json()["last_position"]["ledger_id"], 0))
                n += 3
        finally:
            client.close()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(acked) >= 20 or bool(errors), 30, "20 appends")
        before = len(acked) * 3
        got = rows(quire(spark, env, log=name, partition_entries=7))
        during = len(acked) * 3
        wait_for(lambda: len(acked) * 3 > during + 30 or bool(errors), 30, "appends after")
    finally:
        stop.set()
        thread.join(30)
    assert not errors, errors
    final = gateway_log(env, name)
    assert len(final) > len(got) >= before
    assert got == final[: len(got)]
    assert len(got) % 3 == 0  # whole batches only


def job_error(df_thunk: Any) -> str:
    """The text of the exception a failing read job raises on the driver."""
    with pytest.raises(Exception) as info:  # noqa: PT011 - Spark wraps it in its own class
        df_thunk().collect()
    return str(info.value)


def test_bad_options_fail_the_job_with_the_gateway_error(spark: SparkSession, env: Env) -> None:
    """An unknown log or ledger, a bad ledger list, a wrong token, a wrong password:
    the job fails with a QuireSparkError whose message says what the gateway (or the
    option check) said, error code included."""
    secret = env.gw.create(password=PASSWORD)["ledger_id"]
    env.gw.add(secret, b"x", password=PASSWORD)
    cases = [
        (lambda: quire(spark, env, log="no-such-log"), "gateway said 404 log_not_found"),
        (lambda: quire(spark, env, ledgers="987654321"), "gateway said 404 ledger_not_found"),
        (lambda: quire(spark, env, ledgers="1,x"), "invalid_option: option 'ledgers'"),
        (lambda: quire(spark, env, log="a", ledgers="1"), "invalid_option: give exactly one"),
        (
            lambda: quire(spark, env, ledgers=str(secret), password="wrong"),
            "gateway said 401 unauthorized",
        ),
        (
            lambda: (
                spark.read.format("quire")
                .option("gateway", env.gw.url)
                .option("token", "not-the-token")
                .option("log", "x")
                .load()
            ),
            "gateway said 401 unauthorized",
        ),
    ]
    for thunk, words in cases:
        text = job_error(thunk)
        assert words in text, text
        assert "QuireSparkError" in text, text
