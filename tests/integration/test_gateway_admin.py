"""The Admin API of docs/api.md on a real cluster (ZooKeeper, five bookies, one gateway with
an API token and an admin token): every endpoint's exact shape, bookie states (writable,
down after SIGKILL, decommissioning, decommissioned), the under-replicated listing with
its paging and lock progress (marks written directly in ZooKeeper: the auditor is not
part of this test), the replication switch, audit requests, a decommissioned bookie
never chosen by new ledgers, and bad input and tokens.

The tests share one cluster and run in file order: the ones that kill or decommission
bookies come last."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kazoo.client import KazooClient
from typer.testing import CliRunner

from services.cli.app import app as cli_app
from services.zk import paths as zkpaths
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Gateway,
    assert_error,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)

API_TOKEN = "api-token-admin-5c1e"
ADMIN_TOKEN = "admin-token-admin-9b07"
BOOKIES = 5
CLUSTER_KEYS = {
    "auditor_elected",
    "auditor_id",
    "replication_enabled",
    "under_replicated_ledgers",
    "bookies",
    "racks",
    "placement_violations",
}
BOOKIE_KEYS = {
    "id",
    "address",
    "state",
    "ledgers",
    "free_bytes",
    "total_bytes",
    "free_ratio",
    "instance_id",
    "rack",
    "entries_added",
}
MARK_KEYS = {"ledger_id", "missing_bookies", "misplaced", "marked_at", "progress", "worker"}
ADMIN_CALLS = [
    ("GET", "/v1/admin/cluster"),
    ("GET", "/v1/admin/bookies"),
    ("GET", "/v1/admin/under-replicated"),
    ("GET", "/v1/admin/placement"),
    ("POST", "/v1/admin/replication/enable"),
    ("POST", "/v1/admin/replication/disable"),
    ("POST", "/v1/admin/audit"),
    ("POST", "/v1/admin/bookies/127.0.0.1:1/decommission"),
    ("GET", "/v1/admin/no-such-route"),
]


@dataclass
class Env:
    cluster: Cluster
    admin: Gateway  # admin token
    api: Gateway  # same process, API token
    anonymous: Gateway  # same process, no token
    bookies: list  # type: ignore[type-arg]
    zk: KazooClient  # inside the cluster's chroot

    def ids(self) -> list[str]:
        return sorted(b.address for b in self.bookies)

    def get(self, path: str, **params: object) -> dict:  # type: ignore[type-arg]
        r = self.admin.request("GET", path, params=params)
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    def states(self) -> dict[str, str]:
        return {b["id"]: b["state"] for b in self.get("/v1/admin/bookies")["bookies"]}


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("gateway-admin")
    with module_cluster(zookeeper, base) as cluster:
        bookies = start_bookies(cluster, BOOKIES)
        args = ["--api-token", API_TOKEN, "--admin-token", ADMIN_TOKEN]
        admin = start_gateway(cluster, args, token=ADMIN_TOKEN)
        wait_writable(admin, BOOKIES)
        zk = KazooClient(hosts=zookeeper.connect_string + cluster.zk_root, timeout=10.0)
        zk.start(10.0)
        try:
            yield Env(
                cluster,
                admin,
                Gateway(admin.proc, token=API_TOKEN),
                Gateway(admin.proc),
                bookies,
                zk,
            )
        finally:
            zk.stop()
            zk.close()


def _mark(zk: KazooClient, ledger_id: int, missing: list[str], marked_at: int) -> None:
    doc = {"missing_bookies": missing, "marked_at": marked_at}
    zk.create(zkpaths.under_replicated(ledger_id), json.dumps(doc).encode(), makepath=True)


def test_cluster_object_is_exactly_api_md(env: Env) -> None:
    """GET /v1/admin/cluster has exactly docs/api.md's keys and types; with no auditor running
    none is elected, and an election candidate's id shows up as auditor_id."""
    doc = env.get("/v1/admin/cluster")
    assert set(doc) == CLUSTER_KEYS, doc
    assert set(doc["bookies"]) == {"writable", "readonly", "unavailable"}
    assert doc["auditor_elected"] is False and doc["auditor_id"] is None
    assert doc["replication_enabled"] is True
    assert doc["under_replicated_ledgers"] == 0
    assert doc["bookies"] == {"writable": BOOKIES, "readonly": 0, "unavailable": 0}

    node = env.zk.create(
        f"{zkpaths.AUDITOR_ELECTION}/n_", b"127.0.0.1:8091", ephemeral=True, sequence=True
    )
    try:
        doc = env.get("/v1/admin/cluster")
        assert doc["auditor_elected"] is True and doc["auditor_id"] == "127.0.0.1:8091"
    finally:
        env.zk.delete(node)


