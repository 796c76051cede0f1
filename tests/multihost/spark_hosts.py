"""Spark on hosts of a ``Network``: a standalone master on host ``spark-master``, a
worker on ``spark-worker`` and a driver on ``spark-driver``, each exec'd inside its
host (``Host.spawner``) from the pip package's scripts, as tests/spark/cluster.py
starts them on loopback.

Every Spark port binds on its host's address: the daemons' through ``--host`` and
``SPARK_LOCAL_IP`` (the worker's executors inherit it), the driver's (its RPC and
block manager) through ``spark.driver.host`` / ``spark.driver.bindAddress``. The
driver is a process of its own (tests/multihost/spark_driver.py), because the test
process, in the root namespace, cannot reach the hosts' addresses; ``SparkDriver``
hands it requests and waits for its answers, through files.

Every process is tracked by the network too, so its ``close`` stops it by pid
whatever happened; ``SparkHosts.stop`` stops them (and the executors, their
descendants) first.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from services.cluster.limits import STOP_GRACE_S
from services.cluster.processes import ManagedProcess, ProcessError, stop_processes, tail
from tests.multihost.network import Host, Network
from tests.spark.cluster import (
    MASTER_CLASS,
    REPO,
    WORKER_CLASS,
    WORKER_MEMORY,
    cluster_env,
    spark_class,
)

MASTER_PORT = 7077
MASTER_UI_PORT = 8080
WORKER_UI_PORT = 8081
WORKER_CORES = 2
START_DEADLINE_S = 90.0
# The driver's JVM start, its executors' registration and the code's shipping.
DRIVER_READY_S = 120.0
ANSWER_POLL_S = 0.1


class SparkDriver:
    """The driver process and its request directory (tests/multihost/spark_driver.py)."""

    def __init__(self, process: ManagedProcess, directory: Path) -> None:
        self.process = process
        self.directory = directory
        self._numbers = itertools.count()

    def send(self, op: str, **fields: Any) -> int:
        """Hand the driver a request; its number, for ``answer``."""
        n = next(self._numbers)
        path = self.directory / "requests" / f"{n}.json"
        aside = path.with_name(f".{n}.tmp")
        aside.write_text(json.dumps({"op": op, **fields}))
        aside.rename(path)
        return n

    def answer(self, n: int, deadline_s: float) -> dict[str, Any]:
        """Request ``n``'s answer, waited for; a failed request raises with its error."""
        path = self.directory / "answers" / f"{n}.json"
        end = time.monotonic() + deadline_s
        while not path.exists():
            if not self.process.alive():
                raise ProcessError(f"the Spark driver died:\n{tail(self.process.log_path, 60)}")
            if time.monotonic() > end:
                raise TimeoutError(f"the Spark driver did not answer request {n} in {deadline_s} s")
            time.sleep(ANSWER_POLL_S)
        doc: dict[str, Any] = json.loads(path.read_text())
        if not doc.pop("ok"):
            raise AssertionError(f"the Spark driver's request {n} failed: {doc['error']}")
        return doc

    def call(self, op: str, deadline_s: float, **fields: Any) -> dict[str, Any]:
        return self.answer(self.send(op, **fields), deadline_s)


@dataclass
class SparkHosts:
    """The master, the worker and the driver, each on its host."""

    master: ManagedProcess
    worker: ManagedProcess
    driver: SparkDriver
    base_dir: Path

    def processes(self) -> list[ManagedProcess]:
        return [self.master, self.worker, self.driver.process]

    def log_tails(self, lines: int = 40) -> str:
        parts = [
            f"----- {p.name} (pid {p.pid}) {p.log_path}\n{tail(p.log_path, lines)}"
            for p in self.processes()
        ]
        for stderr in sorted((self.base_dir / "work").glob("*/*/stderr")):
            parts.append(f"----- executor {stderr}\n{tail(stderr, lines)}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Every process (the executors with their worker) stopped by pid."""
        stop_processes(list(reversed(self.processes())), STOP_GRACE_S)


def _wait_for_worker(master: Host, process: ManagedProcess, deadline_s: float) -> None:
    """Until the master's status page, asked from the master's host, lists one live
    worker (the master answering at all is checked the same way)."""

    def registered() -> bool:
        try:
            page = master.http().get(f"http://{master.name}:{MASTER_UI_PORT}/json/")
            workers = page.json().get("workers", [])
        except (httpx.HTTPError, ValueError):
            return False
        return any(w.get("state") == "ALIVE" for w in workers)

    process.wait_until(registered, deadline_s, "registered with the master")


def start_spark(network: Network, base_dir: Path, gateways: Sequence[str]) -> SparkHosts:
    """Hosts ``spark-master``, ``spark-worker`` and ``spark-driver`` on ``network``, a
    master and a worker of ``WORKER_CORES`` cores on the first two, and a driver whose
    connector uses ``gateways`` (its ``gateway`` option, the URLs joined by commas),
    returned once its executors registered."""
    master_host, worker_host, driver_host = network.add_hosts(
        ["spark-master", "spark-worker", "spark-driver"]
    )
    processes: list[ManagedProcess] = []
    try:
        env = cluster_env(base_dir)
        master = master_host.spawn(
            "spark-master",
            spark_class(
                MASTER_CLASS,
                "--host",
                master_host.name,
                "--port",
                str(MASTER_PORT),
                "--webui-port",
                str(MASTER_UI_PORT),
            ),
            base_dir / "logs" / "master.log",
            {**env, "SPARK_LOCAL_IP": master_host.address},
        )
        processes.append(master)
        worker = worker_host.spawn(
            "spark-worker",
            spark_class(
                WORKER_CLASS,
                f"spark://{master_host.name}:{MASTER_PORT}",
                "--host",
                worker_host.name,
                "--cores",
                str(WORKER_CORES),
                "--memory",
                WORKER_MEMORY,
                "--webui-port",
                str(WORKER_UI_PORT),
                "--work-dir",
                str(base_dir / "work"),
            ),
            base_dir / "logs" / "worker.log",
            {**env, "SPARK_LOCAL_IP": worker_host.address},
        )
        processes.append(worker)
        driver_dir = base_dir / "driver"
        driver_process = driver_host.spawn(
            "spark-driver",
            [
                sys.executable,
                "-m",
                "tests.multihost.spark_driver",
                "--master",
                f"spark://{master_host.name}:{MASTER_PORT}",
                "--address",
                driver_host.address,
                "--cores",
                str(WORKER_CORES),
                "--gateways",
                ",".join(gateways),
                "--dir",
                str(driver_dir),
            ],
            base_dir / "logs" / "driver.log",
            {
                **env,
                "SPARK_LOCAL_IP": driver_host.address,
                "PYTHONPATH": str(REPO),
            },
        )
        processes.append(driver_process)
        _wait_for_worker(master_host, worker, START_DEADLINE_S)
        driver_process.wait_until(
            (driver_dir / "ready").exists, DRIVER_READY_S, "ready (its executors registered)"
        )
    except BaseException:
        stop_processes(list(reversed(processes)), STOP_GRACE_S)
        raise
    return SparkHosts(master, worker, SparkDriver(driver_process, driver_dir), base_dir)
