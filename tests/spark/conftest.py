"""Fixtures of the Spark connector tests: one local SparkSession per test process
(``session.spark_session``; starting one takes ~5 s), shared by every module.

A JVM holds one SparkContext at a time, so test_cluster.py, whose session runs on a
standalone cluster, stops the local one first; its tests are therefore run after every
other Spark test (``pytest_collection_modifyitems``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.spark.session import spark_session

LAST = "tests/spark/test_cluster.py"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local[2] SparkSession for the whole test process, stopped at its end."""
    with spark_session("quire-tests") as session:
        yield session


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of test_cluster.py after the other Spark tests, in the slots the Spark
    tests hold (so the order of everything else, and of each module's tests, stays)."""
    slots = [i for i, item in enumerate(items) if item.nodeid.startswith("tests/spark/")]
    spark_items = [items[i] for i in slots]
    spark_items.sort(key=lambda item: item.nodeid.startswith(LAST))
    for slot, item in zip(slots, spark_items, strict=True):
        items[slot] = item
