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

from services.cluster.processes import ProcessError
from services.spark import register
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import Gateway
from tests.integration.log_support import LogClient
from tests.shared import StandardCluster, unique_name
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
def quire(shared_cluster: StandardCluster) -> Iterator[Quire]:
    """The standard cluster's gateway with an API token (tests/shared.py)."""
    gw = shared_cluster.gateway(["--api-token", TOKEN], TOKEN)
    logs = LogClient(gw.url)
    logs.http.headers["Authorization"] = f"Bearer {TOKEN}"
    try:
        yield Quire(shared_cluster.cluster, gw, logs)
    finally:
        logs.close()


@pytest.fixture(scope="module")
def spark(spark_cluster: StandaloneCluster, quire: Quire) -> Iterator[Any]:
    """A session on the cluster with one executor per worker, both registered, and the
    connector registered. (It takes ``quire`` so that the Quire cluster starts while
    the Spark workers register.) A JVM holds one SparkContext: the process's local
    session (conftest.py), if started, is stopped first; these tests run last."""
    from pyspark.sql import SparkSession

    local = SparkSession.getActiveSession()
    if local is not None:
        local.stop()
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


def log_ledgers(quire: Quire, name: str) -> dict[int, dict[str, str]]:
    """Every existing ledger made for log ``name`` (custom metadata quire.log), with its
    custom metadata: the log's own and any task ledger left behind."""
    found: dict[int, dict[str, str]] = {}
    params: dict[str, Any] = {"limit": 1000}
    while True:
        page = quire.gw.request("GET", "/v1/ledgers", params=params).json()
        for lid in page["ledgers"]:
            r = quire.gw.request("GET", f"/v1/ledgers/{lid}")
            if r.status_code == 200 and r.json()["metadata"].get("quire.log") == name:
                found[lid] = r.json()["metadata"]
        if page["next"] is None:
            return found
        params["after"] = page["next"]


def save(df: Any, quire: Quire, name: str) -> None:
    (
        df.write.format("quire")
        .option("gateway", quire.gw.url)
        .option("token", TOKEN)
        .option("log", name)
        .mode("append")
        .save()
    )


def progress_report(query: Any, checkpoint: Path) -> str:
    """A query's batches (ids, input rows, offsets) and its checkpoint's logs, for a failure."""
    lines = [
        f"batch {p['batchId']}: {p['numInputRows']} rows, "
        f"{[(s['startOffset'], s['endOffset']) for s in p['sources']]}"
        for p in query.recentProgress
    ]
    for kind in ("offsets", "commits"):
        names = sorted(f.name for f in (checkpoint / kind).glob("[0-9]*"))
        lines.append(f"{kind}: {names}")
    return "\n".join(lines)


def frame(spark: Any, rdd: Any) -> Any:
    """A DataFrame of one binary column ``data`` from an RDD of 1-tuples."""
    return spark.createDataFrame(rdd, "data binary")


def payload(n: int, size: int = 48) -> bytes:
    head = f"rec-{n}-".encode()
    return head + bytes((n * 7 + i) % 256 for i in range(size - len(head)))


def test_a_cluster_that_fails_to_start_leaves_no_process(tmp_path: Path) -> None:
    """Start-up cut short (a deadline no master meets): ProcessError, and every process
    started for that cluster (its directory is in their environment) is gone."""
    base = tmp_path / "doomed"

    def ours() -> list[int]:
        found = []
        for proc in psutil.process_iter(["pid", "environ"]):
            if any(str(base) in value for value in (proc.info["environ"] or {}).values()):
                found.append(proc.info["pid"])
        return found

    with pytest.raises(ProcessError, match="the master did not answer"):
        with standalone_cluster(base, workers=1, deadline_s=0.5):
            raise AssertionError("the cluster was not expected to start")
    assert (base / "logs" / "master.log").exists()  # it was started
    assert ours() == []


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
    name = unique_name("cluster-read")
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


