#!/usr/bin/env python3
"""Bulk reads of a log through the Spark connector, next to a plain Python client of the
gateway's binary range read.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/spark_read.py                 # 1 GiB + 1 GiB
    PYTHONPATH=$PWD .venv/bin/python benchmarks/spark_read.py --big-bytes 64MiB \\
        --small-bytes 16MiB --partitions 2,4                                  # a quick check
    PYTHONPATH=$PWD .venv/bin/python benchmarks/spark_read.py --gateway http://host:8080

How it runs:

1. A local cluster (``services/bench/run.py``'s: ZooKeeper, 3 bookies, one gateway,
   fsync on) under a temporary directory, unless ``--gateway`` names one.
2. Two fresh logs are filled through that gateway with JSON batch appends (a few
   threads, batches of <= 8 MiB): ``--big-bytes`` of ``--big-record`` records (1 GiB of
   64 KiB by default) and ``--small-bytes`` of ``--small-record`` records (1 GiB of
   1 KiB: a Spark job's own start, ~0.7 s here even for two records, is then a small
   part of the read, as in a real bulk read; until 2026-11-26 the default was 256
   MiB). The fill rate is reported too (ingestion through the REST API).
3. Each log is read whole ``--rounds`` times:
   - ``plain``: one Python process, one stream per planned partition in turn
     (``SparkGatewayClient.read_range``, the envelopes decoded and checked for visibility,
     as the connector does), the rows counted and their bytes summed;
   - ``spark-N``: ``spark.read.format("quire")`` in ``local[2]`` with N partitions,
     forced by ``count(*)`` and ``sum(length(data))`` (every row crosses into the JVM),
   after one untimed warm-up job (Spark's and its Python workers' start).
   Reported per read: MB/s (payload bytes, 10^6), records/s, and the CPU seconds of the
   gateway and of the bookies (psutil) in that read, in cores.
4. The logs are deleted and the cluster stopped.

The last stdout line is one JSON object. Targets (issue 10): >= 100 MB/s with 64 KiB
records and >= 100,000 records/s with 1 KiB records in local[2].
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import re
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from services.protocol import log_records
from services.spark.batch_read import plan
from services.spark.client import SparkGatewayClient
from services.spark.limits import PARTITION_ENTRIES_MAX
from services.spark.options import parse_read_options

FILL_THREADS = 4
FILL_BATCH_BYTES = 8 << 20
FILL_BATCH_RECORDS_MAX = 10_000
FILL_RETRIES_MAX = 100
FILL_RETRY_DELAY_S = 0.1
_SIZE = re.compile(r"(\d+)\s*([KMG]i?B?|B)?", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def note(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def size(text: str) -> int:
    """``64KiB``, ``1GiB``, ``1024`` → bytes."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    unit = (match.group(2) or "").upper()[:1]
    return int(match.group(1)) * _UNITS[unit]


# -- the cluster and its CPU ------------------------------------------------------


@contextmanager
def local_cluster(work: Path) -> Iterator[tuple[str, dict[str, list[int]]]]:
    """A --local style cluster: its gateway URL and the pids of gateway and bookies."""
    from services.bench.config import BenchConfig
    from services.bench.run import start_local_cluster

    cluster = start_local_cluster(BenchConfig(local=True, bookies=3), work)
    try:
        pids: dict[str, list[int]] = {"gateway": [], "bookies": []}
        url = ""
        for proc in cluster.services:
            if proc.pid is None:
                continue
            if proc.name == "gateway":
                url = proc.url
                pids["gateway"].append(proc.pid)
            elif proc.name.startswith("bookie"):
                pids["bookies"].append(proc.pid)
        yield url, pids
    finally:
        cluster.stop()


