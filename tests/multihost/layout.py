"""Quire's processes on hosts of a ``Network``: a ZooKeeper ensemble with one server
per host, bookies and gateways each on a host of its own, bound to the host's
address and advertising its name (a bookie's id is ``bookie1:3181``).

Each host has a network stack of its own, so every service of a kind uses the same
well-known port. A process is a ``ServiceProcess`` or ``ZooKeeperProcess`` exec'd
inside its host (``Host.spawner``), driven as anywhere else by pid: kill, pause,
resume, restart; readiness is checked from its own host. Spark's master, worker and
driver go on hosts of their own beside a layout (tests/multihost/spark_hosts.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from services.cluster.limits import STOP_GRACE_S
from services.cluster.processes import (
    ServiceProcess,
    ZooKeeperProcess,
    stop_processes,
    tail,
    zookeeper_mode,
    zookeeper_ready,
)
from services.cluster.tls import tls_args
from services.tls.certificates import CertificateAuthority
from services.tls.contexts import TlsFiles
from tests.multihost.faults import mount_tmpfs
from tests.multihost.network import Host, Network

ZOOKEEPER_CLIENT_PORT = 2181
ZOOKEEPER_PEER_PORT = 2888
ZOOKEEPER_ELECTION_PORT = 3888
BOOKIE_PORT = 3181
GATEWAY_PORT = 8080
AUDITOR_PORT = 8090
REPLICATOR_PORT = 8091
ZOOKEEPER_READY_S = 90.0
SERVICE_HEALTHY_S = 60.0
# Short, so a host cut from ZooKeeper loses its session within a test's patience.
SESSION_TIMEOUT_S = 4


class HostService(ServiceProcess):
    """A Quire service exec'd inside ``node``, listening on its address under its name."""

    def __init__(
        self,
        node: Host,
        module: str,
        args: Sequence[str],
        port: int,
        log_path: Path,
        env: dict[str, str] | None = None,
        tls: TlsFiles | None = None,
    ):
        """With ``tls`` the service serves HTTPS with those files (the flags are added),
        and its health is asked with their CA and certificate."""
        self.node = node
        name = f"{module}@{node.name}"
        if tls is not None:
            args = [*args, *tls_args(tls), *(["--tls-client-auth"] if tls.client_auth else [])]
        super().__init__(
            module,
            args,
            node.name,
            port,
            log_path,
            env,
            name=name,
            spawner=node.spawner,
            tls_ca=tls.ca if tls is not None else None,
            tls_client=(tls.cert, tls.key) if tls is not None else None,
        )
        self._health: httpx.Client | None = None

    def wait_healthy(self, deadline_s: float = SERVICE_HEALTHY_S) -> None:
        """Until ``/health`` answers 200, asked from the service's own host."""
        self.wait_until(self.healthy, deadline_s, "healthy")

    def healthy(self) -> bool:
        if self._health is None:
            context = self.client_context()
            self._health = (
                self.node.http()
                if context is None
                else self.node.http_client(timeout_s=1.0, ssl_context=context)
            )
        try:
            return self._health.get(f"{self.url}/health").status_code == 200
        except httpx.HTTPError:
            return False


class HostZooKeeper(ZooKeeperProcess):
    """A ZooKeeper server exec'd inside ``node``: client, quorum and election ports
    bound on the host's address."""

    def __init__(
        self,
        node: Host,
        data_dir: Path,
        server_id: int,
        servers: Sequence[tuple[int, str, int, int]],
    ):
        self.node = node
        super().__init__(
            data_dir,
            ZOOKEEPER_CLIENT_PORT,
            host=node.name,
            server_id=server_id,
            servers=servers,
            name=f"zookeeper@{node.name}",
            spawner=node.spawner,
        )

    def wait_ready(self, deadline_s: float = ZOOKEEPER_READY_S) -> None:
        """Until the server answers ``srvr`` as serving, asked from its own host."""
        address = self.node.address
        self.wait_until(
            lambda: self.node.call(zookeeper_ready, address, self.port), deadline_s, "serving"
        )

    def mode(self) -> str | None:
        """``leader``, ``follower`` or None while not serving, asked from its own host."""
        return self.node.call(zookeeper_mode, self.node.address, self.port)


