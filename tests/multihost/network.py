"""Hosts as Linux network namespaces: a private network for one test module, and the
faults a network can have.

A ``Network`` is a set of namespaces named after a prefix of its own,
``qh<pid>n<seq>``: one *switch* namespace holding a Linux bridge, and one namespace
per ``Host``, joined to the bridge by a veth pair, with ``lo`` up, an address of
``SUBNET`` on ``eth0`` and ``/etc/netns/<namespace>/hosts`` naming every host of the
network (``ip netns exec`` mounts it over ``/etc/hosts``). The bridge and every veth
end live inside these namespaces: the root namespace gets no interface, no address
and no route, so the subnet can be the same for every network and nothing collides
between parallel pytest workers (only the namespaces' names, which carry the pid).

Processes run inside a host through ``ip netns exec`` (``Host.spawner``): a fork of
the test process or of the suite's zygote (tests/warm_start.py) would stay in the
root namespace. The test process itself reaches a host through sockets created in
the host's namespace by a thread that entered it (``Host.socket``,
``Host.http_client``); a socket keeps its namespace wherever it is used.

Faults: ``partition`` drops packets with iptables rules (``IPTABLES``, the nft
backend, which works in a namespace here) in the INPUT chain of the receiving
hosts, as a network that loses them silently would; ``heal`` deletes exactly the
rules it added. A bookie's disk filled or wiped: tests/multihost/faults.py.

Clean-up: ``close`` stops every process started through the network's hosts, runs
what was registered with ``at_close`` (unmounting disks), then deletes its namespaces
(which takes the bridge, the veths and the rules with them) and their ``/etc/netns``
directories. It runs from the context manager, from the pytest fixture that holds the
network and at exit; and ``sweep``, run as a network is made, removes what networks of
dead processes left, never anything whose owner pid is alive.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import httpcore
import httpx
import psutil
from httpcore._backends.sync import SyncStream

from services.cluster.limits import STOP_GRACE_S
from services.cluster.processes import (
    Child,
    ManagedProcess,
    exec_child,
    stop_processes,
)

T = TypeVar("T")

NETNS_RUN_DIR = Path("/run/netns")
NETNS_ETC_DIR = Path("/etc/netns")
# Addresses exist only inside a network's namespaces, so every network uses the same.
SUBNET = "10.213.0"
SUBNET_BITS = 24
HOSTS_MAX = 250
# The nft backend: iptables-legacy works in a namespace here too, but Debian's default
# is nft, and one named backend keeps every rule in one table.
IPTABLES = "iptables-nft"
BRIDGE = "br0"
HOST_INTERFACE = "eth0"
SWITCH = "switch"
# A host's name is a DNS label the services advertise (bookie ids are "host:port").
HOST_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
OWNED = re.compile(r"^qh(\d+)n\d+-")
COMMAND_TIMEOUT_S = 30.0
_CLONE_NEWNET = 0x40000000


class NetworkError(RuntimeError):
    """A namespace, link or rule could not be made or removed."""


def run(argv: Sequence[str]) -> str:
    """Run a command of ``ip`` or iptables; its stdout, or NetworkError with its stderr."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkError(f"{' '.join(argv)}: {exc}") from exc
    if done.returncode != 0:
        raise NetworkError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def namespaces() -> list[str]:
    """The names of every network namespace ``ip netns`` knows."""
    return [line.split()[0] for line in run(["ip", "netns", "list"]).splitlines() if line]


def unavailable() -> str | None:
    """Why hosts cannot be made here (not root, no ``ip``, namespaces refused), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is missing"
    probe = f"qh{os.getpid()}n0-probe"
    try:
        run(["ip", "netns", "add", probe])
        run(["ip", "netns", "del", probe])
    except NetworkError as exc:
        return f"ip netns does not work here: {exc}"
    return None


def owner_pid(namespace: str) -> int | None:
    """The pid of the process whose network made ``namespace``, None if not ours."""
    match = OWNED.match(namespace)
    return int(match.group(1)) if match else None


def sweep() -> list[str]:
    """Remove the namespaces (and ``/etc/netns`` directories) that networks of dead
    processes left: a test process killed before its clean-up ran. The processes still
    running inside them are killed first, by pid (``ip netns pids``): they were started
    by that dead process's hosts. Nothing of a live owner is touched. Returns the
    namespaces removed."""
    removed = []
    leftovers = {ns for ns in namespaces() if _dead_owner(ns)}
    for ns in sorted(leftovers):
        for pid in run(["ip", "netns", "pids", ns]).split():
            with contextlib.suppress(psutil.Error):
                psutil.Process(int(pid)).kill()
        with contextlib.suppress(NetworkError):
            run(["ip", "netns", "del", ns])
            removed.append(ns)
    if NETNS_ETC_DIR.is_dir():
        for path in NETNS_ETC_DIR.iterdir():
            if _dead_owner(path.name):
                shutil.rmtree(path, ignore_errors=True)
    return removed


def _dead_owner(name: str) -> bool:
    pid = owner_pid(name)
    return pid is not None and not psutil.pid_exists(pid)


def _enter_namespace(path: str) -> None:
    """Move the calling thread (only it) into the network namespace at ``path``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns {path}: {os.strerror(errno)}")
    finally:
        os.close(fd)


