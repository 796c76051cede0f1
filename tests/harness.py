"""The test harness: real ZooKeeper, real service processes on loopback.

Every process a test starts goes through a ``Cluster``; the fixture that owns
the cluster stops every process by pid at teardown, also when the test
failed, and prints the tail of each log when it did.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kazoo.client import KazooClient

from services.cluster.processes import ServiceProcess, ZooKeeperProcess, free_port, tail


def wait_for(
    predicate: Callable[[], object], deadline_s: float = 20.0, what: str = "condition"
) -> object:
    """Poll ``predicate`` until it returns something truthy, or fail after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    last_exc: Exception | None = None
    while time.monotonic() < end:
        try:
            value = predicate()
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last_exc = exc
        else:
            if value:
                return value
        time.sleep(0.05)
    raise AssertionError(
        f"timed out after {deadline_s}s waiting for {what} (last error: {last_exc!r})"
    )


class ZooKeeperEnsemble:
    """N local ZooKeeper servers forming one ensemble."""

    def __init__(self, base_dir: Path, size: int = 3):
        self.servers: list[ZooKeeperProcess] = []
        peers = [(i + 1, "127.0.0.1", free_port(), free_port()) for i in range(size)]
        for server_id, _, _, _ in peers:
            self.servers.append(
                ZooKeeperProcess(
                    base_dir / f"zk{server_id}",
                    free_port(),
                    server_id=server_id,
                    servers=peers,
                    name=f"zookeeper-{server_id}",
                )
            )

    @property
    def connect_string(self) -> str:
        return ",".join(s.connect_string for s in self.servers)

    def start(self) -> ZooKeeperEnsemble:
        for server in self.servers:
            server.start()
        for server in self.servers:
            server.wait_ready(90.0)
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def expire_session(connect_string: str, session_id: int, password: bytes) -> None:
    """Force a ZooKeeper session to expire (kazoo's harness trick): open a second
    connection with the same session id and password and close it."""
    other = KazooClient(hosts=connect_string, client_id=(session_id, password), timeout=10.0)
    other.start(10.0)
    other.stop()
    other.close()


class Cluster:
    """Processes of one test: services on free loopback ports under one chroot."""

    def __init__(self, zk_connect: str, zk_root: str, base_dir: Path, secret: str | None = None):
        self.zk_connect = zk_connect
        self.zk_root = zk_root
        self.base_dir = base_dir
        self.secret = secret
        self.processes: list[ServiceProcess] = []

    def common_args(self) -> list[str]:
        args = ["--zk", self.zk_connect, "--zk-root", self.zk_root, "--zk-session-timeout", "4"]
        if self.secret:
            args += ["--cluster-secret", self.secret]
        return args

    def start(
        self,
        module: str,
        extra_args: list[str] | None = None,
        port: int | None = None,
        wait: bool = True,
        env: dict | None = None,
        name: str | None = None,
    ) -> ServiceProcess:
        port = port or free_port()
        label = name or f"{module}-{port}"
        proc = ServiceProcess(
            module,
            [*self.common_args(), *(extra_args or [])],
            "127.0.0.1",
            port,
            self.base_dir / "logs" / f"{label}.log",
            env=env,
            name=label,
        )
        self.processes.append(proc)
        proc.start()
        if wait:
            proc.wait_healthy(30.0)
        return proc

    def start_bookie(
        self,
        data_dir: Path | None = None,
        extra_args: list[str] | None = None,
        port: int | None = None,
        wait: bool = True,
    ) -> ServiceProcess:
        port = port or free_port()
        data_dir = data_dir or self.base_dir / f"bookie-{port}"
        return self.start(
            "bookie",
            ["--data-dir", str(data_dir), *(extra_args or [])],
            port=port,
            wait=wait,
            name=f"bookie-{port}",
        )

    def stop_all(self) -> None:
        for proc in reversed(self.processes):
            proc.stop()

    def log_tails(self) -> str:
        return "\n".join(
            f"----- {p.name} (pid {p.pid}) {p.log_path}\n{tail(p.log_path, 60)}"
            for p in self.processes
        )


def fresh_chroot() -> str:
    return f"/test-{uuid.uuid4().hex[:12]}"
