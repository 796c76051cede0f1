"""Part 3 of issue 42, ``benchmarks/scale.py open``: many open things on one gateway.

Three bookies and ZooKeeper, then two phases, each on a gateway of its own (so the
figures of one do not carry the other's memory):

- *ledgers*: gateway L creates open ledgers (``POST /v1/ledgers``, E3 Qw2 Qa2) and adds
  ``--ledger-entries`` entries to each, growing through fixed fractions of ``--ledgers``
  (``steps``); L then holds every write handle, idle.
- *readers, then streams*: gateway T holds logs ``tail-0`` … (each ``PUT`` and
  ``POST .../writer`` on T, so T holds an open ledger per log) with one tailing reader
  each (a long poll ``GET .../records?wait_ms=30000``, asked again from its ``next`` as
  soon as it is answered), growing through fixed fractions of ``--readers``; then, on top of
  the readers, idle WebSocket streams (``/v1/logs/tail-N/stream``, one per log from
  ``tail-1``), growing through fixed fractions of ``--streams``. The readers and streams are
  held by ``services.bench.open_holder`` processes, at most ``HOLDER_CONNECTIONS_MAX``
  connections each, from addresses 127.0.0.2 … with at most ``--per-address``
  connections each (under the gateway's default ``--connections-per-client-max`` 512).

At every size, the same three measurements: the gateway's CPU over a quiet window of
``--quiet-s`` (nothing asked of it but what is held; ``/proc`` stat), its RSS after it,
and an active client beside what is held: single 100-byte appends, one at a time at
``--rate`` a second for ``--active-s``, to the log ``active`` (on L) or ``tail-0``
(on T, which also has a tailing reader: the readers' holder must see those records),
latency p50 / p99 / max. Size 0 of each phase is the empty gateway the ratios compare
against. The gateway runs with ``--connections-max`` and ``--requests-in-flight-max``
raised to hold the readers and streams (``GATEWAY_FLAGS``); nothing else is changed from
its defaults. ``--phases ledgers`` (or ``tail``) runs one phase alone; the plots draw
both, so they are then left as they are.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

import httpx
import psutil

from services.bench.scale_common import (
    START_DEADLINE_S,
    Cluster,
    machine,
    percentile,
    plot,
    process_cpu_s,
    say,
)
from services.cluster.processes import ServiceProcess

# Targets of issue 42 on this machine.
LEDGER_BYTES_TARGET = 2048  # gateway memory per idle open ledger
LEDGER_P99_RATIO_TARGET = 1.5
TAIL_RSS_TARGET_MB = 2048.0  # 10,000 tailing readers and 5,000 streams
TAIL_P99_RATIO_TARGET = 2.0
IDLE_CPU_TARGET_PERCENT = 1.0  # "no CPU while idle": under 1 % of a core

# 10,000 readers and 5,000 streams and the rest, in connections; the readers' long polls
# in requests being served (4,096 by default).
GATEWAY_FLAGS = ["--connections-max", "18000", "--requests-in-flight-max", "18000"]
HOLDER_CONNECTIONS_MAX = 5_000  # per holder process
HTTP_TIMEOUT_S = 60.0
HOLD_DEADLINE_S = 300.0  # until a holder reports every connection open
SETTLE_CPU_PERCENT = 5.0  # settled once its CPU over --settle-window-s is under this
SETTLE_DEADLINE_S = 60.0
PAYLOAD = b"x" * 100


PHASES = ("ledgers", "tail")


def steps(last: int, fractions: tuple[float, ...]) -> list[int]:
    return sorted({0, *(max(1, round(last * f)) for f in fractions if last)})


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="quire-scale-open-"))
    cluster = Cluster(work, zk_heap_mb=args.zk_heap_mb, zk_force_sync=False)
    holders = Holders()
    result: dict[str, Any] = {"part": "open", "quick": args.quick}
    try:
        cluster.start_zookeeper()
        cluster.start_bookies(3)
        if "ledgers" in args.phases:
            result["ledgers"] = LedgerPhase(cluster, args).run()
        if "tail" in args.phases:
            result["tail"] = TailPhase(cluster, args, holders).run()
    finally:
        holders.stop()
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    result["gateway_flags"] = GATEWAY_FLAGS
    result["settings"] = {
        "rate": args.rate,
        "active_s": args.active_s,
        "quiet_s": args.quiet_s,
        "settle_window_s": args.settle_window_s,
        "per_address": args.per_address,
        "ledger_entries": args.ledger_entries,
        "wait_ms": args.wait_ms,
        "phases": sorted(args.phases),
    }
    result["targets"] = {
        "ledger_bytes": LEDGER_BYTES_TARGET,
        "ledger_p99_ratio": LEDGER_P99_RATIO_TARGET,
        "tail_rss_mb": TAIL_RSS_TARGET_MB,
        "tail_p99_ratio": TAIL_P99_RATIO_TARGET,
        "idle_cpu_percent": IDLE_CPU_TARGET_PERCENT,
    }
    result["machine"] = machine()
    if (not args.quick or args.plot) and set(PHASES) <= args.phases:
        plot_open(args.out, result)
    elif not args.quick or args.plot:
        # Each plot draws both phases: one phase alone would lose the other's curves.
        say("one phase only: the plots are left as they are")
    return result


# -- measuring one gateway ----------------------------------------------------------------


# A collection this long, by generation, is counted apart (a bucket bound of
# services/gc_pauses.py): a full one of 0.5 s, a young one of 10 ms.
SLOW_COLLECTION_S = {"0": "0.01", "1": "0.01", "2": "0.5"}


class Measured:
    """A gateway under measurement and its active client's log."""

    def __init__(self, cluster: Cluster, name: str, log: str) -> None:
        self.proc = cluster.service("gateway", GATEWAY_FLAGS, name)
        self.proc.wait_healthy(START_DEADLINE_S)
        assert self.proc.pid is not None
        self.pid = self.proc.pid
        self.http = httpx.Client(base_url=self.proc.url, timeout=HTTP_TIMEOUT_S)
        self.log = log
        self.baseline_p99_ms: float | None = None
        open_log(self.http, log)

    def close(self) -> None:
        self.http.close()

    def settle(self, window_s: float) -> float:
        """Seconds until the gateway's CPU over a window of ``window_s`` (a second by
        default: ``--settle-window-s``) falls under ``SETTLE_CPU_PERCENT`` (what it set
        up is done: explicit LAC updates, metadata writes), at most
        ``SETTLE_DEADLINE_S``."""
        started = time.monotonic()
        while time.monotonic() - started < SETTLE_DEADLINE_S:
            before = process_cpu_s(self.pid)
            time.sleep(window_s)
            if (process_cpu_s(self.pid) - before) * 100 < SETTLE_CPU_PERCENT * window_s:
                break
        return time.monotonic() - started

    def collections(self) -> dict[str, tuple[float, float, float]]:
        """The gateway's garbage collections so far, by generation: how many, how many
        took longer than ``SLOW_COLLECTION_S`` of theirs, and their seconds
        (``quire_gateway_gc_pause_seconds``; a scrape renders every log's series, so it
        is taken outside the measured windows)."""
        text = self.http.get("/metrics").text
        prefix = "quire_gateway_gc_pause_seconds"
        values: dict[tuple[str, str], float] = {}
        for line in text.splitlines():
            if not line.startswith(prefix):
                continue
            generation = line.split('generation="', 1)[1].split('"', 1)[0]
            key = line.split("{", 1)[0].removeprefix(prefix)
            if key == "_bucket" and f'le="{SLOW_COLLECTION_S[generation]}"' not in line:
                continue
            values[generation, key] = float(line.rsplit(" ", 1)[1])
        found: dict[str, tuple[float, float, float]] = {}
        for generation in SLOW_COLLECTION_S:
            if (generation, "_count") not in values:
                raise SystemExit(f"the gateway's /metrics has no {prefix} of {generation}")
            count = values[generation, "_count"]
            slow = count - values.get((generation, "_bucket"), 0.0)
            found[generation] = (count, slow, values.get((generation, "_sum"), 0.0))
        return found

    def measure(self, args: argparse.Namespace, items: int) -> dict[str, Any]:
        gc_before = self.collections()
        window_started = time.monotonic()
        row: dict[str, Any] = {
            "items": items,
            "settle_s": round(self.settle(args.settle_window_s), 1),
        }
        before = process_cpu_s(self.pid)
        quiet_started = time.monotonic()
        time.sleep(args.quiet_s)  # the window measured: nothing asked of the gateway
        cpu_s = process_cpu_s(self.pid) - before
        row["idle_cpu_percent"] = round(100 * cpu_s / (time.monotonic() - quiet_started), 2)
        info = psutil.Process(self.pid).memory_info()
        row["rss_mb"] = round(info.rss / 2**20, 1)
        row["threads"] = psutil.Process(self.pid).num_threads()
        row["active"] = self.active(args)
        window_s = time.monotonic() - window_started
        gc_after = self.collections()

        def window(generations: tuple[str, ...], slow: str) -> dict[str, Any]:
            def change(i: int) -> float:
                return sum(gc_after[g][i] - gc_before[g][i] for g in generations)

            return {
                "window_s": round(window_s, 1),
                "count": int(change(0)),
                slow: int(change(1)),
                "seconds": round(change(2), 3),
            }

        # Collections while settling, quiet and active: each pauses every request.
        row["gc_full"] = window(("2",), "over_500ms")
        row["gc_young"] = window(("0", "1"), "over_10ms")
        if self.baseline_p99_ms is None:
            self.baseline_p99_ms = row["active"]["p99_ms"]
        row["p99_ratio"] = round(row["active"]["p99_ms"] / self.baseline_p99_ms, 2)
        return row

    def active(self, args: argparse.Namespace) -> dict[str, Any]:
        """Single appends, one at a time, paced at ``--rate`` for ``--active-s``."""
        latencies: list[float] = []
        interval = 1.0 / args.rate
        started = time.perf_counter()
        next_at = started
        while time.perf_counter() - started < args.active_s:
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)  # pacing of the client's own requests
            next_at += interval
            sent = time.perf_counter()
            answer = self.http.post(f"/v1/logs/{self.log}/records", content=PAYLOAD)
            latencies.append((time.perf_counter() - sent) * 1000)
            if answer.status_code != 200:
                raise SystemExit(f"active append: {answer.status_code} {answer.text[:300]}")
        return {
            "appends": len(latencies),
            "p50_ms": round(percentile(latencies, 0.5), 2),
            "p99_ms": round(percentile(latencies, 0.99), 2),
            "max_ms": round(max(latencies), 2),
        }


