"""Which entries a real bookie stores (GET /v1/ledgers/{id}/stored, POST /v1/stored):
runs of striped and contiguous ledgers, bulk order and unknown ledgers, digest checks
that find an entry corrupted on disk, bad input, the cluster secret, /v1/info."""

from __future__ import annotations

import asyncio
import sqlite3

from bookie.storage import DB_FILE
from services.bookie_client import BookieClient, StoredInfo
from services.cluster.processes import poll_client
from services.errors import LedgerNotFound
from services.limits import STORED_BATCH_MAX, STORED_SAMPLE_ENTRIES_MAX
from services.wire import digest
from services.wire.framing import FramedRecord
from tests.integration.bookie_support import Bookie, sealed

SECRET = "stored-test-secret"


def hmac_record(lid: int, eid: int) -> FramedRecord:
    key = digest.mac_key(b"pw")
    return digest.seal(
        FramedRecord(lid, eid, eid - 1, b"h%d" % eid, b"", False, "hmac-sha256", eid), key
    )


def stored(bookie: Bookie, lid: int, verify: str = "none") -> dict:
    r = bookie.http.get(f"/v1/ledgers/{lid}/stored", params={"verify": verify})
    assert r.status_code == 200, r.text
    return r.json()


def bulk(bookie: Bookie, ids: list[int], verify: str = "none") -> list[dict]:
    r = bookie.http.post("/v1/stored", json={"ledger_ids": ids, "verify": verify})
    assert r.status_code == 200, r.text
    return r.json()["ledgers"]


def test_stored_runs_bulk_checks_and_a_corrupted_entry(cluster, tmp_path):
    """A striped ledger (E=3, Qw=2: two of every three entries) lists one run per
    stripe, a contiguous one a single run; bulk answers keep the order asked and mark
    unknown ledgers; bad input is 400 and a missing secret 401; after an entry's bytes
    are changed on disk in a stopped bookie, verify=sample finds the damaged last
    entry and verify=all finds every damaged one, through the client too."""
    cluster.secret = SECRET
    data_dir = tmp_path / "bookie"
    proc = cluster.start_bookie(data_dir=data_dir)
    bookie = Bookie(proc, SECRET)
    striped = [e for e in range(300) if e % 3 != 2]
    for first in range(0, len(striped), 100):
        bookie.add([sealed(1, e) for e in striped[first : first + 100]])
    bookie.add([sealed(2, e) for e in range(100)])
    bookie.add([hmac_record(3, e) for e in range(5)])
    bookie.fence(4)  # known, no entries

    one = stored(bookie, 1)
    assert one == {
        "ledger_id": 1,
        "ranges": [[e, e + 1] for e in range(0, 300, 3)],
        "entries": 200,
        "last_entry_id": 298,
        "fenced": False,
        "checked": 0,
        "corrupt": [],
    }
    assert stored(bookie, 2)["ranges"] == [[0, 99]]
    assert stored(bookie, 3, "all") | {"ranges": None} == {
        "ledger_id": 3,
        "ranges": None,
        "entries": 5,
        "last_entry_id": 4,
        "fenced": False,
        "checked": 5,
        "corrupt": [],
    }
    missing = bookie.http.get("/v1/ledgers/77/stored")
    assert missing.status_code == 404 and missing.json()["error"] == "ledger_not_found"

    answers = bulk(bookie, [4, 77, 2, 1, 2])
    assert [a["ledger_id"] for a in answers] == [4, 77, 2, 1, 2]
    assert answers[1] == {
        "ledger_id": 77,
        "known": False,
        "ranges": [],
        "entries": 0,
        "last_entry_id": -1,
        "fenced": False,
        "checked": 0,
        "corrupt": [],
    }
    assert answers[0]["known"] and answers[0]["fenced"] and answers[0]["ranges"] == []
    assert answers[3] == {**one, "known": True} and answers[2] == answers[4]

    for body in (
        {"ledger_ids": []},
        {"ledger_ids": list(range(STORED_BATCH_MAX + 1))},
        {"ledger_ids": ["1"]},
        {"ledger_ids": [1.5]},
        {"ledger_ids": [-1]},
        {"ledger_ids": [1], "verify": "all"},
        {"ledger_ids": [1], "extra": 1},
        {},
    ):
        r = bookie.http.post("/v1/stored", json=body)
        assert (r.status_code, r.json()["error"]) == (400, "invalid_argument"), body
    r = bookie.http.get("/v1/ledgers/1/stored", params={"verify": "most"})
    assert (r.status_code, r.json()["error"]) == (400, "invalid_argument")
    for call in (
        lambda: poll_client().get(f"{proc.url}/v1/ledgers/1/stored", timeout=10),
        lambda: poll_client().post(f"{proc.url}/v1/stored", json={"ledger_ids": [1]}, timeout=10),
        lambda: poll_client().get(
            f"{proc.url}/v1/info", headers={"X-Cluster-Secret": "no"}, timeout=10
        ),
    ):
        r = call()
        assert (r.status_code, r.json()["error"]) == (401, "unauthorized")

    info = bookie.info()
    assert info["ledgers"] == 4 and info["state"] == "writable"
    assert 0 < info["free_bytes"] <= info["total_bytes"]

    # Damage two entries of ledger 2 on disk while the bookie is stopped.
    proc.stop()
    with sqlite3.connect(data_dir / DB_FILE) as db:
        for eid in (50, 99):
            db.execute(
                "UPDATE entries SET payload = ? WHERE ledger_id = 2 AND entry_id = ?",
                (b"damaged", eid),
            )
    db.close()
    proc.start()
    proc.wait_healthy(30.0)

    sample = stored(bookie, 2, "sample")
    assert sample["checked"] == STORED_SAMPLE_ENTRIES_MAX and sample["corrupt"] == [99]
    full = stored(bookie, 2, "all")
    assert (full["checked"], full["corrupt"]) == (100, [50, 99])
    assert stored(bookie, 1, "all")["corrupt"] == [] and stored(bookie, 1)["checked"] == 0

    async def through_client() -> tuple[StoredInfo, list[StoredInfo]]:
        async with BookieClient(proc.address, SECRET) as client:
            try:
                await client.stored(77)
            except LedgerNotFound:
                pass
            else:
                raise AssertionError("an unknown ledger must be LedgerNotFound")
            return await client.stored(2, "all"), await client.stored_many([1, 77, 2], "sample")

    single, many = asyncio.run(through_client())
    assert single.corrupt == (50, 99) and single.ranges == ((0, 99),)
    assert [(i.ledger_id, i.known) for i in many] == [(1, True), (77, False), (2, True)]
    assert many[0].holds(298) and not many[0].holds(299) and many[0].entries == 200
    assert many[2].corrupt == (99,) and many[0].corrupt == ()
    bookie.close()
