"""Many streams at once against real processes (ZooKeeper, three bookies, a gateway):
overload slows the streams down instead of failing bookies (issue 35 item 11).

256 streams with 256 records of 1 KiB in flight each (64 MiB through one gateway, the
size of the report) are driven by ``quire bench --stream`` for a few seconds. A bookie
whose add queue is full is busy, not failed: no ledger may change its ensemble or be
closed, and records must be acknowledged. These tests check that it works, not how fast
(benchmarks/README.md holds the figures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Cluster
from tests.integration.gateway_support import (
    Gateway,
    metric_value,
    start_bookies,
    start_gateway,
    wait_writable,
)

QUIRE = Path(sys.executable).parent / "quire"
STREAMS = 256
IN_FLIGHT = 256
LEDGERS = 4


def _bench(gateway: Gateway, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``quire bench --stream`` at the report's size against ``gateway`` (the ledgers are
    kept, to be inspected afterwards)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")}
    return subprocess.run(
        [
            str(QUIRE), "bench", "--gateway", gateway.url, "--stream",
            "--concurrency", str(STREAMS), "--in-flight", str(IN_FLIGHT),
            "--ledgers", str(LEDGERS), "-e", "3", "-w", "2", "-a", "2",
            "--entry-size", "1024", "--duration", "4", "--warmup", "0.5",
            "--keep-ledgers", "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "TMPDIR": str(tmp_path)},
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _check_no_bookie_replaced(gateway: Gateway, proc: subprocess.CompletedProcess[str]) -> None:
    ledgers = gateway.request("GET", "/v1/ledgers").json()["ledgers"]
    assert len(ledgers) == LEDGERS, ledgers
    for lid in ledgers:
        doc = gateway.metadata(lid)
        assert doc["state"] == "OPEN", doc
        assert len(doc["fragments"]) == 1, doc  # no ensemble change
    assert metric_value(gateway.metrics(), "quire_gateway_ensemble_changes_total") == 0
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["errors"] == 0, summary
    assert summary["entries"] > 0, summary


@pytest.mark.parametrize(
    "gateway_args",
    [
        pytest.param([], id="defaults"),
        # A queue of 2,000 entries per bookie (8 requests of 250), far below the records
        # in flight: it is full from the first burst whatever the machine's speed.
        pytest.param(["--bookie-batch-entries-max", "250"], id="short-bookie-queue"),
    ],
)
def test_many_streams_slow_down_instead_of_replacing_bookies(
    cluster: Cluster, tmp_path: Path, gateway_args: list[str]
) -> None:
    """256 streams × 256 records in flight through one gateway to 3 bookies: records are
    acknowledged, no stream fails, and a busy bookie is never taken for a failed one
    (no ensemble change, every ledger still OPEN on its first ensemble)."""
    start_bookies(cluster, 3)
    gateway = start_gateway(cluster, gateway_args)
    try:
        wait_writable(gateway, 3)
        _check_no_bookie_replaced(gateway, _bench(gateway, tmp_path))
    finally:
        gateway.close_client()
