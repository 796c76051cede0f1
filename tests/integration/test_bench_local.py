"""`quire bench --local` runs end to end (its own ZooKeeper, bookies and gateway),
ends with one JSON line holding the required figures, and leaves nothing behind,
also when interrupted. Checks that the command works, not how fast it is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from services import native
from tests.harness import killed_survivors, wait_for

QUIRE = Path(sys.executable).parent / "quire"
REQUIRED = ("adds_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms")
RSS_KEYS = ("gateway_rss_mb_max", "bookie_rss_mb_max")
# The raw fsync probe of --local, shorter than its 2 s: only that it ran is checked.
FSYNC_PROBE_S = "0.2"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")}
    return {**env, "TMPDIR": str(tmp_path)}


def _left_behind(tmp_path: Path) -> list[str]:
    """Processes whose command line mentions the test's temp dir (the cluster's)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(str(tmp_path) in part for part in proc.info["cmdline"] or ()):
                found.append(f"{proc.info['pid']}: {' '.join(proc.info['cmdline'])}")
        except psutil.Error:
            pass
    return found


def _run(tmp_path: Path, *args: str) -> dict:
    proc = subprocess.run(
        [str(QUIRE), "bench", "--local", "--duration", "1", "--warmup", "0.3",
         "--fsync-probe-s", FSYNC_PROBE_S, *args],
        capture_output=True, text=True, timeout=240, env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in (*REQUIRED, *RSS_KEYS, "raw_fsync_per_s"):
        value = summary.get(key)
        assert isinstance(value, int | float) and value > 0, (key, value, proc.stderr[-2000:])
    assert summary["errors"] == 0, summary
    assert "adds/s" in proc.stdout and "p99.9" in proc.stdout
    assert "bench" in proc.stderr  # the progress line
    assert list(tmp_path.iterdir()) == []  # the temp dir is removed
    assert _left_behind(tmp_path) == []
    return summary


def test_bench_local_single_entry_adds(tmp_path: Path) -> None:
    """Single-entry adds with the default quorums: every required key is a positive
    number, no add failed, the temp dir and every process are gone afterwards."""
    summary = _run(tmp_path, "--concurrency", "4", "--ledgers", "2")
    assert summary["batch"] == 1 and summary["requests_per_s"] == summary["adds_per_s"]
    assert summary["p50_ms"] <= summary["p99_ms"] <= summary["p999_ms"]
    assert summary["native"] == native.STATUS  # the cluster runs this tree, as built


def test_bench_local_batched_adds(tmp_path: Path) -> None:
    """Batched adds at E=Qw=Qa=1 with a rate limit: entries/s is batch × requests/s,
    and the rate is held (not exceeded by more than the histogram's slack)."""
    summary = _run(
        tmp_path, "-e", "1", "-w", "1", "-a", "1", "--batch", "10", "--concurrency", "2",
        "--rate", "40", "--entry-size", "100",
    )  # fmt: skip
    assert summary["adds_per_s"] == pytest.approx(10 * summary["requests_per_s"], rel=0.01)
    assert summary["requests_per_s"] <= 40 * 1.2
    assert summary["mb_per_s"] * 1e6 == pytest.approx(summary["adds_per_s"] * 100, rel=0.01)


def test_bench_local_stream(tmp_path: Path) -> None:
    """``--stream``: single records over two WebSocket streams, each with 32 in flight
    (the generator's own RFC 6455 client, services/bench/ws_frames.py): records are
    acknowledged and counted, none failed (a refused handshake, a bad frame or an
    error message from the gateway would each be an error)."""
    summary = _run(tmp_path, "--stream", "--concurrency", "2", "--in-flight", "32")
    assert summary["requests_per_s"] == summary["adds_per_s"]
    assert summary["entries"] >= 32


@pytest.mark.parametrize(
    "signals",
    [(signal.SIGINT,), (signal.SIGTERM, signal.SIGTERM), (signal.SIGINT, signal.SIGINT)],
    ids=["sigint", "sigterm-twice", "sigint-twice"],
)
def test_bench_local_interrupted_stops_everything(
    tmp_path: Path, signals: tuple[signal.Signals, ...]
) -> None:
    """SIGINT or SIGTERM while the load runs: exit 130, every process of the local
    cluster and the load generator is stopped (by pid), the temp dir is removed. A
    second signal once the cluster is stopping (an impatient user) changes nothing:
    until 2026-11-27 a second SIGTERM there cut the clean-up short and left ZooKeeper
    running."""
    proc = subprocess.Popen(
        [str(QUIRE), "bench", "--local", "--duration", "60", "--warmup", "0.3",
         "--concurrency", "2", "--fsync-probe-s", FSYNC_PROBE_S],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=_env(tmp_path), start_new_session=True,
    )  # fmt: skip
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True)
    reader.start()
    children: set[int] = set()
    try:

        def loading() -> bool:
            try:
                children.update(c.pid for c in psutil.Process(proc.pid).children(recursive=True))
            except psutil.Error:
                pass
            # The load's progress line (services/bench/report.py: "  bench warming up …",
            # then the counted seconds), printed once the load processes run; and the
            # children, as the line alone can come before every child is seen.
            running = any(line.startswith("  bench ") for line in stderr)
            return running and len(children) >= 5

        wait_for(loading, 180.0, "the load to run with its 5+ children")
        assert len(children) >= 5  # ZooKeeper, 3 bookies, gateway, load
        os.kill(proc.pid, signals[0])
        if len(signals) > 1:
            stopping = lambda: any("stopping" in line for line in stderr)  # noqa: E731
            wait_for(stopping, 60.0, "the cluster to be stopping")
            os.kill(proc.pid, signals[1])
        # 130; or killed by the second signal when it came after the clean-up ended
        # (the default handlers are back by then): either way nothing may survive.
        codes = (130, -signals[-1]) if len(signals) > 1 else (130,)
        assert proc.wait(60.0) in codes, "".join(stderr)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(5.0)
    end = time.monotonic() + 10.0
    while time.monotonic() < end and any(psutil.pid_exists(pid) for pid in children):
        time.sleep(0.1)
    survivors = killed_survivors(children)
    assert survivors == [], survivors
    assert "interrupted" in "".join(stderr)
    assert list(tmp_path.iterdir()) == []
