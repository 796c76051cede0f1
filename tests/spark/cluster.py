"""A real Spark standalone cluster for tests: one master and N workers on 127.0.0.1.

Started from the pip package's own scripts (``spark-class`` under pyspark's install
dir, which is ``SPARK_HOME``), so no separate Spark download is needed:

    with standalone_cluster(tmp_path) as cluster:
        spark = SparkSession.builder.master(cluster.master_url)...

Each worker launches its executors (JVMs) and their Python workers as its own
children, so a job run on this cluster runs in processes other than the driver's,
and the connector's code must reach them (see ``ship_code``). The cluster
processes get a clean environment without PYTHONPATH: the repository's code
reaches executors only the way it would on a real cluster.

Every process is tracked by pid and stopped by pid (with its descendants), also
when start-up fails; nothing is signalled by name.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from services.cluster.processes import (
    ManagedProcess,
    ProcessError,
    free_port,
    poll_client,
    stop_processes,
    tail,
)

REPO = Path(__file__).resolve().parents[2]
# The interpreter of the driver is the one the executors' Python workers must use: it
# has pyarrow (without it a worker dies with "No module named pyarrow").
PYTHON = sys.executable
HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# Memory of each daemon JVM (master, worker) and of each worker's executors.
DAEMON_MEMORY = "256m"
# Short-lived test JVMs: the client compiler only and a serial collector start faster and
# take less CPU from a small machine (the daemons, the executors and the driver).
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
WORKER_MEMORY = "1g"
START_DEADLINE_S = 90.0
EXECUTORS_DEADLINE_S = 60.0
STOP_GRACE_S = 10.0
# Packages of the repository shipped to executors (services/spark imports only these).
SHIPPED_PACKAGES = ("services",)
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n
logger.master.name = org.apache.spark.deploy
logger.master.level = info
"""


def spark_home() -> Path:
    """The pip-installed pyspark's directory: it holds bin/spark-class and jars/.

    What ``pyspark.find_spark_home`` answers for a pip install, without its deference to
    a SPARK_HOME of the environment (another Spark would not match the driver's jars).
    """
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class StandaloneCluster:
    """A running master and its workers (their processes, ports and directories)."""

    base_dir: Path
    master_port: int
    master_ui_port: int
    env: dict[str, str]
    master: ManagedProcess | None = None
    workers: list[ManagedProcess] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def master_ui(self) -> str:
        return f"http://{HOST}:{self.master_ui_port}"

    @property
    def work_dir(self) -> Path:
        """SPARK_WORKER_DIR: each executor's stdout/stderr lands under it."""
        return self.base_dir / "work"

    def processes(self) -> list[ManagedProcess]:
        return [p for p in [self.master, *self.workers] if p is not None]

    def state(self) -> dict[str, Any]:
        """The master's JSON status page (workers, applications)."""
        r = poll_client().get(f"{self.master_ui}/json/", timeout=2.0)
        r.raise_for_status()
        doc: dict[str, Any] = r.json()
        return doc

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def diagnostics(self, lines: int = 30) -> str:
        """The tails of every daemon's log and every executor's stderr, for a failure."""
        parts = [
            f"--- {p.name} ({p.log_path}):\n{tail(p.log_path, lines)}" for p in self.processes()
        ]
        for stderr in sorted(self.work_dir.glob("*/*/stderr")):
            parts.append(f"--- executor {stderr}:\n{tail(stderr, lines)}")
        return "\n".join(parts)


