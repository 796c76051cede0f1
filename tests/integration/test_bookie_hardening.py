"""A real bookie against the cases of issue 7: entries are never silently overwritten,
one bad record does not fail a whole request, one stalled request does not stall every
add, answers carry the bookie's instance and the ledger's length."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx

from services.cluster.processes import ZooKeeperProcess, free_port, poll_client, tail
from services.wire import framing
from tests.harness import Cluster, fresh_chroot, wait_for
from tests.integration.bookie_support import Bookie, sealed


def test_readd_same_bytes_is_idempotent_different_bytes_are_refused(cluster):
    """Re-adding an entry with its bytes answers stored; different bytes for a stored entry
    (a normal add, or a recovery add on a fenced ledger) are refused per record with
    entry_exists, the rest of the request is stored, and the entry keeps its bytes."""
    bookie = Bookie(cluster.start_bookie())
    try:
        assert bookie.add([sealed(3, 0, b"zero"), sealed(3, 1, b"one")])["stored"] == 2
        assert bookie.add([sealed(3, 1, b"one")]) == {"stored": 1, "rejected": []}
        answer = bookie.add([sealed(3, 1, b"ONE"), sealed(3, 2, b"two"), sealed(4, 0)])
        assert answer == {
            "stored": 2,
            "rejected": [{"ledger_id": 3, "entry_id": 1, "error": "entry_exists"}],
        }
        bookie.fence(3)
        answer = bookie.add([sealed(3, 0, b"other", recovery=True), sealed(3, 2, b"two", True)])
        assert answer == {
            "stored": 1,
            "rejected": [{"ledger_id": 3, "entry_id": 0, "error": "entry_exists"}],
        }
        assert bookie.read(3, 0).payload == b"zero"
        assert bookie.read(3, 1).payload == b"one"
        assert bookie.metric("quire_bookie_rejected_adds_total", 'reason="entry_exists"') == 2
    finally:
        bookie.close()


def _stalled_add(proc, declared: int = 64 * 1024 * 1024) -> socket.socket:
    """A connection that declares a body of ``declared`` bytes and sends none of it."""
    sock = socket.create_connection((proc.host, proc.port), timeout=10.0)
    sock.sendall(
        (
            f"POST /v1/entries HTTP/1.1\r\nHost: {proc.address}\r\n"
            f"Content-Type: {framing.MEDIA_TYPE}\r\nContent-Length: {declared}\r\n\r\n"
        ).encode()
    )
    return sock


def test_a_stalled_64_mib_add_does_not_stall_other_adds(cluster):
    """A request that declares the whole 64 MiB add budget and sends nothing holds none of
    it: a normal add on another connection is stored within two seconds (before the fix it
    waited for the stalled body for ever)."""
    proc = cluster.start_bookie()
    bookie = Bookie(proc)
    stalled = [_stalled_add(proc) for _ in range(3)]
    try:
        started = time.monotonic()
        r = bookie.http.post(
            "/v1/entries",
            content=framing.encode([sealed(9, 0)]),
            headers={"Content-Type": framing.MEDIA_TYPE},
            timeout=5.0,
        )
        assert r.status_code == 200, r.text
        assert r.json() == {"stored": 1, "rejected": []}
        assert time.monotonic() - started < 3.0  # before the fix: no answer at all
    finally:
        for sock in stalled:
            sock.close()
        bookie.close()


def test_a_slow_body_times_out_with_a_json_error_and_the_connection_closes(cluster):
    """A body that does not arrive within body_read_timeout_ms is answered with docs/api.md's
    JSON error invalid_argument naming the setting (400 from the bookie's add path, or 408
    from the HTTP server's own body timer, whichever fires first: both bound the same
    wait), the connection is closed, and nothing is stored."""
    proc = cluster.start_bookie(extra_args=["--body-read-timeout-ms", "500"])
    bookie = Bookie(proc)
    body = framing.encode([sealed(11, 0)])
    sock = _stalled_add(proc, declared=len(body))
    try:
        sock.sendall(body[:10])  # a part, then nothing
        started = time.monotonic()
        answer = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break  # the bookie closed the connection after answering
            answer += chunk
        assert time.monotonic() - started < 5.0
        head, _, payload = answer.partition(b"\r\n\r\n")
        assert head.startswith((b"HTTP/1.1 400", b"HTTP/1.1 408")), answer
        doc = json.loads(payload)
        assert doc["error"] == "invalid_argument"
        assert "body_read_timeout_ms" in doc["message"]
        r = bookie.http.get("/v1/ledgers/11/lac")
        assert r.status_code == 404 and r.json()["error"] == "ledger_not_found"
    finally:
        sock.close()
        bookie.close()


def test_health_and_metrics_answer_while_zookeeper_is_unreachable(tmp_path):
    """A bookie whose ZooKeeper does not listen yet serves /health (503, JSON error) and
    /metrics at once, answers /v1 calls 503 unavailable naming ZooKeeper, logs each failed
    attempt once per back-off step (no flood), and turns healthy and serves adds once
    ZooKeeper starts on that port."""
    zk_port = free_port()
    bookies = Cluster(f"127.0.0.1:{zk_port}", fresh_chroot(), tmp_path)
    zookeeper = ZooKeeperProcess(tmp_path / "zk", zk_port)
    try:
        proc = bookies.start_bookie(wait=False)
        health = wait_for(lambda: _get(f"{proc.url}/health"), 15.0, "/health to answer")
        assert health.status_code == 503
        assert health.json()["error"] == "unavailable"
        assert poll_client().get(f"{proc.url}/metrics", timeout=5.0).status_code == 200
        bookie = Bookie(proc)
        r = bookie.http.post(
            "/v1/entries",
            content=framing.encode([sealed(1, 0)]),
            headers={"Content-Type": framing.MEDIA_TYPE},
        )
        assert r.status_code == 503 and r.json()["error"] == "unavailable", r.text
        assert "ZooKeeper" in r.json()["message"]
        r = bookie.http.get("/v1/ledgers/1/lac")
        assert r.status_code == 503 and r.json()["error"] == "unavailable", r.text
        wait_for(lambda: _log_count(proc, "cannot reach ZooKeeper") >= 3, 30.0, "retries")
        lines = tail(proc.log_path, 10_000).splitlines()
        attempts = sum("cannot reach ZooKeeper" in line for line in lines)
        assert 3 <= attempts <= 4, "\n".join(lines[-40:])  # back-off: 0.5 s, 1 s, 2 s
        assert len(lines) <= 3 * attempts + 20, "\n".join(lines[-40:])
        assert not bookie.healthy()

        zookeeper.start()
        zookeeper.wait_ready(60.0)
        wait_for(bookie.healthy, 30.0, "/health to turn 200 once ZooKeeper is up")
        assert bookie.add([sealed(1, 0)]) == {"stored": 1, "rejected": []}
        bookie.close()
    finally:
        bookies.stop_all()
        zookeeper.stop()


def _get(url: str) -> httpx.Response | None:
    try:
        return poll_client().get(url, timeout=2.0)
    except httpx.HTTPError:
        return None


def _log_count(proc, text: str) -> int:
    return sum(text in line for line in tail(proc.log_path, 10_000).splitlines())


def test_one_bad_crc_record_fails_only_itself_in_a_cross_ledger_add(cluster):
    """In one add request holding entries of three ledgers, a record whose crc32c does not
    match (corrupted digest) and one whose payload was tampered with are refused one by
    one with invalid_argument; every other record is stored (before: 400 for the whole
    request, nothing stored). A body that does not parse is still refused whole."""
    bookie = Bookie(cluster.start_bookie())
    try:
        bad_digest = sealed(21, 1)._replace(digest=bytes(4))
        tampered = sealed(22, 0, b"abc")._replace(payload=b"abd")
        records = [sealed(21, 0), bad_digest, tampered, sealed(22, 1), sealed(23, 0)]
        assert bookie.add(records) == {
            "stored": 3,
            "rejected": [
                {"ledger_id": 21, "entry_id": 1, "error": "invalid_argument"},
                {"ledger_id": 22, "entry_id": 0, "error": "invalid_argument"},
            ],
        }
        assert bookie.read(21, 0) == records[0]
        assert bookie.read(22, 1) == records[3]
        assert bookie.read(23, 0) == records[4]
        r = bookie.http.get("/v1/ledgers/22/entries/0")
        assert r.status_code == 404 and r.json()["error"] == "entry_not_found"
        assert bookie.metric("quire_bookie_rejected_adds_total", 'reason="invalid_argument"') == 2
        whole = bookie.http.post(
            "/v1/entries",
            content=framing.encode([sealed(24, 0)])[:-1],
            headers={"Content-Type": framing.MEDIA_TYPE},
        )
        assert whole.status_code == 400 and whole.json()["error"] == "invalid_argument"
        assert 24 not in bookie.ledgers()
    finally:
        bookie.close()


def test_answers_carry_the_instance_and_the_ledger_length(cluster):
    """Fence, LAC, entry and range answers and not-found errors carry the bookie's instance
    id (the cookie's), through the client too; the fence and LAC answers give the ledger's
    length at the last entry stored and at the LAC; a bookie reformatted with
    `quire bookie format` answers under a new instance id."""
    from services.bookie_client import BookieClient
    from services.errors import EntryNotFound, LedgerNotFound
    from tests.integration.test_bookie_cookie import run_format

    data_dir = cluster.base_dir / "formatted"
    proc = cluster.start_bookie(data_dir=data_dir)
    bookie = Bookie(proc)
    first = bookie.info()["instance_id"]
    # lengths: entry e of sealed() carries length (e + 1) * 10; entry 2 says lac 1.
    bookie.add([sealed(31, 0), sealed(31, 1), sealed(31, 2)])

    async def answers() -> dict:
        async with BookieClient(proc.address) as client:
            lac = await client.read_lac(31)
            fence = await client.fence(31)
            entry = await client.read_entry_result(31, 1)
            page = await client.read_range(31, 0, 10)
            missing_entry = missing_ledger = None
            try:
                await client.read_entry(31, 9)
            except EntryNotFound as exc:
                missing_entry = exc
            try:
                await client.read_range(32, 0, 10)
            except LedgerNotFound as exc:
                missing_ledger = exc
            return {
                "lac": lac,
                "fence": fence,
                "entry": entry,
                "page": page,
                "missing_entry": missing_entry,
                "missing_ledger": missing_ledger,
            }

    got = asyncio.run(answers())
    lac, fence = got["lac"], got["fence"]
    assert (lac.lac, lac.last_entry_id, lac.length, lac.lac_length) == (1, 2, 30, 20)
    assert fence.fenced and (fence.length, fence.lac_length) == (30, 20)
    assert lac.instance_id == fence.instance_id == first
    assert got["entry"].instance_id == got["page"].instance_id == first
    assert got["missing_entry"].bookie_instance_id == first
    assert got["missing_ledger"].bookie_instance_id == first
    r = bookie.http.get("/v1/ledgers/31/lac")
    assert r.headers["X-Quire-Bookie-Instance"] == first
    assert r.json()["instance_id"] == first
    # Adds (served before FastAPI's stack) carry it once, as every /v1 answer, errors
    # included, with the same other headers as a routed answer.
    media = {"Content-Type": framing.MEDIA_TYPE}
    adds = [
        bookie.http.post("/v1/entries", content=framing.encode([sealed(31, 3)]), headers=media),
        bookie.http.post("/v1/entries", content=b"not framed", headers=media),
        bookie.http.post("/v1/entries", content=b"", headers=media),
    ]
    assert [a.status_code for a in adds] == [200, 400, 400], [a.text for a in adds]
    for a in adds:
        assert a.headers.get_list("X-Quire-Bookie-Instance") == [first], a.headers
        assert sorted(a.headers) == sorted(r.headers), (a.headers, r.headers)

    proc.stop()
    run_format(cluster, proc.address, data_dir)
    proc.start()
    proc.wait_healthy(30.0)
    second = bookie.info()["instance_id"]
    assert second and second != first
    r = bookie.http.get("/v1/ledgers/31/entries/1")
    assert r.status_code == 404 and r.json()["error"] == "ledger_not_found"
    assert r.headers["X-Quire-Bookie-Instance"] == second
    bookie.close()