def test_bookies_listing_shape_and_figures(env: Env) -> None:
    """GET /v1/admin/bookies lists every bookie in id order with exactly the documented
    keys; running bookies are writable and report their disk and instance id."""
    bookies = env.get("/v1/admin/bookies")["bookies"]
    assert [b["id"] for b in bookies] == env.ids()
    for b in bookies:
        assert set(b) == BOOKIE_KEYS, b
        assert b["state"] == "writable" and b["address"] == b["id"]
        assert isinstance(b["instance_id"], str) and b["instance_id"]
        assert isinstance(b["free_ratio"], float) and 0.0 <= b["free_ratio"] <= 1.0
        for key in ("ledgers", "free_bytes", "total_bytes"):
            assert isinstance(b[key], int) and b[key] >= 0, b
        assert 0 < b["free_bytes"] <= b["total_bytes"]
    one = env.get(f"/v1/admin/bookies/{bookies[0]['id']}")
    assert set(one) == BOOKIE_KEYS and one["id"] == bookies[0]["id"]


def test_under_replicated_listing_paging_and_progress(env: Env) -> None:
    """Marks written in ZooKeeper appear in id order with their missing bookies and
    marked_at; a ledger with a worker's lock shows its progress and worker; ?limit=
    pages with next; the cluster count is the number of marks now."""
    ids = [3, 70, 10**12]
    _mark(env.zk, 3, ["127.0.0.1:7"], 1000)
    _mark(env.zk, 70, ["127.0.0.1:7", "127.0.0.1:8"], 2000)
    _mark(env.zk, 10**12, ["127.0.0.1:9"], 3000)
    progress = {"entries_copied": 12, "bytes_copied": 4096}
    lock = {"worker": "127.0.0.1:8092", "since": 1, "progress": progress}
    env.zk.create(zkpaths.replication_lock(70), json.dumps(lock).encode(), makepath=True)
    try:
        doc = env.get("/v1/admin/under-replicated")
        assert set(doc) == {"ledgers", "next"} and doc["next"] is None
        assert [m["ledger_id"] for m in doc["ledgers"]] == ids
        for m in doc["ledgers"]:
            assert set(m) == MARK_KEYS, m
        first, second, third = doc["ledgers"]
        assert first["missing_bookies"] == ["127.0.0.1:7"] and first["marked_at"] == 1000
        assert first["progress"] is None and first["worker"] is None
        assert second["missing_bookies"] == ["127.0.0.1:7", "127.0.0.1:8"]
        assert second["progress"] == progress and second["worker"] == "127.0.0.1:8092"
        assert third["ledger_id"] == 10**12 and third["progress"] is None

        page = env.get("/v1/admin/under-replicated", limit=2)
        assert [m["ledger_id"] for m in page["ledgers"]] == [3, 70] and page["next"] == 70
        rest = env.get("/v1/admin/under-replicated", limit=2, after=page["next"])
        assert [m["ledger_id"] for m in rest["ledgers"]] == [10**12] and rest["next"] is None

        assert env.get("/v1/admin/cluster")["under_replicated_ledgers"] == 3
    finally:
        env.zk.delete(zkpaths.replication_lock(70))
        for ledger_id in ids:
            env.zk.delete(zkpaths.under_replicated(ledger_id))
    assert env.get("/v1/admin/cluster")["under_replicated_ledgers"] == 0
    assert env.get("/v1/admin/under-replicated") == {"ledgers": [], "next": None}