def cluster_env(base_dir: Path, python: str = PYTHON) -> dict[str, str]:
    """The daemons' environment: SPARK_HOME, the Python of executors, local dirs only."""
    conf_dir = base_dir / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "log4j2.properties").write_text(LOG4J2)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.pop("PYTHONPATH", None)  # the code reaches executors by shipping, not by a shared path
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_CONF_DIR=str(conf_dir),
        SPARK_LOCAL_IP=HOST,
        SPARK_LOCAL_DIRS=str(base_dir / "local"),
        SPARK_WORKER_DIR=str(base_dir / "work"),
        SPARK_LOG_DIR=str(base_dir / "logs"),
        SPARK_PID_DIR=str(base_dir / "pids"),
        SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
        SPARK_DAEMON_JAVA_OPTS=JVM_OPTIONS,
        PYSPARK_PYTHON=python,
        PYSPARK_DRIVER_PYTHON=python,
    )
    for name in ("local", "work", "logs", "pids"):
        (base_dir / name).mkdir(parents=True, exist_ok=True)
    return env


def spark_class(*args: str) -> list[str]:
    """The command that runs a Spark daemon's main class with ``args``."""
    return [str(spark_home() / "bin" / "spark-class"), *args]


def _wait_for_workers(cluster: StandaloneCluster, count: int, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    last: object = None
    while time.monotonic() < end:
        for proc in cluster.processes():
            if not proc.alive():
                raise ProcessError(f"{proc.name} exited during start-up\n{cluster.diagnostics()}")
        try:
            alive = cluster.alive_workers()
            if len(alive) >= count:  # with count 0: the master's page answered
                return
            last = f"{len(alive)} alive workers"
        except (httpx.HTTPError, ValueError) as exc:
            last = exc
        time.sleep(0.2)
    what = f"{count} workers not registered" if count else "the master did not answer"
    raise ProcessError(f"{what} after {deadline_s}s (last: {last!r})\n{cluster.diagnostics()}")


@contextmanager
def standalone_cluster(
    base_dir: Path | None = None,
    workers: int = 2,
    cores_per_worker: int = 1,
    deadline_s: float = START_DEADLINE_S,
    wait_for_workers: bool = True,
    master_port: int | None = None,
    master_ui_port: int | None = None,
) -> Iterator[StandaloneCluster]:
    """Start a master and ``workers`` workers, wait until all registered, stop all after.

    With ``wait_for_workers=False`` it returns once the master answers, so a driver can
    start while the workers register (``cluster_session`` waits for their executors).

    Every process started is stopped by pid (with its executors and their Python
    workers), whether start-up, the body or the wait failed.
    """
    with tempfile.TemporaryDirectory(prefix="spark-cluster-") as scratch:
        base = Path(base_dir) if base_dir is not None else Path(scratch)
        cluster = StandaloneCluster(
            base_dir=base,
            master_port=master_port or free_port(),
            master_ui_port=master_ui_port or free_port(),
            env=cluster_env(base),
        )
        try:
            cluster.master = ManagedProcess(
                "spark-master",
                spark_class(
                    MASTER_CLASS,
                    "--host",
                    HOST,
                    "--port",
                    str(cluster.master_port),
                    "--webui-port",
                    str(cluster.master_ui_port),
                ),
                base / "logs" / "master.log",
                env=cluster.env,
            ).start()
            _wait_for_workers(cluster, 0, deadline_s)  # the master answers
            for i in range(workers):
                worker = ManagedProcess(
                    f"spark-worker-{i + 1}",
                    spark_class(
                        WORKER_CLASS,
                        cluster.master_url,
                        "--host",
                        HOST,
                        "--cores",
                        str(cores_per_worker),
                        "--memory",
                        WORKER_MEMORY,
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(cluster.work_dir),
                    ),
                    base / "logs" / f"worker-{i + 1}.log",
                    env=cluster.env,
                )
                cluster.workers.append(worker.start())
            if wait_for_workers:
                _wait_for_workers(cluster, workers, deadline_s)
            yield cluster
        finally:
            stop_processes(cluster.processes(), STOP_GRACE_S)


def ship_code(dest_dir: Path, packages: tuple[str, ...] = SHIPPED_PACKAGES) -> Path:
    """A zip of the repository's Python packages, for ``SparkContext.addPyFile``."""
    path = dest_dir / "quire-code.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in packages:
            for source in sorted((REPO / package).rglob("*.py")):
                archive.write(source, source.relative_to(REPO).as_posix())
    return path


@contextmanager
def driver_python(python: str = PYTHON) -> Iterator[None]:
    """PYSPARK_PYTHON in the driver's environment while a session lives.

    A driver started from Python (not by spark-submit) sends every Python function
    with ``os.environ["PYSPARK_PYTHON"]`` (default ``python3`` from the executor's
    PATH) as the interpreter to run it with; ``spark.pyspark.python`` alone does not
    change that, so without this the executors run a Python without pyarrow.
    """
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    os.environ["PYSPARK_PYTHON"] = python
    os.environ["PYSPARK_DRIVER_PYTHON"] = python
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def session_conf(cluster: StandaloneCluster, python: str = PYTHON) -> dict[str, str]:
    """SparkSession settings for a job spread over the cluster's workers, one core each."""
    return {
        "spark.master": cluster.master_url,
        "spark.driver.host": HOST,
        "spark.driver.bindAddress": HOST,
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.executor.extraJavaOptions": JVM_OPTIONS,
        "spark.driver.extraJavaOptions": JVM_OPTIONS,
        "spark.cores.max": str(len(cluster.workers)),
        "spark.ui.enabled": "false",
        "spark.default.parallelism": str(len(cluster.workers)),
        "spark.sql.shuffle.partitions": str(len(cluster.workers)),
        "spark.pyspark.python": python,
        "spark.pyspark.driver.python": python,
        "spark.executorEnv.PYSPARK_PYTHON": python,
        "spark.python.worker.reuse": "true",
        "spark.local.dir": str(cluster.base_dir / "local"),
    }


@contextmanager
def cluster_session(
    cluster: StandaloneCluster,
    app_name: str,
    extra_conf: dict[str, str] | None = None,
    deadline_s: float = EXECUTORS_DEADLINE_S,
) -> Iterator[Any]:
    """A SparkSession on ``cluster`` with the repository's code shipped to executors,
    handed out once every worker's executor registered; stopped afterwards."""
    from pyspark.sql import SparkSession

    with driver_python():
        builder = SparkSession.builder.appName(app_name)
        for key, value in {**session_conf(cluster), **(extra_conf or {})}.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        try:
            code_dir = cluster.base_dir / "code"
            code_dir.mkdir(exist_ok=True)
            session.sparkContext.addPyFile(str(ship_code(code_dir)))
            _wait_for_executors(session, cluster, len(cluster.workers), deadline_s)
            yield session
        finally:
            session.stop()


def _wait_for_executors(
    session: Any, cluster: StandaloneCluster, count: int, deadline_s: float
) -> None:
    # getExecutorMemoryStatus counts the driver's block manager too.
    status = session.sparkContext._jsc.sc().getExecutorMemoryStatus
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if status().size() >= count + 1:
            return
        time.sleep(0.2)
    raise ProcessError(
        f"{count} executors not registered after {deadline_s}s\n{cluster.diagnostics()}"
    )


def main(argv: list[str] | None = None) -> int:
    """``make spark-cluster``: a master and workers until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m tests.spark.cluster", description=main.__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores of each worker")
    parser.add_argument("--port", type=int, default=7077, help="the master's port")
    parser.add_argument("--webui-port", type=int, default=8180, help="the master's web UI")
    args = parser.parse_args(argv)
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with standalone_cluster(
        workers=args.workers,
        cores_per_worker=args.cores,
        master_port=args.port,
        master_ui_port=args.webui_port,
    ) as cluster:
        print(f"Spark master {cluster.master_url} (web UI {cluster.master_ui}), ", end="")
        print(f"{args.workers} workers; logs under {cluster.base_dir}; Ctrl-C stops it")
        print(f"executors run {PYTHON}: export PYSPARK_PYTHON={PYTHON} before a driver starts")
        while not stop and all(p.alive() for p in cluster.processes()):
            time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
