"""The auto-recovery walk-through ("Kill a bookie and watch it heal" in README.md, in
full in docs/operations.md), run as a new user would: `quire up`, write with the CLI,
kill -9 a bookie, keep writing, watch it re-replicate with `quire admin`.

`quire up` hands QUIRE_* settings to its services, so the lost-bookie delay is short
here (2 s instead of 30 s); everything else is the default cluster: four bookies,
ledgers of 3/2/2, one auditor, one replicator."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cluster.processes import poll_client
from tests.harness import wait_for
from tests.integration.test_quire_up import (
    QuireUp,
    _quire,
    free_port_block,
    ports_needed,
)

DEADLINE_S = 120.0


@pytest.fixture
def up(tmp_path: Path) -> Iterator[QuireUp]:
    port = free_port_block(ports_needed(4))
    proc = QuireUp(
        ["--data-dir", str(tmp_path / "data"), "--gateway-port", str(port),
         "--zk-port", str(free_port_block(1))],
        cwd=tmp_path,
        extra_env={"QUIRE_LOST_BOOKIE_DELAY": "2", "QUIRE_AUDIT_INTERVAL": "30"},
    )  # fmt: skip
    try:
        yield proc
    finally:
        proc.kill_everything()


def _cli(gateway: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")}
    return subprocess.run(
        [*_quire(), "--gateway", gateway, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def test_kill_a_bookie_keep_writing_and_watch_it_re_replicate(up: QuireUp) -> None:
    """The walk-through: every command works, the writer carries on past the kill, and
    within a bounded time no fragment names the killed bookie, nothing is marked, and
    every entry reads back."""
    started = up.wait_ready()
    gateway = started["gateway"]["where"]
    assert {"auditor", "replicator"} <= set(started), up.output()

    created = _cli(gateway, "ledger", "create")
    assert created.returncode == 0, created.stderr
    lid = int(poll_client().get(f"{gateway}/v1/ledgers", timeout=10).json()["ledgers"][-1])
    appended = _cli(gateway, "ledger", "append", str(lid), "hello", "world")
    assert appended.returncode == 0, appended.stderr
    fragments = poll_client().get(f"{gateway}/v1/ledgers/{lid}", timeout=10).json()["fragments"]
    victim_id = fragments[0]["bookies"][0]
    victim = next(v for v in started.values() if v["where"].endswith(victim_id))
    os.kill(victim["pid"], signal.SIGKILL)

    more = _cli(gateway, "ledger", "append", str(lid), "still", "writing")
    assert more.returncode == 0, more.stderr  # the writer replaced the bookie itself

    def repaired() -> bool:
        doc = poll_client().get(f"{gateway}/v1/ledgers/{lid}", timeout=10).json()
        return not any(victim_id in f["bookies"] for f in doc["fragments"])

    wait_for(repaired, DEADLINE_S, "no fragment to name the killed bookie")
    waited = _cli(gateway, "admin", "wait-replicated", "--timeout", str(DEADLINE_S))
    assert waited.returncode == 0, waited.stdout + waited.stderr
    listing = _cli(gateway, "admin", "under-replicated", "--json")
    assert listing.returncode == 0 and '"ledgers": []' in listing.stdout, listing.stdout
    bookies = _cli(gateway, "admin", "bookies", "--json")
    assert bookies.returncode == 0, bookies.stderr
    assert f'"{victim_id}"' in bookies.stdout and '"down"' in bookies.stdout, bookies.stdout
    read = _cli(gateway, "ledger", "read", str(lid), "--format", "text")
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["hello", "world", "still", "writing"], read.stdout
