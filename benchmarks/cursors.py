"""Durable cursors: acks per second per cursor and in total, with the ZooKeeper writes they
cost, and reads through a cursor against plain positional reads, in one sitting (issue 41;
docs/logs.md "Durable cursors").

Starts its own ZooKeeper, three bookies and a gateway in a temporary directory, fills one
log with ``--records`` records of ``--record-size`` bytes over ``--ledgers`` ledgers
(JSON batches of 1,000), then:

- reads: the whole log, ``--read-passes`` times in each of four ways, interleaved:
  ``positional`` (``from=`` each page's ``next``), ``cursor`` (the first page
  ``?cursor=C``, then ``from=next``, as ``quire log read --cursor C`` does),
  ``cursor+ack`` (the same, acking each page's last record before reading on, as
  ``--ack`` would per page) and ``cursor re-read+ack`` (every page ``?cursor=C`` after
  acking the one before: a consumer that keeps no position of its own). Pages of 1,000
  records; records/s and MB/s of record payload; every way must read every record once.
- acks: for each of ``--flush-ms`` a gateway started with ``--cursor-flush-ms`` at that
  value (it takes the log's writer role, as the first did, so each acks against the
  log's writer), and for each of ``--cursors`` that many fresh cursors on the log, with
  ``--clients-per-cursor`` clients each acking the cursor's next record (in log order,
  one ack in flight per client, keep-alive connections) for ``--ack-duration-s``.
  Acks/s per cursor and in total, ack latency, and from the gateway's ``/metrics``
  (``quire_gateway_cursor_acks_total``, ``quire_gateway_cursor_writes_total``) read
  before and after, the ZooKeeper writes per second and acks per write; from ZooKeeper's
  ``mntr`` the requests it received per ack (reads included). Each cursor must end at
  the highest position acknowledged to it.

Prints a table per part and ends with one JSON line (``--json-out`` writes it to a file
too), with the CPU model and the CPU each process used.

    .venv/bin/python benchmarks/cursors.py             # full: ~2 min
    .venv/bin/python benchmarks/cursors.py --quick     # ~30 s
    .venv/bin/python benchmarks/cursors.py --flush-ms 100,0 --cursors 1,64 --ack-duration-s 5
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.bench.histogram import bucket_of, percentile_s  # noqa: E402
from services.bench.load import Stats, exchange, run_loop  # noqa: E402
from services.bench.measure import cpu_model  # noqa: E402
from services.cluster.processes import (  # noqa: E402
    ServiceProcess,
    ZooKeeperProcess,
    free_port,
    stop_processes,
)

SECRET = "bench-secret"
LOG = "cursor-bench"
PAGE_RECORDS = 1000  # a JSON page's most (docs/api.md); the reads ask for full pages
FILL_BATCH_RECORDS = 1000
# A page of 1,000 records, base64 in JSON, must stay under the raw client's answer bound
# (services/bench/limits.py RESPONSE_BODY_MAX_BYTES, 1 MiB).
RECORD_SIZE_MAX_BYTES = 512
REQUEST_TIMEOUT_S = 30.0
SETUP_DEADLINE_S = 60.0
STOP_GRACE_S = 5.0
READ_MODES = ("positional", "cursor", "cursor+ack", "cursor re-read+ack")
ACK_MODES = ("cursor+ack", "cursor re-read+ack")

FULL = {"ack_duration_s": 10.0, "read_passes": 3}
QUICK = {"ack_duration_s": 2.0, "read_passes": 1}


# -- the cluster ---------------------------------------------------------------------


class Cluster:
    """ZooKeeper, three bookies and the gateways started so far (one per flush value)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.zk = ZooKeeperProcess(work / "zk", free_port())
        self.procs: list[ServiceProcess | ZooKeeperProcess] = [self.zk]
        self.env = {**os.environ, "QUIRE_CLUSTER_SECRET": SECRET}

    def service(self, module: str, args: list[str], name: str) -> ServiceProcess:
        common = ["--zk", self.zk.connect_string, "--zk-root", "/cursor-bench"]
        proc = ServiceProcess(
            module, [*common, *args], "127.0.0.1", free_port(), self.work / f"{name}.log",
            env=self.env, name=name,
        )  # fmt: skip
        self.procs.append(proc)
        proc.start()
        return proc

    def start(self) -> None:
        self.zk.start()
        self.zk.wait_ready()
        bookies = [
            self.service("bookie", ["--data-dir", str(self.work / f"bookie-{i}")], f"bookie-{i}")
            for i in range(3)
        ]
        for proc in bookies:
            proc.wait_healthy(SETUP_DEADLINE_S)

    def gateway(self, flush_ms: int) -> ServiceProcess:
        proc = self.service("gateway", ["--cursor-flush-ms", str(flush_ms)], f"gateway-{flush_ms}")
        proc.wait_healthy(SETUP_DEADLINE_S)
        return proc

    def stop(self) -> None:
        stop_processes(self.procs, STOP_GRACE_S)