def test_replication_disable_enable_round_trip(env: Env) -> None:
    """disable and enable answer 200 with the cluster object and flip the switch in
    ZooKeeper; doing either twice changes nothing."""
    for _ in range(2):
        r = env.admin.request("POST", "/v1/admin/replication/disable")
        assert r.status_code == 200, r.text
        assert set(r.json()) == CLUSTER_KEYS and r.json()["replication_enabled"] is False
        assert env.zk.exists(zkpaths.REPLICATION_DISABLED) is not None
    assert env.get("/v1/admin/cluster")["replication_enabled"] is False
    for _ in range(2):
        r = env.admin.request("POST", "/v1/admin/replication/enable")
        assert r.status_code == 200, r.text
        assert set(r.json()) == CLUSTER_KEYS and r.json()["replication_enabled"] is True
        assert env.zk.exists(zkpaths.REPLICATION_DISABLED) is None


def test_audit_request_is_202_and_bumps_the_request_node(env: Env) -> None:
    """POST /v1/admin/audit is 202 {"requested": true, "auditor_id"} and changes the
    node the elected auditor watches."""
    _, before = env.zk.get(zkpaths.AUDIT_REQUEST)
    r = env.admin.request("POST", "/v1/admin/audit")
    assert r.status_code == 202, r.text
    assert r.json() == {"requested": True, "auditor_id": None}
    _, after = env.zk.get(zkpaths.AUDIT_REQUEST)
    assert after.version > before.version


@pytest.mark.parametrize(("method", "path"), ADMIN_CALLS)
def test_admin_calls_need_the_admin_token(env: Env, method: str, path: str) -> None:
    """With --admin-token, every /v1/admin/ call (an unknown one too) is 401 without a
    token and with the API token."""
    assert_error(env.anonymous.request(method, path), 401, "unauthorized")
    assert_error(env.api.request(method, path), 401, "unauthorized")


def test_admin_token_is_accepted_and_api_token_still_works_elsewhere(env: Env) -> None:
    """The admin token opens the admin API and the ledger API; the API token opens the
    ledger API only."""
    assert env.admin.request("GET", "/v1/admin/cluster").status_code == 200
    assert env.admin.request("GET", "/v1/ledgers").status_code == 200
    assert env.api.request("GET", "/v1/ledgers").status_code == 200


def test_bad_input(env: Env) -> None:
    """An unknown bookie is 404 bookie_not_found (nothing is created for it); a bad
    limit or after is 400; an unknown admin route is 404 not_found."""
    r = env.admin.request("POST", "/v1/admin/bookies/10.9.9.9:1/decommission")
    assert_error(r, 404, "bookie_not_found")
    assert env.zk.exists(zkpaths.decommission("10.9.9.9:1")) is None
    assert_error(env.admin.request("GET", "/v1/admin/bookies/10.9.9.9:1"), 404, "bookie_not_found")
    for params in ({"limit": 0}, {"limit": "x"}, {"limit": "1.0"}, {"after": -2}, {"after": "a"}):
        r = env.admin.request("GET", "/v1/admin/under-replicated", params=params)
        assert_error(r, 400, "invalid_argument")
    assert_error(env.admin.request("GET", "/v1/admin/nothing"), 404, "not_found")
    assert_error(env.admin.request("DELETE", "/v1/admin/cluster"), 405, "method_not_allowed")


def test_a_hung_bookie_does_not_hang_the_listing(env: Env) -> None:
    """A SIGSTOPped bookie costs the listing a short time-out: it answers in seconds,
    with null figures for that bookie and real ones for the others."""
    hung = env.bookies[-1]
    hung.pause()
    try:
        started = time.monotonic()
        rows = {b["id"]: b for b in env.get("/v1/admin/bookies")["bookies"]}
        assert time.monotonic() - started < 10.0
    finally:
        hung.resume()
    assert rows[hung.address]["free_ratio"] is None and rows[hung.address]["ledgers"] is None
    others = [rows[b.address] for b in env.bookies[:-1]]
    assert all(isinstance(b["free_ratio"], float) for b in others)
    wait_for(lambda: env.states()[hung.address] == "writable", 30.0, "the bookie back")


