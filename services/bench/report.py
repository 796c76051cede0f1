"""The figures of ``quire bench``: the live progress line, the summary (the JSON of
the last stdout line) and the human report before it."""

from __future__ import annotations

import os
import sys
import time
from typing import IO, TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, SpinnerColumn, TaskID, TextColumn
from rich.progress import Progress as RichProgress

from services import native
from services.bench.histogram import merge_histograms, percentile_s
from services.bench.limits import PROGRESS_PLAIN_INTERVAL_S, PROGRESS_TTY_INTERVAL_S
from services.bench.measure import Sampler

if TYPE_CHECKING:
    from services.bench.config import BenchConfig


class Progress:
    """The live progress of the counted window on stderr: a rich bar (seconds counted of
    ``--duration``, adds/s, p99, errors) on a terminal, a plain line every few seconds
    otherwise (so logs and tests see it too); nothing with ``quiet``."""

    def __init__(self, stream: IO[str] = sys.stderr, quiet: bool = False) -> None:
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty()
        self.interval_s = PROGRESS_TTY_INTERVAL_S if self.tty else PROGRESS_PLAIN_INTERVAL_S
        self._last: tuple[float, int] | None = None
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None

    def show(self, snap: dict, duration_s: float, gateway_rss_mb: float | None) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        counted = 0.0
        if not snap["counting"]:
            text = "warming up"
        else:
            counted = max(snap["counted_s"], 1e-9)
            rate = snap["entries"] / counted
            now_rate = ""
            if self._last is not None and now > self._last[0]:
                recent = (snap["entries"] - self._last[1]) / (now - self._last[0])
                now_rate = f" (now {recent:,.0f})"
            text = (
                f"{min(counted, duration_s):5.1f}/{duration_s:g}s {rate:>10,.0f} adds/s{now_rate}"
                f"  p99 {snap['p99_ms']:.2f} ms  errors {snap['errors']}"
            )
            self._last = (now, snap["entries"])
        if gateway_rss_mb is not None:
            text += f"  gateway {gateway_rss_mb:.0f} MB"
        if self.tty:
            self._draw(text, min(counted, duration_s), duration_s)
        else:
            self.stream.write(f"  bench {text}\n")
            self.stream.flush()

    def _draw(self, text: str, counted_s: float, duration_s: float) -> None:
        if self._bar is None:
            console = Console(file=self.stream, highlight=False, soft_wrap=True)
            self._bar = RichProgress(
                SpinnerColumn(),
                TextColumn("bench"),
                BarColumn(),
                TextColumn("{task.description}"),
                console=console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("", total=duration_s)
        if self._task is not None:
            self._bar.update(self._task, completed=counted_s, description=text)

    def clear(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
            self._task = None


def summarize(
    config: BenchConfig,
    url: str,
    outputs: list[dict],
    gateway: Sampler | None,
    bookies: list[Sampler],
    gateway_cpu: float | None,
    bookie_cpu: float | None,
    machine_cpu: float,
) -> dict[str, Any]:
    histogram = merge_histograms([out["histogram"] for out in outputs])
    elapsed = max(out["elapsed_s"] for out in outputs)
    entries = sum(out["entries"] for out in outputs)
    load_cpu = sum(out["cpu_s"] for out in outputs) / elapsed
    errors = sum(out["errors"] for out in outputs)
    ms = {
        key: round(percentile_s(histogram, fraction) * 1000, 3)
        for key, fraction in (("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99),
                              ("p999_ms", 0.999), ("max_ms", 1.0))
    }  # fmt: skip
    others = machine_cpu - load_cpu - (gateway_cpu or 0.0) - (bookie_cpu or 0.0)
    summary: dict[str, Any] = {
        "adds_per_s": round(entries / elapsed, 1),
        "requests_per_s": round(sum(out["requests"] for out in outputs) / elapsed, 1),
        # to the byte per second: a small run moves only kilobytes per second
        "mb_per_s": round(sum(out["payload_bytes"] for out in outputs) / elapsed / 1e6, 6),
        **ms,
        "errors": errors,
        "entries": entries,
        "gateway": url,
        "local": config.local,
        "ledgers": config.ledgers,
        "ensemble": config.ensemble,
        "write_quorum": config.write_quorum,
        "ack_quorum": config.ack_quorum,
        "entry_size": config.entry_size,
        "concurrency": config.concurrency,
        "batch": config.batch,
        "rate": config.rate,
        "duration_s": round(elapsed, 3),
        "load_procs": len(outputs),
        "load_cpu": round(load_cpu, 3),
        "gateway_cpu": round(gateway_cpu, 3) if gateway_cpu is not None else None,
        "bookie_cpu": round(bookie_cpu, 3) if bookie_cpu is not None else None,
        "others_cpu": round(max(0.0, others), 3),
        "nproc": os.cpu_count(),
        "gateway_rss_mb_max": round(gateway.rss_max / 2**20, 1) if gateway else None,
        "bookie_rss_mb_max": (
            round(max(b.rss_max for b in bookies) / 2**20, 1) if bookies else None
        ),
        # A --local cluster runs this tree, as built (services/native.py).
        "native": native.STATUS if config.local else None,
    }
    if errors:
        summary["first_error"] = next((o["first_error"] for o in outputs if o["first_error"]), None)
    return summary


def report(summary: dict) -> str:
    """The human part of stdout (the JSON line follows it)."""
    s = summary
    rate = f"{s['rate']:g} requests/s" if s["rate"] else "unthrottled"
    per = "1 entry per request" if s["batch"] == 1 else f"batches of {s['batch']}"
    if s.get("mode") == "log":
        target = f"to log {s['log']} ({s['ledgers']} ledger(s) at the end)"
    else:
        target = f"over {s['ledgers']} ledger(s)"
    lines = [
        f"quire bench: {s['gateway']}{' (local)' if s['local'] else ''}: "
        f"{s['concurrency']} clients {target} "
        f"(E={s['ensemble']} Qw={s['write_quorum']} Qa={s['ack_quorum']}), "
        f"{s['entry_size']:,}-byte entries, {per}, {rate}, {s['duration_s']:.1f} s counted",
        f"  adds/s       {s['adds_per_s']:>12,.0f}   ({s['requests_per_s']:,.0f} requests/s)",
        f"  MB/s         {s['mb_per_s']:>12,.1f}",
        f"  latency ms   p50 {s['p50_ms']:.2f}  p95 {s['p95_ms']:.2f}  p99 {s['p99_ms']:.2f}  "
        f"p99.9 {s['p999_ms']:.2f}  max {s['max_ms']:.2f}",
        f"  errors       {s['errors']:>12,}",
    ]
    if s["errors"]:
        lines[-1] += f"   first: {s['first_error']}"
    cpu = [f"load {s['load_cpu']:.2f}"]
    if s["gateway_cpu"] is not None:
        cpu.append(f"gateway {s['gateway_cpu']:.2f}")
    if s["bookie_cpu"] is not None:
        cpu.append(f"bookies {s['bookie_cpu']:.2f}")
    cpu.append(f"others {s['others_cpu']:.2f}")
    lines.append(f"  cpu (cores)  {'  '.join(cpu)}   of {s['nproc']}")
    memory = []
    if s["gateway_rss_mb_max"] is not None:
        memory.append(f"gateway {s['gateway_rss_mb_max']:.0f}")
    if s["bookie_rss_mb_max"] is not None:
        memory.append(f"largest bookie {s['bookie_rss_mb_max']:.0f}")
    if memory:
        lines.append(f"  peak RSS MB  {'  '.join(memory)}")
    if s.get("native"):
        lines.append(f"  native       {s['native']}")
    if s.get("mode") == "log":
        lines += log_report_lines(s)
    if "raw_fsync_p50_ms" in s:
        lines.append(
            f"  raw fsync    p50 {s['raw_fsync_p50_ms']:.2f} ms  p99 {s['raw_fsync_p99_ms']:.2f} ms"
            f"  ({s['raw_fsync_per_s']:,.0f}/s, 4 KiB append + fsync on the bench's disk)"
        )
    return "\n".join(lines)


def log_report_lines(summary: dict[str, Any]) -> list[str]:
    """The lines ``quire bench --log`` adds to the human report (services/bench/log_bench.py)."""
    s = summary
    lines = []
    if s.get("rolls"):
        lines.append(
            f"  rolls        {s['rolls']:>12,}   every {s['roll_every_s']:g} s, "
            f"p50 {s['roll_p50_ms']:.1f} ms  max {s['roll_max_ms']:.1f} ms"
            + (f"  errors {s['roll_errors']}" if s.get("roll_errors") else "")
        )
    if "handover_ms_median" in s:
        lines.append(
            f"  hand-over ms median {s['handover_ms_median']:.1f}  max {s['handover_ms_max']:.1f}"
            f"  (POST /writer to the first acknowledged append, {s['handover_reps']} times; "
            f"the writer alone {s['handover_writer_ms_median']:.1f})"
        )
    return lines
