"""The bookie's storage against real processes: durability across kill -9, group commit,
fencing across restarts, space reclaimed by deletes, LAC long-polls."""

from __future__ import annotations

import asyncio
import random
import threading
import time

from services.wire import framing
from tests.harness import wait_for
from tests.integration.bookie_support import Bookie, RawConnection, sealed, state, store_bytes


def test_acknowledged_adds_and_fences_survive_kill_9(cluster, tmp_path):
    """Every add acknowledged before a SIGKILL (fsync on) reads back byte-exact after a
    restart on the same data dir, and every fenced flag is still reported."""
    data_dir = tmp_path / "durable"
    proc = cluster.start_bookie(data_dir=data_dir, extra_args=["--journal-sync"])
    bookie = Bookie(proc)
    rng = random.Random(7)
    expected = {}

    async def load():
        conns = [await RawConnection(proc.host, proc.port).open() for _ in range(16)]

        async def writer(i: int) -> None:
            lid = 100 + i
            for first in range(0, 40, 4):
                records = [
                    sealed(lid, e, rng.randbytes(rng.randrange(0, 3000)))
                    for e in range(first, first + 4)
                ]
                answer = await conns[i].post_entries(records)
                assert answer == {"stored": 4, "rejected": []}
                for r in records:  # acknowledged: it must survive
                    expected[(r.ledger_id, r.entry_id)] = r

        await asyncio.gather(*(writer(i) for i in range(16)))
        for conn in conns:
            await conn.close()

    asyncio.run(load())
    fenced = [100, 105, 115, 999]
    for lid in fenced:
        assert bookie.fence(lid)["fenced"]
    proc.kill()  # SIGKILL right after the last acknowledgement

    proc.start()
    proc.wait_healthy(30.0)
    assert len(expected) == 16 * 40
    for lid in range(100, 116):
        got = bookie.read_range(lid, 0, 1000)
        assert got == [expected[(lid, e)] for e in range(40)]
        state = bookie.lac(lid)
        assert state["last_entry_id"] == 39 and state["lac"] == 38
        assert state["fenced"] == (lid in fenced)
    assert bookie.lac(999) == {"ledger_id": 999, "lac": -1, "last_entry_id": -1, "fenced": True}
    assert bookie.read(107, 13) == expected[(107, 13)]
    bookie.close()


def test_group_commit_shares_fsyncs(cluster):
    """Under 64 concurrent adders sending one entry per request, one fsync covers many
    adds: the fsync counter stays far below the add counter."""
    proc = cluster.start_bookie(extra_args=["--journal-sync"])
    bookie = Bookie(proc)
    fsyncs_before = bookie.metric("quire_bookie_fsyncs_total")
    adds_before = bookie.metric("quire_bookie_adds_total")
    clients, rounds = 64, 25

    async def load():
        conns = [await RawConnection(proc.host, proc.port).open() for _ in range(clients)]
        for round_ in range(rounds):
            # All 64 requests are on the wire before any answer is read.
            for i, conn in enumerate(conns):
                body = framing.encode([sealed(i, round_, b"x" * 100)])
                conn.send("POST", "/v1/entries", body, framing.MEDIA_TYPE)
            answers = await asyncio.gather(*(conn.receive() for conn in conns))
            assert all(status == 200 for status, _ in answers), answers[:3]
        for conn in conns:
            await conn.close()

    asyncio.run(load())
    adds = bookie.metric("quire_bookie_adds_total") - adds_before
    fsyncs = bookie.metric("quire_bookie_fsyncs_total") - fsyncs_before
    assert adds == clients * rounds
    assert 0 < fsyncs < adds / 4, f"{fsyncs} fsyncs for {adds} adds"
    assert bookie.metric("quire_bookie_group_commit_entries_count") == bookie.metric(
        "quire_bookie_fsyncs_total"
    )
    bookie.close()


def test_one_add_at_a_time_is_committed_by_the_event_loop(cluster):
    """With one add in flight the writer thread is idle, so the bookie's event loop commits
    each add itself (no hand-off to the thread and back): every commit of a run of single
    adds is a loop commit, each fsynced; a fence after them goes to the thread."""
    proc = cluster.start_bookie(extra_args=["--journal-sync"])
    bookie = Bookie(proc)
    names = ("commits", "loop_commits", "fsyncs")
    before = {n: bookie.metric(f"quire_bookie_{n}_total") for n in names}

    def counted() -> dict[str, float]:
        return {n: bookie.metric(f"quire_bookie_{n}_total") - before[n] for n in names}

    adds = 20

    async def load():
        conn = await RawConnection(proc.host, proc.port).open()
        for eid in range(adds):
            answer = await conn.post_entries([sealed(31, eid, b"one at a time")])
            assert answer == {"stored": 1, "rejected": []}
        await conn.close()

    asyncio.run(load())
    assert counted() == {"commits": adds, "loop_commits": adds, "fsyncs": adds}
    fenced = bookie.fence(31)
    assert fenced["fenced"] is True and fenced["last_entry_id"] == adds - 1
    assert counted() == {"commits": adds + 1, "loop_commits": adds, "fsyncs": adds + 1}
    bookie.close()


