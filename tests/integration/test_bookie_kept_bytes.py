"""The payload bytes a real bookie keeps per ledger (bookie/storage.py, "Kept byte counts")
stay equal to a scan of its entries through every path that adds or removes entries:
single and batched adds, recovery write-backs, deletes and the background purge, an id
written again while it purges, a SIGKILL in the middle of all that, and the migration of
a data dir of the previous version. ``GET /v1/storage`` and ``GET /v1/storage/ledgers``
answer from those counts."""

from __future__ import annotations

import sqlite3
import threading

import httpx

from bookie.storage import DB_FILE
from services.cluster.processes import tail
from services.wire import framing
from tests.bookie_bytes import assert_kept_equals_scan
from tests.harness import wait_for
from tests.integration.bookie_support import Bookie, sealed

PURGE_DEADLINE_S = 60.0


def live_bytes(kept: dict[tuple[str, int], int]) -> int:
    return sum(size for (table, _), size in kept.items() if table == "ledgers")


def purging(kept: dict[tuple[str, int], int]) -> dict[str, int]:
    left = [size for (table, _), size in kept.items() if table == "purging"]
    return {"ledgers": len(left), "bytes": sum(left)}


def every_page(bookie: Bookie) -> dict[int, int]:
    """``GET /v1/storage/ledgers`` page after page: every ledger with its bytes."""
    out: dict[int, int] = {}
    after = -1
    while True:
        page = bookie.http.get("/v1/storage/ledgers", params={"after": after, "limit": 3})
        assert page.status_code == 200, page.text
        doc = page.json()
        out.update({item["ledger_id"]: item["bytes"] for item in doc["ledgers"]})
        if doc["next"] is None:
            return out
        after = doc["next"]


def test_counts_equal_the_scan_through_adds_write_backs_deletes_and_the_purge(
    cluster, tmp_path
) -> None:
    """After single adds, a batch over several ledgers, repeats of stored entries,
    recovery write-backs to a fenced ledger, a delete of a large ledger and an add to its
    id while it purges, every kept count equals the scan, and the report and the paged
    listing give those figures: the deleted ledger leaves ``live`` at once, ``purging``
    holds what is left of it until the purge ends."""
    data_dir = tmp_path / "kept"
    bookie = Bookie(cluster.start_bookie(data_dir=data_dir))
    for eid in range(20):
        assert bookie.add([sealed(1, eid, bytes(eid * 10))])["stored"] == 1
    batch = [sealed(lid, eid, bytes([lid]) * (100 + lid)) for lid in (2, 3, 4) for eid in range(30)]
    assert bookie.add(batch) == {"stored": 90, "rejected": []}
    # Repeats: the same bytes count as stored and add nothing; other bytes are refused.
    again = bookie.add([sealed(1, 5, bytes(50)), sealed(1, 6, b"other")])
    assert again["stored"] == 1 and [r["error"] for r in again["rejected"]] == ["entry_exists"]
    bookie.fence(2)
    write_back = [sealed(2, eid, bytes([2]) * 102, recovery=True) for eid in range(25, 40)]
    assert bookie.add(write_back) == {"stored": 15, "rejected": []}
    for first in range(0, 400, 100):  # ledger 9: 400 entries of 8 KiB, purged over chunks
        records = [sealed(9, eid, bytes(8192)) for eid in range(first, first + 100)]
        assert bookie.add(records)["stored"] == 100

    kept = assert_kept_equals_scan(data_dir)
    assert kept == {
        ("ledgers", 1): sum(eid * 10 for eid in range(20)),
        ("ledgers", 2): 40 * 102,
        ("ledgers", 3): 30 * 103,
        ("ledgers", 4): 30 * 104,
        ("ledgers", 9): 400 * 8192,
    }
    report = bookie.http.get("/v1/storage").json()
    assert report["live"] == {"ledgers": 5, "bytes": live_bytes(kept)}
    assert report["purging"] == {"ledgers": 0, "bytes": 0}
    assert every_page(bookie) == {lid: size for (_, lid), size in kept.items()}

    assert bookie.http.delete("/v1/ledgers/9").status_code == 204
    assert bookie.http.delete("/v1/ledgers/4").status_code == 204
    assert bookie.add([sealed(4, 0, b"again")]) == {"stored": 1, "rejected": []}
    report = bookie.http.get("/v1/storage").json()
    kept = assert_kept_equals_scan(data_dir)
    assert kept[("ledgers", 4)] == len(b"again") and ("purging", 4) not in kept
    assert report["live"] == {"ledgers": 4, "bytes": live_bytes(kept)}
    assert report["purging"]["bytes"] <= 400 * 8192
    assert 9 not in every_page(bookie)

    wait_for(
        lambda: purging(assert_kept_equals_scan(data_dir)) == {"ledgers": 0, "bytes": 0},
        PURGE_DEADLINE_S,
        "ledger 9 to be purged",
    )
    report = bookie.http.get("/v1/storage").json()
    assert report["purging"] == {"ledgers": 0, "bytes": 0}
    assert report["live"] == {"ledgers": 4, "bytes": live_bytes(assert_kept_equals_scan(data_dir))}
    bookie.close()