def open_log(http: httpx.Client, name: str) -> None:
    """The log, created and written by the gateway of ``http`` (which then holds its
    open ledger)."""
    for method, path in (("PUT", f"/v1/logs/{name}"), ("POST", f"/v1/logs/{name}/writer")):
        answer = http.request(method, path)
        if answer.status_code not in (200, 201):
            raise SystemExit(f"{method} {path}: {answer.status_code} {answer.text[:300]}")


async def in_parallel(url: str, calls: int, concurrency: int, one: Any, what: str) -> None:
    """``one(client, i)`` for i in range(calls), ``concurrency`` at a time, with a
    progress line every 10 s."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    started = time.monotonic()
    done = 0
    last_say = started
    async with httpx.AsyncClient(base_url=url, timeout=HTTP_TIMEOUT_S, limits=limits) as client:
        queue = iter(range(calls))

        async def worker() -> None:
            nonlocal done, last_say
            for i in queue:
                await one(client, i)
                done += 1
                if time.monotonic() - last_say > 10:
                    last_say = time.monotonic()
                    say(f"  {what}: {done}/{calls} ({done / (last_say - started):.0f}/s)")

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def refused(answer: httpx.Response) -> None:
    if answer.status_code >= 400:
        raise SystemExit(f"{answer.request.method} {answer.request.url}: "
                         f"{answer.status_code} {answer.text[:300]}")  # fmt: skip


# -- phase 1: idle open ledgers -----------------------------------------------------------


class LedgerPhase:
    def __init__(self, cluster: Cluster, args: argparse.Namespace) -> None:
        self.cluster = cluster
        self.args = args
        self.created = 0

    def run(self) -> list[dict[str, Any]]:
        args = self.args
        gateway = Measured(self.cluster, "gateway-ledgers", "active")
        rows: list[dict[str, Any]] = []
        try:
            for size in steps(args.ledgers, (0.1, 0.3, 1.0)):
                grow_s = self.grow(gateway.proc, size)
                say(f"{size} open ledgers (created in {grow_s:.1f} s); measuring")
                row = gateway.measure(args, size)
                row["create_s"] = round(grow_s, 1)
                if rows:
                    rss_delta = (row["rss_mb"] - rows[0]["rss_mb"]) * 2**20
                    row["bytes_per_ledger"] = round(rss_delta / size)
                say(json.dumps(row))
                rows.append(row)
        finally:
            gateway.close()
            self.cluster.stop_service(gateway.proc)
        return rows

    def grow(self, proc: ServiceProcess, size: int) -> float:
        started = time.monotonic()
        entries = self.args.ledger_entries

        async def one(client: httpx.AsyncClient, _: int) -> None:
            answer = await client.post("/v1/ledgers", json={})
            refused(answer)
            ledger_id = answer.json()["ledger_id"]
            for _ in range(entries):
                refused(await client.post(f"/v1/ledgers/{ledger_id}/entries", content=PAYLOAD))

        calls = size - self.created
        asyncio.run(in_parallel(proc.url, calls, self.args.concurrency, one, "ledgers"))
        self.created = size
        return time.monotonic() - started


# -- phase 2: tailing readers, then streams on top ----------------------------------------


class Holders:
    """The holder processes (services/bench/open_holder.py): started one chunk at a time,
    their latest progress line kept, stopped by pid."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self.latest: dict[int, dict[str, Any]] = {}
        self.address_next = 2  # 127.0.0.1 is the active client's and the set-up's

    def start(self, spec: dict[str, Any], per_address: int) -> int:
        spec = {**spec, "address_first": self.address_next, "per_address": per_address}
        self.address_next += math.ceil(len(spec["targets"]) / per_address)
        if self.address_next > 254:
            raise SystemExit("more connections than 127.0.0.2-254 hold at --per-address")
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.bench.open_holder", json.dumps(spec)],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # stopped by pid, not by the terminal's Ctrl-C
            text=True,
        )
        index = len(self.procs)
        self.procs.append(proc)
        threading.Thread(target=self._read, args=(index, proc.stdout), daemon=True).start()
        return index

    def _read(self, index: int, stream: IO[str]) -> None:
        for line in stream:
            try:
                self.latest[index] = json.loads(line)
            except ValueError:
                continue

    def wait_open(self, index: int, count: int) -> None:
        deadline = time.monotonic() + HOLD_DEADLINE_S
        while True:
            doc = self.latest.get(index, {})
            if doc.get("errors"):
                raise SystemExit(f"holder {index}: {doc['errors']} errors: {doc['first_error']}")
            if doc.get("open") == count:
                return
            if self.procs[index].poll() is not None:
                raise SystemExit(f"holder {index} ended: {doc}")
            if time.monotonic() > deadline:
                raise SystemExit(f"holder {index}: {doc.get('open')} of {count} open")
            time.sleep(0.2)

    def total(self, key: str) -> int:
        return sum(int(doc.get(key, 0)) for doc in self.latest.values())

    def check(self) -> None:
        """Every connection held is still open, none failed."""
        for index, doc in self.latest.items():
            if doc.get("errors") or doc.get("lost"):
                raise SystemExit(f"holder {index}: {doc}")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(10.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = []


class TailPhase:
    def __init__(self, cluster: Cluster, args: argparse.Namespace, holders: Holders) -> None:
        self.cluster = cluster
        self.args = args
        self.holders = holders
        self.logs = 1  # tail-0, the active client's
        self.readers = 0
        self.streams = 0

    def run(self) -> dict[str, list[dict[str, Any]]]:
        args = self.args
        self.gateway = Measured(self.cluster, "gateway-tail", "tail-0")
        readers: list[dict[str, Any]] = []
        streams: list[dict[str, Any]] = []
        try:
            for size in steps(args.readers, (0.25, 0.5, 1.0)):
                grow_s = self.grow_readers(size)
                say(f"{size} tailing readers (set up in {grow_s:.1f} s); measuring")
                readers.append(self.measure(size, readers[0] if readers else None))
            base = readers[-1]
            for size in steps(args.streams, (0.5, 1.0))[1:]:
                grow_s = self.grow_streams(size)
                say(f"{size} streams beside {self.readers} readers ({grow_s:.1f} s); measuring")
                row = self.measure(size, base)
                row["readers"] = self.readers
                streams.append(row)
        finally:
            self.gateway.close()
        return {"readers": readers, "streams": streams}

    def measure(self, size: int, base: dict[str, Any] | None) -> dict[str, Any]:
        records_before = self.holders.total("records")
        row = self.gateway.measure(self.args, size)
        self.holders.check()
        row["polls_answered"] = self.holders.total("polls")
        row["pings_answered"] = self.holders.total("pings")
        if self.readers:
            # tail-0's reader sees the active client's appends (each a record).
            deadline = time.monotonic() + 30
            appended = row["active"]["appends"]
            while self.holders.total("records") - records_before < appended:
                if time.monotonic() > deadline:
                    raise SystemExit("the reader of tail-0 did not see the appends")
                time.sleep(0.2)
        if base is not None and size:
            # Over the readers' empty gateway, or the streams' gateway with every reader.
            row["bytes_per_item"] = round((row["rss_mb"] - base["rss_mb"]) * 2**20 / size)
        say(json.dumps(row))
        return row

    def ensure_logs(self, count: int) -> None:
        if count <= self.logs:
            return
        first = self.logs

        async def one(client: httpx.AsyncClient, i: int) -> None:
            name = f"tail-{first + i}"
            refused(await client.put(f"/v1/logs/{name}"))
            refused(await client.post(f"/v1/logs/{name}/writer"))

        url = self.gateway.proc.url
        asyncio.run(in_parallel(url, count - first, self.args.concurrency, one, "logs"))
        self.logs = count

    def hold(self, kind: str, targets: list[str]) -> None:
        for start in range(0, len(targets), HOLDER_CONNECTIONS_MAX):
            chunk = targets[start : start + HOLDER_CONNECTIONS_MAX]
            spec = {"kind": kind, "host": self.gateway.proc.host,
                    "port": self.gateway.proc.port, "targets": chunk,
                    "wait_ms": self.args.wait_ms}  # fmt: skip
            index = self.holders.start(spec, self.args.per_address)
            self.holders.wait_open(index, len(chunk))

    def grow_readers(self, size: int) -> float:
        started = time.monotonic()
        if size > self.readers:
            self.ensure_logs(size)
            self.hold("readers", [f"tail-{i}" for i in range(self.readers, size)])
            self.readers = size
        return time.monotonic() - started

    def grow_streams(self, size: int) -> float:
        """Streams on tail-1, tail-2, … (one a log while there are logs enough)."""
        started = time.monotonic()
        self.ensure_logs(2)
        spread = self.logs - 1
        targets = [f"tail-{1 + i % spread}" for i in range(self.streams, size)]
        self.hold("streams", targets)
        self.streams = size
        return time.monotonic() - started


# -- plots --------------------------------------------------------------------------------


def plot_open(out: Path, result: dict[str, Any]) -> None:
    ledgers = [r for r in result["ledgers"] if r["items"]]
    readers = [r for r in result["tail"]["readers"] if r["items"]]
    streams = result["tail"]["streams"]

    def xy(
        rows: list[dict[str, Any]], key: str, scale: float = 1.0
    ) -> tuple[list[float], list[float]]:
        return [float(r["items"]) for r in rows], [r[key] * scale for r in rows]

    plot(out / "open_memory.png", "Gateway memory per open item (RSS growth / items)",
         "items held", "KiB each",
         {"idle open ledgers": xy(ledgers, "bytes_per_ledger", 1 / 1024),
          "tailing readers (each with its log)": xy(readers, "bytes_per_item", 1 / 1024),
          "streams (beside the readers)": xy(streams, "bytes_per_item", 1 / 1024)},
         targets={"target (open ledgers)": LEDGER_BYTES_TARGET / 1024})  # fmt: skip
    plot(out / "open_rss.png", "Gateway RSS against what it holds", "items held", "MiB",
         {"idle open ledgers": xy(ledgers, "rss_mb"),
          "tailing readers": xy(readers, "rss_mb"),
          "streams (beside the readers)": xy(streams, "rss_mb")},
         targets={"target (readers and streams)": TAIL_RSS_TARGET_MB}, logy=True)  # fmt: skip
    plot(out / "open_cpu.png", f"Gateway CPU while idle ({result['settings']['quiet_s']} s)",
         "items held", "% of one core",
         {"idle open ledgers": xy(ledgers, "idle_cpu_percent"),
          "tailing readers": xy(readers, "idle_cpu_percent"),
          "streams (beside the readers)": xy(streams, "idle_cpu_percent")},
         targets={"'no CPU' (1 %)": IDLE_CPU_TARGET_PERCENT})  # fmt: skip
    plot(out / "open_latency.png", "The active client's p99 against the empty gateway's",
         "items held", "p99 / empty p99",
         {"idle open ledgers": xy(ledgers, "p99_ratio"),
          "tailing readers": xy(readers, "p99_ratio"),
          "streams (beside the readers)": xy(streams, "p99_ratio")},
         targets={"target (ledgers)": LEDGER_P99_RATIO_TARGET,
                  "target (readers, streams)": TAIL_P99_RATIO_TARGET})  # fmt: skip


def add_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--ledgers",
        type=int,
        default=None,
        help="idle open ledgers at the last step (100,000; --quick 2,000)",
    )
    sub.add_argument(
        "--readers",
        type=int,
        default=None,
        help="tailing readers at the last step (10,000; --quick 200)",
    )
    sub.add_argument(
        "--streams",
        type=int,
        default=None,
        help="streams beside them at the last step (5,000; --quick 100)",
    )
    sub.add_argument("--ledger-entries", type=int, default=1, help="entries added to each")
    sub.add_argument("--rate", type=float, default=50.0, help="the active client's appends/s")
    sub.add_argument("--active-s", type=float, default=20.0, help="the active client's run")
    sub.add_argument("--quiet-s", type=float, default=15.0, help="the idle CPU window")
    sub.add_argument(
        "--settle-window-s",
        type=float,
        default=1.0,
        help="the window the gateway's CPU must fall under 5 %% of, before each measure",
    )
    sub.add_argument("--wait-ms", type=int, default=30_000, help="a tail read's long poll")
    sub.add_argument(
        "--per-address", type=int, default=500, help="held connections per client address 127.0.0.x"
    )
    sub.add_argument("--concurrency", type=int, default=32, help="set-up requests at once")
    sub.add_argument("--zk-heap-mb", type=int, default=1024, help="ZooKeeper's JVM heap")
    sub.add_argument(
        "--phases",
        type=phases,
        default=set(PHASES),
        help="the phases to run, comma-separated: ledgers, tail (both; plots need both)",
    )


def phases(text: str) -> set[str]:
    chosen = {p.strip() for p in text.split(",") if p.strip()}
    unknown = chosen - set(PHASES)
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"phases are {', '.join(PHASES)}; got {text!r}")
    return chosen


def resolve(args: argparse.Namespace) -> None:
    """The sizes: given, else the issue's (or --quick's)."""
    quick = {"ledgers": 2_000, "readers": 200, "streams": 100}
    full = {"ledgers": 100_000, "readers": 10_000, "streams": 5_000}
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.quick and args.active_s == 20.0:
        args.active_s, args.quiet_s = 5.0, 3.0
