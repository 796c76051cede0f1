"""Helpers of the Spark write tests: one SparkSession per module (local[2], started
once: it takes ~15 s), a cluster of three bookies and two gateways, and reads of a log
and its task ledgers through the gateway.

Spark's Python workers must run this venv's interpreter (PYSPARK_PYTHON) and import
this tree's code (PYTHONPATH, which Spark passes on to them)."""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from services.spark import register
from tests.integration.gateway_support import Gateway, ok

ROOT = str(Path(__file__).resolve().parents[2])
VENV_PYTHON = "/work/main/.venv/bin/python"


@contextmanager
def spark_session(app: str) -> Iterator[SparkSession]:
    """A local[2] SparkSession with the connector registered, stopped at the end."""
    python = VENV_PYTHON if Path(VENV_PYTHON).exists() else sys.executable
    os.environ["PYSPARK_PYTHON"] = python
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if ROOT not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *paths])
    session = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


def get_log(g: Gateway, name: str) -> dict[str, Any]:
    doc: dict[str, Any] = ok(g.request("GET", f"/v1/logs/{name}"))
    return doc


def read_log(g: Gateway, name: str) -> list[bytes]:
    """Every record of the log, in order (following ``next`` until caught up)."""
    out: list[bytes] = []
    params: dict[str, Any] = {}
    for _ in range(10_000):
        page = ok(g.request("GET", f"/v1/logs/{name}/records", params=params))
        out += [base64.b64decode(r["data"]) for r in page["records"]]
        if page["caught_up"]:
            return out
        params = {"from": page["next"]}
    raise AssertionError("paging never ended")


def all_ledger_ids(g: Gateway) -> list[int]:
    out: list[int] = []
    params: dict[str, Any] = {"limit": 1000}
    while True:
        page = ok(g.request("GET", "/v1/ledgers", params=params))
        out += page["ledgers"]
        if page["next"] is None:
            return out
        params = {"limit": 1000, "after": page["next"]}


def ledgers_of_log(g: Gateway, log: str) -> dict[int, dict[str, str]]:
    """Every existing ledger made for ``log`` (custom metadata quire.log), with its
    custom metadata."""
    found: dict[int, dict[str, str]] = {}
    for lid in all_ledger_ids(g):
        r = g.request("GET", f"/v1/ledgers/{lid}")
        if r.status_code != 200:
            continue
        meta = r.json()["metadata"]
        if meta.get("quire.log") == log:
            found[lid] = meta
    return found