def test_counts_equal_the_scan_after_a_sigkill_mid_writes(cluster, tmp_path) -> None:
    """Four clients add batches and single entries and delete ledgers while the bookie
    is SIGKILLed: the data dir it leaves has every kept count equal to the scan (each
    count is in the transaction of its entries), and after the restart the report sums
    those counts and the purge ends with them exact."""
    data_dir = tmp_path / "killed"
    proc = cluster.start_bookie(data_dir=data_dir, extra_args=["--journal-sync"])
    bookie = Bookie(proc)
    stop = threading.Event()
    acknowledged = [0, 0, 0, 0]

    def load(client: int) -> None:
        http = httpx.Client(base_url=proc.url, timeout=10.0)
        lid = 1000 * (client + 1)
        try:
            while not stop.is_set():
                count = 1 if client % 2 else 50
                for eid in range(0, 200, count):
                    records = [sealed(lid, e, bytes(100 + e)) for e in range(eid, eid + count)]
                    answer = http.post(
                        "/v1/entries",
                        content=framing.encode(records),
                        headers={"Content-Type": framing.MEDIA_TYPE},
                    )
                    if answer.status_code != 200:
                        return
                    acknowledged[client] += count
                if lid % 3 == 0 and http.delete(f"/v1/ledgers/{lid}").status_code != 204:
                    return
                lid += 1
        except httpx.HTTPError:  # the kill ends the load
            return
        finally:
            http.close()

    loaders = [threading.Thread(target=load, args=(c,), daemon=True) for c in range(4)]
    for loader in loaders:
        loader.start()
    wait_for(lambda: min(acknowledged) >= 400, 60.0, "every client to store 400 entries")
    proc.kill()
    stop.set()
    for loader in loaders:
        loader.join(15.0)

    kept = assert_kept_equals_scan(data_dir)
    assert live_bytes(kept) > 0

    proc.start()
    proc.wait_healthy(30.0)
    report = bookie.http.get("/v1/storage").json()
    kept = assert_kept_equals_scan(data_dir)
    assert report["live"]["bytes"] == live_bytes(kept)
    assert report["live"]["ledgers"] == len([k for k in kept if k[0] == "ledgers"])
    wait_for(
        lambda: purging(assert_kept_equals_scan(data_dir)) == {"ledgers": 0, "bytes": 0},
        PURGE_DEADLINE_S,
        "the purge to end after the restart",
    )
    assert bookie.http.get("/v1/storage").json()["purging"] == {"ledgers": 0, "bytes": 0}
    bookie.close()


def test_a_data_dir_of_the_previous_version_is_counted_at_start(cluster, tmp_path) -> None:
    """A data dir as the previous version left it (no ``bytes`` columns: dropped here from
    a stopped bookie's store, one ledger deleted and not purged) starts: its log says it
    counted the bytes and how long it took, the counts equal the scan, the report gives
    them, and the purge of the ledger deleted before the upgrade ends with its count."""
    data_dir = tmp_path / "previous"
    proc = cluster.start_bookie(data_dir=data_dir)
    bookie = Bookie(proc)
    for lid in (5, 6, 7):
        for first in range(0, 300, 100):
            records = [sealed(lid, e, bytes([lid]) * 2000) for e in range(first, first + 100)]
            assert bookie.add(records)["stored"] == 100
    bookie.fence(8)
    proc.stop()
    db = sqlite3.connect(data_dir / DB_FILE)
    with db:
        # Ledger 7 deleted but not purged yet, as the previous version would leave it.
        db.execute("DELETE FROM ledgers WHERE ledger_id = 7")
        db.execute("INSERT INTO purging (ledger_id) VALUES (7)")
        db.execute("ALTER TABLE ledgers DROP COLUMN bytes")
        db.execute("ALTER TABLE purging DROP COLUMN bytes")
    db.close()

    proc.start()
    proc.wait_healthy(30.0)
    log = tail(proc.log_path, 400)
    assert "counted the payload bytes of every ledger" in log
    assert "took_s" in log
    report = bookie.http.get("/v1/storage").json()
    kept = assert_kept_equals_scan(data_dir)
    assert report["live"] == {"ledgers": 3, "bytes": 600_000 * 2}
    assert kept[("ledgers", 8)] == 0
    assert report["purging"]["bytes"] == kept.get(("purging", 7), 0) <= 600_000
    wait_for(
        lambda: purging(assert_kept_equals_scan(data_dir)) == {"ledgers": 0, "bytes": 0},
        PURGE_DEADLINE_S,
        "the ledger deleted before the upgrade to be purged",
    )
    assert bookie.add([sealed(5, 300, b"after")])["stored"] == 1
    assert assert_kept_equals_scan(data_dir)[("ledgers", 5)] == 600_000 + len(b"after")
    bookie.close()
