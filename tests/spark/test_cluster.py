"""The connector on a real Spark standalone cluster (issue 10, "Where users outgrow one
machine"): a master and two one-core workers on 127.0.0.1, started from the pip
package's scripts (tests/spark/cluster.py), and one SparkSession whose executors are
JVMs of those workers with Python workers of their own. The repository's code reaches
the executors only as a shipped zip (addPyFile), as it would on a real cluster.

One cluster and one session for the whole module (each takes seconds to start).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
import pytest

from tests.spark.cluster import PYTHON, StandaloneCluster, cluster_session, standalone_cluster

WORKERS = 2


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with standalone_cluster(
        tmp_path_factory.mktemp("spark"), workers=WORKERS, wait_for_workers=False
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def spark(spark_cluster: StandaloneCluster) -> Iterator[Any]:
    """A session on the cluster with one executor per worker, both registered."""
    with cluster_session(spark_cluster, "quire-cluster-test") as session:
        yield session


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