def test_killed_bookie_is_down(env: Env) -> None:
    """A SIGKILLed bookie becomes "down" (its cookie stays, its registration goes when
    its session expires) with null figures, and counts as unavailable."""
    victim = env.bookies[-1]
    victim.kill()
    wait_for(lambda: env.states()[victim.address] == "down", 30.0, "the bookie to be down")
    row = env.get(f"/v1/admin/bookies/{victim.address}")
    assert row["ledgers"] is None and row["free_bytes"] is None and row["free_ratio"] is None
    assert isinstance(row["instance_id"], str)  # from its cookie
    counts = env.get("/v1/admin/cluster")["bookies"]
    assert counts == {"writable": BOOKIES - 1, "readonly": 0, "unavailable": 1}


def test_decommission_excludes_the_bookie_from_new_ledgers(env: Env) -> None:
    """Decommissioning a running bookie is 202 with state "decommissioning" at once (and
    again on a second call); no ledger created afterwards, at once, ever uses it."""
    running = [b.address for b in env.bookies[:-1]]
    target = running[0]
    r = env.admin.request("POST", f"/v1/admin/bookies/{target}/decommission")
    assert r.status_code == 202, r.text
    assert set(r.json()) == BOOKIE_KEYS
    assert r.json()["id"] == target and r.json()["state"] == "decommissioning"
    chosen: set[str] = set()
    for _ in range(30):
        ledger = env.admin.create(ensemble_size=2, write_quorum=2, ack_quorum=2)
        chosen.update(ledger["fragments"][0]["bookies"])
    assert target not in chosen
    assert chosen == set(running[1:])  # the others were all eligible
    again = env.admin.request("POST", f"/v1/admin/bookies/{target}/decommission")
    assert again.status_code == 202 and again.json()["state"] == "decommissioning"
    assert env.states()[target] == "decommissioning"
    counts = env.get("/v1/admin/cluster")["bookies"]
    assert counts == {"writable": BOOKIES - 2, "readonly": 1, "unavailable": 1}


def test_decommission_of_a_down_bookie_and_decommissioned_state(env: Env) -> None:
    """A down bookie can be decommissioned too (202, "decommissioning"); once the node
    says decommissioned the listing says so and it no longer counts as unavailable."""
    down = env.bookies[-1].address
    r = env.admin.request("POST", f"/v1/admin/bookies/{down}/decommission")
    assert r.status_code == 202, r.text
    assert r.json()["state"] == "decommissioning" and r.json()["ledgers"] is None
    data, _ = env.zk.get(zkpaths.decommission(down))
    doc = json.loads(data)
    doc["state"] = "decommissioned"
    env.zk.set(zkpaths.decommission(down), json.dumps(doc).encode())
    assert env.states()[down] == "decommissioned"
    assert env.get("/v1/admin/cluster")["bookies"]["unavailable"] == 0
    again = env.admin.request("POST", f"/v1/admin/bookies/{down}/decommission")
    assert again.status_code == 202 and again.json()["state"] == "decommissioned"


def test_cli_against_the_real_gateway(env: Env) -> None:
    """`quire admin` talks to the real gateway: its --json listings are the API's
    objects, its tables name every bookie, and the API token is refused (exit 5)."""
    base = ["--gateway", env.admin.url, "--token", ADMIN_TOKEN, "admin"]
    runner = CliRunner()
    listing = runner.invoke(cli_app, [*base, "bookies", "--json"])
    assert listing.exit_code == 0, listing.output
    assert {b["id"]: b["state"] for b in json.loads(listing.stdout)["bookies"]} == env.states()
    table = runner.invoke(cli_app, [*base, "bookies"])
    assert table.exit_code == 0 and all(b in table.stdout for b in env.ids())
    cluster = runner.invoke(cli_app, [*base, "cluster", "--json"])
    assert json.loads(cluster.stdout) == env.get("/v1/admin/cluster")
    done = runner.invoke(cli_app, [*base, "wait-replicated", "--timeout", "10"])
    assert done.exit_code == 0 and "done" in done.stdout
    refused = runner.invoke(
        cli_app, ["--gateway", env.admin.url, "--token", API_TOKEN, "admin", "cluster"]
    )
    assert refused.exit_code == 5 and "unauthorized" in refused.stderr
