#!/usr/bin/env python3
"""The cost of a bookie's storage report against its data, before and after the kept
byte counts (bookie/storage.py, "Kept byte counts"; benchmarks/README.md, "One bookie to
20 GB").

    git archive BEFORE_COMMIT | tar -x -C /tmp/before        # the bookie that scans
    .venv/bin/python benchmarks/storage_report.py --before /tmp/before --target-gb 4

One ZooKeeper and one bookie on one data dir, filled as ``scale.py bookie`` fills it
(ledgers of 8 MiB, one in four of 1 KiB entries and three of 64 KiB, 64 written at once
in 1 MiB requests by 4 clients: services/bench/scale_bookie.py). The bookie first runs
the code of ``--before`` (its report scans every entry): after every ``--step-gb`` one
``GET /v1/storage`` with the database in the page cache and one with it dropped from it
(``posix_fadvise``), each by a freshly started bookie (it reuses a count), their times and
``bytes_count_ms``. Then the same data dir, dropped from the page cache, is opened by the
bookie of this tree: its first start adds the counts to the data dir (the migration: the
time its log gives), then ``--reports`` reports and one walk of ``GET
/v1/storage/ledgers`` are timed, also with the database dropped from the page cache;
then ``--extra-ledgers`` ledgers of one 100-byte entry are added and the report timed
again (its cost follows the ledgers, not the bytes). Each bookie runs from its own tree
(a spawner with that tree as its working directory, so ``python -m bookie`` imports
it). The work dir is removed at the end. Prints a JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.bench.scale_bookie import (  # noqa: E402
    FIRST_WRITTEN_ID,
    GIB,
    SECRET,
    BookieScale,
    Http,
    body,
)
from services.bench.scale_common import machine, say  # noqa: E402
from services.cluster.processes import (  # noqa: E402
    Child,
    ServiceProcess,
    free_port,
    stop_processes,
)

ZK_ROOT = "/report"
START_DEADLINE_S = 600.0  # the migration of a large data dir happens before it serves
HTTP_TIMEOUT_S = 300.0
EXTRA_LEDGERS_PER_REQUEST = 1000


def spawner_in(tree: Path) -> Any:
    """Start a service with ``tree`` as its working directory: ``python -m bookie`` then
    imports that tree's bookie (the current directory comes first on its path)."""

    def spawn(argv: Sequence[str], log_path: Path, env: dict[str, str]) -> Child:
        log_file = open(log_path, "ab")  # noqa: SIM115 - owned by the child
        try:
            return subprocess.Popen(
                list(argv),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                cwd=tree,
            )
        finally:
            log_file.close()

    return spawn


class Bench(BookieScale):
    """``BookieScale``'s fill, with a bookie from a given tree on a fixed port."""

    def __init__(self, work: Path, args: argparse.Namespace) -> None:
        super().__init__(work, args)
        self.port = free_port()
        self.zk_proc.start()
        self.zk_proc.wait_ready()

    def start_from(self, tree: Path, name: str) -> float:
        """Start the bookie of ``tree`` on the data dir; seconds until healthy."""
        args = ["--zk", self.zk_proc.connect_string, "--zk-root", ZK_ROOT,
                "--data-dir", str(self.data_dir), "--gc-interval-s", "0"]  # fmt: skip
        self.bookie = ServiceProcess(
            "bookie", args, "127.0.0.1", self.port, self.work / f"{name}.log",
            env=self.env, name=name, spawner=spawner_in(tree),
        )  # fmt: skip
        started = time.monotonic()
        self.bookie.start()
        self.bookie.wait_healthy(START_DEADLINE_S)
        took = time.monotonic() - started
        self.http = httpx.Client(
            base_url=self.bookie.url, timeout=HTTP_TIMEOUT_S, headers={"X-Cluster-Secret": SECRET}
        )
        return took

    def stop_bookie(self) -> None:
        if self.http is not None:
            self.http.close()
            self.http = None
        stop_processes([self.bookie], 30.0)

    def close(self) -> None:
        if self.http is not None:
            self.http.close()
        stop_processes([self.bookie, self.zk_proc], 10.0)

    def timed(self, path: str, **params: Any) -> tuple[float, dict[str, Any]]:
        assert self.http is not None
        started = time.perf_counter()
        answer = self.http.get(path, params=params)
        took_ms = (time.perf_counter() - started) * 1000
        if answer.status_code != 200:
            raise SystemExit(f"GET {path}: {answer.status_code} {answer.text[:300]}")
        return took_ms, dict(answer.json())

    def report(self) -> dict[str, Any]:
        took_ms, doc = self.timed("/v1/storage")
        return {
            "request_ms": round(took_ms, 1),
            "bytes_count_ms": doc["bytes_count_ms"],
            "live": doc["live"],
            "file_gb": round(doc["file_bytes"] / GIB, 2),
        }

    def walk_ledgers(self) -> dict[str, Any]:
        """Every page of ``GET /v1/storage/ledgers``: time, ledgers and bytes."""
        started = time.perf_counter()
        after, ledgers, total = -1, 0, 0
        while True:
            _, doc = self.timed("/v1/storage/ledgers", after=after)
            ledgers += len(doc["ledgers"])
            total += sum(item["bytes"] for item in doc["ledgers"])
            if doc["next"] is None:
                break
            after = doc["next"]
        took_ms = (time.perf_counter() - started) * 1000
        return {"ms": round(took_ms, 1), "ledgers": ledgers, "bytes": total}

    async def extra_ledgers(self, count: int) -> None:
        """``count`` new ledgers of one 100-byte entry, a thousand a request."""
        http = Http(self.bookie.host, self.bookie.port)
        payload = os.urandom(100)
        first = FIRST_WRITTEN_ID + 50_000_000
        try:
            for at in range(0, count, EXTRA_LEDGERS_PER_REQUEST):
                ids = range(first + at, first + min(count, at + EXTRA_LEDGERS_PER_REQUEST))
                data = b"".join(body(lid, 0, 1, payload) for lid in ids)
                status, answer = await http.call("POST", "/v1/entries", data)
                if status != 200:
                    raise SystemExit(f"extra ledgers: {status} {answer[:300]!r}")
        finally:
            http.close()


