"""Helpers of the Spark write tests: reads of a log and its task ledgers through the
gateway, and the data source ``quire-impatient`` (the SparkSession is conftest.py's
``spark``)."""

from __future__ import annotations

import base64
from typing import Any

from pyspark.sql.datasource import DataSourceWriter
from pyspark.sql.types import StructType

from services.spark import limits as spark_limits
from services.spark.source import QuireDataSource
from tests.integration.gateway_support import Gateway, ok

# How long the writer ``quire-impatient`` makes on the driver retries an unreachable
# gateway (the connector's own: spark_limits.RETRY_BUDGET_S, 30 s).
IMPATIENT_RETRY_BUDGET_S = 1.0


class ImpatientQuire(QuireDataSource):
    """The data source ``quire`` under the name ``quire-impatient``, whose batch writer
    gives up on an unreachable gateway after ``IMPATIENT_RETRY_BUDGET_S``: a test that a
    job against a gateway nobody answers fails clearly need not wait out the 30 s a
    real job waits for a gateway to come back.

    The writer is made in a Python worker that Spark starts for the job's planning, not
    in the test's process, so a test's monkeypatch cannot reach it; the bound is lowered
    there while the real writer is made (its calls on the driver happen then), and put
    back after, because the worker may be reused for other jobs."""

    @classmethod
    def name(cls) -> str:
        return "quire-impatient"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        saved = spark_limits.RETRY_BUDGET_S
        spark_limits.RETRY_BUDGET_S = IMPATIENT_RETRY_BUDGET_S
        try:
            return super().writer(schema, overwrite)
        finally:
            spark_limits.RETRY_BUDGET_S = saved


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
