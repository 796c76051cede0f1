"""ZooKeeper digest authentication and ACLs (docs/security.md, "ZooKeeper
authentication"; docs/api.md, "Processes and how they start").

A cluster whose bookies, gateway, auditor and replicator all hold the credentials
(``--zk-auth-file``) writes, reads and repairs as any other, and every znode under its
chroot, the chroot included, gives its principal all rights and nobody else any: a
client without credentials, or with other ones, can neither read nor change a single
one. A service with wrong credentials, or none, says so in one line per attempt and
stays unready without dying. ``quire zk lock`` locks a tree made open, ``quire zk
unlock`` opens it again. One cluster for the module."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE
from typer.testing import CliRunner

from services.cli.app import app as quire
from services.cluster.processes import ServiceProcess, poll_client, tail
from services.zk import paths as zkpaths
from services.zk.auth import ZkCredentials
from services.zk.store import MetadataStore
from tests.harness import Cluster, fresh_chroot, wait_for
from tests.integration.gateway_support import (
    Gateway,
    module_cluster,
    payload_for,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.integration.log_support import LogClient

USER = "quire-cluster"
PASSWORD = "zk-auth-test-pw-9c2e"
OTHER_PASSWORD = "not-the-cluster-pw-51a7"
BOOKIES = 4
LEDGERS = 6
ENTRIES = 10


@dataclass
class Env:
    cluster: Cluster
    credentials: ZkCredentials
    bookies: list[ServiceProcess]
    gateway: Gateway
    base: Path


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("zkauth")
    auth_file = base / "zk-auth"
    auth_file.write_text(f"{USER}:{PASSWORD}\n")
    auth_file.chmod(0o600)
    with module_cluster(zookeeper, base, zk_auth_file=auth_file) as cluster:
        bookies = start_bookies(cluster, BOOKIES)
        gateway = start_gateway(cluster)
        try:
            wait_writable(gateway, BOOKIES)
            cluster.start("auditor", ["--lost-bookie-delay", "1", "--audit-interval", "3600"])
            cluster.start("replicator", ["--marks-poll-interval", "1", "--open-ledger-grace", "2"])
            credentials = ZkCredentials.parse(f"{USER}:{PASSWORD}", "test")
            yield Env(cluster, credentials, bookies, gateway, base)
        finally:
            gateway.close_client()


def _client(hosts: str, credentials: ZkCredentials | None) -> KazooClient:
    client = KazooClient(
        hosts=hosts,
        timeout=10.0,
        auth_data=credentials.auth_data() if credentials else None,
    )
    client.start(10.0)
    return client


def _tree(client: KazooClient) -> list[str]:
    """Every znode of the client's chroot, the chroot ("/") first."""
    out = ["/"]
    index = 0
    while index < len(out):
        path = out[index]
        base = path.rstrip("/")
        out += [f"{base}/{child}" for child in sorted(client.get_children(path))]
        index += 1
    return out


def _bookies_of(gateway: Gateway, lid: int) -> set[str]:
    return {b for f in gateway.metadata(lid)["fragments"] for b in f["bookies"]}


def test_the_cluster_writes_reads_and_repairs_with_credentials(env: Env) -> None:
    """With every service authenticated, ledgers and logs are written and read back, and
    a killed bookie's ledgers are re-replicated (auditor marks, worker locks and copies,
    all through ZooKeeper under the ACL)."""
    gateway = env.gateway
    written: dict[int, list[bytes]] = {}
    for n in range(LEDGERS):
        lid = gateway.create(ensemble_size=3, write_quorum=3, ack_quorum=2)["ledger_id"]
        payloads = [payload_for(n * 100 + i, 100) for i in range(ENTRIES)]
        gateway.add_batch(lid, payloads)
        gateway.close(lid)
        written[lid] = payloads
    logs = LogClient(gateway.url)
    try:
        logs.create("zk-auth-log")
        logs.take_writer("zk-auth-log")
        logs.append("zk-auth-log", [b"one", b"two"])
        r = logs.append_raw("zk-auth-log", [b"keyed"], key="zk-auth-key")
        assert r.status_code == 200, r.text
        logs.roll("zk-auth-log")  # the rolled ledger's keys are saved beside the log
        assert [data for _, data in logs.read_all("zk-auth-log")] == [b"one", b"two", b"keyed"]
    finally:
        logs.close()
    owner = _client(env.cluster.zk_connect + env.cluster.zk_root, env.credentials)
    try:
        keys = zkpaths.saved_keys("zk-auth-log")
        wait_for(lambda: bool(owner.exists(keys) and owner.get_children(keys)), 30.0,
                 "the rolled ledger's keys saved")  # fmt: skip
        for path in [keys, *(f"{keys}/{child}" for child in owner.get_children(keys))]:
            assert owner.get_acls(path)[0] == env.credentials.acl(), path
    finally:
        owner.stop()
        owner.close()

    victim = env.bookies[0]
    assert any(victim.address in _bookies_of(gateway, lid) for lid in written)
    victim.kill()

    def repaired() -> bool:
        if any(victim.address in _bookies_of(gateway, lid) for lid in written):
            return False
        r = gateway.http.get("/v1/admin/under-replicated")
        return r.status_code == 200 and r.json()["ledgers"] == []

    wait_for(repaired, 60.0, "every fragment to leave the killed bookie and marks to clear")
    for lid, payloads in written.items():
        assert gateway.read_all(lid) == list(enumerate(payloads)), f"ledger {lid}"


