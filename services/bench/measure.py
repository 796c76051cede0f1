"""Measurements of the benchmarks: the disk's raw fsync rate, a process's peak memory
and CPU, the machine's busy CPU and CPU model, and a summary of py-spy profiles.

Used by ``quire bench`` (services/bench/run.py) and benchmarks/bookie_add.py, so
both report the same figures the same way. Only psutil and the standard
library: it runs in the orchestrating process, never in the load generator.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path

import psutil

from services.bench.limits import FSYNC_BLOCK_BYTES, SAMPLE_INTERVAL_S


def raw_fsync(directory: Path, seconds: float) -> dict:
    """Append 4 KiB and fsync, in a loop, for ``seconds``: the disk's sync rate."""
    path = directory / "fsync-probe"
    block = os.urandom(FSYNC_BLOCK_BYTES)
    latencies = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        began = time.perf_counter()
        end = began + seconds
        while True:
            t0 = time.perf_counter()
            if t0 >= end:
                break
            os.write(fd, block)
            os.fsync(fd)
            latencies.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - began
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    latencies.sort()
    return {
        "raw_fsync_per_s": round(len(latencies) / elapsed, 1),
        "raw_fsync_p50_ms": round(statistics.median(latencies) * 1000, 3),
        "raw_fsync_p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))] * 1000, 3),
    }


class Sampler(threading.Thread):
    """Peak resident memory of a process and its children, sampled every 0.1 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.process = psutil.Process(pid)
        self.rss_max = 0
        self.case_rss_max = 0
        self._stop_event = threading.Event()

    def rss(self) -> int:
        total = self.process.memory_info().rss
        for child in self.process.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                pass
        return total

    def cpu_s(self) -> float:
        try:
            t = self.process.cpu_times()
            return t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            return 0.0

    def run(self) -> None:
        while not self._stop_event.wait(SAMPLE_INTERVAL_S):
            try:
                rss = self.rss()
            except psutil.Error:
                return
            self.rss_max = max(self.rss_max, rss)
            self.case_rss_max = max(self.case_rss_max, rss)

    def stop(self) -> None:
        self._stop_event.set()


def busy_cpu_s() -> float:
    """CPU seconds the whole machine spent busy (all cores)."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def cpu_model() -> str:
    """The machine's CPU model as ``/proc/cpuinfo`` names it ("unknown" where it does
    not): benchmarks/README.md tells its figures apart by it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


# Leaf frames of a thread that is waiting, not working (py-spy cannot always tell:
# uvloop's epoll wait shows as Runner.run, a pool thread's queue wait as _worker).
IDLE_LEAVES = (
    "Condition.wait (threading.py",
    "EpollSelector.select (selectors.py",
    "Runner.run (asyncio/runners.py",
    "_worker (concurrent/futures/thread.py",
)


def profile_report(folded: Path, top: int = 15) -> str:
    """Top frames of a py-spy folded-stacks file, as shares of the busy samples: by
    self time and by inclusive time. Samples whose leaf is a wait are counted apart."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    busy = idle = 0
    for line in folded.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        if frames[-1].startswith(IDLE_LEAVES):
            idle += count
            continue
        busy += count
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count
    if not busy:
        return "  (no busy samples)"
    lines = [f"  {busy} busy samples ({idle} more waiting); self:"]
    for frame, count in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"    {100 * count / busy:5.1f}%  {frame}")
    lines.append("  inclusive:")
    for frame, count in sorted(inclusive.items(), key=lambda kv: -kv[1])[: top * 2]:
        lines.append(f"    {100 * count / busy:5.1f}%  {frame}")
    return "\n".join(lines)


def local_pid_listening_on(port: int) -> int | None:
    try:
        for conn in psutil.net_connections("tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
                return conn.pid
    except psutil.Error:
        pass
    return None
