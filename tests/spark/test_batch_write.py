"""Batch write into a log through Spark (local[2]) against a real cluster: the log
gains exactly the rows, in partition order, as one change of its ledger list; a string
column works; a job failing mid-way adds nothing and leaves no task ledger behind; the
gateway that was the log's writer is fenced off; bad modes and options fail clearly."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from pyspark.sql import Row, SparkSession
from pyspark.sql.functions import col, udf
from pyspark.sql.types import BinaryType, StructField, StructType

from services.spark import limits as spark_limits
from services.spark.batch_write import QuireWriter
from tests.harness import Cluster
from tests.integration.gateway_support import Gateway, ok
from tests.shared import StandardCluster, unique_name
from tests.spark.write_support import ImpatientQuire, get_log, ledgers_of_log, read_log


@dataclass
class Env:
    cluster: Cluster
    a: Gateway
    b: Gateway
    spark: SparkSession


@pytest.fixture(scope="module")
def env(shared_cluster: StandardCluster, spark: SparkSession) -> Iterator[Env]:
    """The standard cluster's two gateways (tests/shared.py); the process's
    SparkSession."""
    yield Env(shared_cluster.cluster, shared_cluster.writer, shared_cluster.reader, spark)


def binary_frame(spark: SparkSession, payloads: list[bytes], partitions: int):  # type: ignore[no-untyped-def]
    """A DataFrame of ``data binary`` whose partition i holds the i-th slice, in order."""
    rdd = spark.sparkContext.parallelize([(bytearray(p),) for p in payloads], partitions)
    return spark.createDataFrame(rdd, "data binary")


def test_batch_write_lands_rows_in_partition_order_in_one_change(env: Env) -> None:
    """A log written by gateway B, then a Spark job of 3 partitions: the log's ledger
    list grew by exactly the 3 task ledgers, contiguous at its end, in partition order
    (quire.task 0.0, 1.0, 2.0 of one job); its records are B's then the rows in order;
    the commit left the role free: B's next append takes it again, after the rows."""
    name = unique_name("batch-order")
    ok(env.b.request("PUT", f"/v1/logs/{name}"), 201)
    ok(env.b.request("POST", f"/v1/logs/{name}/writer"))
    ok(env.b.request("POST", f"/v1/logs/{name}/records", content=b"before"))
    before = get_log(env.a, name)
    payloads = [f"row-{i:04d}".encode() + bytes([i % 256]) * (i % 7) for i in range(300)]
    frame = binary_frame(env.spark, payloads, 3)
    frame.write.format("quire").option("gateway", env.a.url).option("log", name).mode(
        "append"
    ).save()

    after = get_log(env.a, name)
    assert after["ledgers"][: len(before["ledgers"])] == before["ledgers"]
    new = after["ledgers"][len(before["ledgers"]) :]
    assert len(new) == 3
    assert after["writer"] is None
    metas = [ok(env.a.request("GET", f"/v1/ledgers/{lid}"))["metadata"] for lid in new]
    assert [m["quire.task"] for m in metas] == ["0.0", "1.0", "2.0"]
    assert len({m["quire.job"] for m in metas}) == 1
    assert all(m["quire.log"] == name for m in metas)
    assert read_log(env.a, name) == [b"before", *payloads]
    r = ok(env.b.request("POST", f"/v1/logs/{name}/records", content=b"after"))
    assert r["position"]["ledger_id"] not in after["ledgers"]


def test_string_column_and_log_created(env: Env) -> None:
    """A string data column is written as UTF-8, into a log the job creates."""
    name = unique_name("batch-strings")
    assert env.a.request("GET", f"/v1/logs/{name}").status_code == 404
    rows = [(f"héllo {i}",) for i in range(50)]
    frame = env.spark.createDataFrame(rows, "data string").coalesce(2)
    frame.write.format("quire").option("gateway", env.a.url).option("log", name).mode(
        "append"
    ).save()
    assert read_log(env.b, name) == [r[0].encode("utf-8") for r in rows]


