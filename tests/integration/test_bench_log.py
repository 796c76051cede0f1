"""`quire bench --local --log --handover` runs end to end (its own ZooKeeper, bookies
and two gateways) and ends with one JSON line holding the log's figures. Checks that
the command works, not how fast it is."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_bench_local import FSYNC_PROBE_S, QUIRE, _env, _left_behind


def test_bench_log_with_rolls_keys_and_handover(tmp_path: Path) -> None:
    """Keyed batched appends with a roll every 0.5 s, then two hand-overs: appends were
    counted with no error, rolls happened (the log has several ledgers), every hand-over
    was timed and the old writer's gateway went on taking its busy clients' appends
    (forwarded to the new writer), nothing is left behind."""
    proc = subprocess.run(
        [str(QUIRE), "bench", "--local", "--log", "--duration", "1.2", "--warmup", "0.3",
         "--fsync-probe-s", FSYNC_PROBE_S,
         "--concurrency", "2", "--batch", "5", "--idempotency-keys", "--roll-every-s", "0.5",
         "--handover", "--handover-reps", "2"],
        capture_output=True, text=True, timeout=240, env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["mode"] == "log" and summary["idempotency_keys"] is True
    assert summary["entries"] > 0 and summary["errors"] == 0, summary
    assert summary["adds_per_s"] == pytest.approx(5 * summary["requests_per_s"], rel=0.01)
    assert summary["rolls"] >= 1 and summary["roll_errors"] == 0
    assert summary["ledgers"] >= 2
    assert summary["handover_reps"] == 2 and len(summary["handover_ms"]) == 2
    assert 0 < summary["handover_ms_median"] <= summary["handover_ms_max"]
    assert summary["handover_busy_forwarded"] >= 2  # after each hand-over, forwarded
    # (the summary names the first error a busy client got: handover_first_error)
    assert summary["handover_busy_not_writer"] == 0, summary
    assert summary["handover_busy_errors"] == 0, summary
    assert "hand-over ms" in proc.stdout and "to log bench-" in proc.stdout
    assert list(tmp_path.iterdir()) == []
    assert _left_behind(tmp_path) == []
