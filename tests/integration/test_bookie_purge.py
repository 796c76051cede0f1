"""A delete on a real bookie process answers at once and its entries go in the background
(bookie/writer.py, "The purge"): the ledger is gone for every read from the answer on, the
rows disappear within a deadline, a bookie killed mid-purge finishes it after a restart,
and a data dir of the older schema (no ``purging`` table) migrates."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from bookie.storage import DB_FILE
from services.wire import framing
from tests.harness import wait_for
from tests.integration.bookie_support import Bookie, sealed

PURGE_DEADLINE_S = 60.0


def rows(data_dir: Path, sql: str, *args: object) -> int:
    """One count, on a read-only connection of the test's own (WAL: the bookie may run)."""
    db = sqlite3.connect(f"file:{data_dir / DB_FILE}?mode=ro", uri=True, timeout=10)
    try:
        return int(db.execute(sql, args).fetchone()[0])
    finally:
        db.close()


def fill(bookie: Bookie, lid: int, entries: int, size: int, batch: int = 100) -> None:
    for first in range(0, entries, batch):
        count = min(batch, entries - first)
        records = [sealed(lid, e, bytes([lid % 256]) * size) for e in range(first, first + count)]
        assert bookie.add(records) == {"stored": count, "rejected": []}


def test_a_deleted_ledger_is_gone_at_once_and_its_rows_soon(cluster, tmp_path):
    """The delete answers 204; from then on the ledger's entries, LAC and stored runs
    answer as for an unknown ledger, the storage report counts it as purging (never
    live), and within the deadline its rows are gone and the report's purging figure is
    zero. The id can then be written again, from scratch."""
    data_dir = tmp_path / "purge"
    bookie = Bookie(cluster.start_bookie(data_dir=data_dir))
    fill(bookie, 1, 400, 16384)
    bookie.add([sealed(2, 0, b"keep me")])

    r = bookie.http.delete("/v1/ledgers/1")
    assert r.status_code == 204
    for path in ("/v1/ledgers/1/entries/0", "/v1/ledgers/1/entries", "/v1/ledgers/1/lac"):
        got = bookie.http.get(path)
        assert got.status_code == 404 and got.json()["error"] == "ledger_not_found", path
    got = bookie.http.get("/v1/ledgers/1/stored")
    assert got.status_code == 404 and got.json()["error"] == "ledger_not_found"
    got = bookie.http.post("/v1/stored", json={"ledger_ids": [1, 2]})
    assert [(x["ledger_id"], x["known"], x["entries"]) for x in got.json()["ledgers"]] == [
        (1, False, 0),
        (2, True, 1),
    ]
    report = bookie.http.get("/v1/storage").json()
    assert report["live"] == {"ledgers": 1, "bytes": len(b"keep me")}
    assert report["purging"]["ledgers"] in (0, 1)
    assert report["purging"]["bytes"] <= 400 * 16384
    page = bookie.http.get("/v1/storage/ledgers").json()
    assert page["ledgers"] == [{"ledger_id": 2, "bytes": len(b"keep me")}]
    assert bookie.ledgers() == [2]

    # The purge thread commits a chunk before it counts it in the metrics
    # (bookie/writer.py _purge_chunk): both are waited for, not read once the rows went.
    wait_for(
        lambda: (
            rows(data_dir, "SELECT COUNT(*) FROM entries WHERE ledger_id = 1") == 0
            and rows(data_dir, "SELECT COUNT(*) FROM purging") == 0
            and bookie.metric("quire_bookie_purging_ledgers") == 0
            and bookie.metric("quire_bookie_purged_entries_total") >= 400
        ),
        PURGE_DEADLINE_S,
        "the deleted ledger's rows to be purged and counted",
    )
    assert bookie.metric("quire_bookie_purged_entries_total") == 400
    assert bookie.http.get("/v1/storage").json()["purging"] == {"ledgers": 0, "bytes": 0}
    assert bookie.read(2, 0).payload == b"keep me"
    assert bookie.add([sealed(1, 5)]) == {"stored": 1, "rejected": []}
    assert bookie.http.get("/v1/ledgers/1/entries/0").json()["error"] == "entry_not_found"
    assert bookie.lac(1) == {"ledger_id": 1, "lac": 4, "last_entry_id": 5, "fenced": False}
    bookie.close()