def test_no_other_client_can_read_or_change_any_znode(env: Env) -> None:
    """Every znode under the chroot, the chroot itself included, carries exactly the
    cluster's ACL; a client without credentials and one with other credentials get
    NoAuth reading its data or children, setting its data or ACL, creating a child or
    deleting it. (The chroot itself can only be deleted empty, and its parent's ACL,
    not the cluster's, says who may.)"""
    hosts = env.cluster.zk_connect + env.cluster.zk_root
    owner = _client(hosts, env.credentials)
    outsiders = [
        _client(hosts, None),
        _client(hosts, ZkCredentials.parse(f"{USER}:{OTHER_PASSWORD}", "test")),
    ]
    try:
        paths = _tree(owner)
        # What the services made: the registry, cookies, ledgers, logs, marks' root...
        assert {"/bookies", "/cookies", "/ledgers", "/logs", "/underreplication"} <= set(paths)
        assert len(paths) > 30, paths
        for path in paths:
            acl, _ = owner.get_acls(path)
            assert acl == env.credentials.acl(), f"{path}: {acl}"
        attempts: list[tuple[str, Callable[[KazooClient, str], object]]] = [
            ("get", lambda c, p: c.get(p)),
            ("children", lambda c, p: c.get_children(p)),
            ("get_acls", lambda c, p: c.get_acls(p)),
            ("set", lambda c, p: c.set(p, b"intruder")),
            ("set_acls", lambda c, p: c.set_acls(p, OPEN_ACL_UNSAFE)),
            ("create", lambda c, p: c.create(f"{p.rstrip('/')}/intruder", b"x")),
        ]
        for outsider in outsiders:
            for path in paths:
                for name, attempt in attempts:
                    with pytest.raises(NoAuthError):
                        attempt(outsider, path)
                        pytest.fail(f"{name} {path} was allowed")
                if path != "/":
                    with pytest.raises(NoAuthError):
                        outsider.delete(path)
        assert not [p for p in _tree(owner) if p.endswith("/intruder")]
    finally:
        for client in [owner, *outsiders]:
            client.stop()
            client.close()


@pytest.mark.parametrize("who", ["wrong", "none"])
def test_a_service_refused_by_zookeeper_says_so_and_stays_unready(env: Env, who: str) -> None:
    """A gateway and a bookie started with other credentials, or with none, against the
    locked tree: each logs one line per attempt naming the principal ZooKeeper refused
    (never the password), keeps answering /health 503, and keeps running."""
    auth_file = None
    principal = "a client without credentials"
    if who == "wrong":
        auth_file = env.base / "wrong-zk-auth"
        auth_file.write_text(f"{USER}:{OTHER_PASSWORD}\n")
        principal = f"digest user '{USER}'"
    refused = Cluster(
        env.cluster.zk_connect, env.cluster.zk_root, env.base / who, zk_auth_file=auth_file
    )
    try:
        procs = [
            refused.start("gateway", wait=False),
            refused.start_bookie(wait=False),
        ]
        expected = f"ZooKeeper denied {principal} access to"
        for proc in procs:
            wait_for(lambda p=proc: expected in tail(p.log_path, 200), 20.0, f"{proc.name} says")
        time.sleep(2.0)  # a few more attempts: still unready, still running
        for proc in procs:
            log = Path(proc.log_path).read_text()
            lines = [line for line in log.splitlines() if expected in line]
            assert 1 <= len(lines) <= 8, lines  # one per attempt, backing off
            assert "NoAuth" in lines[0] and env.cluster.zk_root in lines[0], lines[0]
            assert OTHER_PASSWORD not in log and PASSWORD not in log
            assert proc.alive()
            r = poll_client().get(f"{proc.url}/health", timeout=5.0)
            assert r.status_code == 503, r.text
            assert OTHER_PASSWORD not in r.text
    finally:
        refused.stop_all()


