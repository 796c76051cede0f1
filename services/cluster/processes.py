"""Starting, watching and stopping local processes: ZooKeeper and Quire services.

Used by ``quire up``, ``quire bench --local``, the benchmarks and the test
harness, so they all start the same things the same way. Every process is
tracked by pid and stopped by pid; nothing here ever signals a process it did
not start.
"""

from __future__ import annotations

import fcntl
import functools
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import httpx
import psutil

from services.cluster.config import port_free
from services.cluster.limits import BLOCK_TRIES, STOP_GRACE_S

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# Election timers of an ensemble. ZooKeeper's defaults (a 5 s time-out to connect to
# another server, notifications backing off to one a minute) slow an election while one
# server silently drops packets (a partition); with these a server cut away rejoins
# within seconds of the heal and the others elect without waiting on it.
ZOOKEEPER_ELECTION_PROPERTIES = (
    "-Dzookeeper.cnxTimeout=1000",
    "-Dzookeeper.fastleader.maxNotificationInterval=2000",
)


class ProcessError(RuntimeError):
    """A local process could not be started or did not become ready."""


# Processes that start many servers side by side (the test suite's parallel workers)
# each set this to a range of their own, "LOW-HIGH", below the kernel's ephemeral range:
# free_port and free_port_block then hand out its ports in turn, through a cursor file
# shared by the process and its children, instead of asking the kernel for any free one
# (which two processes can both be given before either binds it).
PORT_RANGE_ENV = "QUIRE_PORT_RANGE"
# Where the cursor file lives (default: the temp dir), so that children started with
# another TMPDIR still share their parent's cursor.
PORT_CURSOR_DIR_ENV = "QUIRE_PORT_CURSOR_DIR"
BLOCK_LOW, BLOCK_HIGH = 20000, 32000  # blocks outside a range: below the ephemeral ports


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on: the next free one of ``$QUIRE_PORT_RANGE`` when it is
    set, otherwise one the kernel picks."""
    if os.environ.get(PORT_RANGE_ENV):
        return free_port_block(1, host)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def free_port_block(count: int, host: str = "127.0.0.1") -> int:
    """A port P such that P..P+count-1 are free now: the next such block of
    ``$QUIRE_PORT_RANGE`` when it is set, otherwise a random one below the ephemeral
    range."""
    span = os.environ.get(PORT_RANGE_ENV)
    if span:
        return _next_block_in(_port_range(span), count, host)
    rng = random.Random()
    for _ in range(BLOCK_TRIES):
        base = rng.randrange(BLOCK_LOW, BLOCK_HIGH - count)
        if all(port_free(host, base + i) for i in range(count)):
            return base
    raise ProcessError(f"no block of {count} free ports on {host}")


def _port_range(span: str) -> tuple[int, int]:
    try:
        low, high = (int(part) for part in span.split("-", 1))
    except ValueError:
        raise ProcessError(
            f"{PORT_RANGE_ENV}={span!r}: expected LOW-HIGH, e.g. 10000-11999"
        ) from None
    if not 0 < low <= high < 65536:
        raise ProcessError(f"{PORT_RANGE_ENV}={span!r}: not a range of ports")
    return low, high


def _next_block_in(span: tuple[int, int], count: int, host: str) -> int:
    low, high = span
    size = high - low + 1
    if not 0 < count <= size:
        raise ProcessError(f"{PORT_RANGE_ENV}={low}-{high}: no block of {count} ports in it")
    cursor_dir = os.environ.get(PORT_CURSOR_DIR_ENV) or tempfile.gettempdir()
    cursor = Path(cursor_dir) / f"quire-ports-{low}-{high}"
    with open(cursor, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes
        f.seek(0)
        text = f.read().strip()
        base = int(text) if text.isdigit() and low <= int(text) <= high else low
        for _ in range(size):
            if base + count - 1 > high:
                base = low
            if all(port_free(host, base + i) for i in range(count)):
                f.seek(0)
                f.truncate()
                f.write(str(base + count))
                return base
            base += 1
    raise ProcessError(f"{PORT_RANGE_ENV}={low}-{high}: no block of {count} free ports")


def port_is_open(host: str, port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class Child(Protocol):
    """A started process as its starter sees it: ``subprocess.Popen``, or a handle that
    behaves the same (pid, exit code, signals, wait with ``subprocess.TimeoutExpired``)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


# Starts ``argv`` in a session of its own, stdin from /dev/null, stdout and stderr
# appended to the log file, in the environment given.
Spawner = Callable[[Sequence[str], Path, dict[str, str]], Child]