@dataclass
class Layout:
    """What ``start_layout`` started, by role; the test's client is a host of its own."""

    network: Network
    zookeepers: list[HostZooKeeper]
    bookies: list[HostService]
    gateways: list[HostService]
    client: Host
    zk_root: str
    auditors: list[HostService] = field(default_factory=list)
    replicators: list[HostService] = field(default_factory=list)
    processes: list[ServiceProcess | ZooKeeperProcess] = field(default_factory=list)
    # Each bookie's data dir, by bookie id (on a tmpfs of its own with bookie_disk_bytes).
    data_dirs: dict[str, Path] = field(default_factory=dict)
    # Each bookie's rack, by its host's name (only those given one).
    racks: dict[str, str] = field(default_factory=dict)

    @property
    def zk_connect(self) -> str:
        return ",".join(z.connect_string for z in self.zookeepers)

    def zookeeper_leader(self, deadline_s: float = ZOOKEEPER_READY_S) -> HostZooKeeper:
        """The server that answers ``srvr`` as leader, polled until one does."""
        deadline = time.monotonic() + deadline_s
        while True:
            for server in self.zookeepers:
                if server.alive() and server.mode() == "leader":
                    return server
            if time.monotonic() > deadline:
                raise TimeoutError(f"no ZooKeeper leader within {deadline_s} s")
            time.sleep(0.1)

    @property
    def zookeeper_hosts(self) -> list[Host]:
        return [z.node for z in self.zookeepers]

    @property
    def bookie_hosts(self) -> list[Host]:
        return [b.node for b in self.bookies]

    def log_tails(self, lines: int = 40) -> str:
        return "\n".join(
            f"----- {p.name} (pid {p.pid}) {p.log_path}\n{tail(p.log_path, lines)}"
            for p in self.processes
        )

    def stop(self) -> None:
        stop_processes(list(reversed(self.processes)), STOP_GRACE_S)


def service_args(zk_connect: str, zk_root: str, zk_auth_file: Path | None = None) -> list[str]:
    args = [
        "--zk",
        zk_connect,
        "--zk-root",
        zk_root,
        "--zk-session-timeout",
        str(SESSION_TIMEOUT_S),
    ]
    if zk_auth_file is not None:
        args += ["--zk-auth-file", str(zk_auth_file)]
    return args


