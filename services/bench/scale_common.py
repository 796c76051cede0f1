"""What the parts of ``benchmarks/scale.py`` share (issue 42): a local cluster stopped by
pid, the machine's description, percentiles, the JSON result and the matplotlib plots.

benchmarks/scale.py takes them from here for its own parts (``longlog``, ``metadata``),
as do the parts in modules of their own (``open``: services/bench/scale_open.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from services.bench.measure import cpu_model
from services.cluster.processes import (
    ServiceProcess,
    ZooKeeperProcess,
    free_port,
    stop_processes,
)

SECRET = "scale-bench-secret"
ZK_ROOT = "/scale"
START_DEADLINE_S = 120.0
STOP_GRACE_S = 5.0


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """What the figures were taken on, and how busy it was (other sessions' test suites
    may share the two cores)."""
    return {
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def process_cpu_s(pid: int) -> float:
    """User and system CPU seconds of one process (``/proc/PID/stat``)."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


class Cluster:
    """ZooKeeper, bookies and services in ``work``, stopped by pid (``stop``)."""

    def __init__(
        self,
        work: Path,
        zk_heap_mb: int = 256,
        zk_force_sync: bool = True,
        zk_snap_count: int = 0,
    ) -> None:
        self.work = work
        self.procs: list[ServiceProcess | ZooKeeperProcess] = []
        self.zk = ZooKeeperProcess(work / "zk", free_port())
        if zk_heap_mb != 256:
            # services/cluster/processes.py gives ZooKeeper a 256 MiB heap.
            self.zk.argv = [f"-Xmx{zk_heap_mb}m" if a.startswith("-Xmx") else a
                            for a in self.zk.argv]  # fmt: skip
        if not zk_force_sync:
            # ZooKeeper answers writes before its transaction log is on disk: for a
            # part whose set-up makes many znodes and whose subject is not ZooKeeper.
            with (self.zk.data_dir / "zoo.cfg").open("a") as cfg:
                cfg.write("forceSync=no\n")
        if zk_snap_count:
            # A snapshot every (about) this many transactions, so that one can be made
            # on purpose (the metadata part's ``force_snapshot``) with a few writes.
            with (self.zk.data_dir / "zoo.cfg").open("a") as cfg:
                cfg.write(f"snapCount={zk_snap_count}\n")
        self.env = {**os.environ, "QUIRE_CLUSTER_SECRET": SECRET}
        self.bookies: list[ServiceProcess] = []

    def start_zookeeper(self) -> None:
        self.procs.append(self.zk)
        self.zk.start()
        self.zk.wait_ready()

    def service(self, module: str, args: list[str], name: str) -> ServiceProcess:
        """Start a service (not waited for: ``wait_healthy`` it)."""
        common = ["--zk", self.zk.connect_string, "--zk-root", ZK_ROOT]
        proc = ServiceProcess(
            module, [*common, *args], "127.0.0.1", free_port(), self.work / f"{name}.log",
            env=self.env, name=name,
        )  # fmt: skip
        self.procs.append(proc)
        proc.start()
        return proc

    def start_bookies(self, count: int) -> None:
        self.bookies = [
            self.service("bookie", ["--data-dir", str(self.work / f"bookie-{i}")], f"bookie-{i}")
            for i in range(count)
        ]
        for bookie in self.bookies:
            bookie.wait_healthy(START_DEADLINE_S)

    def stop_service(self, proc: ServiceProcess) -> None:
        stop_processes([proc], STOP_GRACE_S)
        self.procs.remove(proc)

    def stop(self) -> None:
        stop_processes(self.procs, STOP_GRACE_S)


def write_result(out: Path, part: str, result: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{part}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result), flush=True)


def plot(
    path: Path,
    title: str,
    xlabel: str,
    ylabel: str,
    series: dict[str, tuple[list[float], list[float]]],
    target: float | None = None,
    logx: bool = True,
    targets: dict[str, float] | None = None,
    logy: bool = False,
) -> None:
    """One curve per series on one small PNG (about 30 KB), with the issue's target
    (or ``targets``, by name) as dashed lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 3.8), dpi=90)
    for label, (xs, ys) in series.items():
        axes.plot(xs, ys, marker="o", label=label)
    lines = dict(targets or {})
    if target is not None:
        lines["target"] = target
    colours = ("red", "purple", "brown")
    for (label, value), colour in zip(lines.items(), colours, strict=False):
        axes.axhline(value, color=colour, linestyle="--", linewidth=1, label=label)
    if logx:
        axes.set_xscale("log")
    if logy:
        axes.set_yscale("log")
    axes.set_title(title, fontsize=10)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
