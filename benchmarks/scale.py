"""Scale: how Quire's cost grows with its data, measured as curves (issue 42).

One subcommand per part of the issue; each starts its own cluster (ZooKeeper, bookies,
gateways, an auditor as the part needs) in a temporary directory, stops it by pid and
removes the directory at the end, is bounded in time and disk by its size flags, and
writes its result as JSON and one PNG per curve under ``benchmarks/scale/``
(``--out`` elsewhere). ``--quick`` runs a part in about a minute, for development; its
figures are not the ones in benchmarks/README.md.

- ``bookie``: one bookie filled to ``--target-gb`` (20) of 1 KiB and 64 KiB entries; at
  every ``--step-gb`` (2): adds, cold and recent reads, RSS, file against payload; then
  half its ledgers deleted under load (services/bench/scale_bookie.py).
- ``metadata``: ZooKeeper holding N CLOSED ledgers whose metadata is written straight
  into it (as benchmarks/rereplication.py does), N growing along a curve: a page of
  ``GET /v1/ledgers`` at the start, middle and end of the listing, one full audit,
  ZooKeeper's memory (RSS) and snapshot size, a gateway's and an auditor's start-up.
- ``open``: many open things on one gateway (services/bench/scale_open.py): idle open
  ledgers, then tailing readers and WebSocket streams; the gateway's memory, its CPU
  while idle and an active client's append latency beside them.
- ``longlog``: one log grown by real appends and rolls to 10,000 ledgers; at each size
  of the curve: a read from the start, the middle and the end, a read ``from_time``, a
  truncate of the first ledger and a hand-over (``POST .../writer`` on another gateway,
  until its first keyed append is answered: the idempotency window's rebuild included).

    .venv/bin/python benchmarks/scale.py longlog                 # 100 .. 10,000 ledgers
    .venv/bin/python benchmarks/scale.py longlog --quick         # 100, 300 ledgers
    .venv/bin/python benchmarks/scale.py metadata                # 10k, 100k, 1M ledgers
    .venv/bin/python benchmarks/scale.py metadata --quick        # 2k, 10k ledgers
    .venv/bin/python benchmarks/scale.py bookie                  # 20 GB, a point every 2 GB
    .venv/bin/python benchmarks/scale.py bookie --target-gb 1 --step-gb 0.25
    .venv/bin/python benchmarks/scale.py open          # 100k open ledgers; 10k readers, 5k streams
    .venv/bin/python benchmarks/scale.py open --quick            # 2k, 200, 100
    .venv/bin/python benchmarks/scale.py open --phases ledgers   # the open ledgers alone

The last stdout line is the part's result as JSON (also written to
``OUT/<part>.json``); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.limits import DEDUP_CLOCK_SKEW_MS  # noqa: E402
from services.bench import (
    scale_bookie,  # noqa: E402
    scale_open,  # noqa: E402
)
from services.bench.measure import Sampler  # noqa: E402
from services.bench.metadata import (  # noqa: E402
    CREATE_TIMEOUT_S,
    FIRST_WRITTEN_ID,
    write_closed_ledgers,
)
from services.bench.scale_common import (  # noqa: E402
    SECRET,
    START_DEADLINE_S,
    ZK_ROOT,
    Cluster,
    machine,
    percentile,
    plot,
    process_cpu_s,
    say,
    write_result,
)
from services.cluster.processes import (  # noqa: E402
    ServiceProcess,
    ZooKeeperProcess,
)
from services.zk import paths as zkpaths  # noqa: E402

OUT_DIR = Path(__file__).resolve().parent / "scale"
HTTP_TIMEOUT_S = 120.0

# Targets of issue 42 on this machine.
READ_START_TARGET_MS = 100.0
HANDOVER_TARGET_MS = 1000.0
PAGE_TARGET_MS = 50.0
AUDIT_TARGET_S = 300.0
START_TARGET_S = 30.0


def timed(call: Callable[[], httpx.Response]) -> tuple[float, httpx.Response]:
    """(milliseconds, the answer) of one request; a refused request ends the run."""
    started = time.perf_counter()
    answer = call()
    ms = (time.perf_counter() - started) * 1000
    if answer.status_code >= 400:
        raise SystemExit(f"{answer.request.method} {answer.request.url}: {answer.status_code} "
                         f"{answer.text[:300]}")  # fmt: skip
    return ms, answer


# -- part 4: long logs ------------------------------------------------------------------


class LongLog:
    """One log grown to ``sizes[-1]`` ledgers by real keyed appends and rolls through
    gateway A, measured at each size of ``sizes`` through gateway C (which never writes
    it); hand-overs go A → B → A."""

    def __init__(self, cluster: Cluster, args: argparse.Namespace) -> None:
        self.cluster = cluster
        self.args = args
        self.name = "long"
        self.http: dict[str, httpx.Client] = {}
        self.keys = 0
        self.ledgers: list[int] = []
        self.last_position = ""
        self.rolled_at: list[float] = []  # when each roll of the build was answered
        self.appended_at = 0.0  # when the last keyed append was sent

    def start(self) -> None:
        self.cluster.start_zookeeper()
        self.cluster.start_bookies(3)
        # A, B and C remember keys for --window-s (short: the log's ledgers are older
        # than the window, as in a log that grew over months); D for --dense-window-s
        # (the default 2 minutes, which here holds every ledger rolled in that time).
        windows = {"a": self.args.window_s, "b": self.args.window_s, "c": self.args.window_s,
                   "d": self.args.dense_window_s}  # fmt: skip
        gateways = {
            name: self.cluster.service(
                "gateway", ["--idempotency-window-s", str(window)], f"gateway-{name}"
            )
            for name, window in windows.items()
        }
        for name, proc in gateways.items():
            proc.wait_healthy(START_DEADLINE_S)
            self.http[name] = httpx.Client(base_url=proc.url, timeout=HTTP_TIMEOUT_S)
        self.gateways = gateways

    def close(self) -> None:
        for client in self.http.values():
            client.close()

    def append(self, via: str) -> httpx.Response:
        """One keyed batch of ``--records`` records (the builder's unit)."""
        self.keys += 1
        self.appended_at = time.monotonic()
        payload = base64.b64encode(os.urandom(self.args.record_bytes)).decode()
        return self.http[via].post(
            f"/v1/logs/{self.name}/records",
            json={"entries": [payload] * self.args.records},
            headers={"Idempotency-Key": f"k{self.keys}"},
        )

    def log(self) -> dict[str, Any]:
        answer = self.http["c"].get(f"/v1/logs/{self.name}")
        answer.raise_for_status()
        return dict(answer.json())

    def grow(self, ledgers: int) -> float:
        """Append and roll through A until the log lists ``ledgers``; the seconds taken."""
        started = time.monotonic()
        count = len(self.log()["ledgers"])
        last_say = started
        while count < ledgers:
            answer = self.append("a")
            if answer.status_code != 200:
                raise SystemExit(f"append: {answer.status_code} {answer.text[:300]}")
            self.last_position = position(answer.json()["last_position"])
            roll = self.http["a"].post(f"/v1/logs/{self.name}/roll")
            if roll.status_code != 200:
                raise SystemExit(f"roll: {roll.status_code} {roll.text[:300]}")
            count += 1
            self.rolled_at.append(time.monotonic())
            if time.monotonic() - last_say > 10:
                last_say = time.monotonic()
                rate = count / (last_say - started)
                say(f"  {count}/{ledgers} ledgers ({rate:.0f}/s overall)")
        # The last ledger (open, the writer's) holds records too: the end of the log.
        answer = self.append("a")
        answer.raise_for_status()
        self.last_position = position(answer.json()["last_position"])
        # C reads an open ledger up to the LAC the bookies report, which trails the
        # writer by a moment: wait (long polls) until C sees the last record, so that
        # the reads measured start from a settled log.
        deadline = time.monotonic() + 30
        while not self.read(**{"from": self.last_position, "wait_ms": 1000})[1]["records"]:
            if time.monotonic() > deadline:
                raise SystemExit(f"gateway C never saw the record at {self.last_position}")
        return time.monotonic() - started

    def read(self, **params: Any) -> tuple[float, dict[str, Any]]:
        ms, answer = timed(lambda: self.http["c"].get(
            f"/v1/logs/{self.name}/records", params={"limit": self.args.read_limit, **params}
        ))  # fmt: skip
        return ms, dict(answer.json())

    def read_case(self, **params: Any) -> dict[str, Any]:
        """The first read (through C, after the log changed) and ``--repeats`` more."""
        first, doc = self.read(**params)
        if not doc["records"]:
            raise SystemExit(f"read {params}: no record")
        samples = [self.read(**params)[0] for _ in range(self.args.repeats)]
        return {
            "first_ms": round(first, 2),
            "median_ms": round(statistics.median(samples), 2),
            "p99_ms": round(percentile(samples, 0.99), 2),
            "first_position": position(doc["records"][0]["position"]),
        }

    def measure(self) -> dict[str, Any]:
        self.ledgers = self.log()["ledgers"]
        n = len(self.ledgers)
        middle = self.ledgers[n // 2]
        row: dict[str, Any] = {"ledgers": n}
        row["start"] = self.read_case()
        row["middle"] = self.read_case(**{"from": f"{middle}:0"})
        row["end"] = self.read_case(**{"from": self.last_position})
        if row["end"]["first_position"] != self.last_position:
            raise SystemExit(f"read from the end began at {row['end']['first_position']}")
        # from_time: the stamp of the middle ledger's first record; the search must land
        # on that record or an earlier one with the same stamp.
        _, doc = self.read(**{"from": f"{middle}:0"})
        stamp = doc["records"][0]["time"]
        # The first search from a time on C reads the stamps of the ledgers it probes;
        # C keeps a closed ledger's, so the searches after it read inside one ledger.
        searched = self.search_reads()
        cold_ms, _ = self.read(from_time=stamp)
        cold_reads = self.search_reads() - searched
        row["from_time"] = self.read_case(from_time=stamp)
        row["from_time"]["cold_ms"] = round(cold_ms, 2)
        row["from_time"]["cold_search_reads"] = cold_reads
        found = row["from_time"]["first_position"]
        _, check = self.read(**{"from": found})
        if check["records"][0]["time"] != stamp:
            raise SystemExit(f"from_time={stamp} began at {found}, stamped otherwise")
        # Truncate: the first ledger goes (a CAS of the list without it, then its delete).
        ms, _ = timed(lambda: self.http["c"].post(
            f"/v1/logs/{self.name}/truncate", params={"before": f"{self.ledgers[1]}:0"}
        ))  # fmt: skip
        left = self.log()["ledgers"]
        if left[0] != self.ledgers[1]:
            raise SystemExit(f"truncate left {left[:3]}")
        row["truncate_ms"] = round(ms, 2)
        # D's window holds every ledger rolled in its last --dense-window-s. Where its
        # time goes: the bookies' read requests and their time in the store meanwhile,
        # and D's CPU time.
        since = time.monotonic() - self.args.dense_window_s - DEDUP_CLOCK_SKEW_MS / 1000
        in_window = sum(1 for t in self.rolled_at if t >= since)
        reads_before = self.bookie_reads()
        cpu_before = self.cpu_s("d")
        handover = self.handover("d")
        cpu_s = self.cpu_s("d") - cpu_before
        requests, store_s = (a - b for a, b in zip(self.bookie_reads(), reads_before, strict=True))
        row["handover_dense"] = {
            **handover,
            "ledgers_in_window": in_window,
            "bookie_read_requests": int(requests),
            "bookie_store_read_ms": round(store_s * 1000, 1),
            "gateway_cpu_ms": round(cpu_s * 1000, 1),
        }
        self.handover("a")
        # An aged log: every append older than B's window (and the clock skew the
        # rebuild allows), so its walk ends in the log's last ledgers. Waiting here ages
        # the data; it synchronises nothing.
        aged_at = self.appended_at + self.args.window_s + DEDUP_CLOCK_SKEW_MS / 1000 + 0.5
        time.sleep(max(0.0, aged_at - time.monotonic()))
        row["handover"] = [self.handover("b"), self.handover("a")]
        return row

    def search_reads(self) -> int:
        """The entries C read so far to find where a read from a time starts."""
        lines = self.http["c"].get("/metrics").text.splitlines()
        name = "quire_gateway_log_time_search_reads_total"
        return int(sum(float(line.split()[-1]) for line in lines if line.startswith(name)))

    def znode_bytes(self) -> int:
        """The size of the log's znode: every roll, hand-over and truncate rewrites it
        whole (ZooKeeper refuses a znode over jute.maxbuffer, 1 MiB by default)."""
        client = KazooClient(hosts=f"{self.cluster.zk.connect_string}{ZK_ROOT}")
        client.start(30)
        try:
            stat = client.exists(zkpaths.log(self.name))
            return int(stat.dataLength) if stat is not None else 0
        finally:
            client.stop()
            client.close()

    def bookie_reads(self) -> tuple[float, float]:
        """The bookies' read requests so far and the seconds they spent in the store."""
        requests = seconds = 0.0
        for bookie in self.cluster.bookies:
            for line in httpx.get(f"{bookie.url}/metrics", timeout=30.0).text.splitlines():
                if line.startswith("quire_bookie_read_requests_total "):
                    requests += float(line.split()[1])
                elif line.startswith("quire_bookie_read_seconds_sum "):
                    seconds += float(line.split()[1])
        return requests, seconds

    def cpu_s(self, gateway: str) -> float:
        pid = self.gateways[gateway].pid
        assert pid is not None
        return process_cpu_s(pid)

    def handover(self, to: str) -> dict[str, float]:
        """``POST .../writer`` on ``to``, then a keyed append through it: answered once
        the new writer rebuilt its idempotency window from the log's tail."""
        started = time.perf_counter()
        writer_ms, _ = timed(lambda: self.http[to].post(f"/v1/logs/{self.name}/writer"))
        answer = self.append(to)
        total_ms = (time.perf_counter() - started) * 1000
        answer.raise_for_status()
        self.last_position = position(answer.json()["last_position"])
        return {"writer_ms": round(writer_ms, 2), "to_keyed_append_ms": round(total_ms, 2)}


def longlog(args: argparse.Namespace) -> dict[str, Any]:
    sizes = args.sizes or ([100, 300] if args.quick else [100, 300, 1000, 3000, 10000])
    work = Path(tempfile.mkdtemp(prefix="quire-scale-longlog-"))
    cluster = Cluster(work)
    bench = LongLog(cluster, args)
    rows: list[dict[str, Any]] = []
    try:
        bench.start()
        bench.http["a"].put(f"/v1/logs/{bench.name}").raise_for_status()
        for size in sizes:
            grow_s = bench.grow(size)
            say(f"{size} ledgers (grown in {grow_s:.1f} s); measuring")
            row = bench.measure()
            row["grow_s"] = round(grow_s, 1)
            row["zk_data_mb"] = round(dir_bytes(work / "zk") / 1e6, 1)
            row["log_znode_bytes"] = bench.znode_bytes()
            say(json.dumps(row))
            rows.append(row)
    finally:
        bench.close()
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "part": "longlog",
        "quick": args.quick,
        "records_per_ledger": args.records,
        "record_bytes": args.record_bytes,
        "idempotency_window_s": args.window_s,
        "dense_idempotency_window_s": args.dense_window_s,
        "repeats": args.repeats,
        "read_limit": args.read_limit,
        "rows": rows,
        "targets": {"read_start_ms": READ_START_TARGET_MS, "handover_ms": HANDOVER_TARGET_MS},
        "machine": machine(),
    }
    if not args.quick or args.plot:
        plot_longlog(args.out, rows, args)
    return result


def position(doc: dict[str, int]) -> str:
    """A JSON position as a URL's ``LID:EID``."""
    return f"{doc['ledger_id']}:{doc['entry_id']}"


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def plot_longlog(out: Path, rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """One PNG per curve; ``--dense-only``: the dense hand-over's alone, with the one of
    the ``--before`` JSON beside it."""

    def dense_curve(of: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
        return (
            [float(r["handover_dense"]["ledgers_in_window"]) for r in of],
            [r["handover_dense"]["to_keyed_append_ms"] for r in of],
        )

    dense = {"to first keyed append": dense_curve(rows)}
    if args.before is not None:
        dense = {
            "before: every ledger read": dense_curve(json.loads(args.before.read_text())["rows"]),
            "saved keys": dense_curve(rows),
        }
    plot(out / "longlog_rebuild.png",
         "Long log: hand-over with the 2-minute idempotency window full of ledgers",
         "ledgers rolled within the window", "ms", dense, HANDOVER_TARGET_MS)  # fmt: skip
    if args.dense_only:
        return
    xs = [float(r["ledgers"]) for r in rows]
    reads = {
        f"{case} ({kind})": (xs, [r[case][f"{kind}_ms"] for r in rows])
        for case in ("start", "middle", "end", "from_time")
        for kind in ("first", "median")
    }
    reads["from_time (cold)"] = (xs, [r["from_time"]["cold_ms"] for r in rows])
    plot(out / "longlog_reads.png", "Long log: a read's latency against the log's ledgers",
         "ledgers in the log", "ms", reads, READ_START_TARGET_MS)  # fmt: skip
    handover = {
        "POST writer": (xs, [max(h["writer_ms"] for h in r["handover"]) for r in rows]),
        "to first keyed append": (
            xs,
            [max(h["to_keyed_append_ms"] for h in r["handover"]) for r in rows],
        ),
        "truncate (one ledger)": (xs, [r["truncate_ms"] for r in rows]),
    }
    plot(out / "longlog_handover.png", "Long log: hand-over and truncate (slowest of two)",
         "ledgers in the log", "ms", handover, HANDOVER_TARGET_MS)  # fmt: skip


# -- part 2: metadata at a million ledgers ------------------------------------------------


def zk_monitor(zk: ZooKeeperProcess) -> dict[str, str]:
    """ZooKeeper's ``mntr`` four-letter command, as key -> value."""
    with socket.create_connection((zk.host, zk.port), timeout=10.0) as conn:
        conn.sendall(b"mntr")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    pairs = (line.split("\t", 1) for line in data.decode().splitlines() if "\t" in line)
    return dict(pairs)


def newest_snapshot(zk: ZooKeeperProcess) -> Path | None:
    snapshots = sorted((zk.data_dir / "version-2").glob("snapshot.*"),
                       key=lambda p: int(p.name.split(".")[1], 16))  # fmt: skip
    return snapshots[-1] if snapshots else None


# ZooKeeper snapshots after between half of snapCount and snapCount transactions; the
# metadata part's creates go in multis (one transaction each), so it sets snapCount
# low and makes this many small writes to have a snapshot of what it wrote.
ZK_SNAP_COUNT = 1000
SNAPSHOT_DEADLINE_S = 300.0


def force_snapshot(zk: ZooKeeperProcess, client: KazooClient) -> int:
    """A snapshot of ZooKeeper's data as it is now: ``ZK_SNAP_COUNT`` writes of a
    scratch znode, then the new snapshot file's size once it stopped growing."""
    before = newest_snapshot(zk)
    scratch = "/scale-snapshot"
    client.ensure_path(scratch)
    for result in [client.set_async(scratch, b"x") for _ in range(ZK_SNAP_COUNT)]:
        result.get(CREATE_TIMEOUT_S)
    deadline = time.monotonic() + SNAPSHOT_DEADLINE_S
    size = -1
    while time.monotonic() < deadline:
        newest = newest_snapshot(zk)
        if newest is not None and newest != before:
            now = newest.stat().st_size
            if now == size and now > 0:
                return now
            size = now
        time.sleep(0.5)
    raise SystemExit(f"no new ZooKeeper snapshot within {SNAPSHOT_DEADLINE_S} s")


class Metadata:
    """ZooKeeper holding N written CLOSED ledgers, with a gateway and an auditor."""

    def __init__(self, cluster: Cluster, args: argparse.Namespace) -> None:
        self.cluster = cluster
        self.args = args
        self.written = 0
        self.auditor: ServiceProcess | None = None
        self.secret = {"X-Cluster-Secret": SECRET}

    def start(self) -> None:
        self.cluster.start_zookeeper()
        self.cluster.start_bookies(3)
        self.gateway = self.cluster.service("gateway", [], "gateway")
        self.gateway.wait_healthy(START_DEADLINE_S)
        self.http = httpx.Client(base_url=self.gateway.url, timeout=HTTP_TIMEOUT_S)
        self.zk = KazooClient(hosts=f"{self.cluster.zk.connect_string}{ZK_ROOT}")
        self.zk.start(30)
        self.bookie_ids = sorted(self.zk.get_children(zkpaths.BOOKIES))

    def close(self) -> None:
        self.http.close()
        self.zk.stop()
        self.zk.close()

    def grow(self, ledgers: int) -> float:
        started = time.monotonic()
        write_closed_ledgers(
            self.zk, FIRST_WRITTEN_ID + self.written, ledgers - self.written, self.bookie_ids
        )
        self.written = ledgers
        return time.monotonic() - started

    def page(self, after: int | None) -> dict[str, Any]:
        """A page of 1,000 ids after ``after``: the first, then ``--repeats`` more."""
        params = {"limit": 1000} if after is None else {"limit": 1000, "after": after}

        def one() -> float:
            ms, answer = timed(lambda: self.http.get("/v1/ledgers", params=params))
            if len(answer.json()["ledgers"]) == 0:
                raise SystemExit(f"GET /v1/ledgers {params}: an empty page")
            return ms

        first = one()
        samples = [one() for _ in range(self.args.repeats)]
        return {
            "first_ms": round(first, 2),
            "median_ms": round(statistics.median(samples), 2),
            "p99_ms": round(percentile(samples, 0.99), 2),
        }

    def start_auditor(self) -> float:
        """A new auditor (the old one stopped first): seconds until it is healthy and
        elected."""
        if self.auditor is not None:
            self.cluster.stop_service(self.auditor)
        started = time.monotonic()
        self.auditor = self.cluster.service(
            "auditor", ["--audit-interval", "86400"], "auditor"
        )  # fmt: skip
        self.auditor.wait_healthy(START_DEADLINE_S)
        deadline = started + START_DEADLINE_S
        while not self.auditor_status().get("elected"):
            if time.monotonic() > deadline:
                raise SystemExit(f"the auditor was not elected within {START_DEADLINE_S} s")
            time.sleep(0.05)
        return time.monotonic() - started

    def auditor_status(self) -> dict[str, Any]:
        assert self.auditor is not None
        answer = httpx.get(f"{self.auditor.url}/v1/status", headers=self.secret, timeout=30.0)
        answer.raise_for_status()
        return dict(answer.json())

    def audit(self) -> dict[str, Any]:
        """A full audit asked for now: its report, and the auditor's peak RSS meanwhile."""
        assert self.auditor is not None and self.auditor.pid is not None
        asked_ms = int(time.time() * 1000)
        started = time.monotonic()
        sampler = Sampler(self.auditor.pid)
        sampler.start()
        zk_pid = self.cluster.zk.pid
        assert zk_pid is not None
        cpu_before = sampler.cpu_s(), process_cpu_s(zk_pid)
        answer = httpx.post(f"{self.auditor.url}/v1/audit", headers=self.secret, timeout=30.0)
        answer.raise_for_status()
        try:
            while True:
                if time.monotonic() - started > self.args.audit_deadline_s:
                    raise SystemExit(f"no audit within {self.args.audit_deadline_s} s")
                status = self.auditor_status()
                last = status.get("last_audit") or {}
                if (last.get("kind") == "full" and last.get("started_at", 0) >= asked_ms - 1000
                        and not status.get("audit_running")):  # fmt: skip
                    break
                time.sleep(0.2)
        finally:
            sampler.stop()
        # Where the audit's time goes: the auditor's CPU and ZooKeeper's meanwhile.
        auditor_cpu_s = sampler.cpu_s() - cpu_before[0]
        zk_cpu_s = process_cpu_s(zk_pid) - cpu_before[1]
        return {
            "duration_s": last["duration_s"],
            "ledgers": last["ledgers"],
            "complete": last["complete"],
            "auditor_rss_mb_max": round(sampler.rss_max / 2**20, 1),
            "auditor_cpu_s": round(auditor_cpu_s, 1),
            "zk_cpu_s": round(zk_cpu_s, 1),
        }

    def start_gateway(self) -> float:
        """A second gateway: seconds until healthy (then stopped)."""
        started = time.monotonic()
        proc = self.cluster.service("gateway", [], "gateway-start")
        try:
            proc.wait_healthy(START_DEADLINE_S)
            return time.monotonic() - started
        finally:
            self.cluster.stop_service(proc)

    def measure(self) -> dict[str, Any]:
        n = self.written
        row: dict[str, Any] = {"ledgers": n}
        row["page_first"] = self.page(None)
        row["page_middle"] = self.page(FIRST_WRITTEN_ID + n // 2)
        row["page_last"] = self.page(FIRST_WRITTEN_ID + n - 500)
        zk_pid = self.cluster.zk.pid
        assert zk_pid is not None
        monitor = zk_monitor(self.cluster.zk)
        row["zk_rss_mb"] = round(psutil.Process(zk_pid).memory_info().rss / 2**20, 1)
        row["zk_znodes"] = int(monitor.get("zk_znode_count", 0))
        row["zk_approximate_data_mb"] = round(
            int(monitor.get("zk_approximate_data_size", 0)) / 2**20, 1
        )
        row["zk_snapshot_mb"] = round(force_snapshot(self.cluster.zk, self.zk) / 2**20, 1)
        row["auditor_start_s"] = round(self.start_auditor(), 2)
        row["audit"] = self.audit()
        if row["audit"]["ledgers"] < n:
            raise SystemExit(f"the audit checked {row['audit']['ledgers']} of {n} ledgers")
        row["gateway_start_s"] = round(self.start_gateway(), 2)
        return row


def metadata(args: argparse.Namespace) -> dict[str, Any]:
    sizes = args.sizes or ([2_000, 10_000] if args.quick else [10_000, 100_000, 1_000_000])
    work = Path(tempfile.mkdtemp(prefix="quire-scale-metadata-"))
    cluster = Cluster(work, zk_heap_mb=args.zk_heap_mb, zk_snap_count=ZK_SNAP_COUNT)
    bench = Metadata(cluster, args)
    rows: list[dict[str, Any]] = []
    try:
        bench.start()
        for size in sizes:
            grow_s = bench.grow(size)
            say(f"{size} ledgers' metadata (written in {grow_s:.1f} s); measuring")
            row = bench.measure()
            row["write_s"] = round(grow_s, 1)
            say(json.dumps(row))
            rows.append(row)
    finally:
        bench.close()
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "part": "metadata",
        "quick": args.quick,
        "zk_heap_mb": args.zk_heap_mb,
        "repeats": args.repeats,
        "rows": rows,
        "targets": {
            "page_ms": PAGE_TARGET_MS,
            "audit_s": AUDIT_TARGET_S,
            "start_s": START_TARGET_S,
        },  # fmt: skip
        "machine": machine(),
    }
    if not args.quick or args.plot:
        plot_metadata(args.out, rows)
    return result


def plot_metadata(out: Path, rows: list[dict[str, Any]]) -> None:
    xs = [float(r["ledgers"]) for r in rows]
    pages = {
        f"{where} page ({kind})": (xs, [r[f"page_{where}"][f"{kind}_ms"] for r in rows])
        for where in ("first", "middle", "last")
        for kind in ("median", "p99")
    }
    plot(out / "metadata_pages.png", "GET /v1/ledgers?limit=1000 against the ledgers",
         "ledgers in ZooKeeper", "ms", pages, PAGE_TARGET_MS)  # fmt: skip
    times = {
        "full audit": (xs, [r["audit"]["duration_s"] for r in rows]),
        "auditor start (elected)": (xs, [r["auditor_start_s"] for r in rows]),
        "gateway start": (xs, [r["gateway_start_s"] for r in rows]),
    }
    plot(out / "metadata_times.png", "A full audit and start-ups against the ledgers",
         "ledgers in ZooKeeper", "s", times, logy=True,
         targets={"audit target": AUDIT_TARGET_S, "start target": START_TARGET_S})  # fmt: skip
    memory = {
        "ZooKeeper RSS": (xs, [r["zk_rss_mb"] for r in rows]),
        "ZooKeeper snapshot": (xs, [r["zk_snapshot_mb"] for r in rows]),
        "auditor RSS (peak in audit)": (xs, [r["audit"]["auditor_rss_mb_max"] for r in rows]),
    }
    plot(out / "metadata_memory.png", "Memory and snapshot against the ledgers",
         "ledgers in ZooKeeper", "MiB", memory)  # fmt: skip


# -- the command ------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parts = parser.add_subparsers(dest="part", required=True)

    def part(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = parts.add_parser(name, help=help_text)
        sub.add_argument("--quick", action="store_true", help="about a minute, for development")
        sub.add_argument("--out", type=Path, default=OUT_DIR, help="JSON and PNGs go here")
        sub.add_argument("--plot", action="store_true", help="plot a --quick run too")
        return sub

    sub = part("bookie", "one bookie filled to 20 GB: adds, reads, space; then half deleted")
    scale_bookie.add_arguments(sub)
    sub = part("open", "100,000 idle open ledgers; 10,000 tailing readers, 5,000 streams")
    scale_open.add_arguments(sub)
    sub = part("longlog", "a log of 10,000 ledgers: reads, from_time, truncate, hand-over")
    sub.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                     help="ledger counts of the curve, ascending")  # fmt: skip
    sub.add_argument("--records", type=int, default=10, help="records per ledger")
    sub.add_argument("--record-bytes", type=int, default=100)
    sub.add_argument("--repeats", type=int, default=20, help="reads per case after the first")
    sub.add_argument("--read-limit", type=int, default=100, help="records per read")
    sub.add_argument("--window-s", type=float, default=2.0,
                     help="--idempotency-window-s of gateways A, B, C")  # fmt: skip
    sub.add_argument("--dense-window-s", type=float, default=120.0,
                     help="--idempotency-window-s of gateway D")  # fmt: skip
    sub.add_argument("--replot", type=Path,
                     help="no run: plot the longlog JSON of an earlier run")  # fmt: skip
    sub.add_argument("--before", type=Path,
                     help="a longlog JSON: its dense hand-over drawn beside")  # fmt: skip
    sub.add_argument("--dense-only", action="store_true",
                     help="write only the dense hand-over plot (longlog_rebuild.png)")  # fmt: skip
    sub = part("metadata", "ZooKeeper with up to a million ledgers: pages, audit, start-ups")
    sub.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                     help="ledger counts of the curve, ascending")  # fmt: skip
    sub.add_argument("--repeats", type=int, default=20, help="pages per case after the first")
    sub.add_argument("--zk-heap-mb", type=int, default=2048, help="ZooKeeper's JVM heap")
    sub.add_argument("--audit-deadline-s", type=float, default=900.0)
    args = parser.parse_args()
    # SIGTERM (and SIGINT, which a background job ignores) ends the run through its
    # ``finally``: the cluster is stopped and its directory removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if args.part == "longlog" and args.replot is not None:
        plot_longlog(args.out, json.loads(args.replot.read_text())["rows"], args)
        return
    if args.part == "open":
        scale_open.resolve(args)
    runs = {
        "longlog": longlog,
        "metadata": metadata,
        "bookie": scale_bookie.run,
        "open": scale_open.run,
    }
    result = runs[args.part](args)
    if not args.quick or args.plot:
        write_result(args.out, args.part, result)
    else:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
