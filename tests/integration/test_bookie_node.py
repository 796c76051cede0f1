"""The bookie as a cluster member: registration and re-registration after session expiry,
/health, read-only mode both ways, and the cluster secret."""

from __future__ import annotations

import json

import httpx

from services.cluster.processes import free_port, poll_client
from services.wire import framing
from services.zk import paths as zkpaths
from tests.harness import wait_for
from tests.integration.bookie_support import Bookie, sealed


def registration(zk_client, bookie_id: str) -> tuple[dict, int] | None:
    found = zk_client.exists(zkpaths.bookie(bookie_id))
    if found is None:
        return None
    data, stat = zk_client.get(zkpaths.bookie(bookie_id))
    return json.loads(data), stat.ephemeralOwner


def test_registration_and_reregistration_after_session_expiry(cluster, zk_client):
    """A bookie registers an ephemeral /bookies/{id} with its address, state and instance;
    when its ZooKeeper session expires (the process was frozen past the session timeout,
    like a long GC pause) the znode goes, and the bookie re-creates it under a new session
    and keeps serving."""
    proc = cluster.start_bookie()
    bookie = Bookie(proc)
    doc, owner = registration(zk_client, proc.address)
    assert doc == {
        "id": proc.address,
        "address": f"http://{proc.address}",
        "state": "writable",
        "instance_id": bookie.info()["instance_id"],
        "rack": None,
    }
    assert owner != 0  # ephemeral
    bookie.add([sealed(1, 0)])

    # SIGSTOP: no heartbeats, so ZooKeeper expires the session (4 s in tests) for real.
    # This needs no test hook exposing the session password in the bookie's API.
    proc.pause()
    try:
        wait_for(lambda: registration(zk_client, proc.address) is None, 30.0, "session expiry")
    finally:
        proc.resume()
    wait_for(lambda: registration(zk_client, proc.address), 30.0, "re-registration")
    doc_after, owner_after = registration(zk_client, proc.address)
    assert owner_after != owner and doc_after == doc
    wait_for(bookie.healthy, 10.0, "healthy again")
    assert bookie.read(1, 0).payload == sealed(1, 0).payload
    bookie.add([sealed(1, 1)])
    bookie.close()


def test_health_is_503_until_registered(cluster, zk_client):
    """/health answers 503 while the bookie cannot register (its id is held by another
    instance) and 200 once it is registered; the data path does not depend on it."""
    port = free_port()
    bookie_id = f"127.0.0.1:{port}"
    other = {"id": bookie_id, "address": "x", "state": "writable", "instance_id": "other"}
    zk_client.create(zkpaths.bookie(bookie_id), json.dumps(other).encode(), makepath=True)
    proc = cluster.start_bookie(port=port, wait=False)
    health = f"{proc.url}/health"

    def answered() -> int:
        return poll_client().get(health, timeout=2.0).status_code

    assert wait_for(answered, 30.0, "the server to answer") == 503
    body = poll_client().get(health).json()
    assert body["error"] == "unavailable"
    assert json.loads(zk_client.get(zkpaths.bookie(bookie_id))[0])["instance_id"] == "other"
    zk_client.delete(zkpaths.bookie(bookie_id))
    wait_for(lambda: answered() == 200, 20.0, "registration")
    doc, owner = registration(zk_client, bookie_id)
    assert doc["instance_id"] != "other" and owner != 0