class Host:
    """One host: a network namespace with one address on the network's bridge."""

    def __init__(self, network: Network, name: str, index: int):
        self.network = network
        self.name = name
        self.namespace = f"{network.prefix}-{name}"
        self.address = f"{SUBNET}.{index}"
        self._thread: ThreadPoolExecutor | None = None
        self._thread_lock = threading.Lock()
        self._http: httpx.Client | None = None

    def __repr__(self) -> str:
        return f"Host({self.name}, {self.address})"

    # ------------------------------------------------------------ processes

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def spawner(self, argv: Sequence[str], log_path: Path, env: dict[str, str]) -> Child:
        """A ``services.cluster.processes.Spawner``: ``argv`` exec'd inside this host (the
        pid is the program's own: ``ip netns exec`` execs it)."""
        return exec_child(self.command(argv), log_path, env)

    def spawn(
        self, name: str, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None
    ) -> ManagedProcess:
        """Start ``argv`` inside this host; the network stops it when it closes."""
        proc = ManagedProcess(name, argv, log_path, env, spawner=self.spawner)
        self.network.track(proc)
        proc.start()
        return proc

    # ------------------------------------------------------------ the test's side

    def call(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` run by a thread inside this host's namespace (one at a time)."""
        with self._thread_lock:
            if self._thread is None:
                self._thread = ThreadPoolExecutor(
                    1,
                    thread_name_prefix=self.namespace,
                    initializer=_enter_namespace,
                    initargs=(str(NETNS_RUN_DIR / self.namespace),),
                )
            thread = self._thread
        return thread.submit(fn, *args).result()

    def socket(self, family: int = socket.AF_INET, kind: int = socket.SOCK_STREAM) -> socket.socket:
        """A socket of this host: connections from it leave from this host's address."""
        return self.call(socket.socket, family, kind)

    def http_client(
        self, timeout_s: float = 30.0, ssl_context: ssl.SSLContext | None = None
    ) -> httpx.Client:
        """An HTTP client whose connections leave from this host; host names of the
        network resolve to their addresses; https verified with ``ssl_context``."""
        return httpx.Client(transport=HostTransport(self, ssl_context), timeout=timeout_s)

    def http(self) -> httpx.Client:
        """This host's own client, for health checks from the host itself (short
        time-outs; a partition never separates a host from itself)."""
        if self._http is None:
            self._http = self.http_client(timeout_s=1.0)
        return self._http

    def iptables(self, *args: str) -> str:
        return run(self.command([IPTABLES, "-w", *args]))

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
        with self._thread_lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.shutdown(wait=True)


class HostBackend(httpcore.SyncBackend):
    """httpcore's sockets, created in a host's namespace, host names resolved by the
    network. (httpcore has no public way to hand it sockets: SyncStream is its own.)"""

    def __init__(self, host: Host):
        self.host = host

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[object] | None = None,
    ) -> httpcore.NetworkStream:
        address = self.host.network.resolve(host)
        sock = self.host.socket()
        try:
            sock.settimeout(timeout)
            sock.connect((address, port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except TimeoutError as exc:
            sock.close()
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            sock.close()
            raise httpcore.ConnectError(str(exc)) from exc
        return SyncStream(sock)


class HostTransport(httpx.HTTPTransport):
    """httpx's transport over ``HostBackend``: the only change is where sockets come
    from (httpx takes no network backend, so its pool is replaced)."""

    def __init__(self, host: Host, ssl_context: ssl.SSLContext | None = None):
        super().__init__()
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context, network_backend=HostBackend(host)
        )


class Network:
    """A private network of hosts; ``close`` removes everything it made."""

    _sequence = 0
    _sequence_lock = threading.Lock()

    def __init__(self) -> None:
        with Network._sequence_lock:
            Network._sequence += 1
            sequence = Network._sequence
        self.prefix = f"qh{os.getpid()}n{sequence}"
        self.hosts: dict[str, Host] = {}
        self.processes: list[ManagedProcess] = []
        self._rules: list[tuple[Host, tuple[str, ...]]] = []
        self._at_close: list[Callable[[], None]] = []
        self._closed = False
        self.swept = sweep()
        self.switch = f"{self.prefix}-{SWITCH}"
        atexit.register(self.close)
        try:
            run(["ip", "netns", "add", self.switch])
            self._in_switch("link", "add", BRIDGE, "type", "bridge")
            self._in_switch("link", "set", BRIDGE, "up")
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _in_switch(self, *args: str) -> str:
        return run(["ip", "-n", self.switch, *args])

    # ------------------------------------------------------------ hosts

    def add_host(self, name: str) -> Host:
        """A new host on the bridge; every host's hosts file names it from now on."""
        if self._closed:
            raise NetworkError("the network is closed")
        if not HOST_NAME.match(name) or name == SWITCH or name in self.hosts:
            raise NetworkError(f"host name {name!r}: taken or not a short lower-case label")
        if len(self.hosts) >= HOSTS_MAX:
            raise NetworkError(f"more than {HOSTS_MAX} hosts")
        index = len(self.hosts) + 1
        host = Host(self, name, index)
        self.hosts[name] = host
        (NETNS_ETC_DIR / host.namespace).mkdir(parents=True, exist_ok=True)
        run(["ip", "netns", "add", host.namespace])
        port = f"v{index}"  # the bridge's end, inside the switch namespace
        peer = ["peer", "name", HOST_INTERFACE, "netns", host.namespace]
        self._in_switch("link", "add", port, "type", "veth", *peer)
        self._in_switch("link", "set", port, "master", BRIDGE, "up")
        inside = ["ip", "-n", host.namespace]
        run([*inside, "link", "set", "lo", "up"])
        run([*inside, "addr", "add", f"{host.address}/{SUBNET_BITS}", "dev", HOST_INTERFACE])
        run([*inside, "link", "set", HOST_INTERFACE, "up"])
        self._write_hosts_files()
        return host

    def add_hosts(self, names: Iterable[str]) -> list[Host]:
        return [self.add_host(name) for name in names]

    def _write_hosts_files(self) -> None:
        """Every host's ``/etc/netns/<namespace>/hosts``, rewritten in place (a running
        process has the file mounted, so it sees the new names)."""
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        lines += [f"{h.address}\t{h.name}" for h in self.hosts.values()]
        text = "\n".join(lines) + "\n"
        for host in self.hosts.values():
            with open(NETNS_ETC_DIR / host.namespace / "hosts", "w") as f:
                f.write(text)

    def resolve(self, name: str) -> str:
        """A host's address from its name (an address stays itself)."""
        host = self.hosts.get(name)
        return host.address if host is not None else name

    def track(self, proc: ManagedProcess) -> None:
        """Stop ``proc`` when the network closes (it runs inside one of its hosts)."""
        self.processes.append(proc)

    # ------------------------------------------------------------ faults

    def partition(self, a: Iterable[Host], b: Iterable[Host], one_way: bool = False) -> None:
        """Drop every packet from a host of ``a`` to a host of ``b`` and, unless
        ``one_way``, from ``b`` to ``a``: at the receiver, so the sender sees nothing
        but silence. Lasts until ``heal``."""
        a, b = list(a), list(b)
        for sender in a:
            for receiver in b:
                self._drop(sender, receiver)
        if not one_way:
            for sender in b:
                for receiver in a:
                    self._drop(sender, receiver)

    def _drop(self, sender: Host, receiver: Host) -> None:
        rule = ("INPUT", "-s", sender.address, "-j", "DROP")
        receiver.iptables("-A", *rule)
        self._rules.append((receiver, rule))

    def heal(self) -> None:
        """Delete exactly the rules ``partition`` added, newest first."""
        while self._rules:
            host, rule = self._rules.pop()
            host.iptables("-D", *rule)

    # ------------------------------------------------------------ clean-up

    def at_close(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the network closes, once its processes stopped (newest first)."""
        self._at_close.append(fn)

    def close(self) -> None:
        """Stop the processes, run what ``at_close`` registered, then delete the
        namespaces and their /etc/netns directories. Idempotent; every step runs even
        if one fails."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        errors: list[str] = []
        stop_processes(list(reversed(self.processes)), STOP_GRACE_S)
        while self._at_close:
            try:
                self._at_close.pop()()
            except Exception as exc:  # every step runs; reported at the end
                errors.append(f"{type(exc).__name__}: {exc}")
        self._rules.clear()  # they go with their namespaces
        for host in self.hosts.values():
            host.close()
        for ns in [*(h.namespace for h in self.hosts.values()), self.switch]:
            for pid in _pids_in(ns):  # started in a host by hand, not through spawn
                if pid == os.getpid():
                    continue
                with contextlib.suppress(psutil.Error):
                    psutil.Process(pid).send_signal(signal.SIGKILL)
            if (NETNS_RUN_DIR / ns).exists():
                try:
                    run(["ip", "netns", "del", ns])
                except NetworkError as exc:
                    errors.append(str(exc))
            shutil.rmtree(NETNS_ETC_DIR / ns, ignore_errors=True)
        if errors:
            raise NetworkError("; ".join(errors))


def _pids_in(namespace: str) -> list[int]:
    if not (NETNS_RUN_DIR / namespace).exists():
        return []
    try:
        return [int(pid) for pid in run(["ip", "netns", "pids", namespace]).split()]
    except NetworkError:
        return []