def test_fencing_rejects_normal_adds_accepts_recovery_and_survives_restart(cluster):
    """After a fence a normal add is rejected (ledger_fenced), a recovery add is stored;
    after a restart the flag still rejects normal adds and the recovered entry is there."""
    proc = cluster.start_bookie()
    bookie = Bookie(proc)
    assert bookie.add([sealed(5, i) for i in range(3)]) == {"stored": 3, "rejected": []}
    state = bookie.fence(5)
    assert state == {"ledger_id": 5, "lac": 1, "last_entry_id": 2, "fenced": True}
    assert bookie.fence(5) == state  # idempotent

    answer = bookie.add([sealed(5, 3), sealed(6, 0)])
    assert answer == {
        "stored": 1,
        "rejected": [{"ledger_id": 5, "entry_id": 3, "error": "ledger_fenced"}],
    }
    assert bookie.http.get("/v1/ledgers/5/entries/3").json()["error"] == "entry_not_found"
    recovered = sealed(5, 3, b"recovered", recovery=True)
    assert bookie.add([recovered]) == {"stored": 1, "rejected": []}
    assert bookie.metric("quire_bookie_rejected_adds_total", 'reason="ledger_fenced"') == 1

    proc.restart()
    assert bookie.lac(5)["fenced"] is True
    assert bookie.add([sealed(5, 4)])["rejected"] == [
        {"ledger_id": 5, "entry_id": 4, "error": "ledger_fenced"}
    ]
    got = bookie.read(5, 3)
    assert got.payload == b"recovered" and got.recovery is False  # reads carry no recovery bit
    assert got.digest_type == "crc32c" and got.length == recovered.length
    assert bookie.lac(6)["fenced"] is False
    bookie.close()


def test_delete_removes_entries_and_reclaims_space(cluster, tmp_path):
    """Deleting a ledger removes its entries and flags (404 afterwards) and gives the disk
    space back; other ledgers are untouched."""
    data_dir = tmp_path / "space"
    proc = cluster.start_bookie(data_dir=data_dir)
    bookie = Bookie(proc)
    blob = bytes(range(256)) * 256  # 64 KiB
    for first in range(0, 320, 40):
        bookie.add([sealed(1, e, blob) for e in range(first, first + 40)])
    bookie.add([sealed(2, 0, b"keep me")])
    bookie.fence(1)
    full = store_bytes(data_dir)
    assert full > 20 * 1024 * 1024

    r = bookie.http.delete("/v1/ledgers/1")
    assert r.status_code == 204 and r.content == b""
    assert bookie.http.get("/v1/ledgers/1/lac").json()["error"] == "ledger_not_found"
    assert bookie.http.get("/v1/ledgers/1/entries/5").json()["error"] == "ledger_not_found"
    assert bookie.http.delete("/v1/ledgers/1").status_code == 404
    assert bookie.ledgers() == [2]
    assert bookie.read(2, 0).payload == b"keep me"
    wait_for(lambda: store_bytes(data_dir) < full / 4, 20.0, "space to be reclaimed")
    wait_for(lambda: bookie.metric("quire_bookie_stored_bytes") < full / 4, 20.0, "bytes gauge")
    # The ledger can be written again from scratch, unfenced.
    assert bookie.add([sealed(1, 0)]) == {"stored": 1, "rejected": []}
    assert bookie.lac(1) == {"ledger_id": 1, "lac": -1, "last_entry_id": 0, "fenced": False}
    bookie.close()


def test_reads_lac_and_long_poll(cluster):
    """Range reads honour from/to/max_entries/max_bytes and report the last entry; LAC is the
    maximum seen; a long-poll answers as soon as the ledger passes `after`, and with the
    current state when the wait is over."""
    proc = cluster.start_bookie()
    bookie = Bookie(proc)
    bookie.add([sealed(3, e, bytes(1000)) for e in (0, 1, 2, 4, 5)])
    r = bookie.http.get("/v1/ledgers/3/entries", params={"from": 1, "to": 4})
    assert r.headers["X-Quire-Last-Entry-Id"] == "5"
    assert [x.entry_id for x in bookie.read_range(3, 1, 4)] == [1, 2, 4]
    assert [x.entry_id for x in bookie.read_range(3, 0, 9, max_entries=2)] == [0, 1]
    assert [x.entry_id for x in bookie.read_range(3, 0, 9, max_bytes=2500)] == [0, 1]
    assert [x.entry_id for x in bookie.read_range(3, 2, 9, max_bytes=1)] == [2]
    assert bookie.read_range(3, 6, 9) == []
    assert bookie.lac(3)["lac"] == 4

    r = bookie.http.post("/v1/ledgers/3/lac", json={"lac": 9})
    assert state(r.json()) == {"ledger_id": 3, "lac": 9, "last_entry_id": 5, "fenced": False}
    assert bookie.http.post("/v1/ledgers/3/lac", json={"lac": 2}).json()["lac"] == 9
    new = state(bookie.http.post("/v1/ledgers/8/lac", json={"lac": -1}).json())
    assert new == {"ledger_id": 8, "lac": -1, "last_entry_id": -1, "fenced": False}

    # Long-poll: answered by the add, well before its 20 s wait.
    result: dict = {}

    def poll() -> None:
        started = time.monotonic()
        r = bookie.http.get("/v1/ledgers/3/lac", params={"after": 9, "wait_ms": 20000})
        result.update(r.json(), elapsed=time.monotonic() - started)

    thread = threading.Thread(target=poll)
    thread.start()
    # Whether the add lands before or during the wait, the poll must answer with it.
    bookie.add([sealed(3, 10, lac=9)])
    thread.join(25.0)
    assert result["last_entry_id"] == 10 and result["elapsed"] < 15.0

    started = time.monotonic()
    r = bookie.http.get("/v1/ledgers/3/lac", params={"after": 50, "wait_ms": 300})
    assert r.status_code == 200 and r.json()["last_entry_id"] == 10
    assert time.monotonic() - started >= 0.25
    r = bookie.http.get("/v1/ledgers/77/lac", params={"after": 0, "wait_ms": 100})
    assert r.status_code == 404 and r.json()["error"] == "ledger_not_found"
    bookie.close()
