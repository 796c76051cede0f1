"""The counted window of ``quire bench``: the load processes run (services/bench/procs.py),
the gateway and bookies are sampled (services/bench/measure.py) and, with ``--profile``,
profiled; the result is summarized (services/bench/report.py). Used by the ledger
benchmark (services/bench/run.py) and the log benchmark (services/bench/log_bench.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from services.bench.config import BenchConfig
from services.bench.limits import LOAD_SLACK_S, START_DELAY_S
from services.bench.measure import Sampler, busy_cpu_s, profile_report
from services.bench.procs import LoadProcesses, load_specs
from services.bench.report import Progress, summarize
from services.errors import present


def note(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def measure(
    config: BenchConfig,
    url: str,
    ledger_ids: list[int],
    gateway_pid: int | None,
    bookie_pids: list[int],
    extra_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the load processes and sample the services over the counted window
    (``extra_spec`` goes into every load process's spec: ``--log``'s log)."""
    gateway = Sampler(gateway_pid) if gateway_pid else None
    bookies = [Sampler(pid) for pid in bookie_pids]
    for sampler in [gateway, *bookies]:
        if sampler is not None:
            sampler.start()
    start_at = time.time() + START_DELAY_S
    loads = LoadProcesses()
    progress = Progress(quiet=config.quiet)
    profiler = None
    try:
        specs = load_specs(config, url, ledger_ids, start_at)
        for spec in specs:
            spec.update(extra_spec or {})
        loads.start(specs)
        count_from = start_at + config.warmup_s
        count_to = count_from + config.duration_s

        def show_until(deadline: float) -> None:
            while (left := deadline - time.time()) > 0:
                time.sleep(min(progress.interval_s, left))
                rss = gateway.rss_max / 2**20 if gateway is not None else None
                progress.show(loads.snapshot(), config.duration_s, rss)

        show_until(count_from)
        cpu0 = _cpu(gateway, bookies)
        busy0, wall0 = busy_cpu_s(), time.monotonic()
        if config.profile is not None and gateway_pid:
            profiler = _start_profiler(config, gateway_pid)
        show_until(count_to)
        cpu1 = _cpu(gateway, bookies)
        busy, wall = busy_cpu_s() - busy0, time.monotonic() - wall0
        progress.clear()
        outputs = loads.wait(LOAD_SLACK_S)
    finally:
        progress.clear()
        loads.stop()
        for sampler in [gateway, *bookies]:
            if sampler is not None:
                sampler.stop()
        if profiler is not None:
            _finish_profiler(config, profiler)
    gateway_cpu = (cpu1[0] - cpu0[0]) / wall if gateway is not None else None
    bookie_cpu = (sum(cpu1[1:]) - sum(cpu0[1:])) / wall if bookies else None
    return summarize(config, url, outputs, gateway, bookies, gateway_cpu, bookie_cpu, busy / wall)


def _cpu(gateway: Sampler | None, bookies: list[Sampler]) -> list[float]:
    return [gateway.cpu_s() if gateway is not None else 0.0, *(b.cpu_s() for b in bookies)]


def _start_profiler(config: BenchConfig, pid: int) -> subprocess.Popen[bytes]:
    """py-spy over the gateway for the counted window (``--profile DIR``)."""
    profile = present(config.profile, "the profiler runs only with --profile")
    profile.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            config.py_spy, "record", "--pid", str(pid),
            "--duration", str(max(1, int(config.duration_s))),
            "--rate", "250", "--format", "raw",
            "--output", str(profile / "gateway.folded"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


def _finish_profiler(config: BenchConfig, proc: subprocess.Popen[bytes]) -> None:
    profile = present(config.profile, "the profiler runs only with --profile")
    try:
        proc.wait(LOAD_SLACK_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    folded = profile / "gateway.folded"
    if folded.exists():
        report = profile_report(folded, top=25)
        (profile / "gateway.top.txt").write_text(report + "\n")
        note(f"quire bench: profile of the gateway ({folded}):\n{report}")
