#!/usr/bin/env python3
"""Bookie add throughput and latency, next to this disk's raw fsync rate.

    .venv/bin/python benchmarks/bookie_add.py                 # full grid, ~3 minutes
    .venv/bin/python benchmarks/bookie_add.py --quick         # smoke run, ~15 s
    .venv/bin/python benchmarks/bookie_add.py --cases 'sync_1k_*' --duration 10
    .venv/bin/python benchmarks/bookie_add.py --bookie http://127.0.0.1:3181

Without ``--bookie`` it starts its own ZooKeeper and bookie in a temporary
directory — once with fsync on and once with ``--no-journal-sync`` — and
stops them by pid when done, also on Ctrl-C or SIGTERM. Cases are named
``{sync|nosync}_{100b|1k|64k}_c{1|64}_{single|batch}`` (batch = 100 entries
per request); ``--cases`` takes comma-separated shell patterns.

The load runs in a separate process (benchmarks/_load.py: raw HTTP/1.1 on
asyncio streams under uvloop, one keep-alive connection per simulated
client), so this process only orchestrates and samples: the bookie's resident
memory (peak, psutil every 0.1 s) and CPU, the generator's CPU (to show it
is not the limit) and the CPU everything else on the machine used meanwhile.

A live progress line goes to stderr; stdout gets a table and, as its LAST
line, one JSON object (see benchmarks/README.md for the keys).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from services.bench.histogram import percentile_s  # noqa: E402
from services.bench.measure import (  # noqa: E402
    Sampler,
    busy_cpu_s,
    local_pid_listening_on,
    profile_report,
    raw_fsync,
)
from services.cluster.processes import ServiceProcess, ZooKeeperProcess, free_port  # noqa: E402

LOAD_SCRIPT = Path(__file__).resolve().parent / "_load.py"
SIZES = {"100b": 100, "1k": 1024, "64k": 64 * 1024}
CLIENTS = (1, 64)
KINDS = {"single": 1, "batch": 100}
MODES = ("sync", "nosync")
QUICK_CASES = ("sync_1k_c64_single", "sync_1k_c64_batch", "nosync_1k_c64_batch")
DEFAULT_DURATION_S = 5.0
QUICK_DURATION_S = 1.0
FSYNC_PROBE_S = 3.0
START_DELAY_S = 1.0  # lets the load process import and connect before the clock starts
CASE_SLACK_S = 60.0  # a load process that outlives its case by this much is killed
BOOKIE_READY_S = 60.0


@dataclass(frozen=True)
class Case:
    mode: str
    size_name: str
    clients: int
    kind: str

    @property
    def name(self) -> str:
        return f"{self.mode}_{self.size_name}_c{self.clients}_{self.kind}"

    @property
    def key(self) -> str:
        """The JSON key of the case's main rate."""
        prefix = f"{self.mode}_{self.size_name}_c{self.clients}"
        return f"{prefix}_adds_per_s" if self.kind == "single" else f"{prefix}_batch_entries_per_s"

    @property
    def size(self) -> int:
        return SIZES[self.size_name]

    @property
    def batch(self) -> int:
        return KINDS[self.kind]


ALL_CASES = [
    Case(mode, size, clients, kind)
    for mode in MODES
    for size in SIZES
    for clients in CLIENTS
    for kind in KINDS
]


