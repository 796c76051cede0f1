"""The local cluster behind ``quire up``: ZooKeeper, bookies and services, supervised.

Layout (P = the gateway port, N = the number of bookies)::

    zookeeper    127.0.0.1:2181 (unless --zk names one)   DATA_DIR/zookeeper
    bookie-i     P+i, i = 1..N                            DATA_DIR/bookie-i
    gateway      P         (once gateway/__main__.py exists)
    auditor      P+N+1     (once auditor/__main__.py exists)
    replicator   P+N+2     (once replicator/__main__.py exists)

Every log goes to ``DATA_DIR/logs/<name>.log``.

Ordering rules. Every port is checked before anything starts, so a busy port
costs nothing. ZooKeeper starts first and must serve before the bookies
start; the bookies start together and are then waited for one by one (a
bookie is healthy once it is registered); then the services in table order.
Stopping goes the other way: every service gets SIGTERM at once, then
SIGKILL after a grace, and ZooKeeper goes last, so the services close their
sessions and their ephemeral registrations disappear at once rather than
after the session timeout.

A child that dies while the cluster runs is reported on stderr and the rest
keep running, so you can kill -9 a bookie by hand and watch the cluster
cope. When nothing useful is left -- the ZooKeeper that ``quire up`` started
died, or no service is alive -- it stops the rest and exits 1.

The cluster secret. Every bookie refuses ``/v1`` calls without the cluster
secret, so that nobody else who reaches its port can write or stall it. ``quire
up`` generates a random one (``secrets.token_hex``) unless one is given (the
``cluster_secret`` of ``UpConfig`` or ``QUIRE_CLUSTER_SECRET`` in its
environment), and hands it to every service it starts in the
``QUIRE_CLUSTER_SECRET`` environment variable: never on a command line (which
``ps`` shows and the logs record) and never printed.

With ``--tls`` (``UpConfig.tls``) every service serves HTTPS with a certificate of a
CA kept in ``DATA_DIR/tls`` (``services/cluster/tls.py``) and verifies its peers
with it; the summary says how to call the gateway with that CA.

The data dir is reused on the next start: ZooKeeper's data and each bookie's
data dir (with its cookie) stay where they were, and a bookie's id is its
``host:port``, so the same ``--gateway-port`` gives every bookie its old
identity back.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO

from services.cluster.config import (
    CLUSTER_SECRET_BYTES,
    SECRET_ENV,
    SERVICES,
    ClusterError,
    Planned,
    StopRequested,
    UpConfig,
    port_free,
)
from services.cluster.limits import (
    BOOKIES_MAX,
    EXTERNAL_ZOOKEEPER_DEADLINE_S,
    LOG_TAIL_LINES,
    STOP_GRACE_S,
    SUPERVISE_INTERVAL_S,
    ZOOKEEPER_START_DEADLINE_S,
)
from services.cluster.processes import (
    ManagedProcess,
    ProcessError,
    ServiceProcess,
    ZooKeeperProcess,
    ended,
    port_is_open,
    stop_processes,
    tail,
    zookeeper_ready,
)
from services.cluster.tls import LocalTls, tls_args
from services.console import Ui


class LocalCluster:
    """Starts, watches and stops the processes of one ``quire up``."""

    def __init__(self, config: UpConfig, ui: Ui | None = None):
        self.config = config
        self.ui = ui or Ui("quire up")
        self.data_dir = config.data_dir.expanduser().resolve()
        self.logs_dir = self.data_dir / "logs"
        self.stop_requested = threading.Event()
        self.zookeeper: ZooKeeperProcess | None = None
        self.services: list[ServiceProcess] = []
        self._reported: set[int] = set()
        self._lock_file: IO[str] | None = None
        self.tls: LocalTls | None = None  # with config.tls, once started
        self._cluster_secret = (
            config.cluster_secret
            or os.environ.get(SECRET_ENV)
            or secrets.token_hex(CLUSTER_SECRET_BYTES)
        )

    # -- the plan -----------------------------------------------------------

    @property
    def zk_connect(self) -> str:
        return self.config.zk or f"{self.config.host}:{self.config.zk_port}"

    def plan(self) -> list[Planned]:
        """Every service to start, with its port and arguments, in start order."""
        cfg = self.config
        if not 1 <= cfg.bookies <= BOOKIES_MAX:
            raise ClusterError(f"--bookies must be between 1 and {BOOKIES_MAX}, got {cfg.bookies}")
        common = self._common_args()
        planned = [
            Planned(
                f"bookie-{i}",
                "bookie",
                cfg.gateway_port + i,
                [*common, "--data-dir", str(self.data_dir / f"bookie-{i}")],
            )
            for i in range(1, cfg.bookies + 1)
        ]
        unknown = cfg.without - {spec.name for spec in SERVICES}
        if unknown:
            names = ", ".join(spec.name for spec in SERVICES)
            raise ClusterError(f"--without takes {names}; got {', '.join(sorted(unknown))}")
        for spec in SERVICES:
            if spec.name not in cfg.without and spec.available():
                port = spec.port(cfg.gateway_port, cfg.bookies)
                planned.append(Planned(spec.name, spec.module, port, common))
        for item in planned:
            if not 1 <= item.port <= 65535:
                raise ClusterError(
                    f"{item.name} would listen on port {item.port}, outside 1-65535: "
                    "pick a lower --gateway-port"
                )
        return planned

    def _common_args(self) -> list[str]:
        args = ["--zk", self.zk_connect, "--zk-root", self.config.zk_root]
        if self.config.zk_session_timeout is not None:
            args += ["--zk-session-timeout", str(self.config.zk_session_timeout)]
        return args

    # -- start --------------------------------------------------------------

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start everything and wait until it is healthy.

        On failure (``ClusterError``, ``StopRequested``) what started keeps
        running until ``stop()``: use the cluster as a context manager.
        """
        planned = self.plan()
        self._check_ports(planned)
        self._lock_data_dir()
        if self.config.tls:
            self.tls = LocalTls.prepare(self.data_dir / "tls", self.config.host)
        if self.config.zk is None:
            self._start_zookeeper()
        else:
            self._check_external_zookeeper()
        bookies = [p for p in planned if p.module == "bookie"]
        others = [p for p in planned if p.module != "bookie"]
        self._start_group(bookies)
        for item in others:
            self._start_group([item])

    def add_service(self, name: str, module: str, port: int) -> ServiceProcess:
        """Start one more service of the started cluster (``quire bench --handover``'s
        second gateway) and wait until it is healthy; ``stop()`` stops it with the rest."""
        self._start_group([Planned(name, module, port, self._common_args())])
        return self.services[-1]

    def _check_ports(self, planned: Sequence[Planned]) -> None:
        host = self.config.host
        wanted = [(p.name, p.port) for p in planned]
        if self.config.zk is None:
            wanted.insert(0, ("zookeeper", self.config.zk_port))
        seen: dict[int, str] = {}
        for name, port in wanted:
            if port in seen:
                raise ClusterError(f"{name} and {seen[port]} would both use port {port}")
            seen[port] = name
        for name, port in wanted:
            if port_free(host, port):
                continue
            if name == "zookeeper":
                raise ClusterError(
                    f"port {port} on {host} (for ZooKeeper) is busy: is a ZooKeeper already "
                    f"running? Use it with --zk {host}:{port}, or stop it"
                )
            raise ClusterError(
                f"port {port} on {host} (for {name}) is busy: stop whatever uses it "
                "(another quire up?) or choose other ports with --gateway-port"
            )

    def _lock_data_dir(self) -> None:
        """One ``quire up`` per data dir: two would share ZooKeeper's and the bookies' files."""
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / "quire-up.pid"
        lock = open(path, "a+")  # noqa: SIM115 - held until stop()
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.seek(0)
            other = lock.read().strip() or "?"
            lock.close()
            raise ClusterError(
                f"{self.data_dir} is in use by another quire up (pid {other}); "
                "stop it or choose another --data-dir"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        self._lock_file = lock

    def _start_zookeeper(self) -> None:
        if shutil.which("java") is None:
            raise ClusterError(
                "java is not installed: ZooKeeper needs a Java runtime (17+); "
                "'make run' installs what it can, or install a JRE"
            )
        try:
            zk = ZooKeeperProcess(
                self.data_dir / "zookeeper", self.config.zk_port, host=self.config.host
            )
        except ProcessError as exc:
            raise ClusterError(str(exc)) from None
        zk.log_path = self.logs_dir / "zookeeper.log"
        self.zookeeper = zk
        self._spawn(zk)
        self._wait(
            zk,
            lambda: zookeeper_ready(zk.host, zk.port),
            "serving",
            max(ZOOKEEPER_START_DEADLINE_S, self.config.start_deadline_s),
        )
        self.ui.started(self._describe(zk, zk.connect_string))

    def _check_external_zookeeper(self) -> None:
        hosts = [h.rsplit(":", 1) for h in self.zk_connect.split(",")]
        end = time.monotonic() + EXTERNAL_ZOOKEEPER_DEADLINE_S
        with self.ui.progress(f"checking ZooKeeper at {self.zk_connect}"):
            while not any(port_is_open(h, int(p)) for h, p in hosts):
                if self.stop_requested.is_set():
                    raise StopRequested
                if time.monotonic() > end:
                    raise ClusterError(
                        f"cannot reach ZooKeeper at {self.zk_connect} (--zk): is it running?"
                    )
                self.stop_requested.wait(0.2)

    def _start_group(self, items: Sequence[Planned]) -> None:
        """Start ``items`` together, then wait for each to be healthy."""
        started = []
        for item in items:
            files = self.tls.issue(item.name) if self.tls is not None else None
            proc = ServiceProcess(
                item.module,
                [*item.args, *(tls_args(files) if files is not None else [])],
                self.config.host,
                item.port,
                self.logs_dir / f"{item.name}.log",
                env={**os.environ, SECRET_ENV: self._cluster_secret},
                name=item.name,
                tls_ca=files.ca if files is not None else None,
            )
            self.services.append(proc)
            self._spawn(proc)
            started.append(proc)
        for proc in started:
            self._wait(proc, proc.healthy, "healthy", self.config.start_deadline_s)
            self.ui.started(self._describe(proc, proc.url))

    def _spawn(self, proc: ManagedProcess) -> None:
        with open(proc.log_path, "ab") as log:
            log.write(f"----- quire up: starting {proc.name}: {' '.join(proc.argv)}\n".encode())
        try:
            proc.start()
        except OSError as exc:
            raise ClusterError(f"cannot start {proc.name}: {exc}") from None

    def _wait(
        self, proc: ManagedProcess, ready: Callable[[], bool], what: str, deadline_s: float
    ) -> None:
        end = time.monotonic() + deadline_s
        with self.ui.progress(f"waiting for {proc.name} (pid {proc.pid}) to be {what}"):
            while True:
                if self.stop_requested.is_set():
                    raise StopRequested
                if not proc.alive():
                    raise ClusterError(
                        f"{proc.name} {ended(proc)} before it was {what}; "
                        f"its log is {proc.log_path}",
                        proc.log_path,
                    )
                if ready():
                    return
                if time.monotonic() > end:
                    raise ClusterError(
                        f"{proc.name} was not {what} after {deadline_s:g}s; "
                        f"its log is {proc.log_path}",
                        proc.log_path,
                    )
                self.stop_requested.wait(0.1)

    def _describe(self, proc: ManagedProcess, where: str) -> str:
        return f"{proc.name:<12} {where:<24} pid {proc.pid:<8} log {proc.log_path}"

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for proc in self.services:
            module = getattr(proc, "module", proc.name)
            counts[module] = counts.get(module, 0) + 1
        what = [f"{n} {m}{'s' if n > 1 else ''}" for m, n in counts.items()]
        if self.zookeeper is not None:
            what.insert(0, "ZooKeeper")
        return (
            f"quire up: ready: {', '.join(what)}; ZooKeeper {self.zk_connect}"
            f"{self.config.zk_root}; data in {self.data_dir}; "
            f"Ctrl-C or SIGTERM to pid {os.getpid()} stops everything"
        )

    def how_to_call(self) -> str | None:
        """With TLS, how to reach the gateway with the cluster's CA; None without."""
        gateway = next((p for p in self.services if p.name == "gateway"), None)
        if self.tls is None or gateway is None:
            return None
        ca = self.tls.ca
        return (
            f"quire up: TLS on every service; the CA certificate is {ca}\n"
            f"    curl --cacert {ca} {gateway.url}/v1/ledgers\n"
            f"    export QUIRE_GATEWAY={gateway.url} QUIRE_CA_FILE={ca}"
        )

    # -- run ----------------------------------------------------------------

    def supervise(self) -> None:
        """Watch the children until a stop is requested; ``ClusterError`` when hopeless."""
        while not self.stop_requested.wait(SUPERVISE_INTERVAL_S):
            for proc in self._children():
                if proc.alive() or id(proc) in self._reported:
                    continue
                self._reported.add(id(proc))
                self.ui.error(f"{proc.name} (pid {proc.pid}) {ended(proc)}")
                self.ui.note(_indent(tail(proc.log_path, LOG_TAIL_LINES)))
                if proc is not self.zookeeper:
                    self.ui.note(f"the rest keep running; its log is {proc.log_path}")
            if self.zookeeper is not None and not self.zookeeper.alive():
                raise ClusterError(
                    "ZooKeeper died; nothing works without it, stopping everything",
                    self.zookeeper.log_path,
                )
            if not any(p.alive() for p in self.services):
                raise ClusterError("every service has exited, stopping")

    # -- stop ---------------------------------------------------------------

    def _children(self) -> list[ManagedProcess]:
        children: list[ManagedProcess] = list(self.services)
        if self.zookeeper is not None:
            children.insert(0, self.zookeeper)
        return children

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop every service at once, then ZooKeeper; SIGKILL whatever outlives the grace.
        Ctrl-C and SIGTERM are ignored meanwhile (``_signals_held``)."""
        with _signals_held():
            self._stop(grace_s)

    def _stop(self, grace_s: float) -> None:
        services = [p for p in reversed(self.services) if p.proc is not None]
        if any(p.alive() for p in services):
            with self.ui.progress(f"stopping {len(services)} service(s)"):
                stop_processes(services, grace_s)
        else:
            stop_processes(services, grace_s)
        if self.zookeeper is not None and self.zookeeper.proc is not None:
            with self.ui.progress("stopping ZooKeeper"):
                stop_processes([self.zookeeper], grace_s)
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM ignored for the block, on the main thread (elsewhere signals
    cannot be set, and are not delivered). A stop runs once the user has asked for it:
    a second Ctrl-C or SIGTERM (an impatient user) raised in the middle of it would
    leave the processes not yet signalled running, ZooKeeper last of all. The stop is
    bounded by its grace and SIGKILL; the handlers are restored after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in held}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())
