"""Fixtures of the streaming and jobs tests: a gateway of the standard cluster (the
SparkSession is conftest.py's ``spark``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.gateway_support import Gateway
from tests.shared import StandardCluster

ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="module")
def gateway(shared_cluster: StandardCluster) -> Gateway:
    """The standard cluster's writer gateway (tests/shared.py); every log a test makes
    is named by ``unique_name``."""
    return shared_cluster.writer
