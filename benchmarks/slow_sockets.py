#!/usr/bin/env python3
"""A normal client's latency on a gateway while thousands of slow sockets are open.

    .venv/bin/python benchmarks/slow_sockets.py                  # 5,000 sockets, ~4 min
    .venv/bin/python benchmarks/slow_sockets.py --sockets 1000 --duration 5   # quicker

Starts its own ZooKeeper, three bookies and a gateway (default settings) in a
temporary directory, creates a ledger, then measures, for ``--duration`` seconds
each, ``--rounds`` times in turn (the machine's other load drifts; the rounds of a
phase are pooled), a normal client that alternates ``GET /health`` and a 100-byte add on one
keep-alive connection from 127.0.0.1, ``--rate`` requests a second:

- ``baseline``: nothing else;
- ``spread``: ``--sockets`` slow sockets held open from ``--addresses`` loopback
  source addresses 127.0.0.2… (each under the per-client cap), each sending a request
  line and one header and then nothing; a socket the gateway closes (head time-out) is
  opened again at once, so the count stays at ``--sockets``;
- ``control``: the same slow sockets, opened and re-opened the same way, but against
  a sink (this script with ``--sink``: holds each for 5-10 s, then a 408 and close)
  instead of the gateway: what the opener's own churn costs the machine, so the
  gateway's share of any slow-down can be told apart on a shared machine;
- ``one_address``: the same number of sockets tried from 127.0.0.1 alone: the
  per-client cap refuses all but its share with the JSON 503 (refused slots retry
  after 1 s); the normal client then comes from 127.0.0.250.

The slow sockets live in a child process (this script with ``--opener``, asyncio on
uvloop, loopback only); every process is stopped by pid at the end, also on Ctrl-C or
SIGTERM. stdout gets a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.cluster.processes import (  # noqa: E402
    ServiceProcess,
    ZooKeeperProcess,
    free_port,
    port_is_open,
)

SLOW_HEAD = b"GET /health HTTP/1.1\r\nHost: slow\r\n"  # and never the blank line
RETRY_AFTER_REFUSAL_S = 1.0
REQUEST_TIMEOUT_S = 10.0


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the slow sockets


async def hold_slot(host: str, port: int, source: str, counts: dict, stop: asyncio.Event) -> None:
    """Keep one slow socket open from ``source`` until ``stop``; reopen it when closed."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        refused = False
        try:
            sock.bind((source, 0))
            await loop.sock_connect(sock, (host, port))
            await loop.sock_sendall(sock, SLOW_HEAD)
            counts["open"] += 1
            try:
                answer = await loop.sock_recv(sock, 4096)
            finally:
                counts["open"] -= 1
            if answer.startswith(b"HTTP/1.1 503"):
                counts["refused"] += 1
                refused = True
            else:
                counts["closed"] += 1
        except OSError:
            counts["errors"] += 1
            refused = True
        finally:
            sock.close()
        if refused:
            await asyncio.sleep(RETRY_AFTER_REFUSAL_S)


async def opener(host: str, port: int, sockets: int, sources: list[str], seconds: float) -> None:
    counts = {"open": 0, "refused": 0, "closed": 0, "errors": 0}
    stop = asyncio.Event()
    tasks = []
    for i in range(sockets):
        source = sources[i % len(sources)]
        tasks.append(asyncio.create_task(hold_slot(host, port, source, counts, stop)))
        if i % 200 == 199:
            await asyncio.sleep(0.05)  # open them at a bounded rate (~4,000/s)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        print(json.dumps(counts), flush=True)
        await asyncio.sleep(0.5)
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def sink(port: int) -> None:
    """Hold each connection for 5-10 s (like the gateway's head time-out), then close."""
    import random

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(4096)
        await asyncio.sleep(random.uniform(5.0, 10.0))
        writer.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\n\r\n")
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=2048)
    async with server:
        await server.serve_forever()


