"""benchmarks/bookie_add.py --quick runs end to end (its own ZooKeeper and bookies)
and ends with one JSON line holding the required figures. Checks that the script
works, not how fast the bookie is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = (
    "raw_fsync_per_s",
    "sync_1k_c64_adds_per_s",
    "sync_1k_c64_batch_entries_per_s",
    "nosync_1k_c64_batch_entries_per_s",
    "bookie_rss_mb_max",
)


def test_bookie_add_quick_prints_the_required_json(tmp_path):
    """The last stdout line parses as JSON with every required key, each a positive
    number, and no add failed."""
    proc = subprocess.run(
        # --quick's 3 cases, each counted 0.5 s (--quick: 1 s) after 0.1 s (0.3 s).
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bookie_add.py"),
            "--quick",
            "--duration",
            "0.5",
            "--warmup",
            "0.1",
        ],  # fmt: skip
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    summary = json.loads(last)
    for key in REQUIRED:
        value = summary.get(key)
        assert isinstance(value, int | float) and value > 0, (key, value, proc.stderr[-2000:])
    assert summary["errors"] == 0, proc.stderr[-3000:]
    assert list(tmp_path.iterdir()) == []  # the temp dir is removed