def log(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


# ------------------------------------------------------------------ measurements


# ------------------------------------------------------------------ running a case


class Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.children: list[subprocess.Popen] = []
        self.ledger_base = 1_000_000

    def run_case(
        self, case: Case, host: str, port: int, sampler: Sampler | None, secret: str | None
    ) -> dict:
        args = self.args
        procs = max(1, min(args.load_procs, case.clients))
        start_at = time.time() + START_DELAY_S
        loads = []
        for i in range(procs):
            clients = case.clients // procs + (1 if i < case.clients % procs else 0)
            spec = {
                "host": host,
                "port": port,
                "secret": secret,
                "clients": clients,
                "batch": case.batch,
                "size": case.size,
                "digest": args.digest,
                "duration_s": args.duration,
                "warmup_s": args.warmup,
                "ledger_base": self.ledger_base,
                "label": case.name,
                "progress": i == 0 and sys.stderr.isatty(),
                "start_at": start_at,
            }
            self.ledger_base += clients
            proc = subprocess.Popen(
                [sys.executable, str(LOAD_SCRIPT), json.dumps(spec)],
                stdout=subprocess.PIPE,
                start_new_session=True,  # Ctrl-C reaches us; we stop it by pid
                cwd=ROOT,
            )
            self.children.append(proc)
            loads.append(proc)

        # Sample the bookie and the machine over exactly the counted window.
        count_from = start_at + args.warmup
        time.sleep(max(0.0, count_from - time.time()))
        if sampler is not None:
            sampler.case_rss_max = 0
        bookie_cpu0 = sampler.cpu_s() if sampler else 0.0
        busy0, wall0 = busy_cpu_s(), time.monotonic()
        profiler = self.start_profiler(case, sampler)
        time.sleep(max(0.0, count_from + args.duration - time.time()))
        bookie_cpu = (sampler.cpu_s() - bookie_cpu0) if sampler else None
        busy, wall = busy_cpu_s() - busy0, time.monotonic() - wall0
        if profiler is not None:
            self.finish_profiler(case, profiler)

        outputs = []
        for proc in loads:
            try:
                out, _ = proc.communicate(timeout=CASE_SLACK_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            self.children.remove(proc)
            if proc.returncode != 0:
                raise RuntimeError(f"load process for {case.name} exited with {proc.returncode}")
            outputs.append(json.loads(out.decode().strip().splitlines()[-1]))
        return summarize(case, outputs, bookie_cpu, busy, wall, sampler)

    def start_profiler(self, case: Case, sampler: Sampler | None) -> subprocess.Popen | None:
        """py-spy over the bookie for the counted window (``--profile DIR``)."""
        if not self.args.profile or sampler is None:
            return None
        self.args.profile.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            [
                self.args.py_spy,
                "record",
                "--pid",
                str(sampler.process.pid),
                "--duration",
                str(max(1, int(self.args.duration))),
                "--rate",
                "250",
                "--format",
                "raw",
                "--output",
                str(self.args.profile / f"{case.name}.folded"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.children.append(proc)
        return proc

    def finish_profiler(self, case: Case, proc: subprocess.Popen) -> None:
        try:
            proc.wait(CASE_SLACK_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self.children.remove(proc)
        folded = self.args.profile / f"{case.name}.folded"
        if folded.exists():
            report = profile_report(folded)
            (self.args.profile / f"{case.name}.top.txt").write_text(report)
            log(f"profile of the bookie in {case.name} ({folded}):\n{report}")

    def stop_children(self) -> None:
        for proc in self.children:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self.children.clear()


def summarize(
    case: Case,
    outputs: list[dict],
    bookie_cpu_s: float | None,
    busy_s: float,
    wall_s: float,
    sampler: Sampler | None,
) -> dict:
    histogram: dict[int, int] = {}
    for out in outputs:
        for bucket, count in out["histogram"].items():
            histogram[int(bucket)] = histogram.get(int(bucket), 0) + count
    elapsed = max(out["elapsed_s"] for out in outputs)
    entries = sum(out["entries"] for out in outputs)
    load_cpu = sum(out["cpu_s"] for out in outputs) / elapsed
    bookie_cpu = bookie_cpu_s / wall_s if bookie_cpu_s is not None else None
    machine = busy_s / wall_s
    errors = sum(out["errors"] for out in outputs)
    first_error = next((o["first_error"] for o in outputs if o["first_error"]), None)
    return {
        "case": case.name,
        "key": case.key,
        "entries_per_s": entries / elapsed,
        "requests_per_s": sum(out["requests"] for out in outputs) / elapsed,
        "mb_per_s": sum(out["payload_bytes"] for out in outputs) / elapsed / 1e6,
        "p50_ms": percentile_s(histogram, 0.50) * 1000,
        "p99_ms": percentile_s(histogram, 0.99) * 1000,
        "errors": errors,
        "first_error": first_error,
        "load_cpu": load_cpu,
        "bookie_cpu": bookie_cpu,
        "others_cpu": max(0.0, machine - load_cpu - (bookie_cpu or 0.0)),
        "bookie_rss_mb": sampler.case_rss_max / 2**20 if sampler else None,
    }


# ------------------------------------------------------------------ the bookies


def start_bookie(zk: ZooKeeperProcess, work: Path, mode: str, secret: str | None) -> ServiceProcess:
    port = free_port()
    args = ["--zk", zk.connect_string, "--zk-root", f"/bench-{mode}"]
    args += ["--data-dir", str(work / f"bookie-{mode}")]
    if mode == "nosync":
        args.append("--no-journal-sync")
    if secret:
        args += ["--cluster-secret", secret]
    log_path = work / "logs" / f"bookie-{mode}.log"
    bookie = ServiceProcess("bookie", args, "127.0.0.1", port, log_path, name=f"bookie-{mode}")
    bookie.start()
    bookie.wait_healthy(BOOKIE_READY_S)
    return bookie


def remote_mode(url: str, secret: str | None) -> str:
    headers = {"X-Cluster-Secret": secret} if secret else {}
    info = httpx.get(f"{url}/v1/info", headers=headers, timeout=5.0).json()
    return "sync" if info.get("journal_sync", True) else "nosync"


# ------------------------------------------------------------------ output


def table(results: list[dict]) -> str:
    lines = [
        f"{'case':<26} {'entries/s':>10} {'req/s':>9} {'MB/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'err':>4} {'load cpu':>8} {'bookie cpu':>10} {'others':>6} {'RSS MB':>7}"
    ]
    for r in results:
        bookie_cpu = f"{r['bookie_cpu']:.2f}" if r["bookie_cpu"] is not None else "-"
        rss = f"{r['bookie_rss_mb']:.0f}" if r["bookie_rss_mb"] is not None else "-"
        lines.append(
            f"{r['case']:<26} {r['entries_per_s']:>10,.0f} {r['requests_per_s']:>9,.0f} "
            f"{r['mb_per_s']:>8.1f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['errors']:>4} "
            f"{r['load_cpu']:>8.2f} {bookie_cpu:>10} {r['others_cpu']:>6.2f} {rss:>7}"
        )
    return "\n".join(lines)


def summary_json(fsync: dict, results: list[dict], rss_max: float | None, args) -> dict:
    out: dict = dict(fsync)
    for r in results:
        key = r["key"]
        stem = key.removesuffix("_adds_per_s").removesuffix("_batch_entries_per_s")
        suffix = "_batch" if r["case"].endswith("_batch") else ""
        out[key] = round(r["entries_per_s"], 1)
        out[f"{stem}{suffix}_mb_per_s"] = round(r["mb_per_s"], 2)
        out[f"{stem}{suffix}_p50_ms"] = round(r["p50_ms"], 3)
        out[f"{stem}{suffix}_p99_ms"] = round(r["p99_ms"], 3)
    sync_b = out.get("sync_1k_c64_batch_entries_per_s")
    nosync_b = out.get("nosync_1k_c64_batch_entries_per_s")
    if sync_b and nosync_b:
        out["sync_over_nosync_1k_c64_batch"] = round(sync_b / nosync_b, 3)
    out["bookie_rss_mb_max"] = round(rss_max, 1) if rss_max is not None else None
    with_rss = [r for r in results if r["bookie_rss_mb"] is not None]
    if with_rss:
        worst = max(with_rss, key=lambda r: r["bookie_rss_mb"])
        out["bookie_rss_mb_max_case"] = worst["case"]
    out["load_cpu_max"] = round(max((r["load_cpu"] for r in results), default=0.0), 3)
    out["others_cpu_max"] = round(max((r["others_cpu"] for r in results), default=0.0), 3)
    out["errors"] = sum(r["errors"] for r in results)
    out["nproc"] = os.cpu_count()
    out["duration_s"] = args.duration
    out["digest"] = args.digest
    return out


# ------------------------------------------------------------------ main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bookie", help="use this bookie (http://host:port) instead of our own")
    parser.add_argument("--secret", help="cluster secret to send / to start our bookie with")
    parser.add_argument("--duration", type=float, help="seconds counted per case (default 5)")
    parser.add_argument("--warmup", type=float, help="seconds per case before counting")
    parser.add_argument("--quick", action="store_true", help="short smoke run of 3 cases")
    parser.add_argument("--cases", help="comma-separated patterns, e.g. 'sync_1k_*,*_batch'")
    parser.add_argument("--digest", choices=("crc32c", "none"), default="crc32c")
    parser.add_argument("--load-procs", type=int, default=1, help="load processes per case")
    parser.add_argument("--work-dir", type=Path, help="where the temp dir goes (default /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, data)")
    parser.add_argument("--list", action="store_true", help="list the case names and exit")
    parser.add_argument(
        "--profile", type=Path, help="record py-spy profiles of the bookie per case into DIR"
    )
    parser.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy", help="py-spy")
    args = parser.parse_args(argv)
    if args.duration is None:
        args.duration = QUICK_DURATION_S if args.quick else DEFAULT_DURATION_S
    if args.warmup is None:
        args.warmup = 0.3 if args.quick else 1.0
    return args


def select_cases(args: argparse.Namespace) -> list[Case]:
    if args.cases:
        patterns = [p.strip() for p in args.cases.split(",") if p.strip()]
        return [c for c in ALL_CASES if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]
    if args.quick:
        return [c for c in ALL_CASES if c.name in QUICK_CASES]
    return list(ALL_CASES)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cases = select_cases(args)
    if args.list:
        print("\n".join(c.name for c in ALL_CASES))
        return 0
    if not cases:
        log("no case matches --cases")
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    work = Path(tempfile.mkdtemp(prefix="quire-bench-", dir=args.work_dir))
    runner = Runner(args)
    services: list = []
    results: list[dict] = []
    rss_max: float | None = None
    try:
        probe_s = 0.5 if args.quick else FSYNC_PROBE_S
        log(f"raw fsync: 4 KiB append + fsync in {work} for {probe_s:g}s")
        fsync = raw_fsync(work, probe_s)
        log(f"  {fsync['raw_fsync_per_s']:,.0f} fsync/s, p50 {fsync['raw_fsync_p50_ms']} ms")
        if args.bookie:
            url = args.bookie.rstrip("/")
            host, port = url.removeprefix("http://").rsplit(":", 1)
            mode = remote_mode(url, args.secret)
            pid = local_pid_listening_on(int(port)) if host in ("127.0.0.1", "localhost") else None
            sampler = Sampler(pid) if pid else None
            if sampler:
                sampler.start()
            log(f"bookie {url} (journal {mode}; pid {pid or 'unknown'})")
            for case in [c for c in cases if c.mode == mode]:
                results.append(runner.run_case(case, host, int(port), sampler, args.secret))
                log(table(results[-1:]).splitlines()[1])
            if sampler:
                sampler.stop()
                rss_max = sampler.rss_max / 2**20
        else:
            zk = ZooKeeperProcess(work / "zookeeper", free_port())
            services.append(zk)
            zk.start()
            zk.wait_ready(60.0)
            for mode in MODES:
                mode_cases = [c for c in cases if c.mode == mode]
                if not mode_cases:
                    continue
                bookie = start_bookie(zk, work, mode, args.secret)
                services.append(bookie)
                assert bookie.pid is not None
                sampler = Sampler(bookie.pid)
                sampler.start()
                log(f"bookie {bookie.url} (journal {mode}, pid {bookie.pid})")
                for case in mode_cases:
                    result = runner.run_case(case, bookie.host, bookie.port, sampler, args.secret)
                    results.append(result)
                    log(table(results[-1:]).splitlines()[1])
                sampler.stop()
                rss_max = max(rss_max or 0.0, sampler.rss_max / 2**20)
                bookie.stop()
                services.remove(bookie)
    except KeyboardInterrupt:
        log("interrupted; stopping what we started")
        return 130
    finally:
        runner.stop_children()
        for service in reversed(services):
            service.stop()
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(table(results))
    print(json.dumps(summary_json(fsync, results, rss_max, args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