def zk_received(zk: ZooKeeperProcess) -> int:
    """Requests ZooKeeper received so far (``mntr`` ``zk_packets_received``: every read,
    write and session ping of every client)."""
    with socket.create_connection((zk.host, zk.port), timeout=5.0) as sock:
        sock.sendall(b"mntr")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    for line in b"".join(chunks).decode(errors="replace").splitlines():
        key, _, value = line.partition("\t")
        if key == "zk_packets_received":
            return int(value)
    raise SystemExit("ZooKeeper's mntr has no zk_packets_received")


def cursor_counters(url: str) -> tuple[float, float]:
    """The gateway's cursor acks received and positions written (its /metrics)."""
    text = httpx.get(f"{url}/metrics", timeout=10.0).text
    found = {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return (
        found.get("quire_gateway_cursor_acks_total", 0.0),
        found.get("quire_gateway_cursor_writes_total", 0.0),
    )


def cpu_s(*procs: ServiceProcess | ZooKeeperProcess) -> float:
    total = 0.0
    for proc in procs:
        if proc.pid is not None:
            times = psutil.Process(proc.pid).cpu_times()
            total += times.user + times.system
    return total


@contextmanager
def cpu_window(cluster: Cluster, gateway: ServiceProcess) -> Iterator[dict[str, float]]:
    """Cores the gateway, ZooKeeper, the bookies and this process used during the block
    (filled in when it ends)."""
    bookies = [p for p in cluster.procs if p.name.startswith("bookie")]
    before = (cpu_s(gateway), cpu_s(cluster.zk), cpu_s(*bookies), time.process_time())
    started = time.perf_counter()
    out: dict[str, float] = {}
    yield out
    elapsed = time.perf_counter() - started
    after = (cpu_s(gateway), cpu_s(cluster.zk), cpu_s(*bookies), time.process_time())
    for name, b, a in zip(
        ("gateway", "zookeeper", "bookies", "client"), before, after, strict=True
    ):
        out[f"{name}_cores"] = round((a - b) / elapsed, 2)


# -- the log -------------------------------------------------------------------------


def retry(call: Any, what: str) -> httpx.Response:
    """``call()`` until it answers 2xx (a gateway that just started may not see its
    bookies yet: 503)."""
    deadline = time.monotonic() + SETUP_DEADLINE_S
    while True:
        try:
            r: httpx.Response = call()
        except httpx.HTTPError as exc:
            r = None  # type: ignore[assignment]
            error = repr(exc)
        else:
            if r.is_success:
                return r
            error = f"{r.status_code} {r.text[:300]}"
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: {error}")
        time.sleep(0.2)


def fill(url: str, records: int, ledgers: int, size: int) -> None:
    """The log, made and written through ``url``: ``records`` records over ``ledgers``
    ledgers (rolled between), each a payload of ``size`` random bytes."""
    per_ledger = math.ceil(records / ledgers)
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        retry(lambda: http.put(f"/v1/logs/{LOG}"), "create the log")
        retry(lambda: http.post(f"/v1/logs/{LOG}/writer"), "take the writer role")
        left = records
        for ledger in range(ledgers):
            in_ledger = min(per_ledger, left)
            while in_ledger > 0:
                count = min(FILL_BATCH_RECORDS, in_ledger)
                entries = [base64.b64encode(os.urandom(size)).decode() for _ in range(count)]
                body = {"entries": entries}
                retry(lambda b=body: http.post(f"/v1/logs/{LOG}/records", json=b), "append")
                in_ledger -= count
                left -= count
            if ledger < ledgers - 1 and left > 0:
                retry(lambda: http.post(f"/v1/logs/{LOG}/roll"), "roll the log")


def make_cursor(url: str, name: str) -> None:
    r = httpx.put(f"{url}/v1/logs/{LOG}/cursors/{name}", json={"start": "earliest"}, timeout=10)
    if r.status_code != 201:
        raise SystemExit(f"cursor {name}: {r.status_code} {r.text[:300]}")


def position_text(position: dict[str, int]) -> str:
    return f"{position['ledger_id']}:{position['entry_id']}"


# -- raw HTTP/1.1 --------------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection on raw asyncio streams (services/bench/load.py's
    exchange): a client's requests one after the other."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> Connection:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def request(self, method: str, target: str, body: bytes = b"") -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        head = (
            f"{method} {target} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        status, answer, _ = await asyncio.wait_for(
            exchange(self.reader, self.writer, head, body), REQUEST_TIMEOUT_S
        )
        return status, answer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def ack_body(position: str) -> bytes:
    return json.dumps({"position": position}).encode()


