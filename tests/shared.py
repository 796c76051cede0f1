"""The standard cluster: one per test process (each pytest-xdist worker), shared by every
test that only needs "a healthy cluster" and breaks nothing.

Four bookies, two gateways, an auditor and a replication worker under one chroot of the
session's ZooKeeper, started together and waited for together. A test that kills,
pauses, restarts or reconfigures a process takes a cluster of its own (the ``cluster``
fixture, or a module's); one that needs a gateway with other flags (an API token, an
admin token, a small budget) asks ``StandardCluster.gateway(flags)`` for one: started
the first time those flags are asked for, then shared too.

Tests sharing it are isolated by names: ledger ids are unique anyway, and every log,
cursor or other name a test makes comes from ``unique_name`` so two tests (or two
modules) never meet. A shared process that dies fails the next test that uses the
cluster (``check_alive``), with its log, rather than every later test obscurely.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from services.cluster.processes import ServiceProcess, tail
from tests.harness import Cluster, fresh_chroot, wait_healthy
from tests.integration.gateway_support import Gateway, wait_writable

BOOKIES = 4
GATEWAYS = 2
# Nothing the shared cluster's tests do loses a bookie for long; should one be lost,
# its repair must not move data under the other tests' feet for a while.
AUDITOR_ARGS = ["--lost-bookie-delay", "600"]

_names = itertools.count()
_run = uuid.uuid4().hex[:6]


def unique_name(prefix: str = "t") -> str:
    """A log (or cursor, or other) name no other test of any worker uses."""
    return f"{prefix}-{_run}-{next(_names)}"


@dataclass
class StandardCluster:
    cluster: Cluster
    bookies: list[ServiceProcess]
    gateways: list[Gateway]  # plain: no token, no special flags
    auditor: ServiceProcess
    replicator: ServiceProcess
    _variants: dict[tuple[tuple[str, ...], str | None], Gateway] = field(default_factory=dict)

    @property
    def writer(self) -> Gateway:
        return self.gateways[0]

    @property
    def reader(self) -> Gateway:
        """Another gateway: never the writer of the writer's ledgers."""
        return self.gateways[1]

    def gateway(self, flags: Sequence[str] = (), token: str | None = None) -> Gateway:
        """A gateway started with ``flags`` (shared by every test asking for the same
        flags), its client sending ``token``."""
        key = (tuple(flags), token)
        if key not in self._variants:
            gw = Gateway(self.cluster.start("gateway", list(flags)), token=token)
            wait_writable(gw, BOOKIES)
            self._variants[key] = gw
        return self._variants[key]

    def check_alive(self) -> None:
        dead = [p for p in self.cluster.processes if not p.alive()]
        assert not dead, "a process of the shared cluster died:\n" + "\n".join(
            f"----- {p.name} {p.log_path}\n{tail(p.log_path, 40)}" for p in dead
        )


@contextmanager
def standard_cluster(zk_connect: str, base_dir: Path) -> Iterator[StandardCluster]:
    cluster = Cluster(zk_connect, fresh_chroot(), base_dir)
    shared: StandardCluster | None = None
    try:
        bookies = [cluster.start_bookie(wait=False) for _ in range(BOOKIES)]
        gateways = [cluster.start("gateway", wait=False) for _ in range(GATEWAYS)]
        auditor = cluster.start("auditor", AUDITOR_ARGS, wait=False)
        replicator = cluster.start("replicator", wait=False)
        wait_healthy(cluster.processes, 60.0)
        shared = StandardCluster(
            cluster, bookies, [Gateway(p) for p in gateways], auditor, replicator
        )
        for gw in shared.gateways:
            wait_writable(gw, BOOKIES)
        yield shared
    finally:
        if shared is not None:
            for gw in [*shared.gateways, *shared._variants.values()]:
                gw.close_client()
        cluster.stop_all()
