"""One way to start the tests' local SparkSession (``conftest.spark`` and the write
tests use it): local[2], the UI off, the connector registered, the driver's JVM on
the client compiler and the serial collector (``cluster.JVM_OPTIONS``: its start and the
tests' small jobs take about 40 % less CPU than with the JVM's defaults).

The Python workers Spark starts must run this venv's interpreter (PYSPARK_PYTHON:
without it a worker dies with "No module named pyarrow") and import this tree's code
(PYTHONPATH: Spark passes it on to its workers)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from services.spark import register
from tests.spark.cluster import JVM_OPTIONS

ROOT = str(Path(__file__).resolve().parents[2])


def spark_environment() -> None:
    """PYSPARK_PYTHON and PYTHONPATH for Spark's Python workers."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if ROOT not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *paths])


@contextmanager
def spark_session(app: str) -> Iterator[SparkSession]:
    """A local[2] SparkSession with the connector registered, stopped at the end."""
    spark_environment()
    session = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()