def start_layout(
    network: Network,
    base_dir: Path,
    zookeepers: int = 3,
    bookies: int = 3,
    gateways: int = 2,
    zk_root: str = "/quire",
    gateway_args: Sequence[str] = (),
    auditors: int = 0,
    replicators: int = 0,
    auditor_args: Sequence[str] = (),
    replicator_args: Sequence[str] = (),
    bookie_disk_bytes: int | None = None,
    racks: Sequence[str | None] = (),
    zk_auth_file: Path | None = None,
    tls: CertificateAuthority | None = None,
) -> Layout:
    """Hosts ``zk1``…, ``bookie1``…, ``gateway1``…, ``auditor1``…, ``replicator1``…
    and ``client`` on ``network``, and on each its process: the ZooKeeper servers first
    (started together, then waited for), then every other service together. Every
    process is stopped by the network's ``close`` too. With ``bookie_disk_bytes``, each
    bookie's data dir is on a tmpfs of that size (tests/multihost/faults.py), unmounted
    when the network closes. ``racks[i]`` is the ``--rack`` of bookie ``i + 1`` (None,
    or past the end: none). With ``zk_auth_file`` every service holds those ZooKeeper
    credentials (docs/security.md, "ZooKeeper authentication"). With ``tls`` every
    service serves HTTPS with a certificate of that CA for its host's name and address,
    and the bookies require client certificates (``host_tls``)."""
    zk_hosts = network.add_hosts(f"zk{i}" for i in range(1, zookeepers + 1))
    bookie_hosts = network.add_hosts(f"bookie{i}" for i in range(1, bookies + 1))
    gateway_hosts = network.add_hosts(f"gateway{i}" for i in range(1, gateways + 1))
    auditor_hosts = network.add_hosts(f"auditor{i}" for i in range(1, auditors + 1))
    replicator_hosts = network.add_hosts(f"replicator{i}" for i in range(1, replicators + 1))
    client = network.add_host("client")
    servers = [
        (i, host.name, ZOOKEEPER_PEER_PORT, ZOOKEEPER_ELECTION_PORT)
        for i, host in enumerate(zk_hosts, 1)
    ]
    ensemble = [
        HostZooKeeper(host, base_dir / host.name, server_id, servers)
        for (server_id, *_), host in zip(servers, zk_hosts, strict=True)
    ]
    layout = Layout(network, ensemble, [], [], client, zk_root)
    start = time.monotonic()
    for server in ensemble:
        _launch(layout, server)
    for server in ensemble:
        server.wait_ready(max(1.0, ZOOKEEPER_READY_S - (time.monotonic() - start)))
    common = service_args(layout.zk_connect, zk_root, zk_auth_file)
    for index, host in enumerate(bookie_hosts):
        disk = base_dir / host.name
        if bookie_disk_bytes is not None:
            disk = mount_tmpfs(network, host.name, disk / "disk", bookie_disk_bytes)
        data = ["--data-dir", str(disk / "data")]
        rack = racks[index] if index < len(racks) else None
        if rack is not None:
            data += ["--rack", rack]
            layout.racks[host.name] = rack
        bookie = HostService(
            host,
            "bookie",
            [*common, *data],
            BOOKIE_PORT,
            base_dir / host.name / "bookie.log",
            tls=host_tls(tls, host, base_dir, client_auth=True),
        )
        layout.data_dirs[bookie.address] = disk / "data"
        layout.bookies.append(bookie)
        _launch(layout, bookie)
    for host in gateway_hosts:
        args = [*common, *gateway_args]
        gateway = HostService(
            host,
            "gateway",
            args,
            GATEWAY_PORT,
            base_dir / host.name / "gateway.log",
            tls=host_tls(tls, host, base_dir),
        )
        layout.gateways.append(gateway)
        _launch(layout, gateway)
    for role, hosts, port, extra, started in (
        ("auditor", auditor_hosts, AUDITOR_PORT, auditor_args, layout.auditors),
        ("replicator", replicator_hosts, REPLICATOR_PORT, replicator_args, layout.replicators),
    ):
        for host in hosts:
            proc = HostService(
                host,
                role,
                [*common, *extra],
                port,
                base_dir / host.name / f"{role}.log",
                tls=host_tls(tls, host, base_dir),
            )
            started.append(proc)
            _launch(layout, proc)
    start = time.monotonic()
    for proc in [*layout.bookies, *layout.gateways, *layout.auditors, *layout.replicators]:
        proc.wait_healthy(max(1.0, SERVICE_HEALTHY_S - (time.monotonic() - start)))
    return layout


def host_tls(
    ca: CertificateAuthority | None, host: Host, base_dir: Path, client_auth: bool = False
) -> TlsFiles | None:
    """A certificate of ``ca`` for ``host`` (its name and address) under
    ``base_dir/<host>/tls``, with the CA beside it; None without a CA."""
    if ca is None:
        return None
    directory = base_dir / host.name / "tls"
    directory.mkdir(parents=True, exist_ok=True)
    ca.write(directory / "ca.pem", directory / "ca.key")
    (directory / "ca.key").unlink()  # a service host holds no CA key
    files = TlsFiles(
        directory / "cert.pem", directory / "key.pem", directory / "ca.pem", client_auth
    )
    ca.issue(host.name, [host.name], [host.address]).write(files.cert, files.key)
    return files


def _launch(layout: Layout, proc: ServiceProcess | ZooKeeperProcess) -> None:
    layout.processes.append(proc)
    layout.network.track(proc)
    proc.start()
