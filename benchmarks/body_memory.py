#!/usr/bin/env python3
"""A gateway's memory while many large adds arrive at once, for several budgets of all
REST bodies (``--requests-bytes-in-flight-max``).

    .venv/bin/python benchmarks/body_memory.py                 # 200 × 5 MB, 4 budgets, ~1.5 min
    .venv/bin/python benchmarks/body_memory.py --budgets 16,none --clients 50

For each budget in turn (MiB; ``none`` is 1 TiB, no bound in practice): a fresh
``--local`` style cluster (ZooKeeper, three bookies, a gateway started with
``QUIRE_REQUESTS_BYTES_IN_FLIGHT_MAX``), one ledger (E=3 Qw=2 Qa=2), then ``--clients``
threads that each open a connection and send one raw add of ``--size`` bytes, all at
once. The gateway's resident memory is sampled every 20 ms until the last answer. Every
add must be answered 200, and the ledger, closed, must end at entry ``clients - 1``.
stdout gets a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from spark_read import local_cluster  # noqa: E402

MIB = 1024 * 1024
NO_BOUND = 1 << 40
BUDGET_ENV = "QUIRE_REQUESTS_BYTES_IN_FLIGHT_MAX"


def flood(url: str, gateway_pid: int, clients: int, size: int) -> dict[str, Any]:
    """``clients`` raw adds of ``size`` bytes at once; peak RSS, time and answers."""
    http = httpx.Client(base_url=url, timeout=120.0)
    doc = http.post("/v1/ledgers", json={"ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2})
    doc.raise_for_status()
    lid = doc.json()["ledger_id"]
    host, port = url.removeprefix("http://").split(":")
    head = b"POST /v1/ledgers/%d/entries HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
    request = head % (lid, size) + b"x" * size
    statuses: list[int] = []

    def client() -> None:
        with socket.create_connection((host, int(port)), timeout=120) as sock:
            sock.sendall(request)
            answer = b""
            while b"\r\n\r\n" not in answer:
                piece = sock.recv(65536)
                if not piece:
                    break
                answer += piece
        statuses.append(int(answer.split()[1]) if answer else 0)

    gateway = psutil.Process(gateway_pid)
    before = gateway.memory_info().rss
    peak = before
    started = time.perf_counter()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        peak = max(peak, gateway.memory_info().rss)
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    closed = http.post(f"/v1/ledgers/{lid}/close")
    last = closed.json().get("last_entry_id") if closed.status_code == 200 else None
    http.close()
    ok = statuses.count(200)
    return {
        "rss_before_mib": round(before / MIB),
        "rss_peak_mib": round(peak / MIB),
        "seconds": round(seconds, 2),
        "mb_per_s": round(clients * size / seconds / 1e6, 1),
        "answered_200": ok,
        "other_statuses": sorted({s for s in statuses if s != 200}),
        "last_entry_id": last,
        "all_stored": ok == clients and last == clients - 1,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budgets", default="16,64,256,none", help="MiB each, or none")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--size", type=int, default=5_000_000, help="bytes per add (≤ 5 MiB)")
    args = parser.parse_args()
    rows = []
    for budget in args.budgets.split(","):
        limit = NO_BOUND if budget == "none" else int(budget) * MIB
        os.environ[BUDGET_ENV] = str(limit)
        print(f"budget {budget}: starting a cluster", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="body-memory-") as work:
            with local_cluster(Path(work)) as (url, pids):
                row = {
                    "budget_mib": budget,
                    **flood(url, pids["gateway"][0], args.clients, args.size),
                }
        rows.append(row)
        print(f"budget {budget}: {row}", file=sys.stderr)
    os.environ.pop(BUDGET_ENV, None)
    print(f"{args.clients} clients × {args.size:,} bytes, one raw add each, all at once\n")
    print("| budget (MiB) | gateway RSS before / peak (MiB) | seconds | MB/s | stored |")
    print("|---|---|---|---|---|")
    for r in rows:
        stored = (
            "all" if r["all_stored"] else f"NO: {r['answered_200']} × 200, {r['other_statuses']}"
        )
        print(
            f"| {r['budget_mib']} | {r['rss_before_mib']} / {r['rss_peak_mib']} | "
            f"{r['seconds']} | {r['mb_per_s']} | {stored} |"
        )
    print(json.dumps({"clients": args.clients, "size": args.size, "rows": rows}))
    return 0 if all(r["all_stored"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