def migration_s(log_path: Path) -> float | None:
    """The ``took_s`` of the bookie's "counted the payload bytes" log line."""
    text = log_path.read_text(errors="replace")
    for line in text.splitlines():
        if "counted the payload bytes of every ledger" in line:
            found = re.search(r"took_s\W+([0-9.]+)", line)
            if found:
                return float(found.group(1))
    return None


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="storage-report-", dir=args.work_dir))
    bench = Bench(work, args)
    out: dict[str, Any] = {"machine": machine(), "before": [], "args": vars(args) | {}}
    out["args"]["before"] = str(args.before)
    try:
        say(f"bookie of {args.before} (the scan) ...")
        bench.start_from(args.before, "bookie-before")
        target = args.target_gb * GIB
        step = args.step_gb * GIB
        until = step
        while True:
            until = min(until, target)
            asyncio.run(bench.fill(int(until), time.monotonic() + 3600))
            # This bookie reuses a count for ten times as long as it took: a restart
            # before each report makes it count afresh, warm, then from the disk.
            bench.stop_bookie()
            bench.start_from(args.before, "bookie-before")
            row = {"gib": round(bench.written.fill_bytes / GIB, 2), "warm": bench.report()}
            bench.stop_bookie()
            bench.drop_cache()
            bench.start_from(args.before, "bookie-before")
            row["cold"] = bench.report()
            row["load"] = round(os.getloadavg()[0], 2)
            say(f"before: {row}")
            out["before"].append(row)
            if until >= target:
                break
            until += step
        bench.stop_bookie()

        say("bookie of this tree: its first start counts the bytes (from the disk) ...")
        bench.drop_cache()
        start_s = bench.start_from(ROOT, "bookie-after")
        after: dict[str, Any] = {
            "start_s": round(start_s, 2),
            "migration_s": migration_s(work / "bookie-after.log"),
            "load": round(os.getloadavg()[0], 2),
        }
        after["reports"] = [bench.report() for _ in range(args.reports)]
        after["ledgers_walk"] = bench.walk_ledgers()
        bench.drop_cache()
        after["cold_report"] = bench.report()
        say(f"after: {after}")
        if args.extra_ledgers:
            asyncio.run(bench.extra_ledgers(args.extra_ledgers))
            after["with_extra_ledgers"] = {
                "extra_ledgers": args.extra_ledgers,
                "reports": [bench.report() for _ in range(args.reports)],
                "ledgers_walk": bench.walk_ledgers(),
                "load": round(os.getloadavg()[0], 2),
            }
            say(f"after, with {args.extra_ledgers} more ledgers: {after['with_extra_ledgers']}")
        out["after"] = after
    finally:
        bench.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--before", type=Path, required=True, help="a tree of the bookie before the kept counts"
    )
    parser.add_argument("--target-gb", type=float, default=4.0)
    parser.add_argument("--step-gb", type=float, default=1.0)
    parser.add_argument("--reports", type=int, default=5, help="timed reports after")
    parser.add_argument("--extra-ledgers", type=int, default=100_000)
    parser.add_argument("--work-dir", default=None, help="where the temp dir goes")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    args = parser.parse_args()
    args.before = args.before.resolve()
    print(json.dumps(run(args), indent=1))


if __name__ == "__main__":
    main()
