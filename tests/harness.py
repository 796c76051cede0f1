"""The test harness: real ZooKeeper, real service processes on loopback.

Every process a test starts goes through a ``Cluster``; the fixture that owns
the cluster stops every process by pid at teardown, also when the test
failed, and prints the tail of each log when it did.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import psutil
from kazoo.protocol.serialization import (
    Close,
    Connect,
    int_int_long_struct,
    int_int_struct,
    int_struct,
    reply_header_struct,
)

from services.cluster.limits import STOP_GRACE_S
from services.cluster.processes import (
    ServiceProcess,
    ZooKeeperProcess,
    free_port,
    stop_processes,
    tail,
)
from services.tls.contexts import TlsFiles

if TYPE_CHECKING:
    from services.zk.store import MetadataStore

EXPIRE_ATTEMPTS_MAX = 5
_CLOSE_XID = 1


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


def wait_healthy(procs: Iterable[ServiceProcess], deadline_s: float = 30.0) -> None:
    """Wait for processes started together (``wait=False``) until each answers /health."""
    end = time.monotonic() + deadline_s
    for proc in procs:
        proc.wait_healthy(max(0.1, end - time.monotonic()))


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


def killed_survivors(pids: Iterable[int]) -> list[int]:
    """The ``pids`` still running, each killed (so a failing test leaks nothing into the
    next ones); the caller asserts the list is empty."""
    survivors = [pid for pid in pids if psutil.pid_exists(pid)]
    for pid in survivors:
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass
    return survivors


def expire_session(
    connect_string: str, session_id: int, password: bytes, timeout_s: float = 10.0
) -> None:
    """End a ZooKeeper session on the server, as its expiry does: connect with the
    session's id and password (the server drops the owner's connection) and close the
    session, both requests in one write.

    Not kazoo's harness trick (a second ``KazooClient`` on the session, started, then
    stopped): between that client's start and its close the owner reconnects, takes the
    session back (the server drops the other connection), the close is never sent and
    the session lives on; on a loaded machine the two clients steal it back and forth.
    Pipelined, the close reaches the server before the owner's first reconnect (its retry
    waits >= 0.1 s). Should the owner still win, the attempt is repeated."""
    host, port = connect_string.split("/", 1)[0].split(",")[0].rsplit(":", 1)
    connect = Connect(0, 0, 30_000, session_id, password, False).serialize()
    close = int_int_struct.pack(_CLOSE_XID, Close.type) + Close.serialize()
    request = b"".join(int_struct.pack(len(part)) + part for part in (connect, close))
    for _ in range(EXPIRE_ATTEMPTS_MAX):
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
            sock.sendall(request)
            answers = sock.makefile("rb")
            answer = _zk_frame(answers)
            if answer is None:
                continue
            _, negotiated_ms, _ = int_int_long_struct.unpack_from(answer, 0)
            if negotiated_ms <= 0:
                return  # the session had already expired
            reply = _zk_frame(answers)
            if reply is None:
                continue  # the owner reconnected between our two requests
            xid, _, err = reply_header_struct.unpack_from(reply, 0)
            assert xid == _CLOSE_XID and err == 0, f"closing session {session_id:#x}: {err}"
            return
    raise AssertionError(f"session {session_id:#x} survived {EXPIRE_ATTEMPTS_MAX} closes")


async def renew_session(store: MetadataStore, connect_string: str, timeout_s: float = 30.0) -> None:
    """End ``store``'s session on the server (``expire_session``) and poll, up to
    ``timeout_s``, until the store is connected again under a new session."""
    old = store.session_id
    assert old is not None
    session_id, password = store.client.client_id
    await asyncio.to_thread(expire_session, connect_string, session_id, password)
    deadline = time.monotonic() + timeout_s
    while not (store.connected and store.session_id not in (None, old)):
        assert time.monotonic() < deadline, "no new session"
        await asyncio.sleep(0.05)


def _zk_frame(answers: BinaryIO) -> bytes | None:
    """One length-prefixed ZooKeeper answer, or None when the server closed first."""
    try:
        head = answers.read(int_struct.size)
        if len(head) < int_struct.size:
            return None
        (length,) = int_struct.unpack(head)
        body = answers.read(length)
    except ConnectionResetError:
        return None
    return body if len(body) == length else None


class Cluster:
    """Processes of one test: services on free loopback ports under one chroot. With
    ``tls`` every service serves HTTPS with these files (docs/security.md, "TLS"); the
    ``client_auth`` of ``tls`` is left to each service's own flags. With ``zk_auth_file``
    every service authenticates with ZooKeeper with its credentials and locks what it
    creates (docs/security.md, "ZooKeeper authentication")."""

    def __init__(
        self,
        zk_connect: str,
        zk_root: str,
        base_dir: Path,
        secret: str | None = None,
        tls: TlsFiles | None = None,
        zk_auth_file: Path | None = None,
    ):
        self.zk_connect = zk_connect
        self.zk_root = zk_root
        self.base_dir = base_dir
        self.secret = secret
        self.tls = tls
        self.zk_auth_file = zk_auth_file
        self.processes: list[ServiceProcess] = []

    def common_args(self) -> list[str]:
        args = ["--zk", self.zk_connect, "--zk-root", self.zk_root, "--zk-session-timeout", "4"]
        if self.secret:
            args += ["--cluster-secret", self.secret]
        if self.tls:
            args += ["--tls-cert", str(self.tls.cert), "--tls-key", str(self.tls.key)]
            args += ["--tls-ca", str(self.tls.ca)]
        if self.zk_auth_file:
            args += ["--zk-auth-file", str(self.zk_auth_file)]
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
            tls_ca=self.tls.ca if self.tls else None,
            tls_client=(self.tls.cert, self.tls.key) if self.tls else None,
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

    def start_bookies(
        self, count: int, extra_args: list[str] | None = None
    ) -> list[ServiceProcess]:
        """``count`` bookies started together, then waited for together."""
        bookies = [self.start_bookie(extra_args=extra_args, wait=False) for _ in range(count)]
        wait_healthy(bookies)
        return bookies

    def stop_all(self) -> None:
        """Every process at once (SIGTERM, SIGKILL after the grace), not one by one."""
        stop_processes(list(reversed(self.processes)), STOP_GRACE_S)

    def log_tails(self) -> str:
        return "\n".join(
            f"----- {p.name} (pid {p.pid}) {p.log_path}\n{tail(p.log_path, 60)}"
            for p in self.processes
        )


def fresh_chroot() -> str:
    return f"/test-{uuid.uuid4().hex[:12]}"
