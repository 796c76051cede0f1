"""What ``quire up`` starts and where: the services, the configuration, the errors."""

from __future__ import annotations

import importlib.util
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from services.cluster.limits import SERVICE_START_DEADLINE_S

CLUSTER_SECRET_BYTES = 32
SECRET_ENV = "QUIRE_CLUSTER_SECRET"


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """One singleton service of the local cluster; ``port(P, N)`` places it."""

    name: str
    module: str
    port: Callable[[int, int], int]

    def available(self) -> bool:
        """True once ``python -m <module>`` can run (later issues add the modules)."""
        try:
            return importlib.util.find_spec(f"{self.module}.__main__") is not None
        except (ImportError, ValueError):
            return False


# The services after the bookies, in start order. Each starts only once its
# module exists; adding one to the cluster is one line here.
SERVICES: tuple[ServiceSpec, ...] = (
    ServiceSpec("gateway", "gateway", lambda p, n: p),
    ServiceSpec("auditor", "auditor", lambda p, n: p + n + 1),
    ServiceSpec("replicator", "replicator", lambda p, n: p + n + 2),
)


class ClusterError(RuntimeError):
    """The cluster cannot start or keep running; the message is one line for people."""

    def __init__(self, message: str, log_path: Path | None = None):
        super().__init__(message)
        self.log_path = log_path


class StopRequested(Exception):
    """SIGINT or SIGTERM arrived while the cluster was starting."""


@dataclass(slots=True)
class UpConfig:
    data_dir: Path
    bookies: int = 4
    gateway_port: int = 8080
    host: str = "127.0.0.1"
    zk: str | None = None
    zk_port: int = 2181
    zk_root: str = "/quire"
    zk_session_timeout: float | None = None
    start_deadline_s: float = SERVICE_START_DEADLINE_S
    without: frozenset[str] = frozenset()
    tls: bool = False  # every service over TLS, a CA in DATA_DIR/tls (services/cluster/tls.py)
    # None: QUIRE_CLUSTER_SECRET if set, else a random one (module docstring).
    cluster_secret: str | None = field(default=None, repr=False)


def port_free(host: str, port: int) -> bool:
    """True if a server could listen on ``host:port`` now (what uvicorn and ZooKeeper do)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@dataclass(slots=True)
class Planned:
    name: str
    module: str
    port: int
    args: list[str]