def test_a_batch_write_on_the_cluster_lands_in_task_order(spark: Any, quire: Quire) -> None:
    """Four partitions written by the executors: the log gains four task ledgers, in
    partition order, holding exactly the rows; the commit left the role free, so the next
    append takes it again, in a new ledger after the task ledgers."""
    name = unique_name("cluster-write")
    quire.logs.create(name)
    quire.logs.take_writer(name)
    quire.logs.append(name, [b"before"])
    before = quire.logs.show(name)["ledgers"]
    data = [payload(i, 20 + i) for i in range(60)]
    df = frame(spark, spark.sparkContext.parallelize([(d,) for d in data], 4))
    save(df, quire, name)
    ledgers = quire.logs.show(name)["ledgers"]
    assert ledgers[: len(before)] == before
    new = ledgers[len(before) :]
    assert len(new) == 4
    tasks = [log_ledgers(quire, name)[lid]["quire.task"] for lid in new]
    assert [t.split(".")[0] for t in tasks] == ["0", "1", "2", "3"]
    assert [d for _, _, d in gateway_log(quire, name)] == [b"before", *data]
    r = quire.logs.append_raw(name, [b"late"])
    assert r.status_code == 200 and r.json()["position"]["ledger_id"] not in ledgers, r.text


def test_a_failed_write_on_the_cluster_adds_nothing(spark: Any, quire: Quire) -> None:
    """A task raising on an executor (every attempt): the job fails, the log is as it
    was, and no task ledger is left behind (the executors' ledgers were deleted)."""
    name = unique_name("cluster-write-fails")
    quire.logs.create(name)
    quire.logs.take_writer(name)
    quire.logs.append(name, [b"kept"])
    log_before = quire.logs.show(name)
    ledgers_before = set(log_ledgers(quire, name))

    def poisoned(n: int) -> tuple[bytes]:
        """On an executor (pickled by value: it uses nothing of this module)."""
        if n == 33:
            raise ValueError("poisoned row 33")
        return (f"row-{n}".encode(),)

    df = frame(spark, spark.sparkContext.parallelize(range(40), 4).map(poisoned))
    with pytest.raises(Exception, match="poisoned row 33"):  # noqa: PT011 - Spark wraps it
        save(df, quire, name)
    assert quire.logs.show(name)["ledgers"] == log_before["ledgers"]
    assert [d for _, _, d in gateway_log(quire, name)] == [b"kept"]
    assert set(log_ledgers(quire, name)) == ledgers_before


def test_a_stream_from_log_to_log_on_the_cluster_exactly_once(
    spark: Any, quire: Quire, tmp_path: Path
) -> None:
    """A query tails one log and writes a transform of each record to another: records
    appended before and while it runs arrive once, in order; stopped and restarted from
    its checkpoint, it adds exactly the records appended meanwhile, once."""
    source, sink = unique_name("cluster-stream-in"), unique_name("cluster-stream-out")
    checkpoint = tmp_path / "checkpoint"
    quire.logs.create(source)
    quire.logs.take_writer(source)
    sent: list[bytes] = []

    def append(count: int) -> None:
        batch = [payload(len(sent) + i) for i in range(count)]
        quire.logs.append(source, batch)
        sent.extend(batch)

    def start(**trigger: Any) -> Any:
        return (
            spark.readStream.format("quire")
            .option("gateway", quire.gw.url)
            .option("token", TOKEN)
            .option("log", source)
            .load()
            .selectExpr("concat(CAST('out:' AS BINARY), data) AS data")
            .writeStream.format("quire")
            .option("gateway", quire.gw.url)
            .option("token", TOKEN)
            .option("log", sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start()
        )

    def landed() -> list[bytes]:
        try:
            return [d for _, _, d in gateway_log(quire, sink)]
        except AssertionError:  # the sink log is created by the first batch
            return []

    def expected() -> list[bytes]:
        return [b"out:" + d for d in sent]

    append(10)
    query = start(processingTime="1 second")
    try:
        wait_for(lambda: landed() == expected() or query.exception(), 60, "the first records")
        append(7)
        append(5)
        wait_for(lambda: landed() == expected() or query.exception(), 60, "records appended live")
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    assert landed() == expected()
    append(8)
    # Restarted with a processing-time trigger, not availableNow: Spark 4.0 runs a Python
    # source's availableNow as one batch (SPARK-45178), and a run stopped after planning
    # a batch and before committing it would re-run just that batch (docs/spark.md).
    again = start(processingTime="1 second")
    try:
        wait_for(lambda: landed() == expected() or again.exception(), 60, "records after restart")
    finally:
        again.stop()
    assert again.exception() is None, again.exception()
    assert landed() == expected(), progress_report(again, checkpoint)
    assert len(sent) == 30
