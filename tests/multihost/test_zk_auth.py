"""ZooKeeper authentication across hosts (docs/security.md, "ZooKeeper
authentication"): a cluster whose every service holds the credentials, each on a host
of its own, writes and reads through its gateway; a client on a host outside the
cluster reaches ZooKeeper's port, and without the credentials, or with other ones, can
read nothing under the cluster's root and change nothing, while the same host with the
credentials can: what protects the metadata is the principal, not the network."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE

from services.zk.auth import ZkCredentials
from tests.integration.gateway_support import payload_for
from tests.multihost.checks import client_of
from tests.multihost.layout import Layout, start_layout
from tests.multihost.network import Network

USER = "quire-hosts"
PASSWORD = "zk-auth-hosts-pw-3e81"
OTHER = ZkCredentials.parse(f"{USER}:not-the-password-77d0", "test")
CREDENTIALS = ZkCredentials.parse(f"{USER}:{PASSWORD}", "test")


@pytest.fixture(scope="module")
def layout(network: Network, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layout]:
    """One ZooKeeper server, three bookies, a gateway, an auditor and a replication
    worker, each on its own host, all with the credentials file."""
    base: Path = tmp_path_factory.mktemp("zkauth-hosts")
    auth_file = base / "zk-auth"
    auth_file.write_text(f"{USER}:{PASSWORD}\n")
    auth_file.chmod(0o600)
    started = start_layout(
        network,
        base,
        zookeepers=1,
        bookies=3,
        gateways=1,
        auditors=1,
        replicators=1,
        zk_auth_file=auth_file,
    )
    try:
        yield started
    finally:
        started.stop()


def _tree(client: KazooClient) -> list[str]:
    out = ["/"]
    index = 0
    while index < len(out):
        base = out[index].rstrip("/")
        out += [f"{base}/{child}" for child in sorted(client.get_children(out[index]))]
        index += 1
    return out


def _refusals(client: KazooClient, paths: list[str]) -> list[str]:
    """What ``client`` was allowed to do to ``paths``: each read and change tried."""
    attempts: list[tuple[str, Callable[[str], object]]] = [
        ("get", client.get),
        ("children", client.get_children),
        ("get_acls", client.get_acls),
        ("set", lambda p: client.set(p, b"intruder")),
        ("set_acls", lambda p: client.set_acls(p, OPEN_ACL_UNSAFE)),
        ("create", lambda p: client.create(f"{p.rstrip('/')}/intruder", b"x")),
        ("delete", client.delete),
    ]
    allowed = []
    for path in paths:
        for name, attempt in attempts:
            if name == "delete" and path == "/":
                continue  # the chroot's parent's ACL, not the cluster's (docstring below)
            try:
                attempt(path)
            except NoAuthError:
                continue
            allowed.append(f"{name} {path}")
    return allowed


def test_a_host_outside_the_cluster_can_read_nothing_and_change_nothing(
    layout: Layout, logs_on_failure: None
) -> None:
    """The cluster writes and reads a ledger; from the client host, a kazoo client
    without credentials and one with other credentials are refused every read and every
    change of every znode under the root (the chroot itself may only be deleted empty,
    by its parent's ACL: not tried), and the same host with the credentials reads the
    whole tree."""
    gateway = client_of(layout, layout.gateways[0])
    try:
        lid = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
        payloads = [payload_for(i, 100) for i in range(5)]
        gateway.add_batch(lid, payloads)
        gateway.close(lid)
        assert gateway.read_all(lid) == list(enumerate(payloads))
    finally:
        gateway.close_client()

    hosts = ",".join(f"{z.node.address}:{z.port}" for z in layout.zookeepers) + layout.zk_root

    def check() -> tuple[int, list[str]]:
        clients = [
            KazooClient(hosts=hosts, timeout=10.0, auth_data=credentials)
            for credentials in (CREDENTIALS.auth_data(), None, OTHER.auth_data())
        ]
        try:
            for client in clients:
                client.start(20.0)
            owner, *outsiders = clients
            paths = _tree(owner)
            return len(paths), [a for c in outsiders for a in _refusals(c, paths)]
        finally:
            for client in clients:
                client.stop()
                client.close()

    count, allowed = layout.client.call(check)
    assert count > 20
    assert allowed == []