def test_read_only_mode_switches_both_ways(cluster, zk_client):
    """Under the free-disk threshold the bookie goes read-only: normal adds get 503
    bookie_read_only, recovery adds and reads still work, the registration says readonly;
    with the threshold lowered it is writable again, in ZooKeeper too."""
    proc = cluster.start_bookie(extra_args=["--disk-check-interval", "0.1"])
    bookie = Bookie(proc)
    bookie.add([sealed(4, 0)])

    r = bookie.http.post("/v1/admin/disk-threshold", json={"readonly_free_ratio": 0.9999})
    assert r.status_code == 200 and r.json()["state"] == "readonly"
    assert r.json()["readonly_free_ratio"] == 0.9999
    wait_for(
        lambda: registration(zk_client, proc.address)[0]["state"] == "readonly", 10.0, "readonly"
    )
    body = framing.encode([sealed(4, 1)])
    r = bookie.http.post("/v1/entries", content=body)
    assert r.status_code == 503 and r.json()["error"] == "bookie_read_only"
    mixed = framing.encode([sealed(4, 1, recovery=True), sealed(4, 2)])
    assert bookie.http.post("/v1/entries", content=mixed).status_code == 503
    assert bookie.lac(4)["last_entry_id"] == 0  # nothing of the refused requests stored
    assert bookie.add([sealed(4, 1, recovery=True)]) == {"stored": 1, "rejected": []}
    assert bookie.read(4, 0).payload == sealed(4, 0).payload
    assert len(bookie.read_range(4, 0, 10)) == 2
    assert bookie.fence(9)["fenced"]  # recovery must be able to fence a read-only bookie
    assert bookie.metric("quire_bookie_read_only") == 1
    assert bookie.metric("quire_bookie_rejected_adds_total", 'reason="bookie_read_only"') == 2

    r = bookie.http.post("/v1/admin/disk-threshold", json={"readonly_free_ratio": 0})
    assert r.json()["state"] == "writable"
    wait_for(
        lambda: registration(zk_client, proc.address)[0]["state"] == "writable", 10.0, "writable"
    )
    assert bookie.add([sealed(4, 2)]) == {"stored": 1, "rejected": []}
    assert bookie.metric("quire_bookie_read_only") == 0
    bookie.close()


def test_starts_read_only_under_the_configured_threshold(cluster, zk_client):
    """--readonly-free-ratio above the free ratio makes the bookie register as readonly from
    the start."""
    proc = cluster.start_bookie(extra_args=["--readonly-free-ratio", "1.0"])
    assert registration(zk_client, proc.address)[0]["state"] == "readonly"
    assert Bookie(proc).info()["state"] == "readonly"


SECRET = "cluster-secret-for-tests"

V1_CALLS = [
    ("POST", "/v1/entries", framing.encode([sealed(1, 0)])),
    ("GET", "/v1/ledgers/1/entries/0", b""),
    ("GET", "/v1/ledgers/1/entries?from=0&to=5", b""),
    ("GET", "/v1/ledgers/1/lac", b""),
    ("GET", "/v1/ledgers/1/lac?after=0&wait_ms=100", b""),
    ("POST", "/v1/ledgers/1/lac", b'{"lac": 5}'),
    ("POST", "/v1/ledgers/2/lac", b'{"lac": 5}'),
    ("POST", "/v1/ledgers/1/fence", b""),
    ("POST", "/v1/ledgers/3/fence", b""),
    ("DELETE", "/v1/ledgers/1", b""),
    ("GET", "/v1/ledgers", b""),
    ("GET", "/v1/info", b""),
    ("GET", "/v1/storage/ledgers", b""),
    ("POST", "/v1/admin/disk-threshold", b'{"readonly_free_ratio": 0.9999}'),
    ("GET", "/v1/no-such-route", b""),
    ("PUT", "/v1/entries", b""),
]


def test_cluster_secret_matrix(cluster):
    """With --cluster-secret every /v1 call without the secret or with a wrong one is 401
    unauthorized and changes nothing (unknown routes too); /health, /metrics and
    /openapi.json stay public; with the secret everything works."""
    proc = cluster.start_bookie(extra_args=["--cluster-secret", SECRET])
    good = Bookie(proc, SECRET)
    good.add([sealed(1, 0, b"original")])
    plain = httpx.Client(base_url=proc.url, timeout=10.0)
    for headers in (
        {},
        {"X-Cluster-Secret": "wrong"},
        {"X-Cluster-Secret": SECRET + "x"},
        {"X-Cluster-Secret": ""},
    ):
        for method, path, body in V1_CALLS:
            r = plain.request(method, path, content=body, headers=headers)
            assert r.status_code == 401, (method, path, headers, r.text)
            assert r.json()["error"] == "unauthorized"
    # Nothing changed.
    assert good.ledgers() == [1]
    assert good.lac(1) == {"ledger_id": 1, "lac": -1, "last_entry_id": 0, "fenced": False}
    assert good.read(1, 0).payload == b"original"
    assert good.info()["state"] == "writable"
    assert good.http.get("/v1/storage/ledgers").json() == {
        "ledgers": [{"ledger_id": 1, "bytes": len(b"original")}],
        "next": None,
    }
    for path in ("/health", "/metrics", "/openapi.json"):
        assert plain.get(path).status_code == 200, path
    assert good.http.get("/v1/no-such-route").status_code == 404
    assert good.metric("quire_bookie_adds_total") == 1
    plain.close()
    good.close()
