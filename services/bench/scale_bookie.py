"""``benchmarks/scale.py bookie``: one bookie filled to ``--target-gb`` (issue 42, part 1).

One ZooKeeper and one bookie (journal sync on, the defaults) in a temporary directory.
The bookie is driven directly over HTTP (``POST /v1/entries`` with the cluster secret),
so the curve is the bookie's own, not a gateway's.

The fill: ledgers of ``LEDGER_BYTES`` each, one in four of 1 KiB entries and the others
of 64 KiB entries (a quarter of the bytes in small entries, most of the entries small),
``FILL_ACTIVE_LEDGERS`` of them written at once in requests of about 1 MiB, so that a
ledger's entries are spread over a stretch of the file as in a bookie serving many
writers. Every ledger has CLOSED metadata in ZooKeeper (``services/bench/metadata.py``)
before its first entry, as a gateway makes it, so the bookie's garbage collection keeps
it.

At the start and after every ``--step-gb`` of fill: single and batched add throughput
and latency (``--probe-s`` each, their own new ledgers of 1 KiB entries); the latency of
single-entry reads of random old entries (written before the last ``--recent-mb``)
right after the file was dropped from the page cache (``posix_fadvise(DONTNEED)`` on the
bookie's database file only: no other process's cache is touched), the 1 KiB and the
64 KiB entries apart, and of random recent ones (the last ``--recent-mb`` written,
mostly cached); how much of the file the page cache held before and after the cold reads
(``fincore``); the bookie's RSS; the database file against the payload bytes written and
what ``GET /v1/storage`` counts.

Then half the fill ledgers (every other one: their pages are spread over the whole file)
are deleted as a gateway deletes a ledger, its znode first and then ``DELETE
/v1/ledgers/{id}`` on the bookie, one ledger after the other, while a load of single and
batched adds runs; every second the file's size, its free pages, the ledgers the bookie
still purges in the background (its ``quire_bookie_purging_ledgers``; 0 from a bookie
that deletes in the delete's own transaction) and the adds of that second are recorded,
until every delete is answered, the purge is over and the file stops shrinking, or
``--reclaim-deadline-s``. The result says
how long the space took to come back, how much came back and the adds meanwhile against
the same load just before.

Bounds: the free disk is checked first (the target, a margin, and the bookie's own
read-only threshold); the fill stops at ``--deadline-s``; the directory is removed and
the processes stopped by pid at the end, also on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from kazoo.client import KazooClient

from services.bench.histogram import bucket_of, percentile_s
from services.bench.load import exchange, run_loop
from services.bench.metadata import FIRST_WRITTEN_ID, write_closed_ledgers
from services.bench.scale_common import machine, percentile, plot, say
from services.cluster.processes import (
    ServiceProcess,
    ZooKeeperProcess,
    free_port,
    stop_processes,
)
from services.wire.digest import compute
from services.wire.framing import HEADER, MEDIA_TYPE
from services.zk import paths as zkpaths

GIB = 1024**3
MIB = 1024**2
SECRET = "scale-bench-secret"
ZK_ROOT = "/scale"
START_DEADLINE_S = 120.0
HTTP_TIMEOUT_S = 120.0
DB_FILE = "bookie.db"  # bookie/storage.py's (a tool does not import the service)

# The fill's shape.
LEDGER_BYTES = 8 * MIB
ENTRY_KINDS = {"1k": 1024, "64k": 64 * 1024}
REQUEST_BYTES = 1 * MIB
FILL_CLIENTS = 4
FILL_ACTIVE_LEDGERS = 64
# The probes: 1 KiB entries, this many clients each on its own new ledger, one request in
# flight each; a batch is this many entries.
PROBE_CLIENTS = 16
PROBE_BATCH = 100
PROBE_ENTRY_BYTES = 1024
PROBE_LEDGER_BASE = FIRST_WRITTEN_ID + 10_000_000
REQUEST_TIMEOUT_S = 60.0
# Reads: samples of each kind, and what counts as recent.
READ_SAMPLES = 200
RECENT_MIB = 256  # --recent-mb
# Reclamation: the load during it (single and batched clients), how often the file is
# looked at, how many probes long the load before it runs, and when the file counts as
# settled (no shrink by more than this for this many probes' time, at least the floor).
RECLAIM_CLIENTS = 8  # of single adds, and as many of batched (--reclaim-clients)
RECLAIM_SAMPLE_S = 1.0
RECLAIM_BASELINE_PROBES = 4
SETTLED_BYTES = 64 * MIB
SETTLED_PROBES = 4
SETTLED_FLOOR_S = 3.0
# The file's bytes per payload byte of 1 KiB entries (the index, headers, page slack:
# measured 1.05 from 4 GiB up, more on a small file), to count what the adds during
# reclamation took: measured over the baseline load of each run, this is the fallback
# and the bounds of that measure.
FILE_OVER_PAYLOAD = 1.05
FILE_OVER_PAYLOAD_BOUNDS = (1.0, 1.5)
RATIO_MIN_ADDED = 16 * MIB
# Disk: what must stay free beyond the target (the WAL, the probes' ledgers, slack) and
# the bookie's read-only threshold (its --readonly-free-ratio default).
DISK_MARGIN_BYTES = 4 * GIB
DISK_TARGET_FACTOR = 1.15
READONLY_FREE_RATIO = 0.05

# Targets of issue 42.
ADD_RATIO_TARGET = 0.8
COLD_READ_P99_TARGET_MS = 20.0
RECLAIM_TARGET_S = 600.0


def add_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--target-gb", type=float, default=20.0, help="fill the bookie to this")
    sub.add_argument("--step-gb", type=float, default=2.0, help="measure after every this")
    sub.add_argument("--probe-s", type=float, default=5.0, help="seconds of each add probe")
    sub.add_argument("--deadline-s", type=float, default=3600.0,
                     help="the fill stops (and says so) past this")  # fmt: skip
    sub.add_argument("--reclaim-deadline-s", type=float, default=900.0,
                     help="longest wait for the deleted ledgers' space")  # fmt: skip
    sub.add_argument("--recent-mb", type=int, default=RECENT_MIB,
                     help="the last MiB written count as recent; older entries are read "
                          "cold")  # fmt: skip
    sub.add_argument("--reclaim-clients", type=int, default=RECLAIM_CLIENTS,
                     help="clients of single adds, and as many of batched adds, during the "
                          "reclamation and its baseline")  # fmt: skip


# -- the written entries --------------------------------------------------------------


@dataclass
class Ledger:
    ledger_id: int
    kind: str
    entries_total: int
    next_entry: int = 0


@dataclass
class Chunk:
    """One fill request's entries of one ledger, and where in the written bytes it
    began (for old against recent)."""

    ledger_id: int
    kind: str
    first_entry: int
    count: int
    offset: int


@dataclass
class Written:
    ledgers: list[Ledger] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    fill_bytes: int = 0  # payload bytes of the fill
    probe_bytes: int = 0  # payload bytes of the add probes
    next_fill: int = 0  # index of the next fill ledger to open
    probe_ledgers: list[int] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return self.fill_bytes + self.probe_bytes


def fill_ledger(index: int) -> Ledger:
    kind = "1k" if index % 4 == 0 else "64k"
    return Ledger(FIRST_WRITTEN_ID + index, kind, LEDGER_BYTES // ENTRY_KINDS[kind])


def body(ledger_id: int, first_entry: int, count: int, payload: bytes) -> bytes:
    """Framed records ``first_entry``.. of a ledger, crc32c digests (the bookie checks
    them), lengths as a writer sets them."""
    parts: list[bytes] = []
    size = len(payload)
    flags = 1 << 1  # crc32c
    for entry_id in range(first_entry, first_entry + count):
        lac, length = entry_id - 1, (entry_id + 1) * size
        digest = compute("crc32c", b"", ledger_id, entry_id, lac, payload, length=length)
        parts.append(HEADER.pack(flags, ledger_id, entry_id, lac, length, size, len(digest)))
        parts.append(digest)
        parts.append(payload)
    return b"".join(parts)


class Http:
    """Raw HTTP/1.1 to the bookie on one keep-alive connection (services/bench/load.py's
    exchange): the generator costs little of the two cores it shares."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.prefix = f"Host: {host}:{port}\r\nX-Cluster-Secret: {SECRET}\r\n"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def call(self, method: str, path: str, data: bytes = b"") -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (
            f"{method} {path} HTTP/1.1\r\n{self.prefix}Content-Type: {MEDIA_TYPE}\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode()
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            status, answer, keep_alive = await exchange(self.reader, self.writer, head, data)
        if not keep_alive:
            self.close()
        return status, answer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