def test_job_failing_midway_adds_nothing_and_leaves_no_ledger(env: Env) -> None:
    """A UDF raising in one partition after that task has written some records (2 per
    request): the job fails with the UDF's message, the log is unchanged and no ledger
    made for it is left."""
    name = unique_name("batch-fail")
    ok(env.a.request("PUT", f"/v1/logs/{name}"), 201)
    ok(env.a.request("POST", f"/v1/logs/{name}/writer"))
    ok(env.a.request("POST", f"/v1/logs/{name}/records", content=b"kept"))
    before = get_log(env.a, name)

    @udf(returnType=BinaryType())
    def boom(n: int) -> bytes:
        if n == 25:
            raise ValueError("record 25 is poisoned")
        return f"n{n}".encode()

    rdd = env.spark.sparkContext.parallelize([(n,) for n in range(30)], 3)
    frame = env.spark.createDataFrame(rdd, "n long").select(boom(col("n")).alias("data"))
    with pytest.raises(Exception, match="record 25 is poisoned"):
        frame.write.format("quire").option("gateway", env.a.url).option("log", name).option(
            "request_records", "2"
        ).mode("append").save()
    after = get_log(env.a, name)
    assert after["ledgers"] == before["ledgers"]
    assert read_log(env.a, name) == [b"kept"]
    left = set(ledgers_of_log(env.a, name)) - set(after["ledgers"])
    assert left == set(), f"task ledgers left behind: {left}"


def test_a_losing_attempt_ledger_is_deleted_by_the_commit(env: Env) -> None:
    """Two attempts of one partition (a task and its speculative copy, or a retry whose
    first worker died) each write a ledger; the commit gets one message for the
    partition: the log holds that attempt's rows once, and no ledger of the job is left
    outside the log (not the other attempt's, not the id mark the writer made)."""
    name = unique_name("batch-speculative")
    schema = StructType([StructField("data", BinaryType())])
    writer = QuireWriter({"gateway": env.a.url, "log": name}, schema, False)
    rows = [Row(data=bytearray(b"only-once-1")), Row(data=bytearray(b"only-once-2"))]
    loser = writer.write(iter(rows))
    winner = writer.write(iter(rows))
    assert loser.ledger_id != winner.ledger_id
    writer.commit([winner])
    assert read_log(env.a, name) == [b"only-once-1", b"only-once-2"]
    assert get_log(env.a, name)["ledgers"] == [winner.ledger_id]
    assert set(ledgers_of_log(env.a, name)) == {winner.ledger_id}
    for gone in (loser.ledger_id, writer.mark):
        assert env.a.request("GET", f"/v1/ledgers/{gone}").status_code == 404


def test_overwrite_and_bad_options_fail_clearly(env: Env) -> None:
    """mode overwrite, a missing log option, a frame without data and an unreachable
    gateway each fail before any task runs, with a message that says what is wrong
    (the unreachable one once the writer's retries gave up: after 1 s here)."""
    frame = env.spark.createDataFrame([("x",)], "data string")

    def writer():  # type: ignore[no-untyped-def]
        return frame.write.format("quire").option("gateway", env.a.url)  # a new one each time

    with pytest.raises(Exception, match="append-only"):
        writer().option("log", "o").mode("overwrite").save()
    with pytest.raises(Exception, match='option "log"'):
        writer().mode("append").save()
    other = env.spark.createDataFrame([("x",)], "text string")
    with pytest.raises(Exception, match="needs a column 'data'"):
        other.write.format("quire").option("gateway", env.a.url).option("log", "o").mode(
            "append"
        ).save()
    # The writer of quire-impatient (write_support.py) gives up on the gateway after 1 s,
    # not after the 30 s a job waits for a gateway to come back; the message is the same.
    env.spark.dataSource.register(ImpatientQuire)
    started = time.monotonic()
    with pytest.raises(Exception, match="gateway_unreachable"):
        frame.write.format("quire-impatient").option("gateway", "http://127.0.0.1:9").option(
            "log", "o"
        ).mode("append").save()
    assert time.monotonic() - started < spark_limits.RETRY_BUDGET_S  # the lowered budget
