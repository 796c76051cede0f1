"""Fixtures of the Spark connector tests: one SparkSession per test module (local[2];
starting one takes ~15 s), with the connector registered.

The Python workers Spark starts must run this venv's interpreter (PYSPARK_PYTHON:
without it a worker dies with "No module named pyarrow") and import this tree's code
(PYTHONPATH: Spark passes it on to its workers)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from services.spark import register

ROOT = str(Path(__file__).resolve().parents[2])


def spark_environment() -> None:
    """PYSPARK_PYTHON and PYTHONPATH for Spark's Python workers."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if ROOT not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *paths])


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """A local[2] SparkSession for one test module, stopped at its end."""
    spark_environment()
    session = (
        SparkSession.builder.master("local[2]")
        .appName("quire-tests")
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