def test_quire_zk_lock_and_unlock_a_tree_made_open(env: Env) -> None:
    """docs/security.md, "ZooKeeper authentication": a tree created without credentials
    is locked to the principal by `quire zk lock` (credentials from QUIRE_ZK_AUTH), after
    which an anonymous client reads nothing; another principal cannot lock it again
    (exit 1, one line naming it); `quire zk unlock` with the file opens it again."""
    connect = env.cluster.zk_connect
    root = fresh_chroot()
    hosts = connect + root

    async def make_open_tree() -> None:
        store = MetadataStore(hosts, session_timeout_s=4)
        await store.start(10.0)
        try:
            await store.create("/ledgers/00/0000/0000/0000/L0001", b"{}")
            await store.create("/logs/Lone", b"{}")
            await store.create("/cookies/127.0.0.1:1", b"{}")
        finally:
            await store.stop()

    asyncio.run(make_open_tree())
    runner = CliRunner()
    anonymous = _client(hosts, None)
    owner = _client(hosts, env.credentials)
    try:
        paths = _tree(anonymous)
        result = runner.invoke(
            quire,
            ["zk", "lock", "--zk", connect, "--zk-root", root],
            env={"QUIRE_ZK_AUTH": f"{USER}:{PASSWORD}"},
            prog_name="quire",
        )
        assert result.exit_code == 0, result.stderr
        assert f"locked {len(paths)} znodes under {root}" in result.stdout
        assert PASSWORD not in result.stdout + result.stderr
        for path in paths:
            with pytest.raises(NoAuthError):
                anonymous.get(path)
            assert owner.get_acls(path)[0] == env.credentials.acl()

        result = runner.invoke(
            quire,
            ["zk", "lock", "--zk", connect, "--zk-root", root],
            env={"QUIRE_ZK_AUTH": f"intruder:{OTHER_PASSWORD}"},
            prog_name="quire",
        )
        assert result.exit_code == 1
        assert "denied digest user 'intruder'" in result.stderr
        assert OTHER_PASSWORD not in result.stderr

        auth_file = env.base / "unlock-zk-auth"
        auth_file.write_text(f"{USER}:{PASSWORD}\n")
        result = runner.invoke(
            quire,
            ["zk", "unlock", "--zk", connect, "--zk-root", root, "--zk-auth-file", str(auth_file)],
            prog_name="quire",
        )
        assert result.exit_code == 0, result.stderr
        assert _tree(anonymous) == paths
    finally:
        for client in (anonymous, owner):
            client.stop()
            client.close()
        cleanup = _client(connect, env.credentials)
        cleanup.delete(root, recursive=True)
        cleanup.stop()
        cleanup.close()


def test_quire_bookie_format_authenticates_too(env: Env) -> None:
    """`quire bookie format` reads the cluster's credentials as the services do: without
    them the locked cookie is out of its reach (exit 1, one line naming the principal
    refused); with them it formats the killed bookie of the first test."""
    victim = env.bookies[0]
    assert not victim.alive()
    data_dir = env.cluster.base_dir / f"bookie-{victim.port}"
    args = ["bookie", "format", "--data-dir", str(data_dir), "--bookie-id", victim.address]
    args += ["--zk", env.cluster.zk_connect, "--zk-root", env.cluster.zk_root, "--force"]
    runner = CliRunner()
    result = runner.invoke(quire, args, prog_name="quire")
    assert result.exit_code == 1
    assert "ZooKeeper denied a client without credentials access to" in result.stderr
    result = runner.invoke(
        quire, args, prog_name="quire", env={"QUIRE_ZK_AUTH": f"{USER}:{PASSWORD}"}
    )
    assert result.exit_code == 0, result.stderr
    assert f"formatted bookie {victim.address}" in result.stdout
