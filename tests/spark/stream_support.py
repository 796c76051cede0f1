"""Fixtures of the streaming and jobs tests: one local[2] SparkSession per test module
(starting one takes ~15 s) with the connector registered, and a module's cluster of
three bookies and one gateway.

Spark's Python workers must run the venv's interpreter (PYSPARK_PYTHON: without it a
worker dies with "No module named pyarrow") and import this tree's code (PYTHONPATH,
which Spark passes on to its workers)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from services.spark import register
from tests.integration.gateway_support import (
    Gateway,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)

ROOT = str(Path(__file__).resolve().parents[2])


def spark_environment() -> None:
    """PYSPARK_PYTHON and PYTHONPATH for Spark's Python workers (and the jobs run with
    ``python -m`` as subprocesses)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if ROOT not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *paths])


@pytest.fixture(scope="module")
def stream_spark() -> Iterator[SparkSession]:
    """A local[2] SparkSession for one test module, stopped at its end."""
    spark_environment()
    session = (
        SparkSession.builder.master("local[2]")
        .appName("quire-stream-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def gateway(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:  # type: ignore[no-untyped-def]
    """Three bookies and one gateway that sees them writable, for one test module."""
    with module_cluster(zookeeper, tmp_path_factory.mktemp("spark-stream")) as cluster:
        start_bookies(cluster, 3)
        g = start_gateway(cluster)
        try:
            wait_writable(g, 3)
            yield g
        finally:
            g.close_client()
