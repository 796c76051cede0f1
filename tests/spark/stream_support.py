"""Fixtures of the streaming and jobs tests: a module's cluster of three bookies and one
gateway (the SparkSession is conftest.py's ``spark``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.gateway_support import (
    Gateway,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)

ROOT = str(Path(__file__).resolve().parents[2])


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
