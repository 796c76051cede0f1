"""Retention: what it costs appends, and the disk space it gives back.

Starts its own ZooKeeper, three bookies, a gateway and an auditor (a retention pass
every second) in a temporary directory, then, in one sitting:

1. Appends with retention active against without: rounds that take in turn a log with no
   policy (``plain``), a log whose ``max_bytes`` the load passes many times over
   (``kept``: the auditor removes and deletes ledgers all through the round, and the
   writer rolls at a quarter of the limit), and a log without a policy on a second
   gateway that rolls as often (``rolled``: the rolls' share of the cost, without
   retention); ``--clients`` threads append batches of ``--batch`` records of ``--size``
   bytes for ``--seconds`` per round. Reported: records/s of each round, the medians
   and their ratios; the ledgers retention removed meanwhile.
2. Disk space given back: a log without a policy takes ``--fill-mib`` MiB; the bookies'
   storage (``GET /v1/storage``: the database file and its free pages; what the data
   uses is the difference) is read; a policy keeping 100 records is set and a retention
   pass run; the storage is read again, and once more after each bookie's garbage
   collection pass (which vacuums the freed pages back to the file system).

    .venv/bin/python benchmarks/retention.py                  # 6 rounds of 10 s
    .venv/bin/python benchmarks/retention.py --rounds 2 --seconds 3 --fill-mib 8 --max-bytes 4194304
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.bench.measure import cpu_model  # noqa: E402
from services.cluster.processes import (  # noqa: E402
    ServiceProcess,
    ZooKeeperProcess,
    free_port,
    stop_processes,
)


class Cluster:
    def __init__(self, work: Path, roll_bytes: int) -> None:
        self.work = work
        self.roll_bytes = roll_bytes
        self.procs: list[ServiceProcess | ZooKeeperProcess] = []
        self.zk = ZooKeeperProcess(work / "zk", free_port())
        self.bookies: list[ServiceProcess] = []

    def service(self, module: str, args: list[str], name: str) -> ServiceProcess:
        common = ["--zk", self.zk.connect_string, "--zk-root", "/retention-bench"]
        proc = ServiceProcess(
            module, [*common, *args], "127.0.0.1", free_port(), self.work / f"{name}.log",
            name=name,
        )  # fmt: skip
        self.procs.append(proc)
        proc.start()
        return proc

    def start(self) -> None:
        self.procs.append(self.zk)
        self.zk.start()
        self.zk.wait_ready()
        self.bookies = [
            self.service("bookie", ["--data-dir", str(self.work / f"bookie-{i}")], f"bookie-{i}")
            for i in range(3)
        ]
        self.gateway = self.service("gateway", [], "gateway")
        # The same rolls without retention: a gateway rolling every quarter of the limit.
        self.rolling = self.service(
            "gateway", ["--log-roll-bytes", str(self.roll_bytes)], "gateway-rolling"
        )
        self.auditor = self.service(
            "auditor", ["--retention-interval", "1", "--audit-interval", "3600"], "auditor"
        )
        for proc in [*self.bookies, self.gateway, self.rolling, self.auditor]:
            proc.wait_healthy(60.0)

    def stop(self) -> None:
        stop_processes(self.procs, 5.0)


def append_round(url: str, name: str, clients: int, batch: int, size: int, seconds: float) -> float:
    """Records/s appended to ``name`` by ``clients`` threads for ``seconds``."""
    counts = [0] * clients
    body = {"entries": [base64.b64encode(b"r" * size).decode()] * batch}
    end = time.monotonic() + seconds
    errors: list[str] = []

    def run(index: int) -> None:
        with httpx.Client(base_url=url, timeout=60.0) as http:
            while time.monotonic() < end:
                r = http.post(f"/v1/logs/{name}/records", json=body)
                if r.status_code != 200:
                    errors.append(r.text)
                    return
                counts[index] += batch

    started = time.monotonic()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"append failed: {errors[0]}")
    return sum(counts) / (time.monotonic() - started)


def removed_ledgers(auditor: httpx.Client, log: str) -> int:
    """The ledgers retention removed from ``log`` so far (the auditor's counter)."""
    prefix = f'quire_auditor_retention_removed_ledgers_total{{log="{log}",'
    text = auditor.get("/metrics").text
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(prefix)))  # fmt: skip


