"""The Spark connector against a gateway that serves HTTPS only, its certificate signed
by a test CA (docs/spark.md, "TLS"; docs/security.md, "TLS"): with the option
``caFile`` a batch write and a batch read of the log round-trip exactly, and a
streaming query reads that log into another one; without it the job fails on the
driver with the certificate's verification error naming the gateway; a CA file that
does not exist fails the job at planning naming the option; a gateway requiring client
certificates is read with ``certFile`` and ``keyFile``, and a client without them is
told which options give one.
The process's one SparkSession (conftest.py's ``spark``); one TLS cluster for the module
(three bookies, a gateway and one with --tls-client-auth, every hop over TLS as in
tests/integration/test_tls.py)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from services.spark import limits as spark_limits
from services.spark.client import QuireSparkError, SparkGatewayClient, TlsOptions
from services.tls.contexts import TlsFiles
from tests.integration.gateway_support import (
    Gateway,
    loopback_tls,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.shared import unique_name
from tests.spark.write_support import read_log

BOOKIES = 3


@dataclass
class Env:
    spark: SparkSession
    gateway: Gateway
    mutual: Gateway  # requires client certificates
    files: TlsFiles
    base: Path

    @property
    def ca_file(self) -> Path:
        return self.files.ca


@pytest.fixture(scope="module")
def env(  # type: ignore[no-untyped-def]
    zookeeper, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("spark-tls")
    _, files = loopback_tls(base, "spark tls test CA")
    with module_cluster(zookeeper, base, tls=files) as cluster:
        start_bookies(cluster, BOOKIES)
        gateway = start_gateway(cluster)
        mutual = start_gateway(cluster, ["--tls-client-auth"])
        wait_writable(gateway, BOOKIES)
        try:
            yield Env(spark, gateway, mutual, files, base)
        finally:
            gateway.close_client()
            mutual.close_client()


def records(count: int) -> list[bytes]:
    return [f"tls-record-{i}-".encode() + bytes(range(i % 200)) for i in range(count)]


def test_batch_write_and_read_with_the_ca_round_trip(env: Env) -> None:
    """Written with caFile and read back with caFile in three partitions: the log holds
    the records in order, and the read gives exactly them, bytes and order."""
    assert env.gateway.url.startswith("https://")
    log = unique_name("spark-tls")
    sent = records(60)
    frame = env.spark.createDataFrame([(r,) for r in sent], "data binary").repartition(1)
    (
        frame.write.format("quire")
        .option("gateway", env.gateway.url)
        .option("caFile", str(env.ca_file))
        .option("log", log)
        .mode("append")
        .save()
    )
    assert read_log(env.gateway, log) == sent
    read = (
        env.spark.read.format("quire")
        .option("gateway", env.gateway.url)
        .option("caFile", str(env.ca_file))
        .option("log", log)
        .option("partition_entries", "25")
        .load()
    )
    assert [bytes(row.data) for row in read.orderBy("ledger_id", "entry_id").collect()] == sent


def test_a_streaming_query_with_the_ca_copies_a_log(env: Env) -> None:
    """A log-to-log query, both ends given caFile, copies every record once, in order
    (the source's planning and reads and the sink's writes and commit all over HTTPS)."""
    source, sink = unique_name("spark-tls-src"), unique_name("spark-tls-sink")
    sent = records(30)
    env.spark.createDataFrame([(r,) for r in sent], "data binary").repartition(1).write.format(
        "quire"
    ).option("gateway", env.gateway.url).option("caFile", str(env.ca_file)).option(
        "log", source
    ).mode("append").save()
    query = (
        env.spark.readStream.format("quire")
        .option("gateway", env.gateway.url)
        .option("caFile", str(env.ca_file))
        .option("log", source)
        .load()
        .select("data")
        .writeStream.format("quire")
        .option("gateway", env.gateway.url)
        .option("caFile", str(env.ca_file))
        .option("log", sink)
        .option("checkpointLocation", str(env.base / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert read_log(env.gateway, sink) == sent


def job_error(run: Callable[[], object]) -> str:
    """The text of the exception a failing job raises on the driver."""
    with pytest.raises(Exception) as info:  # noqa: PT011 - Spark wraps it in its own class
        run()
    return str(info.value)


def test_without_the_ca_the_job_fails_naming_the_gateway(env: Env) -> None:
    """Without caFile (the system's CA bundle, which does not hold the test CA) a write
    and a read fail on the driver, at once, with the verification error naming the
    gateway's URL and saying how to give the CA; a caFile that does not exist fails the
    job at planning, naming the option."""
    url = env.gateway.url
    frame = env.spark.createDataFrame([(b"x",)], "data binary")
    write = frame.write.format("quire").option("gateway", url).option("log", "never")
    read = env.spark.read.format("quire").option("gateway", url).option("log", "never")
    for run in (lambda: write.mode("append").save(), lambda: read.load().collect()):
        text = job_error(run)
        assert "gateway_not_verified: " in text, text
        assert f"/v1/logs/never: the certificate of {url}" in text, text
        assert "is not verified by the system's CA bundle" in text, text
    missing = env.base / "missing-ca.pem"
    text = job_error(lambda: read.option("caFile", str(missing)).load().collect())
    assert f"option 'caFile': {missing}: No such file" in text, text


def test_a_gateway_requiring_client_certificates(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a gateway with --tls-client-auth, a read with certFile and keyFile (a
    certificate of the cluster's CA) gives the log's records. Without them the gateway
    closes the connection (no TLS alert comes from it): the connector's call fails as
    unreachable, saying that no client certificate was shown and which options give one
    (checked on the client alone, its retry budget cut: a job would retry for 30 s)."""
    log = unique_name("spark-mtls")
    sent = records(12)
    gw = env.gateway
    assert gw.request("PUT", f"/v1/logs/{log}").status_code in (200, 201)
    assert gw.request("POST", f"/v1/logs/{log}/writer").status_code in (200, 201)
    body = {"entries": [base64.b64encode(r).decode() for r in sent]}
    assert gw.request("POST", f"/v1/logs/{log}/records", json=body).status_code in (200, 201)

    got = (
        env.spark.read.format("quire")
        .option("gateway", env.mutual.url)
        .option("caFile", str(env.ca_file))
        .option("certFile", str(env.files.cert))
        .option("keyFile", str(env.files.key))
        .option("log", log)
        .load()
        .collect()
    )
    assert [bytes(row.data) for row in sorted(got, key=lambda r: (r.ledger_id, r.entry_id))] == sent

    monkeypatch.setattr(spark_limits, "RETRY_BUDGET_S", 0.0)
    tls = TlsOptions(str(env.ca_file))
    with SparkGatewayClient(env.mutual.url, tls=tls) as client:
        with pytest.raises(QuireSparkError) as caught:
            client.get_log(log)
    assert caught.value.code == "gateway_unreachable"
    assert f"on {env.mutual.url}: " in str(caught.value)
    assert "no client certificate was shown" in str(caught.value), caught.value