# -- reads ---------------------------------------------------------------------------


@dataclass
class ReadPass:
    records: int = 0
    payload_bytes: int = 0
    pages: int = 0
    acks: int = 0
    elapsed_s: float = 0.0
    positions: list[str] = field(default_factory=list)


async def read_pass(host: str, port: int, mode: str, cursor: str | None) -> ReadPass:
    """Read the log from its first record to what is readable now, page by page, as
    ``mode`` says (module docstring); the positions read, in order."""
    conn = await Connection(host, port).open()
    out = ReadPass()
    base = f"/v1/logs/{LOG}/records?limit={PAGE_RECORDS}"
    following: str | None = None
    started = time.perf_counter()
    try:
        while True:
            if mode == "positional":
                target = base + (f"&from={quote(following)}" if following else "")
            elif mode == "cursor re-read+ack" or following is None:
                target = f"{base}&cursor={cursor}"
            else:
                target = f"{base}&from={quote(following)}"
            status, answer = await conn.request("GET", target)
            if status != 200:
                raise SystemExit(f"read ({mode}): {status} {answer[:300]!r}")
            page = json.loads(answer)
            out.pages += 1
            for record in page["records"]:
                out.payload_bytes += len(base64.b64decode(record["data"]))
                out.positions.append(position_text(record["position"]))
            out.records += len(page["records"])
            if mode in ACK_MODES and page["records"]:
                last = position_text(page["records"][-1]["position"])
                path = f"/v1/logs/{LOG}/cursors/{cursor}/ack"
                status, answer = await conn.request("POST", path, ack_body(last))
                if status != 200:
                    raise SystemExit(f"ack ({mode}): {status} {answer[:300]!r}")
                out.acks += 1
            if page["caught_up"]:
                break
            following = page["next"]
    finally:
        conn.close()
    out.elapsed_s = time.perf_counter() - started
    return out