class Cpu:
    """CPU seconds of groups of processes (and their children) between two points."""

    def __init__(self, pids: dict[str, list[int]]) -> None:
        self.procs = {k: [psutil.Process(p) for p in v] for k, v in pids.items()}

    def now(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for group, procs in self.procs.items():
            total = 0.0
            for proc in procs:
                try:
                    t = proc.cpu_times()
                    total += t.user + t.system + t.children_user + t.children_system
                except psutil.Error:
                    pass
            out[group] = total
        return out


# -- filling ----------------------------------------------------------------------


def fill(client: SparkGatewayClient, name: str, total: int, record: int) -> dict[str, Any]:
    """Append ``total`` bytes of ``record``-byte records to a fresh log ``name``."""
    client.request("PUT", f"/v1/logs/{name}", ok=(200, 201))
    client.request("POST", f"/v1/logs/{name}/writer")
    count = max(1, total // record)
    per = max(1, min(FILL_BATCH_RECORDS_MAX, FILL_BATCH_BYTES // record))
    batches = [min(per, count - at) for at in range(0, count, per)]
    body = os.urandom(record)
    encoded = base64.b64encode(body).decode()
    lock = threading.Lock()
    errors: list[str] = []

    def work() -> None:
        with SparkGatewayClient(client.url, client.token, timeout_s=300) as own:
            while True:
                with lock:
                    if not batches or errors:
                        return
                    n = batches.pop()
                for attempt in range(FILL_RETRIES_MAX + 1):
                    try:
                        own.request(
                            "POST", f"/v1/logs/{name}/records", json={"entries": [encoded] * n}
                        )
                        break
                    except Exception as exc:  # noqa: BLE001 - reported, the fill stops
                        # 503 unavailable (no room in the ledger now) appended nothing:
                        # back off and send it again, as a client should.
                        if "503 unavailable" in str(exc) and attempt < FILL_RETRIES_MAX:
                            time.sleep(FILL_RETRY_DELAY_S)
                            continue
                        errors.append(str(exc))
                        return

    started = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(FILL_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"filling {name} failed: {errors[0]}")
    return {
        "records": count,
        "bytes": count * record,
        "fill_s": round(took, 3),
        "fill_mb_s": round(count * record / took / 1e6, 1),
        "fill_records_s": round(count / took),
    }


# -- reading ----------------------------------------------------------------------


def plain_read(url: str, token: str | None, name: str, partitions: int) -> tuple[int, int]:
    """The log read by one Python client of the binary format: (records, bytes)."""
    options = parse_read_options(_options(url, token, name, partitions, 1 << 40))
    records = nbytes = 0
    with SparkGatewayClient(url, token) as client:
        for part in plan(options, client):
            for frames in client.read_range(part.ledger_id, part.first, part.last):
                for entry_id, payload in frames:
                    record = log_records.decode(payload)
                    if not log_records.visible(entry_id, record, part.end):
                        break
                    records += 1
                    nbytes += len(record.data)
    return records, nbytes


def _options(url: str, token: str | None, name: str, n: int, count: int) -> dict[str, str]:
    options = {
        "gateway": url,
        "log": name,
        "partition_entries": str(min(PARTITION_ENTRIES_MAX, max(1, math.ceil(count / n)))),
        "partition_bytes": str(64 << 30),
    }
    if token:
        options["token"] = token
    return options


def spark_session() -> Any:
    from pyspark.sql import SparkSession

    from services.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [root, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    )
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("quire-spark-read-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def spark_read(
    spark: Any, url: str, token: str | None, name: str, partitions: int, count: int
) -> tuple[int, int]:
    reader = spark.read.format("quire")
    for key, value in _options(url, token, name, partitions, count).items():
        reader = reader.option(key, value)
    row = reader.load().selectExpr("count(*) AS n", "sum(length(data)) AS b").collect()[0]
    return int(row.n), int(row.b or 0)


def measure(cpu: Cpu, run: Callable[[], tuple[int, int]]) -> dict[str, Any]:
    before = cpu.now()
    started = time.perf_counter()
    records, nbytes = run()
    took = time.perf_counter() - started
    after = cpu.now()
    out: dict[str, Any] = {
        "records": records,
        "mb_s": round(nbytes / took / 1e6, 1),
        "records_s": round(records / took),
        "seconds": round(took, 3),
    }
    for group in after:
        out[f"{group}_cores"] = round((after[group] - before[group]) / took, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gateway", help="an existing gateway (default: a local cluster)")
    parser.add_argument("--token")
    parser.add_argument("--big-bytes", type=size, default=1 << 30)
    parser.add_argument("--big-record", type=size, default=64 << 10)
    parser.add_argument("--small-bytes", type=size, default=1 << 30)
    parser.add_argument("--small-record", type=size, default=1 << 10)
    parser.add_argument("--partitions", default="2,8", help="N values for spark, e.g. 2,8")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the logs")
    args = parser.parse_args(argv)
    ns = [int(n) for n in args.partitions.split(",")]
    with ExitStack() as stack:
        pids: dict[str, list[int]] = {}
        if args.gateway:
            url = args.gateway.rstrip("/")
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="spark-bench-")))
            url, pids = stack.enter_context(local_cluster(work))
        cpu = Cpu(pids)
        suffix = secrets.token_hex(3)
        client = stack.enter_context(SparkGatewayClient(url, args.token, timeout_s=300))
        logs = {
            "big": (f"bench-spark-big-{suffix}", args.big_bytes, args.big_record),
            "small": (f"bench-spark-small-{suffix}", args.small_bytes, args.small_record),
        }
        report: dict[str, Any] = {"gateway": url, "logs": {}}
        try:
            for label, (name, total, record) in logs.items():
                note(f"filling {label}: {total:,} bytes of {record:,}-byte records")
                report["logs"][label] = {
                    "record_bytes": record,
                    **fill(client, name, total, record),
                }
                note(f"  {report['logs'][label]}")
            note("starting Spark (local[2])")
            spark = spark_session()
            # One untimed job first: the JVM's and the Python workers' start is not a read.
            small_name = logs["small"][0]
            spark_read(spark, url, args.token, small_name, 2, report["logs"]["small"]["records"])
            for label, (name, _, _) in logs.items():
                count = report["logs"][label]["records"]
                reads: dict[str, list[dict[str, Any]]] = {}
                for _ in range(args.rounds):
                    plain = partial(plain_read, url, args.token, name, 1)
                    reads.setdefault("plain", []).append(measure(cpu, plain))
                    for n in ns:
                        job = partial(spark_read, spark, url, args.token, name, n, count)
                        reads.setdefault(f"spark-{n}", []).append(measure(cpu, job))
                for key, runs in reads.items():
                    for run in runs:
                        note(f"{label} {key}: {run}")
                        if run["records"] != count:
                            raise RuntimeError(f"{label} {key} read {run['records']} of {count}")
                report["logs"][label]["reads"] = reads
            spark.stop()
        finally:
            if not args.keep:
                for name, _, _ in logs.values():
                    try:
                        client.request("DELETE", f"/v1/logs/{name}", ok=(204, 404))
                    except Exception as exc:  # noqa: BLE001 - best effort
                        note(f"could not delete {name}: {exc}")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