def test_a_bookie_killed_mid_purge_finishes_it_after_a_restart(cluster, tmp_path):
    """Under a load of adds (the purge then takes a share of the writer's time only),
    twenty ledgers are deleted and the bookie is SIGKILLed while some are still purging.
    After the restart the purge resumes from the durable table and ends; every entry of
    the live ledger acknowledged before the kill reads back, and ids written again while
    purging (an add, a fence, a LAC update) answer as new ledgers."""
    data_dir = tmp_path / "killed"
    proc = cluster.start_bookie(data_dir=data_dir, extra_args=["--journal-sync"])
    bookie = Bookie(proc)
    doomed = list(range(10, 30))
    for lid in doomed:
        fill(bookie, lid, 500, 4096)

    acknowledged: list[int] = []
    stop = threading.Event()

    def load() -> None:
        load_bookie = Bookie(proc)
        eid = 0
        try:
            while not stop.is_set():
                answer = load_bookie.http.post(
                    "/v1/entries",
                    content=framing.encode([sealed(500, eid)]),
                    headers={"Content-Type": framing.MEDIA_TYPE},
                )
                if answer.status_code != 200:
                    return
                acknowledged.append(eid)
                eid += 1
        except Exception:  # noqa: BLE001 - the kill ends the load
            return
        finally:
            load_bookie.close()

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    wait_for(lambda: len(acknowledged) > 20, 30.0, "the add load to run")
    for lid in doomed:
        assert bookie.http.delete(f"/v1/ledgers/{lid}").status_code == 204
    # Ids still purging (the purge goes from the lowest id up), written again.
    assert bookie.add([sealed(29, 3)]) == {"stored": 1, "rejected": []}
    assert bookie.fence(28) == {"ledger_id": 28, "lac": -1, "last_entry_id": -1, "fenced": True}
    r = bookie.http.post("/v1/ledgers/27/lac", json={"lac": 7})
    assert r.status_code == 200
    assert (r.json()["lac"], r.json()["last_entry_id"], r.json()["fenced"]) == (7, -1, False)
    purging = bookie.metric("quire_bookie_purging_ledgers")
    assert purging > 0, "the purge ended before the kill: nothing to resume"
    proc.kill()
    stop.set()
    loader.join(10.0)

    left = rows(data_dir, "SELECT COUNT(*) FROM purging")
    assert left > 0
    # Mid-purge on disk: no ledger row for a purging id, live rows untouched.
    assert (
        rows(
            data_dir,
            "SELECT COUNT(*) FROM ledgers WHERE ledger_id IN (SELECT ledger_id FROM purging)",
        )
        == 0
    )

    proc.start()
    proc.wait_healthy(30.0)
    wait_for(
        lambda: rows(data_dir, "SELECT COUNT(*) FROM purging") == 0,
        PURGE_DEADLINE_S,
        "the purge to resume and end after the restart",
    )
    marks = ", ".join("?" * len(doomed))
    assert (
        rows(data_dir, f"SELECT COUNT(*) FROM entries WHERE ledger_id IN ({marks})", *doomed) == 1
    )
    assert bookie.read(29, 3).payload == sealed(29, 3).payload
    assert bookie.lac(28)["fenced"] is True
    assert bookie.lac(27)["lac"] == 7
    for lid in doomed[:-3]:
        assert bookie.http.get(f"/v1/ledgers/{lid}/lac").status_code == 404
    stored = bookie.http.get("/v1/ledgers/500/stored").json()
    assert stored["ranges"][0][0] == 0 and stored["ranges"][0][1] >= acknowledged[-1]
    bookie.close()


def test_a_data_dir_without_the_purging_table_migrates(cluster, tmp_path):
    """A data dir as the previous version left it (its store without the ``purging``
    table: dropped here from a stopped bookie's store) opens with its ledgers intact,
    gets the table, and purges a delete in it."""
    data_dir = tmp_path / "old"
    proc = cluster.start_bookie(data_dir=data_dir)
    bookie = Bookie(proc)
    fill(bookie, 3, 50, 1000)
    fill(bookie, 4, 50, 1000)
    bookie.fence(4)
    proc.stop()
    db = sqlite3.connect(data_dir / DB_FILE)
    db.execute("DROP TABLE purging")
    db.commit()
    db.close()
    assert rows(data_dir, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'purging'") == 0

    proc.start()
    proc.wait_healthy(30.0)
    assert rows(data_dir, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'purging'") == 1
    assert bookie.ledgers() == [3, 4]
    assert bookie.lac(4) == {"ledger_id": 4, "lac": 48, "last_entry_id": 49, "fenced": True}
    assert bookie.http.delete("/v1/ledgers/3").status_code == 204
    wait_for(
        lambda: (
            rows(data_dir, "SELECT COUNT(*) FROM entries WHERE ledger_id = 3") == 0
            and rows(data_dir, "SELECT COUNT(*) FROM purging") == 0
        ),
        PURGE_DEADLINE_S,
        "the deleted ledger's rows to be purged",
    )
    assert len(bookie.read_range(4, 0, 100)) == 50
    bookie.close()