def exec_child(argv: Sequence[str], log_path: Path, env: dict[str, str]) -> Child:
    """The default: a new interpreter (fork and exec) for every process."""
    log_file = open(log_path, "ab")  # noqa: SIM115 - owned by the child
    try:
        return subprocess.Popen(
            list(argv),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    finally:
        log_file.close()


_spawner: Spawner = exec_child


def set_spawner(spawner: Spawner) -> Spawner:
    """How every ManagedProcess starts from now on; returns the previous way. The test
    suite forks its services from an interpreter that has them imported already
    (tests/warm_start.py), which saves each start most of its CPU time."""
    global _spawner
    previous, _spawner = _spawner, spawner
    return previous


class ManagedProcess:
    """A child process with its log file; stopped by pid, never by name.

    ``spawner`` starts it where the default one cannot: the multi-host test harness
    (tests/multihost/) execs each process inside its host's network namespace."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: dict[str, str] | None = None,
        spawner: Spawner | None = None,
    ):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.spawner = spawner
        self.proc: Child | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> ManagedProcess:
        """Spawn the process; refused while the one started before is still running (a
        second one beside it would be an orphan nobody stops)."""
        if self.alive():
            raise ProcessError(f"{self.name} is running (pid {self.pid}): stop it first")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = (self.spawner or _spawner)(self.argv, self.log_path, env)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL, then reap."""
        if self.proc is None:
            return
        if self.alive():
            self.proc.kill()
        self.proc.wait()

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM, wait up to ``grace_s``, then SIGKILL. Returns the exit code."""
        if self.proc is None:
            return None
        if self.alive():
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()

    def wait_until(self, ready: Callable[[], bool], deadline_s: float, what: str) -> None:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if not self.alive():
                raise ProcessError(
                    f"{self.name} exited with {self.proc.returncode if self.proc else None} "
                    f"before {what}; log {self.log_path}:\n{tail(self.log_path)}"
                )
            if ready():
                return
            time.sleep(0.05)
        raise ProcessError(
            f"{self.name} not {what} after {deadline_s}s; log {self.log_path}:\n"
            f"{tail(self.log_path)}"
        )


def zookeeper_config(
    data_dir: Path,
    client_port: int,
    host: str = "127.0.0.1",
    servers: Sequence[tuple[int, str, int, int]] = (),
    tick_ms: int = 500,
) -> str:
    """A zoo.cfg; ``servers`` is ``(id, host, peer_port, election_port)`` for an ensemble."""
    lines = [
        f"tickTime={tick_ms}",
        "initLimit=20",
        "syncLimit=10",
        f"dataDir={data_dir}",
        f"clientPort={client_port}",
        f"clientPortAddress={host}",
        "admin.enableServer=false",
        "4lw.commands.whitelist=ruok,srvr,stat,mntr",
        "minSessionTimeout=1000",
        "maxSessionTimeout=120000",
        "maxClientCnxns=0",
        "autopurge.purgeInterval=1",
        "autopurge.snapRetainCount=3",
    ]
    for server_id, server_host, peer_port, election_port in servers:
        lines.append(f"server.{server_id}={server_host}:{peer_port}:{election_port}")
    return "\n".join(lines) + "\n"


def zookeeper_mode(host: str, port: int) -> str | None:
    """The server's ``Mode:`` from ``srvr`` (``leader``, ``follower``, ``standalone``),
    or None while it does not answer as serving."""
    try:
        with socket.create_connection((host, port), timeout=0.5) as sock:
            sock.sendall(b"srvr")
            sock.settimeout(1.0)
            chunks = []
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError:
        return None
    for line in b"".join(chunks).decode(errors="replace").splitlines():
        if line.startswith("Mode:"):
            return line.removeprefix("Mode:").strip()
    return None


def zookeeper_ready(host: str, port: int) -> bool:
    """True once the server answers ``srvr`` as serving (a quorum member or standalone)."""
    return zookeeper_mode(host, port) is not None


class ZooKeeperProcess(ManagedProcess):
    """A ZooKeeper server from Debian's ``zookeeper`` package, run straight from the jar."""

    def __init__(
        self,
        data_dir: Path,
        port: int,
        host: str = "127.0.0.1",
        server_id: int | None = None,
        servers: Sequence[tuple[int, str, int, int]] = (),
        name: str = "zookeeper",
        spawner: Spawner | None = None,
    ):
        if not ZOOKEEPER_JAR.exists():
            raise ProcessError(
                f"{ZOOKEEPER_JAR} is missing: install Debian's zookeeper package "
                "(apt-get install zookeeper), or run 'make run' / 'make test', which do"
            )
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if server_id is not None:
            (self.data_dir / "myid").write_text(f"{server_id}\n")
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(zookeeper_config(self.data_dir, port, host, servers))
        classpath = f"{ZOOKEEPER_CONF_DIR}:{ZOOKEEPER_JAR}"
        if SLF4J_SIMPLE_JAR.exists():
            # Without a binding ZooKeeper's own log is lost (SLF4J falls back to NOP).
            classpath += f":{SLF4J_SIMPLE_JAR}"
        argv = [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-Dzookeeper.admin.enableServer=false",
            *(ZOOKEEPER_ELECTION_PROPERTIES if servers else ()),
            "-cp",
            classpath,
            ZOOKEEPER_MAIN,
            str(cfg),
        ]
        super().__init__(name, argv, self.data_dir / "zookeeper.log", spawner=spawner)

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def wait_ready(self, deadline_s: float = 60.0) -> None:
        self.wait_until(lambda: zookeeper_ready(self.host, self.port), deadline_s, "serving")


_clients = threading.local()


@functools.cache
def default_verify() -> ssl.SSLContext:
    """The default CAs' context, made once: an ``httpx.Client`` given ``verify=True``
    loads them again (about 25 ms of CPU a client), one given this context does not."""
    # The system's CAs (httpx's own default is certifi's bundle): these polls call the
    # cluster's own services, over plain HTTP or with their CA's context, never the
    # public web.
    return ssl.create_default_context()


def poll_client(verify: ssl.SSLContext | bool = True) -> httpx.Client:
    """This thread's client for polls verified with ``verify`` (a context, or True for
    the default CAs), made once. A call of ``httpx.get`` makes a client, and with it a
    TLS context: about 25 ms of CPU, paid by every poll of a loop that asks every 50 ms
    (half a core while a start-up is awaited). Without keep-alive: a process restarted
    on the same port meets a new connection, never a dead one."""
    if verify is True:
        verify = default_verify()
    made: dict[ssl.SSLContext | bool, httpx.Client] | None = getattr(_clients, "made", None)
    if made is None:
        made = _clients.made = {}
    client = made.get(verify)
    if client is None:
        limits = httpx.Limits(max_keepalive_connections=0)
        client = made[verify] = httpx.Client(verify=verify, limits=limits)
    return client


def health_ok(url: str, verify: ssl.SSLContext | bool = True) -> bool:
    """Whether ``url``'s ``/health`` answers 200 (over HTTPS, verified with ``verify``)."""
    try:
        return poll_client(verify).get(f"{url}/health", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


class ServiceProcess(ManagedProcess):
    """A Quire service (``python -m bookie`` …) with its URL and readiness check.

    ``tls_ca``: the service serves HTTPS (its ``--tls-*`` flags are among ``args`` or in
    ``env``), and its certificate is verified against this CA bundle, for the name
    ``host`` (docs/security.md, "TLS"). ``client_context`` is what a caller reaches it
    with: the CA, and ``tls_client`` (a certificate and key) when the service requires
    client certificates."""

    def __init__(
        self,
        module: str,
        args: Sequence[str],
        host: str,
        port: int,
        log_path: Path,
        env: dict[str, str] | None = None,
        name: str | None = None,
        spawner: Spawner | None = None,
        tls_ca: Path | None = None,
        tls_client: tuple[Path, Path] | None = None,
    ):
        self.module = module
        self.host = host
        self.port = port
        self.tls_ca = tls_ca
        self.tls_client = tls_client
        self._client_context: ssl.SSLContext | None = None  # made once, on first use
        argv = [sys.executable, "-m", module, "--host", host, "--port", str(port), *args]
        super().__init__(name or f"{module}@{host}:{port}", argv, log_path, env, spawner)

    @property
    def url(self) -> str:
        scheme = "http" if self.tls_ca is None else "https"
        return f"{scheme}://{self.host}:{self.port}"

    def client_context(self) -> ssl.SSLContext | None:
        """The TLS context to call this service with (made once: health checks poll
        with it); None without TLS."""
        if self.tls_ca is None:
            return None
        if self._client_context is None:
            context = ssl.create_default_context(cafile=self.tls_ca)
            if self.tls_client is not None:
                context.load_cert_chain(*self.tls_client)
            self._client_context = context
        return self._client_context

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def wait_healthy(self, deadline_s: float = 30.0) -> None:
        verify = self.client_context() or True
        self.wait_until(lambda: health_ok(self.url, verify), deadline_s, "healthy")

    def healthy(self) -> bool:
        """Whether its ``/health`` answers 200 now (over TLS with ``client_context``)."""
        return health_ok(self.url, self.client_context() or True)

    def restart(self, deadline_s: float = 30.0) -> None:
        self.stop()
        self.start()
        self.wait_healthy(deadline_s)


def stop_processes(procs: Sequence[ManagedProcess], grace_s: float) -> None:
    """SIGTERM every process (and its descendants) at once, SIGKILL after ``grace_s``.

    Descendants are collected by pid before the signal, so a child that its
    parent leaves behind is stopped too; nothing is signalled by name.
    """
    descendants: list[psutil.Process] = []
    for proc in procs:
        if proc.alive() and proc.pid is not None:
            try:
                descendants += psutil.Process(proc.pid).children(recursive=True)
            except psutil.Error:
                pass
            proc.signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
            proc.signal(signal.SIGTERM)
    end = time.monotonic() + grace_s
    for proc in procs:
        if proc.proc is None:
            continue
        try:
            proc.proc.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
        proc.proc.wait()
    alive = [d for d in descendants if d.is_running()]
    for child in alive:
        try:
            child.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(alive, timeout=max(0.5, end - time.monotonic()))
    for child in alive:
        try:
            child.kill()
        except psutil.Error:
            pass


def ended(proc: ManagedProcess) -> str:
    """How a process ended, for people: "exited with code 3", "was killed by SIGKILL"."""
    code = proc.proc.returncode if proc.proc is not None else None
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            pass
    return f"exited with code {code}"
