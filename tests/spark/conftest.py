"""Fixtures of the Spark connector tests: one SparkSession per test module
(``session.spark_session``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.spark.session import spark_session


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """A local[2] SparkSession for one test module, stopped at its end."""
    with spark_session("quire-tests") as session:
        yield session
