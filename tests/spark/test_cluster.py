"""The connector on a real Spark standalone cluster (issue 10, "Where users outgrow one
machine"): a master and two one-core workers on 127.0.0.1, started from the pip
package's scripts (tests/spark/cluster.py), and one SparkSession whose executors are
JVMs of those workers with Python workers of their own. The repository's code reaches
the executors only as a shipped zip (addPyFile), as it would on a real cluster.

One Spark cluster, one Quire cluster (three bookies, a gateway) and one session for the
whole module (each takes seconds to start). The gateway listens on 127.0.0.1, which the
executors reach as any client would.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from services.spark import register
from tests.harness import Cluster
from tests.integration.gateway_support import (
    Gateway,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.integration.log_support import LogClient
from tests.spark.cluster import PYTHON, StandaloneCluster, cluster_session, standalone_cluster

WORKERS = 2
TOKEN = "spark-cluster-token"
Row3 = tuple[int, int, bytes]


@dataclass
class Quire:
    cluster: Cluster
    gw: Gateway
    logs: LogClient


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with standalone_cluster(
        tmp_path_factory.mktemp("spark"), workers=WORKERS, wait_for_workers=False
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def quire(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Quire]:  # type: ignore[no-untyped-def]
    """Three bookies and a gateway with an API token."""
    with module_cluster(zookeeper, tmp_path_factory.mktemp("quire")) as cluster:
        start_bookies(cluster, 3)
        gw = start_gateway(cluster, ["--api-token", TOKEN], token=TOKEN)
        wait_writable(gw, 3)
        logs = LogClient(gw.url)
        logs.http.headers["Authorization"] = f"Bearer {TOKEN}"
        try:
            yield Quire(cluster, gw, logs)
        finally:
            logs.close()
            gw.close_client()


@pytest.fixture(scope="module")
def spark(spark_cluster: StandaloneCluster, quire: Quire) -> Iterator[Any]:
    """A session on the cluster with one executor per worker, both registered, and the
    connector registered. (It takes ``quire`` so that the Quire cluster starts while
    the Spark workers register.)"""
    with cluster_session(spark_cluster, "quire-cluster-test") as session:
        register(session)
        yield session


def load(spark: Any, quire: Quire, **options: object) -> Any:
    reader = spark.read.format("quire").option("gateway", quire.gw.url).option("token", TOKEN)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def rows(df: Any) -> list[Row3]:
    return [(r.ledger_id, r.entry_id, bytes(r.data)) for r in df.collect()]


def gateway_log(quire: Quire, name: str) -> list[Row3]:
    """The log as GET /v1/logs/{name}/records serves it, in log order."""
    return [(lid, eid, data) for (lid, eid), data in quire.logs.read_all(name)]


def payload(n: int, size: int = 48) -> bytes:
    head = f"rec-{n}-".encode()
    return head + bytes((n * 7 + i) % 256 for i in range(size - len(head)))


def test_a_job_runs_on_two_executors_in_other_processes(
    spark_cluster: StandaloneCluster,
    spark: Any,
) -> None:
    """Two partitions run in two executor JVMs, each a child of its own worker (not the
    driver), with the venv's Python and the repository's code from the shipped zip."""

    def _where_am_i(index: int, rows: Iterator[int]) -> Iterator[tuple[int, int, int, str, str]]:
        """On an executor: (partition, sum, executor JVM pid, python, the code's origin)."""
        import services.protocol.log_records as shipped

        me = psutil.Process(os.getpid())
        jvm = next(p.pid for p in me.parents() if p.name() == "java")
        yield index, sum(rows), jvm, sys.executable, str(shipped.__file__)

    results = (
        spark.sparkContext.parallelize(range(100), 2).mapPartitionsWithIndex(_where_am_i).collect()
    )
    assert sorted(r[0] for r in results) == [0, 1]
    assert sum(r[1] for r in results) == sum(range(100))
    jvms = {r[2] for r in results}
    assert len(jvms) == 2, f"both partitions ran in executor {jvms}"
    driver = psutil.Process(spark.sparkContext._gateway.proc.pid)  # the driver's JVM
    driver_family = {driver.pid, *(c.pid for c in driver.children(recursive=True))}
    assert not jvms & driver_family, "a task ran in the driver's process tree"
    worker_of = {}
    for jvm in jvms:
        parents = {p.pid for p in psutil.Process(jvm).parents()}
        owners = [w.name for w in spark_cluster.workers if w.pid in parents]
        assert len(owners) == 1, f"executor {jvm} is not a child of one worker"
        worker_of[jvm] = owners[0]
    assert len(set(worker_of.values())) == 2, f"executors on one worker: {worker_of}"
    assert {r[3] for r in results} == {PYTHON}
    for r in results:
        assert "quire-code.zip" in r[4], f"the code did not come from the shipped zip: {r[4]}"
        assert not r[4].startswith(str(Path(__file__).resolve().parents[2]))


def test_a_log_read_on_the_cluster_is_the_gateways_log(spark: Any, quire: Quire) -> None:
    """A log of a closed and an open ledger, single records and batches, read in many
    partitions by the executors: exactly the gateway's log read (bytes and order), and
    the writer appends afterwards (nothing fenced)."""
    name = "cluster-read"
    quire.logs.create(name)
    quire.logs.take_writer(name)
    n = 0
    for size in (1, 6, 1, 9, 3):
        quire.logs.append(name, [payload(n + i, 30 + 17 * i) for i in range(size)])
        n += size
    old = quire.logs.show(name)["ledgers"][-1]
    quire.logs.roll(name)
    quire.logs.wait_closed(old)
    for size in (4, 1, 5):
        quire.logs.append(name, [payload(n + i) for i in range(size)])
        n += size
    want = gateway_log(quire, name)
    assert len(want) == n and len({lid for lid, _, _ in want}) == 2
    df = load(spark, quire, log=name, partition_entries=3)
    assert df.rdd.getNumPartitions() >= 2
    assert rows(df) == want
    quire.logs.append(name, [b"after the read"])
    assert gateway_log(quire, name)[-1][2] == b"after the read"