def storage(cluster: Cluster) -> dict[str, int]:
    """The bookies' storage summed: file bytes, free pages, what the data uses."""
    total = {"file_bytes": 0, "free_pages_bytes": 0, "live_bytes": 0}
    for bookie in cluster.bookies:
        doc = httpx.get(f"{bookie.url}/v1/storage", timeout=30.0).json()
        total["file_bytes"] += doc["file_bytes"]
        total["free_pages_bytes"] += doc["free_pages_bytes"]
        total["live_bytes"] += doc["live"]["bytes"]
    total["used_bytes"] = total["file_bytes"] - total["free_pages_bytes"]
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="rounds of each kind")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument(
        "--max-bytes", type=int, default=16 << 20, help="the retained log's limit (rolls at 1/4)"
    )
    parser.add_argument("--fill-mib", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="quire-retention-") as tmp:
        cluster = Cluster(Path(tmp), args.max_bytes // 4)
        try:
            cluster.start()
            summary = run(cluster, args)
        finally:
            cluster.stop()
    print(json.dumps(summary), flush=True)


def run(cluster: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    url = cluster.gateway.url
    http = httpx.Client(base_url=url, timeout=60.0)
    auditor = httpx.Client(base_url=cluster.auditor.url, timeout=120.0)
    # 1. Appends with and without retention, alternated.
    rates: dict[str, list[float]] = {"plain": [], "rolled": [], "kept": []}
    removed = 0
    kinds = list(rates)
    for i in range(args.rounds):
        for kind in kinds[i % 3 :] + kinds[: i % 3]:  # each kind first in turn
            name = f"{kind}-{i}"
            body = {"retention": {"max_bytes": args.max_bytes}} if kind == "kept" else {}
            http.put(f"/v1/logs/{name}", json=body).raise_for_status()
            where = cluster.rolling.url if kind == "rolled" else url
            rate = append_round(where, name, args.clients, args.batch, args.size, args.seconds)
            rates[kind].append(rate)
            during = 0
            if kind == "kept":
                # What the passes removed while the round ran (its series goes with the log).
                during = removed_ledgers(auditor, name)
                removed += during
            print(
                json.dumps({"round": i, "log": kind, "records_per_s": round(rate),
                            "ledgers_removed": during}),
                flush=True,
            )  # fmt: skip
            http.delete(f"/v1/logs/{name}").raise_for_status()
    # 2. Space given back.
    name = "fill"
    http.put(f"/v1/logs/{name}").raise_for_status()
    payload = base64.b64encode(b"f" * 4096).decode()
    for _ in range(args.fill_mib * 256 // 64):
        http.post(f"/v1/logs/{name}/records", json={"entries": [payload] * 64}).raise_for_status()
    http.post(f"/v1/logs/{name}/roll").raise_for_status()
    before = storage(cluster)
    http.patch(f"/v1/logs/{name}", json={"retention": {"max_records": 100}}).raise_for_status()
    started = time.monotonic()
    report = auditor.post("/v1/retention").json()
    pass_s = time.monotonic() - started
    after = storage(cluster)
    for bookie in cluster.bookies:
        httpx.post(f"{bookie.url}/v1/gc", timeout=120.0).raise_for_status()
    after_gc = storage(cluster)
    http.close()
    auditor.close()

    def median(kind: str) -> float:
        return statistics.median(rates[kind])

    return {
        "cpu": cpu_model(),
        "clients": args.clients,
        "batch": args.batch,
        "size": args.size,
        "seconds": args.seconds,
        "max_bytes": args.max_bytes,
        **{f"{k}_records_per_s": [round(x) for x in v] for k, v in rates.items()},
        **{f"{k}_median": round(statistics.median(v)) for k, v in rates.items()},
        "rolled_over_plain": round(median("rolled") / median("plain"), 3),
        "retained_over_plain": round(median("kept") / median("plain"), 3),
        "retained_over_rolled": round(median("kept") / median("rolled"), 3),
        "ledgers_removed_during_rounds": removed,
        "fill_mib": args.fill_mib,
        "storage_before": before,
        "storage_after_retention": after,
        "storage_after_gc": after_gc,
        "retention_pass_s": round(pass_s, 2),
        "retention_pass": report,
    }


if __name__ == "__main__":
    main()
