"""The multi-ledger explicit LAC update (POST /v1/lacs) on a real bookie."""

from __future__ import annotations

import asyncio

from services.bookie_client import BookieClient
from services.cluster.processes import poll_client
from tests.harness import Cluster


def test_lacs_update_many_ledgers_in_one_request(cluster: Cluster) -> None:
    """One request raises the LAC of every listed ledger (keeping the maximum, creating
    unknown ledger records), and the LACs survive a SIGKILL and restart."""
    bookie = cluster.start_bookie()

    async def main() -> None:
        async with BookieClient(bookie.address) as client:
            assert await client.write_lacs({1: 5, 2: 0, 3: -1}) == 3
            assert await client.write_lacs({1: 3, 2: 9}) == 2
            assert (await client.read_lac(1)).lac == 5  # the maximum is kept
            assert (await client.read_lac(2)).lac == 9
            assert (await client.read_lac(3)).lac == -1

    asyncio.run(main())
    bookie.kill()
    bookie.start()
    bookie.wait_healthy()
    doc = poll_client().get(f"{bookie.url}/v1/ledgers/2/lac").json()
    assert doc["lac"] == 9 and doc["fenced"] is False


def test_lacs_bad_input_is_refused_whole(cluster: Cluster) -> None:
    """Malformed batches are 400 invalid_argument and change nothing; never a 500."""
    bookie = cluster.start_bookie()
    url = f"{bookie.url}/v1/lacs"
    bad_bodies = [
        {},
        {"lacs": []},
        {"lacs": [{"ledger_id": -1, "lac": 1}]},
        {"lacs": [{"ledger_id": 1, "lac": -2}]},
        {"lacs": [{"ledger_id": "1", "lac": 1}]},
        {"lacs": [{"ledger_id": 2**63, "lac": 1}]},
        {"lacs": [{"ledger_id": 7, "lac": 1}, {"ledger_id": 8}]},
        {"lacs": [{"ledger_id": 1, "lac": 1, "extra": 1}]},
        {"lacs": [{"ledger_id": i, "lac": 0} for i in range(10_001)]},
        [1, 2],
    ]
    for body in bad_bodies:
        r = poll_client().post(url, json=body, timeout=30)
        assert r.status_code == 400, (body if len(str(body)) < 200 else "big", r.text)
        assert r.json()["error"] == "invalid_argument"
    r = poll_client().post(url, content=b"not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_argument"
    r = poll_client().get(f"{bookie.url}/v1/ledgers/7/lac")
    assert r.status_code == 404 and r.json()["error"] == "ledger_not_found"
