"""A Spark driver that runs inside a host of a ``Network``, run by the test through
``python -m tests.multihost.spark_driver`` (tests/multihost/spark_hosts.py starts it).

The test process lives in the root namespace, which cannot reach the hosts'
addresses, so the driver cannot be a SparkSession of the test's own: it is this
process, exec'd inside the ``spark-driver`` host, with one SparkSession on the
layout's standalone master for its whole life (a JVM start is the slow part). The test
hands it requests as files and reads its answers as files, in a directory both see:

    requests/<n>.json   {"op": "write" | "stream_start" | "stream_stop" | "stop", ...}
    answers/<n>.json    {"ok": true, ...} or {"ok": false, "error": "..."}

A request file appears whole (written aside, then renamed in); requests are served one
at a time, in the order of ``n``. ``ready`` appears once every executor registered.

    write          a batch write of ``records`` rows ("rec-000000"...) in ``partitions``
                   partitions into ``log``, each row held ``row_delay_ms`` by a Python
                   UDF so the job lasts long enough for faults to land in it
    stream_start   a query reading log ``source`` (from the earliest position) and
                   writing each record to log ``sink`` (checkpoint ``checkpoint``,
                   a processing-time trigger of ``trigger_ms``); answered once started
    stream_stop    stops that query; answers its exception (None when it ran clean)
                   and the number of micro-batches it ran
    read           a batch read of log ``log`` from position ``start`` (its start when
                   absent): its ``records`` as [ledger id, entry id, data as latin-1
                   text], in the log's order
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.functions import udf
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StringType

from services.spark import register
from tests.spark.cluster import JVM_OPTIONS, REPO

REQUEST_POLL_S = 0.05
EXECUTORS_DEADLINE_S = 60.0
STREAM_STOP_S = 60


def write_file(path: Path, doc: dict[str, Any]) -> None:
    """``doc`` as JSON at ``path``, appearing whole."""
    aside = path.with_name(f".{path.name}.tmp")
    aside.write_text(json.dumps(doc))
    aside.rename(path)


def session(master: str, address: str, cores: int) -> SparkSession:
    """One SparkSession on ``master``, its ports bound on this host's ``address``;
    handed out once an executor registered. The executors' Python workers import this
    tree through ``PYTHONPATH`` (the hosts share the file system): a zip of it shipped
    with ``addPyFile`` would lose to the venv's editable install, which in a worktree is
    another checkout's code."""
    spark = (
        SparkSession.builder.appName("quire-multihost")
        .master(master)
        .config("spark.driver.host", address)
        .config("spark.driver.bindAddress", address)
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .config("spark.executor.extraJavaOptions", JVM_OPTIONS)
        .config("spark.executor.memory", "512m")
        .config("spark.cores.max", str(cores))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.python.worker.reuse", "true")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", str(REPO))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus  # the driver's counts too
    end = time.monotonic() + EXECUTORS_DEADLINE_S
    while status().size() < 2:
        if time.monotonic() > end:
            raise TimeoutError(f"no executor registered within {EXECUTORS_DEADLINE_S} s")
        time.sleep(0.2)
    return spark


class Driver:
    """Serves the test's requests with one SparkSession."""

    def __init__(self, spark: SparkSession, gateways: str) -> None:
        self.spark = spark
        self.gateways = gateways
        self.queries: dict[str, StreamingQuery] = {}

    def write(self, req: dict[str, Any]) -> dict[str, Any]:
        delay_s = req["row_delay_ms"] / 1000

        def slow(i: int) -> str:  # runs on an executor: nothing of this module
            time.sleep(delay_s)
            return f"rec-{i:06d}"

        data = udf(slow, StringType())
        frame = self.spark.range(0, req["records"], numPartitions=req["partitions"])
        started = time.monotonic()
        (
            frame.select(data("id").alias("data"))
            .write.format("quire")
            .option("gateway", self.gateways)
            .option("log", req["log"])
            .option("request_records", str(req["request_records"]))
            .mode("append")
            .save()
        )
        return {"seconds": time.monotonic() - started}

    def stream_start(self, req: dict[str, Any]) -> dict[str, Any]:
        query = (
            self.spark.readStream.format("quire")
            .option("gateway", self.gateways)
            .option("log", req["source"])
            .option("startingPosition", "earliest")
            .load()
            .select("data")
            .writeStream.format("quire")
            .option("gateway", self.gateways)
            .option("log", req["sink"])
            .option("checkpointLocation", req["checkpoint"])
            .trigger(processingTime=f"{req['trigger_ms']} milliseconds")
            .start()
        )
        self.queries[req["sink"]] = query
        return {}

    def stream_stop(self, req: dict[str, Any]) -> dict[str, Any]:
        query = self.queries.pop(req["sink"])
        failure = query.exception()
        batches = len(query.recentProgress)
        query.stop()
        query.awaitTermination(STREAM_STOP_S)
        return {"exception": None if failure is None else str(failure), "batches": batches}

    def read(self, req: dict[str, Any]) -> dict[str, Any]:
        reader = self.spark.read.format("quire").option("gateway", self.gateways)
        if req.get("start"):
            reader = reader.option("start", req["start"])
        rows = (
            reader.option("log", req["log"])
            .load()
            .orderBy("ledger_id", "entry_id")  # a log's ledgers are made in id order
            .collect()
        )
        records = [[r.ledger_id, r.entry_id, bytes(r.data).decode("latin-1")] for r in rows]
        return {"records": records}

    def serve(self, requests: Path, answers: Path) -> None:
        """Each request in turn until ``stop``."""
        n = 0
        while True:
            path = requests / f"{n}.json"
            if not path.exists():
                time.sleep(REQUEST_POLL_S)
                continue
            req = json.loads(path.read_text())
            if req["op"] == "stop":
                write_file(answers / f"{n}.json", {"ok": True})
                return
            try:
                answer = {"ok": True, **getattr(self, req["op"])(req)}
            except Exception as exc:
                answer = {"ok": False, "error": f"{exc}\n{traceback.format_exc()}"}
            write_file(answers / f"{n}.json", answer)
            n += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.multihost.spark_driver")
    parser.add_argument("--master", required=True, help="spark://HOST:PORT")
    parser.add_argument("--address", required=True, help="this host's address")
    parser.add_argument("--cores", type=int, required=True, help="executor cores to wait for")
    parser.add_argument("--gateways", required=True, help="the connector's gateway option")
    parser.add_argument("--dir", type=Path, required=True, help="requests/, answers/, ready")
    args = parser.parse_args(argv)
    for name in ("requests", "answers"):
        (args.dir / name).mkdir(parents=True, exist_ok=True)
    spark = session(args.master, args.address, args.cores)
    try:
        write_file(args.dir / "ready", {"ok": True})
        Driver(spark, args.gateways).serve(args.dir / "requests", args.dir / "answers")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