def read_part(
    cluster: Cluster,
    gateway: ServiceProcess,
    flush_ms: int,
    passes: int,
    expected: int,
    positions: list[str],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each read mode ``passes`` times through ``gateway``, interleaved (a fresh cursor
    at ``earliest`` per pass through a cursor); the rows of the table and the log's
    positions (each read must find ``positions`` when given)."""
    host, port = gateway.host, gateway.port
    runs: dict[str, list[ReadPass]] = {mode: [] for mode in READ_MODES}
    cores: dict[str, list[dict[str, float]]] = {mode: [] for mode in READ_MODES}
    for index in range(passes):
        for mode in READ_MODES:
            cursor = None
            if mode != "positional":
                cursor = f"read-f{flush_ms}-{READ_MODES.index(mode)}-{index}"
                make_cursor(gateway.url, cursor)
            with cpu_window(cluster, gateway) as used:
                done = run_loop(read_pass(host, port, mode, cursor))
            if done.records != expected or len(set(done.positions)) != expected:
                raise SystemExit(
                    f"read ({mode}) read {done.records} records "
                    f"({len(set(done.positions))} distinct), not {expected}"
                )
            if positions and done.positions != positions:
                raise SystemExit(f"read ({mode}) read the log in another order")
            positions = done.positions
            runs[mode].append(done)
            cores[mode].append(used)
    rows: list[dict[str, Any]] = []
    for mode in READ_MODES:
        rates = [r.records / r.elapsed_s for r in runs[mode]]
        mbs = [r.payload_bytes / r.elapsed_s / 1e6 for r in runs[mode]]
        rows.append(
            {
                "flush_ms": flush_ms,
                "mode": mode,
                "passes": passes,
                "records": expected,
                "pages": runs[mode][0].pages,
                "acks_per_pass": runs[mode][0].acks,
                "records_per_s": round(statistics.median(rates)),
                "records_per_s_all": [round(r) for r in rates],
                "mb_per_s": round(statistics.median(mbs), 2),
                "ms_per_page": round(
                    statistics.median(1000 * r.elapsed_s / r.pages for r in runs[mode]), 2
                ),
                "gateway_cores": statistics.median(c["gateway_cores"] for c in cores[mode]),
                "zookeeper_cores": statistics.median(c["zookeeper_cores"] for c in cores[mode]),
            }
        )
    positional = rows[0]["records_per_s"]
    for row in rows:
        row["vs_positional"] = round(row["records_per_s"] / positional, 2)
    return rows, positions


# -- acks ----------------------------------------------------------------------------


@dataclass
class AckLoad:
    """``clients_per_cursor`` clients per cursor acking the cursor's next position of
    ``positions`` (one ack in flight each) until ``duration_s`` has passed."""

    host: str
    port: int
    cursors: list[str]
    clients_per_cursor: int
    positions: list[str]
    duration_s: float
    stats: Stats = field(default_factory=Stats)
    acked: dict[str, int] = field(default_factory=dict)  # answered acks per cursor
    highest: dict[str, int] = field(default_factory=dict)  # index of the highest answered
    taken: dict[str, int] = field(default_factory=dict)  # the next index to ack
    exhausted: set[str] = field(default_factory=set)
    elapsed_s: float = 0.0

    async def client(self, conn: Connection, cursor: str, end: float) -> None:
        path = f"/v1/logs/{LOG}/cursors/{cursor}/ack"
        stats = self.stats
        while time.perf_counter() < end:
            index = self.taken[cursor]
            if index >= len(self.positions):
                self.exhausted.add(cursor)
                return
            self.taken[cursor] = index + 1
            body = ack_body(self.positions[index])
            started = time.perf_counter()
            try:
                status, answer = await conn.request("POST", path, body)
            except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as exc:
                stats.error(f"{type(exc).__name__}: {exc}")
                return
            latency = time.perf_counter() - started
            if status != 200:
                stats.error(f"HTTP {status} {answer[:200]!r}")
                continue
            stats.requests += 1
            bucket = bucket_of(latency)
            stats.histogram[bucket] = stats.histogram.get(bucket, 0) + 1
            self.acked[cursor] += 1
            self.highest[cursor] = max(self.highest[cursor], index)

    async def run(self) -> AckLoad:
        for cursor in self.cursors:
            self.acked[cursor], self.highest[cursor], self.taken[cursor] = 0, -1, 0
        pairs = [
            (c, Connection(self.host, self.port))
            for _ in range(self.clients_per_cursor)
            for c in self.cursors
        ]
        await asyncio.gather(*(conn.open() for _, conn in pairs))
        started = time.perf_counter()
        end = started + self.duration_s
        try:
            await asyncio.gather(*(self.client(conn, c, end) for c, conn in pairs))
        finally:
            for _, conn in pairs:
                conn.close()
        self.elapsed_s = time.perf_counter() - started
        return self


def ack_run(
    run: int,
    cluster: Cluster,
    gateway: ServiceProcess,
    flush_ms: int,
    cursors: int,
    clients_per_cursor: int,
    positions: list[str],
    duration_s: float,
) -> dict[str, Any]:
    """Row ``run`` of the ack table: ``cursors`` fresh cursors acked through ``gateway``."""
    names = [f"ack-{run}-f{flush_ms}-n{cursors}-{i}" for i in range(cursors)]
    for name in names:
        make_cursor(gateway.url, name)
    acks0, writes0 = cursor_counters(gateway.url)
    zk0 = zk_received(cluster.zk)
    with cpu_window(cluster, gateway) as used:
        load = AckLoad(gateway.host, gateway.port, names, clients_per_cursor, positions, duration_s)
        run_loop(load.run())
    acks1, writes1 = cursor_counters(gateway.url)
    zk1 = zk_received(cluster.zk)
    elapsed, stats = load.elapsed_s, load.stats
    # Every cursor ends at the highest position acknowledged to it (with no failed ack,
    # nothing else can have been written).
    wrong = []
    for name in names:
        doc = httpx.get(f"{gateway.url}/v1/logs/{LOG}/cursors/{name}", timeout=10).json()
        index = load.highest[name]
        if stats.errors == 0 and doc["position"] != (positions[index] if index >= 0 else None):
            wrong.append((name, doc["position"], positions[index]))
    if wrong:
        raise SystemExit(f"cursors not at their highest acknowledged position: {wrong[:3]}")
    per_cursor = [load.acked[n] / elapsed for n in names]
    writes = writes1 - writes0
    gateway_acks = acks1 - acks0
    return {
        "flush_ms": flush_ms,
        "cursors": cursors,
        "clients": cursors * clients_per_cursor,
        "elapsed_s": round(elapsed, 2),
        "acks": stats.requests,
        "gateway_acks": int(gateway_acks),
        "acks_per_s": round(stats.requests / elapsed, 1),
        "acks_per_s_per_cursor": round(statistics.mean(per_cursor), 1),
        "acks_per_s_per_cursor_min": round(min(per_cursor), 1),
        "acks_per_s_per_cursor_max": round(max(per_cursor), 1),
        "p50_ms": round(percentile_s(stats.histogram, 0.50) * 1000, 1),
        "p99_ms": round(percentile_s(stats.histogram, 0.99) * 1000, 1),
        "zk_writes": int(writes),
        "zk_writes_per_s": round(writes / elapsed, 1),
        "zk_writes_per_s_per_cursor": round(writes / elapsed / cursors, 2),
        # The documented bound: one write per cursor per flush period (plus its round trip).
        "zk_writes_per_s_bound": round(cursors * 1000 / flush_ms, 1) if flush_ms else None,
        "acks_per_write": round(gateway_acks / writes, 1) if writes else None,
        "zk_requests_per_ack": round((zk1 - zk0) / stats.requests, 2) if stats.requests else None,
        **used,
        "errors": stats.errors,
        "first_error": stats.first_error,
        "exhausted": sorted(load.exhausted),
    }


# -- report --------------------------------------------------------------------------


def table(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> str:
    cells = [[title for title, _ in columns]]
    for row in rows:
        cells.append([_cell(row.get(key)) for _, key in columns])
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


READ_COLUMNS = [
    ("flush ms", "flush_ms"),
    ("read", "mode"),
    ("records/s", "records_per_s"),
    ("MB/s", "mb_per_s"),
    ("x positional", "vs_positional"),
    ("pages", "pages"),
    ("ms/page", "ms_per_page"),
    ("acks", "acks_per_pass"),
    ("gateway cores", "gateway_cores"),
    ("zk cores", "zookeeper_cores"),
]
ACK_COLUMNS = [
    ("flush ms", "flush_ms"),
    ("cursors", "cursors"),
    ("clients", "clients"),
    ("acks/s", "acks_per_s"),
    ("per cursor", "acks_per_s_per_cursor"),
    ("p50 ms", "p50_ms"),
    ("p99 ms", "p99_ms"),
    ("zk writes/s", "zk_writes_per_s"),
    ("per cursor", "zk_writes_per_s_per_cursor"),
    ("acks/write", "acks_per_write"),
    ("zk reqs/ack", "zk_requests_per_ack"),
    ("gateway cores", "gateway_cores"),
    ("errors", "errors"),
]


def int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected integers >= 0: {text!r}")
    return values


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 s ack runs, one read pass")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--ledgers", type=int, default=4)
    parser.add_argument("--record-size", type=int, default=100, help="bytes per record")
    parser.add_argument("--read-passes", type=int, help="per read mode (full 3, quick 1)")
    parser.add_argument("--cursors", type=int_list, default=[1, 4, 16], help="e.g. 1,4,16")
    parser.add_argument("--clients-per-cursor", type=int, default=8)
    parser.add_argument(
        "--flush-ms", type=int_list, default=[100, 10], help="--cursor-flush-ms values"
    )
    parser.add_argument("--ack-duration-s", type=float, help="per ack run (full 10, quick 2)")
    parser.add_argument("--json-out", type=Path, help="also write the JSON summary here")
    args = parser.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if not 1 <= args.record_size <= RECORD_SIZE_MAX_BYTES:
        parser.error(f"--record-size must be 1-{RECORD_SIZE_MAX_BYTES}")
    if args.records < 1 or not 1 <= args.ledgers <= args.records:
        parser.error("--records must be >= 1 and --ledgers 1..--records")
    if args.read_passes < 1 or args.clients_per_cursor < 1 or args.ack_duration_s <= 0:
        parser.error("--read-passes, --clients-per-cursor and --ack-duration-s must be > 0")
    if min(args.cursors) < 1:
        parser.error("--cursors: at least one cursor per run")
    return args


def main() -> None:
    args = arguments()
    model = cpu_model()
    print(
        f"CPU: {model}, {os.cpu_count()} cores; {args.records:,} records of "
        f"{args.record_size} B in {args.ledgers} ledgers",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="quire-cursors-") as tmp:
        cluster = Cluster(Path(tmp))
        try:
            cluster.start()
            gateway = cluster.gateway(args.flush_ms[0])
            fill(gateway.url, args.records, args.ledgers, args.record_size)
            reads: list[dict[str, Any]] = []
            acks: list[dict[str, Any]] = []
            positions: list[str] = []
            for index, flush_ms in enumerate(args.flush_ms):
                if index > 0:  # the next gateway takes the writer role, the last stops
                    previous, gateway = gateway, cluster.gateway(flush_ms)
                    retry(lambda g=gateway: httpx.post(f"{g.url}/v1/logs/{LOG}/writer"), "writer")
                    previous.stop()
                rows, positions = read_part(
                    cluster, gateway, flush_ms, args.read_passes, args.records, positions
                )
                reads += rows
                for row in rows:
                    print(f"  read: {json.dumps(row)}", file=sys.stderr, flush=True)
                for cursors in args.cursors:
                    row = ack_run(
                        len(acks), cluster, gateway, flush_ms, cursors, args.clients_per_cursor,
                        positions, args.ack_duration_s,
                    )  # fmt: skip
                    acks.append(row)
                    print(f"  ack run: {json.dumps(row)}", file=sys.stderr, flush=True)
            print(f"\nReads (pages of {PAGE_RECORDS}, median of {args.read_passes}):")
            print(table(reads, READ_COLUMNS))
            print(
                f"\nAcks ({args.clients_per_cursor} clients per cursor, {args.ack_duration_s:g} s):"
            )
            print(table(acks, ACK_COLUMNS), flush=True)
        finally:
            cluster.stop()
    summary = {
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "records": args.records,
        "record_size": args.record_size,
        "ledgers": args.ledgers,
        "read_passes": args.read_passes,
        "clients_per_cursor": args.clients_per_cursor,
        "ack_duration_s": args.ack_duration_s,
        "reads": reads,
        "acks": acks,
        "errors": sum(row["errors"] for row in acks),
    }
    line = json.dumps(summary)
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(summary, indent=2) + "\n")
    print(line, flush=True)


if __name__ == "__main__":
    main()