# -- the bench ------------------------------------------------------------------------


class BookieScale:
    def __init__(self, work: Path, args: argparse.Namespace) -> None:
        self.work = work
        self.args = args
        self.env = {**os.environ, "QUIRE_CLUSTER_SECRET": SECRET}
        self.zk_proc = ZooKeeperProcess(work / "zk", free_port())
        self.procs: list[ServiceProcess | ZooKeeperProcess] = []
        self.data_dir = work / "bookie"
        self.written = Written()
        self.payloads = {kind: os.urandom(size) for kind, size in ENTRY_KINDS.items()}
        self.rng = random.Random(42)
        self.zk: KazooClient | None = None
        self.http: httpx.Client | None = None
        self.next_probe = PROBE_LEDGER_BASE
        self.active: list[Ledger] = []
        self.fill_metadata = 0  # fill ledgers with metadata: FIRST_WRITTEN_ID + [0, this)

    # processes

    def start(self) -> None:
        self.procs.append(self.zk_proc)
        self.zk_proc.start()
        self.zk_proc.wait_ready()
        # Garbage collection stays off while filling (every ledger has metadata anyway);
        # reclamation below is the gateway's delete, which needs no pass.
        args = ["--zk", self.zk_proc.connect_string, "--zk-root", ZK_ROOT,
                "--data-dir", str(self.data_dir), "--gc-interval-s", "0"]  # fmt: skip
        self.bookie = ServiceProcess(
            "bookie", args, "127.0.0.1", free_port(), self.work / "bookie.log",
            env=self.env, name="bookie",
        )  # fmt: skip
        self.procs.append(self.bookie)
        self.bookie.start()
        self.bookie.wait_healthy(START_DEADLINE_S)
        self.http = httpx.Client(
            base_url=self.bookie.url, timeout=HTTP_TIMEOUT_S, headers={"X-Cluster-Secret": SECRET}
        )
        self.bookie_id = self.get("/v1/info")["bookie_id"]
        self.zk = KazooClient(hosts=f"{self.zk_proc.connect_string}{ZK_ROOT}")
        self.zk.start(30)
        self.process = psutil.Process(self.bookie_pid())

    def bookie_pid(self) -> int:
        pid = self.bookie.pid
        if pid is None:
            raise SystemExit("the bookie is not running")
        return pid

    def stop(self) -> None:
        if self.http is not None:
            self.http.close()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
        stop_processes(self.procs, 10.0)

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        assert self.http is not None
        answer = self.http.get(path, params=params)
        if answer.status_code != 200:
            raise SystemExit(f"GET {path}: {answer.status_code} {answer.text[:300]}")
        return dict(answer.json())

    def metadata(self, first: int, count: int) -> None:
        assert self.zk is not None
        # E=3 metadata (what write_closed_ledgers writes) naming this bookie and two that
        # never exist: only the znode's presence matters here (no auditor runs).
        bookies = [self.bookie_id, "127.0.0.1:1", "127.0.0.1:2"]
        write_closed_ledgers(self.zk, first, count, bookies, progress=False)

    # the fill

    async def fill(self, until_bytes: int, deadline: float) -> bool:
        """Fill until ``until_bytes`` of fill payload; False if the deadline came first."""
        w = self.written
        active = self.active  # ledgers being written, kept from one step to the next
        turn = 0

        def next_chunk() -> Chunk | None:
            nonlocal turn
            if w.fill_bytes >= until_bytes or time.monotonic() > deadline:
                return None
            while len(active) < FILL_ACTIVE_LEDGERS:
                ledger = fill_ledger(w.next_fill)
                w.next_fill += 1
                w.ledgers.append(ledger)
                active.append(ledger)
            turn = (turn + 1) % len(active)
            ledger = active[turn]
            size = ENTRY_KINDS[ledger.kind]
            count = min(REQUEST_BYTES // size, ledger.entries_total - ledger.next_entry)
            chunk = Chunk(ledger.ledger_id, ledger.kind, ledger.next_entry, count, w.fill_bytes)
            ledger.next_entry += count
            w.fill_bytes += count * size
            if ledger.next_entry >= ledger.entries_total:
                active.remove(ledger)
            return chunk

        async def client() -> None:
            http = Http(self.bookie.host, self.bookie.port)
            try:
                while (chunk := next_chunk()) is not None:
                    data = body(chunk.ledger_id, chunk.first_entry, chunk.count,
                                self.payloads[chunk.kind])  # fmt: skip
                    status, answer = await http.call("POST", "/v1/entries", data)
                    if status != 200 or json.loads(answer)["stored"] != chunk.count:
                        raise SystemExit(f"fill add: {status} {answer[:300]!r}")
                    w.chunks.append(chunk)
            finally:
                http.close()

        await asyncio.gather(*(client() for _ in range(FILL_CLIENTS)))
        return w.fill_bytes >= until_bytes

    def ensure_fill_metadata(self, until_bytes: int) -> None:
        """Metadata of every fill ledger the fill up to ``until_bytes`` can open."""
        needed = math.ceil(until_bytes / LEDGER_BYTES) + FILL_ACTIVE_LEDGERS + 1
        if needed > self.fill_metadata:
            self.metadata(FIRST_WRITTEN_ID + self.fill_metadata, needed - self.fill_metadata)
            self.fill_metadata = needed

    # the add probes

    async def adds(
        self, clients: int, batch: int, seconds: float, stop: asyncio.Event | None = None,
        per_second: list[int] | None = None, started: float = 0.0,
    ) -> dict[str, Any]:  # fmt: skip
        """``clients`` writers of 1 KiB entries, ``batch`` a request, one request in
        flight each, each on its own new ledger, for ``seconds`` (or until ``stop``)."""
        first = self.next_probe
        self.next_probe += clients
        await asyncio.to_thread(self.metadata, first, clients)
        self.written.probe_ledgers.extend(range(first, first + clients))
        payload = os.urandom(PROBE_ENTRY_BYTES)
        histogram: dict[int, int] = {}
        counts = {"entries": 0, "errors": 0}
        end = time.monotonic() + seconds

        async def client(ledger_id: int) -> None:
            http = Http(self.bookie.host, self.bookie.port)
            entry = 0
            try:
                while time.monotonic() < end and not (stop is not None and stop.is_set()):
                    data = body(ledger_id, entry, batch, payload)
                    t0 = time.perf_counter()
                    status, answer = await http.call("POST", "/v1/entries", data)
                    latency = time.perf_counter() - t0
                    if status != 200 or json.loads(answer)["stored"] != batch:
                        counts["errors"] += 1
                        continue
                    entry += batch
                    counts["entries"] += batch
                    self.written.probe_bytes += batch * PROBE_ENTRY_BYTES
                    b = bucket_of(latency)
                    histogram[b] = histogram.get(b, 0) + 1
                    if per_second is not None:
                        second = int(time.monotonic() - started)
                        while len(per_second) <= second:
                            per_second.append(0)
                        per_second[second] += batch
            finally:
                http.close()

        t0 = time.monotonic()
        cpu0, io0 = self.bookie_cpu_s(), self.process.io_counters()
        await asyncio.gather(*(client(first + i) for i in range(clients)))
        elapsed = time.monotonic() - t0
        cpu, io = self.bookie_cpu_s() - cpu0, self.process.io_counters()
        return {
            "entries_per_s": round(counts["entries"] / elapsed, 1),
            "p50_ms": round(percentile_s(histogram, 0.50) * 1000, 2),
            "p99_ms": round(percentile_s(histogram, 0.99) * 1000, 2),
            "errors": counts["errors"],
            # What the machine's load cannot move much: the bookie's CPU per entry, and
            # the bytes it read from the disk (B-tree pages not in the page cache).
            "bookie_cpu_us_per_entry": round(cpu * 1e6 / max(1, counts["entries"]), 1),
            "bookie_cpu_share": round(cpu / elapsed, 2),
            "bookie_disk_read_mb": round((io.read_bytes - io0.read_bytes) / MIB, 1),
            "bookie_disk_write_mb": round((io.write_bytes - io0.write_bytes) / MIB, 1),
        }

    def bookie_cpu_s(self) -> float:
        t = self.process.cpu_times()
        return float(t.user + t.system)

    # reads

    def drop_cache(self) -> None:
        """The bookie's database file out of the page cache (only that file): its dirty
        pages written first, then POSIX_FADV_DONTNEED."""
        fd = os.open(self.data_dir / DB_FILE, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def cached_bytes(self) -> int | None:
        """Bytes of the database file in the page cache (``fincore``), None without it."""
        try:
            out = subprocess.run(
                ["fincore", "--bytes", "--noheadings", "--output", "RES",
                 str(self.data_dir / DB_FILE)],
                capture_output=True, text=True, timeout=30, check=True,
            )  # fmt: skip
            return int(out.stdout.split()[0])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return None

    async def reads(self, chunks: list[Chunk], samples: int) -> list[tuple[str, float]]:
        """(kind, ms) of ``samples`` single-entry reads of random entries of ``chunks``,
        one after the other."""
        http = Http(self.bookie.host, self.bookie.port)
        out: list[tuple[str, float]] = []
        try:
            for _ in range(samples):
                chunk = self.rng.choice(chunks)
                entry = chunk.first_entry + self.rng.randrange(chunk.count)
                t0 = time.perf_counter()
                status, answer = await http.call(
                    "GET", f"/v1/ledgers/{chunk.ledger_id}/entries/{entry}"
                )
                ms = (time.perf_counter() - t0) * 1000
                if status != 200 or len(answer) < ENTRY_KINDS[chunk.kind]:
                    raise SystemExit(f"read {chunk.ledger_id}:{entry}: {status} {answer[:200]!r}")
                out.append((chunk.kind, ms))
        finally:
            http.close()
        return out

    def read_row(self) -> dict[str, Any]:
        w = self.written
        recent_from = w.fill_bytes - self.args.recent_mb * MIB
        old = [c for c in w.chunks if c.offset + REQUEST_BYTES <= recent_from]
        recent = [c for c in w.chunks if c.offset >= recent_from]
        row: dict[str, Any] = {}
        if old:
            old_by_kind = {k: [c for c in old if c.kind == k] for k in ENTRY_KINDS}
            self.drop_cache()
            row["cached_before_cold_mb"] = mb(self.cached_bytes())
            for kind, chunks in old_by_kind.items():
                if chunks:
                    row[f"cold_{kind}"] = summary(
                        [ms for _, ms in run_loop(self.reads(chunks, READ_SAMPLES))]
                    )
            row["cached_after_cold_mb"] = mb(self.cached_bytes())
        if recent:
            row["recent"] = summary([ms for _, ms in run_loop(self.reads(recent, READ_SAMPLES))])
        return row

    # one point of the curve

    def file_bytes(self) -> int:
        total = 0
        for name in (DB_FILE, DB_FILE + "-wal"):
            try:
                total += (self.data_dir / name).stat().st_size
            except FileNotFoundError:
                pass
        return total

    def free_pages_bytes(self) -> int:
        """The database's free pages (what a vacuum gives back to the file system, or new
        entries reuse), read on a read-only connection of our own (WAL: no lock held)."""
        uri = f"file:{self.data_dir / DB_FILE}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=10)) as conn:
            pages = conn.execute("PRAGMA freelist_count").fetchone()[0]
            size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int(pages) * int(size)

    def purging_ledgers(self) -> int:
        """The deleted ledgers whose entries the bookie still purges in the background
        (its metric; 0 from a bookie without a background purge)."""
        assert self.http is not None
        for line in self.http.get("/metrics").text.splitlines():
            if line.startswith("quire_bookie_purging_ledgers "):
                return int(float(line.split()[1]))
        return 0

    def measure(self) -> dict[str, Any]:
        w = self.written
        row: dict[str, Any] = {
            "fill_gb": round(w.fill_bytes / GIB, 3),
            "written_gb": round(w.total_bytes / GIB, 3),
            "fill_ledgers": len(w.ledgers),
        }
        row.update(self.read_row())
        row["single"] = run_loop(self.adds(PROBE_CLIENTS, 1, self.args.probe_s))
        row["batched"] = run_loop(self.adds(PROBE_CLIENTS, PROBE_BATCH, self.args.probe_s))
        row["rss_mb"] = round(self.process.memory_info().rss / MIB, 1)
        row["file_gb"] = round(self.file_bytes() / GIB, 3)
        t0 = time.perf_counter()
        storage = self.get("/v1/storage")
        row["storage_report_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        row["storage_file_gb"] = round(storage["file_bytes"] / GIB, 3)
        row["free_pages_gb"] = round(storage["free_pages_bytes"] / GIB, 3)
        row["live_gb"] = round(storage["live"]["bytes"] / GIB, 3)
        row["file_over_written"] = round(self.file_bytes() / max(1, w.total_bytes), 3)
        row["load_average"] = [round(x, 2) for x in os.getloadavg()]
        return row

    # reclamation

    def reclaim(self) -> dict[str, Any]:
        w = self.written
        doomed = [lg.ledger_id for lg in w.ledgers[::2] if lg.next_entry > 0]
        doomed_bytes = sum(
            lg.next_entry * ENTRY_KINDS[lg.kind] for lg in w.ledgers[::2] if lg.next_entry > 0
        )
        baseline_s = RECLAIM_BASELINE_PROBES * self.args.probe_s
        say(f"reclaim: baseline load ({baseline_s:.0f} s)")
        used_before, added_before = self.used_bytes(), w.probe_bytes
        baseline = run_loop(self.reclaim_load(baseline_s, None))
        ratio = self.file_over_payload(used_before, added_before)
        before = self.file_bytes()
        say(f"reclaim: deleting {len(doomed)} ledgers ({doomed_bytes / GIB:.2f} GiB) under load")
        result = run_loop(self.reclaim_run(doomed, before, doomed_bytes, ratio))
        say(json.dumps({k: v for k, v in result.items() if k not in ("timeline", "during")}))
        assert self.http is not None
        # The report and the dry run scan the whole store: on a loaded machine at 20 GiB
        # they have outlasted HTTP_TIMEOUT_S, which must not throw the reclaim away.
        after_storage: dict[str, Any] = {}
        gc: dict[str, Any] = {}
        try:
            after_storage = self.get("/v1/storage")
            gc = self.http.post("/v1/gc", params={"dry_run": "true"}).json()
        except httpx.TimeoutException:
            say("the storage report or the dry run after the reclaim timed out: not recorded")
        # A deleted ledger is gone from the bookie; one left would be a failed delete.
        left = [lid for lid in doomed[:50] if self.http.get(
            f"/v1/ledgers/{lid}/entries/0").status_code != 404]  # fmt: skip
        if left:
            raise SystemExit(f"deleted ledgers still readable: {left[:5]}")
        return {
            "deleted_ledgers": len(doomed),
            "deleted_gb": round(doomed_bytes / GIB, 3),
            "file_gb_before": round(before / GIB, 3),
            "baseline": baseline,
            "file_over_payload": round(ratio, 3),
            **result,
            "free_pages_gb_after": round(after_storage["free_pages_bytes"] / GIB, 3)
            if after_storage
            else None,
            "live_gb_after": round(after_storage["live"]["bytes"] / GIB, 3)
            if after_storage
            else None,
            "gc_dry_run_after": {k: gc.get(k) for k in ("freed_ledgers", "waiting_ledgers")},
        }

    async def reclaim_load(
        self, seconds: float, stop: asyncio.Event | None, started: float = 0.0,
        singles: list[int] | None = None, batches: list[int] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        single, batched = await asyncio.gather(
            self.adds(self.args.reclaim_clients, 1, seconds, stop, singles, started),
            self.adds(self.args.reclaim_clients, PROBE_BATCH, seconds, stop, batches, started),
        )
        return {"single": single, "batched": batched}

    def used_bytes(self) -> int:
        """The file's bytes that hold data (its size less its free pages)."""
        return self.file_bytes() - self.free_pages_bytes()

    def file_over_payload(self, used_before: int, added_before: int) -> float:
        """The file's bytes per payload byte the baseline load added, in this run (the
        ratio is higher on a small file than on a large one), within the bounds."""
        added = self.written.probe_bytes - added_before
        if added < RATIO_MIN_ADDED:  # too little to measure beside the WAL's checkpoints
            return FILE_OVER_PAYLOAD
        low, high = FILE_OVER_PAYLOAD_BOUNDS
        return min(high, max(low, (self.used_bytes() - used_before) / added))

    async def reclaim_run(
        self, doomed: list[int], before: int, doomed_bytes: int, file_over_payload: float
    ) -> dict[str, Any]:
        assert self.zk is not None
        zk = self.zk
        started = time.monotonic()
        stop = asyncio.Event()
        singles: list[int] = []
        batches: list[int] = []
        load = asyncio.create_task(
            self.reclaim_load(self.args.reclaim_deadline_s, stop, started, singles, batches)
        )
        timeline: list[dict[str, float]] = []
        deleted = 0
        deletes_done_s: float | None = None
        purged_s: float | None = None

        async def deleter() -> None:
            nonlocal deleted, deletes_done_s
            http = Http(self.bookie.host, self.bookie.port)
            try:
                for lid in doomed:
                    await asyncio.to_thread(zk.delete, zkpaths.ledger(lid))
                    status, answer = await http.call("DELETE", f"/v1/ledgers/{lid}")
                    if status != 204:
                        raise SystemExit(f"DELETE {lid}: {status} {answer[:300]!r}")
                    deleted += 1
            finally:
                http.close()
            deletes_done_s = time.monotonic() - started

        probe_bytes_before = self.written.probe_bytes
        deletes = asyncio.create_task(deleter())
        deadline = started + self.args.reclaim_deadline_s
        smallest, smallest_at = before, 0.0
        settled_s = max(SETTLED_FLOOR_S, SETTLED_PROBES * self.args.probe_s)
        try:
            while time.monotonic() < deadline:
                await asyncio.sleep(RECLAIM_SAMPLE_S)
                now = time.monotonic() - started
                size = self.file_bytes()
                # Off the loop that drives the adds being measured (a SQLite read, an
                # HTTP GET of the metrics).
                free = await asyncio.to_thread(self.free_pages_bytes)
                added = self.written.probe_bytes - probe_bytes_before
                # What the data of the file uses, less what the adds meanwhile put in:
                # the deleted bytes are back once this fell by them (given back to the
                # file system, or free pages the adds reused or will reuse).
                held = size - free - added * file_over_payload
                purging = await asyncio.to_thread(self.purging_ledgers)
                if purged_s is None and deletes.done() and purging == 0:
                    purged_s = now
                timeline.append({"t_s": round(now, 1), "file_gb": round(size / GIB, 3),
                                 "free_gb": round(free / GIB, 3),
                                 "added_gb": round(added / GIB, 3),
                                 "held_gb": round(held / GIB, 3), "deleted": deleted,
                                 "purging": purging})  # fmt: skip
                if size < smallest - SETTLED_BYTES:
                    smallest, smallest_at = size, now
                # Settled: every delete answered, every deleted ledger's entries purged
                # (a background purge), and the file no longer shrinking.
                if purged_s is not None and now - max(smallest_at, purged_s) > settled_s:
                    break
                if deletes.done() and deletes.exception() is not None:
                    break
        finally:
            stop.set()
            figures = await load
            if not deletes.done():
                deletes.cancel()
        if deletes.done() and not deletes.cancelled() and deletes.exception() is not None:
            raise deletes.exception()  # type: ignore[misc]
        smallest = min(smallest, self.file_bytes())
        freed = before - smallest
        # When the file had given 90 % of what it gave back to the file system, and when
        # 90 % of the deleted bytes were no longer held by data (given back or free).
        back_90 = next(
            (p["t_s"] for p in timeline if before - p["file_gb"] * GIB >= 0.9 * freed), None
        )
        released_90 = next(
            (p["t_s"] for p in timeline if before - p["held_gb"] * GIB >= 0.9 * doomed_bytes),
            None,
        )
        for series, rows in (("single", singles), ("batched", batches)):
            for i, n in enumerate(rows):
                if i < len(timeline):
                    timeline[i][f"{series}_per_s"] = n
        return {
            "deletes_s": round(deletes_done_s, 1) if deletes_done_s is not None else None,
            "deleted_before_deadline": deleted,
            "purged_s": purged_s,
            "space_back_90_s": back_90,
            "released_90_s": released_90,
            "settled_s": round(smallest_at, 1),
            "file_gb_after": round(smallest / GIB, 3),
            "freed_gb": round(freed / GIB, 3),
            # The deleted bytes no longer held by data at the end: given back to the file
            # system, or free pages the adds meanwhile reused (the file grew less).
            "released_gb": round((before - timeline[-1]["held_gb"] * GIB) / GIB, 3)
            if timeline
            else 0.0,
            "during": figures,
            "timeline": timeline,
        }


def mb(value: int | None) -> float | None:
    return None if value is None else round(value / MIB, 1)


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "p50_ms": round(statistics.median(samples), 2),
        "p99_ms": round(percentile(samples, 0.99), 2),
        "max_ms": round(max(samples), 2),
    }


def check_disk(where: Path, target_bytes: int) -> dict[str, Any]:
    usage = shutil.disk_usage(where)
    needed = int(target_bytes * DISK_TARGET_FACTOR) + DISK_MARGIN_BYTES
    needed += int(usage.total * READONLY_FREE_RATIO)
    if usage.free < needed:
        raise SystemExit(
            f"scale.py bookie: {where} has {usage.free / GIB:.1f} GiB free; this run needs "
            f"{needed / GIB:.1f} GiB (the target, a margin and the bookie's read-only "
            f"threshold): refused"
        )
    return {"free_gb": round(usage.free / GIB, 1), "needed_gb": round(needed / GIB, 1)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.quick:
        args.target_gb, args.step_gb = min(args.target_gb, 1.0), min(args.step_gb, 0.25)
        args.probe_s = min(args.probe_s, 2.0)
    if args.step_gb <= 0 or args.target_gb <= 0 or args.step_gb > args.target_gb:
        raise SystemExit("scale.py bookie: need 0 < --step-gb <= --target-gb")
    if args.reclaim_clients < 1 or args.recent_mb < 1:
        raise SystemExit("scale.py bookie: need --reclaim-clients >= 1 and --recent-mb >= 1")
    target = int(args.target_gb * GIB)
    work = Path(tempfile.mkdtemp(prefix="quire-scale-bookie-"))
    started = time.monotonic()
    deadline = started + args.deadline_s
    rows: list[dict[str, Any]] = []
    reclaim: dict[str, Any] | None = None
    complete = False
    bench = BookieScale(work, args)
    try:
        disk = check_disk(work, target)
        bench.start()
        say(f"bookie at {bench.bookie.url}; empty: measuring")
        rows.append(bench.measure())
        say(json.dumps(rows[-1]))
        steps = max(1, round(args.target_gb / args.step_gb))
        for k in range(1, steps + 1):
            until = min(target, int(k * args.step_gb * GIB))
            bench.ensure_fill_metadata(until)
            t0 = time.monotonic()
            complete = run_loop(bench.fill(until, deadline))
            rate = (until - int((k - 1) * args.step_gb * GIB)) / MIB / (time.monotonic() - t0)
            say(f"filled to {bench.written.fill_bytes / GIB:.2f} GiB ({rate:.0f} MiB/s)")
            row = bench.measure()
            row["fill_mib_per_s"] = round(rate, 1)
            rows.append(row)
            say(json.dumps(row))
            if not complete:
                say(f"scale.py bookie: --deadline-s {args.deadline_s} reached; fill stopped")
                break
        if complete:
            reclaim = bench.reclaim()
            say(json.dumps({k: v for k, v in reclaim.items() if k != "timeline"}))
    finally:
        bench.stop()
        shutil.rmtree(work, ignore_errors=True)
    result: dict[str, Any] = {
        "part": "bookie",
        "quick": args.quick,
        "target_gb": args.target_gb,
        "step_gb": args.step_gb,
        "complete": complete,
        "shape": {
            "ledger_mib": LEDGER_BYTES // MIB,
            "entry_kinds": "1 ledger in 4 of 1 KiB entries, the others of 64 KiB",
            "fill_clients": FILL_CLIENTS,
            "fill_active_ledgers": FILL_ACTIVE_LEDGERS,
            "probe": f"{PROBE_CLIENTS} clients, 1 KiB entries, single or {PROBE_BATCH} a request",
            "probe_s": args.probe_s,
            "reclaim_clients": args.reclaim_clients,
            "read_samples": READ_SAMPLES,
            "recent_mib": args.recent_mb,
        },
        "disk": disk,
        "rows": rows,
        "reclaim": reclaim,
        "took_s": round(time.monotonic() - started, 1),
        "targets": {
            "add_ratio": ADD_RATIO_TARGET,
            "cold_read_p99_ms": COLD_READ_P99_TARGET_MS,
            "reclaim_s": RECLAIM_TARGET_S,
        },
        "machine": machine(),
    }
    result["against_targets"] = judge(rows, reclaim)
    if not args.quick or args.plot:
        plot_bookie(args.out, rows, reclaim)
    return result


def ratio(a: float, b: float) -> float:
    return round(a / max(1e-9, b), 3)


def judge(rows: list[dict[str, Any]], reclaim: dict[str, Any] | None) -> dict[str, Any]:
    empty, last = rows[0], rows[-1]
    out: dict[str, Any] = {
        f"{kind}_ratio": ratio(last[kind]["entries_per_s"], empty[kind]["entries_per_s"])
        for kind in ("single", "batched")
    }
    colds = [last[f"cold_{k}"]["p99_ms"] for k in ENTRY_KINDS if f"cold_{k}" in last]
    out["cold_read_p99_ms"] = max(colds) if colds else None
    if reclaim is not None:
        # The file given back (90 %), and the deleted bytes no longer held by data
        # (given back, or free pages the adds reused: the file grows less).
        out["space_back_90_s"] = reclaim["space_back_90_s"]
        out["released_90_s"] = reclaim.get("released_90_s")
        out["purged_s"] = reclaim.get("purged_s")
        timeline = reclaim["timeline"]
        windows = {
            "deletes": reclaim.get("deletes_s"),
            "purge": reclaim.get("purged_s") or reclaim.get("deletes_s"),
        }
        for kind in ("single", "batched"):
            base = reclaim["baseline"][kind]["entries_per_s"]
            during = reclaim["during"][kind]["entries_per_s"]
            out[f"reclaim_{kind}_ratio"] = ratio(during, base)
            series = [p.get(f"{kind}_per_s", 0) for p in timeline]
            out[f"reclaim_{kind}_min_per_s"] = min(series) if series else None
            # Mean of the per-second rates while the deletes were answered, and until
            # the purge ended, against the baseline.
            for name, end in windows.items():
                inside = [p.get(f"{kind}_per_s", 0) for p in timeline if end and p["t_s"] <= end]
                mean = sum(inside) / len(inside) if inside else 0.0
                out[f"reclaim_{kind}_{name}_ratio"] = ratio(mean, base) if inside else None
    return out


def plot_bookie(
    out: Path,
    rows: list[dict[str, Any]],
    reclaim: dict[str, Any] | None,
) -> None:
    xs = [float(r["fill_gb"]) for r in rows]
    empty = rows[0]
    adds = {
        f"{kind} (per s, 1 KiB entries)": (xs, [r[kind]["entries_per_s"] for r in rows])
        for kind in ("single", "batched")
    }
    plot(out / "bookie_adds.png", "Adds against the bookie's fill", "GiB filled",
         "entries/s", adds, logx=False, logy=True,
         targets={f"80 % of empty, {k}": ADD_RATIO_TARGET * empty[k]["entries_per_s"]
                  for k in ("single", "batched")})  # fmt: skip
    lat: dict[str, tuple[list[float], list[float]]] = {
        f"add p99, {kind}": (xs, [r[kind]["p99_ms"] for r in rows])
        for kind in ("single", "batched")
    }
    read_rows = [r for r in rows if "recent" in r]
    rx = [float(r["fill_gb"]) for r in read_rows]
    for key, label in (("cold_1k", "cold read p99, 1 KiB"), ("cold_64k", "cold read p99, 64 KiB"),
                       ("recent", "recent read p99")):  # fmt: skip
        pts = [(x, r[key]["p99_ms"]) for x, r in zip(rx, read_rows, strict=True) if key in r]
        if pts:
            lat[label] = ([p[0] for p in pts], [p[1] for p in pts])
    plot(out / "bookie_latency.png", "Latency against the bookie's fill", "GiB filled", "ms",
         lat, COLD_READ_P99_TARGET_MS, logx=False, logy=True)  # fmt: skip
    space = {
        "file (db + WAL)": (xs, [r["file_gb"] for r in rows]),
        "written payload": (xs, [r["written_gb"] for r in rows]),
        "live (GET /v1/storage)": (xs, [r["live_gb"] for r in rows]),
        "bookie RSS": (xs, [r["rss_mb"] / 1024 for r in rows]),
    }
    plot(out / "bookie_space.png", "File, payload and memory against the fill", "GiB filled",
         "GiB", space, logx=False)  # fmt: skip
    if reclaim is not None and reclaim["timeline"]:
        tl = reclaim["timeline"]
        ts = [float(p["t_s"]) for p in tl]
        space = {
            "file (db + WAL)": (ts, [p["file_gb"] for p in tl]),
            "ledgers deleted (thousands)": (ts, [p["deleted"] / 1000 for p in tl]),
        }
        if "held_gb" in tl[0]:
            space["free pages"] = (ts, [p["free_gb"] for p in tl])
            space["data held, less the adds meanwhile"] = (ts, [p["held_gb"] for p in tl])
        plot(out / "bookie_reclaim_file.png", "Deleting half the ledgers: the file",
             "s since the first delete", "GiB", space, logx=False)  # fmt: skip
        base = reclaim["baseline"]
        plot(out / "bookie_reclaim_adds.png", "Deleting half the ledgers: adds meanwhile",
             "s since the first delete", "entries/s",
             {f"{k}": (ts, [p.get(f"{k}_per_s", 0) for p in tl]) for k in ("single", "batched")},
             logx=False, logy=True,
             targets={f"80 % of before, {k}": ADD_RATIO_TARGET * base[k]["entries_per_s"]
                      for k in ("single", "batched")})  # fmt: skip