class Opener:
    """The child process that holds the slow sockets, and its last reported counts."""

    def __init__(self, port: int, sockets: int, sources: list[str], seconds: float) -> None:
        argv = [sys.executable, __file__, "--opener", "--port", str(port)]
        argv += ["--sockets", str(sockets), "--sources", ",".join(sources)]
        argv += ["--opener-seconds", str(seconds)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        self.counts: dict = {}

    def wait_open(self, wanted: int, deadline_s: float) -> dict:
        end = time.monotonic() + deadline_s
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.counts = json.loads(line)
            if self.counts["open"] >= wanted or time.monotonic() > end:
                break
        return self.counts

    def stop(self) -> dict:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        lines = [x for x in (out or "").splitlines() if x.startswith("{")]
        if lines:
            self.counts = json.loads(lines[-1])
        return self.counts


# ---------------------------------------------------------------- the normal client


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(port: int, source: str, ledger_id: int, rate: float, seconds: float) -> dict:
    """Alternate GET /health and a 100-byte add at ``rate``/s; latencies in ms."""
    latencies: dict[str, list[float]] = {"health": [], "add": []}
    failures: dict[str, int] = {"health": 0, "add": 0}
    conn: http.client.HTTPConnection | None = None
    interval = 1.0 / rate
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        kind = "health" if n % 2 == 0 else "add"
        due = start + n * interval
        n += 1
        time.sleep(max(0.0, due - time.monotonic()))
        began = time.monotonic()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(
                    "127.0.0.1", port, timeout=REQUEST_TIMEOUT_S, source_address=(source, 0)
                )
            if kind == "health":
                conn.request("GET", "/health")
            else:
                conn.request(
                    "POST",
                    f"/v1/ledgers/{ledger_id}/entries",
                    body=b"x" * 100,
                    headers={"Content-Type": "application/octet-stream"},
                )
            response = conn.getresponse()
            response.read()
            ok = response.status == 200
        except (OSError, http.client.HTTPException):
            ok = False
            if conn is not None:
                conn.close()
            conn = None
        elapsed_ms = (time.monotonic() - began) * 1000
        latencies[kind].append(elapsed_ms)
        if not ok:
            failures[kind] += 1
    if conn is not None:
        conn.close()
    return {"latencies": latencies, "failures": failures}


def summarise(samples: list[dict]) -> dict:
    """Percentiles of the pooled samples of one phase's rounds."""
    out: dict = {}
    for kind in ("health", "add"):
        values = [v for s in samples for v in s["latencies"][kind]]
        out[f"{kind}_n"] = len(values)
        out[f"{kind}_failed"] = sum(s["failures"][kind] for s in samples)
        out[f"{kind}_p50_ms"] = round(percentile(values, 0.50), 2)
        out[f"{kind}_p99_ms"] = round(percentile(values, 0.99), 2)
        out[f"{kind}_max_ms"] = round(max(values, default=0.0), 2)
    return out


# ---------------------------------------------------------------- the run


def start_cluster(work: Path, procs: list) -> ServiceProcess:
    zk = ZooKeeperProcess(work / "zookeeper", free_port())
    procs.append(zk)
    zk.start()
    zk.wait_ready(60.0)
    common = ["--zk", zk.connect_string, "--zk-root", "/bench"]
    for i in range(3):
        port = free_port()
        data = ["--data-dir", str(work / f"bookie-{i}")]
        bookie = ServiceProcess(
            "bookie", [*common, *data], "127.0.0.1", port, work / f"bookie-{i}.log"
        )
        procs.append(bookie)
        bookie.start()
    for bookie in procs[1:]:
        bookie.wait_healthy(60.0)
    port = free_port()
    gateway = ServiceProcess("gateway", common, "127.0.0.1", port, work / "gateway.log")
    procs.append(gateway)
    gateway.start()
    gateway.wait_healthy(60.0)
    return gateway


def create_ledger(url: str) -> int:
    end = time.monotonic() + 30
    while True:
        r = httpx.post(f"{url}/v1/ledgers", json={}, timeout=10)
        if r.status_code == 201:
            return r.json()["ledger_id"]
        if time.monotonic() > end:
            raise RuntimeError(f"cannot create a ledger: {r.status_code} {r.text}")
        time.sleep(0.2)


def run_phase(
    name: str, gateway: ServiceProcess, ledger_id: int, args: argparse.Namespace, sources: list
) -> dict:
    client_source = "127.0.0.250" if name == "one_address" else "127.0.0.1"
    opener_proc = sink_proc = None
    wanted = 0
    target = gateway.port
    if name == "control":
        target = free_port()
        sink_argv = [sys.executable, __file__, "--sink", "--port", str(target)]
        sink_proc = subprocess.Popen(sink_argv)
        end = time.monotonic() + 30
        while not port_is_open("127.0.0.1", target) and time.monotonic() < end:
            time.sleep(0.1)
    if sources:
        # one_address: only the per-client cap's share can be open at once.
        wanted = args.sockets if name != "one_address" else min(args.sockets, args.cap) - 8
        opener_proc = Opener(target, args.sockets, sources, args.duration + 120)
    try:
        if opener_proc:
            counts = opener_proc.wait_open(wanted, 90.0)
            log(f"  {name}: {counts['open']} slow sockets open")
        watched = {"gateway": psutil.Process(gateway.pid)}
        if opener_proc:
            watched["opener"] = psutil.Process(opener_proc.proc.pid)
        cpu0, t0 = {k: cpu_s(p) for k, p in watched.items()}, time.monotonic()
        result: dict = {
            "samples": measure(gateway.port, client_source, ledger_id, args.rate, args.duration)
        }
        cpu1, t1 = {k: cpu_s(p) for k, p in watched.items()}, time.monotonic()
        for key in ("gateway", "opener"):
            used = cpu1[key] - cpu0[key] if key in watched else 0.0
            result[f"{key}_cpu"] = round(used / (t1 - t0), 2)
        result["gateway_connections"] = len(watched["gateway"].net_connections(kind="tcp"))
    finally:
        counts = opener_proc.stop() if opener_proc else {}
        if sink_proc is not None:
            sink_proc.terminate()
            sink_proc.wait(10)
    result.update(phase=name, slow_open=counts.get("open", 0))
    result.update({f"slow_{k}": v for k, v in counts.items() if k != "open"})
    return result


def cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def table(results: list[dict]) -> str:
    head = (
        "phase        slow   health p50/p99/max ms    add p50/p99/max ms       failed  gw cpu"
        "  opener cpu"
    )
    rows = [head]
    for r in results:
        rows.append(
            f"{r['phase']:<12} {r['slow_open']:>5}  "
            f"{r['health_p50_ms']:>6} {r['health_p99_ms']:>7} {r['health_max_ms']:>7}  "
            f"{r['add_p50_ms']:>6} {r['add_p99_ms']:>7} {r['add_max_ms']:>7}  "
            f"{r['health_failed'] + r['add_failed']:>6}  {r['gateway_cpu']:>6}"
            f"  {r['opener_cpu']:>10}"
        )
    return "\n".join(rows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sockets", type=int, default=5000, help="slow sockets (≤ 20,000)")
    parser.add_argument("--addresses", type=int, default=20, help="source addresses, spread")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per phase")
    parser.add_argument("--rate", type=float, default=100.0, help="normal requests per second")
    parser.add_argument("--cap", type=int, default=512, help="the gateway's per-client cap")
    parser.add_argument("--phases", default="baseline,control,spread,one_address")
    parser.add_argument("--rounds", type=int, default=2, help="phases run in turn, pooled")
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--opener", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sink", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--sources", default="", help=argparse.SUPPRESS)
    parser.add_argument("--opener-seconds", type=float, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 0 < args.sockets <= 20_000 or not 1 <= args.addresses <= 200:
        parser.error("--sockets must be 1..20000 and --addresses 1..200")
    return args


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.sink:
        import uvloop

        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        uvloop.run(sink(args.port))
        return 0
    if args.opener:
        import uvloop

        # Stopped by its parent: exiting closes every socket it holds.
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        signal.signal(signal.SIGINT, lambda *_: os._exit(0))
        sources = args.sources.split(",")
        uvloop.run(opener("127.0.0.1", args.port, args.sockets, sources, args.opener_seconds))
        return 0
    signal.signal(signal.SIGTERM, _terminate)
    work = Path(tempfile.mkdtemp(prefix="quire-slow-", dir=args.work_dir))
    procs: list = []
    results: list[dict] = []
    spread = [f"127.0.0.{2 + i}" for i in range(args.addresses)]
    try:
        gateway = start_cluster(work, procs)
        ledger_id = create_ledger(gateway.url)
        log(f"gateway {gateway.url} (pid {gateway.pid}), ledger {ledger_id}")
        rounds: dict[str, list[dict]] = {}
        for round_no in range(args.rounds):
            for name in args.phases.split(","):
                sources = {
                    "baseline": [],
                    "control": spread,
                    "spread": spread,
                    "one_address": ["127.0.0.1"],
                }[name]
                result = run_phase(name, gateway, ledger_id, args, sources)
                result.update(summarise([result["samples"]]), round=round_no + 1)
                rounds.setdefault(name, []).append(result)
                log(table([result]).splitlines()[1])
        for runs in rounds.values():
            pooled = {k: v for k, v in runs[-1].items() if k not in ("samples", "round")}
            pooled.update(summarise([r["samples"] for r in runs]), rounds=len(runs))
            for key in ("gateway_cpu", "opener_cpu"):
                pooled[key] = round(sum(r[key] for r in runs) / len(runs), 2)
            pooled["slow_open"] = min(r["slow_open"] for r in runs)
            results.append(pooled)
    except KeyboardInterrupt:
        log("interrupted; stopping what we started")
        return 130
    finally:
        for proc in reversed(procs):
            proc.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(table(results))
    base = next((r for r in results if r["phase"] == "baseline"), None)
    summary: dict = {"sockets": args.sockets, "addresses": args.addresses, "phases": results}
    if base:
        for r in results:
            for kind in ("health", "add"):
                ratio = r[f"{kind}_p99_ms"] / max(base[f"{kind}_p99_ms"], 0.01)
                summary[f"{r['phase']}_{kind}_p99_ratio"] = round(ratio, 2)
    summary["cpu_count"] = os.cpu_count()
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
