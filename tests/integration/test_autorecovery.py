"""Auto-recovery end to end: real ZooKeeper, four bookies, gateway, auditor and
replicator processes, real SIGKILLs.

The issue's first test: many CLOSED ledgers (E=3, Qw=3, Qa=2) on four bookies; one
bookie is killed for good; within a bounded time no fragment names it and the
under-replicated list is empty; then a second ORIGINAL bookie is killed and every
entry is still readable with its exact bytes (the copies are real)."""

from __future__ import annotations

import asyncio

from kazoo.client import KazooClient

from services.bookie_client import BookieClientPool
from services.cluster.processes import poll_client
from services.zk import paths as zkpaths
from tests.harness import Cluster, wait_for
from tests.integration.auto_support import ledger_metadata, names, start_auditor
from tests.integration.gateway_support import (
    payload_for,
    start_bookies,
    start_gateway,
    wait_writable,
)

LEDGERS = 24
ENTRIES = 20


def _admin(gateway, path: str) -> dict:  # type: ignore[no-untyped-def]
    r = gateway.http.get(path)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_lost_bookie_is_replaced_everywhere_and_the_copies_are_real(
    cluster: Cluster,
) -> None:
    """Kill one bookie: every fragment is re-replicated, marks clear; kill a second
    original bookie: every entry of every ledger still reads back exactly."""
    bookies = start_bookies(cluster, 4)
    gateway = start_gateway(cluster)
    wait_writable(gateway, 4)
    cluster.start("auditor", ["--lost-bookie-delay", "1", "--audit-interval", "3600"])
    cluster.start("replicator", ["--marks-poll-interval", "1"])

    written: dict[int, list[bytes]] = {}
    for n in range(LEDGERS):
        ledger = gateway.create(ensemble_size=3, write_quorum=3, ack_quorum=2)
        lid = ledger["ledger_id"]
        payloads = [payload_for(n * 1000 + i, 200) for i in range(ENTRIES)]
        gateway.add_batch(lid, payloads)
        gateway.close(lid)
        written[lid] = payloads

    victim = bookies[0]
    holding = [lid for lid in written if victim.address in _bookies_of(gateway, lid)]
    assert holding, "the victim holds some ledgers (placement is random over 4 bookies)"
    victim.kill()

    def repaired() -> bool:
        if any(victim.address in _bookies_of(gateway, lid) for lid in written):
            return False
        return _admin(gateway, "/v1/admin/under-replicated")["ledgers"] == []

    wait_for(repaired, 90.0, "every fragment to leave the killed bookie and marks to clear")
    cluster_doc = _admin(gateway, "/v1/admin/cluster")
    assert cluster_doc["under_replicated_ledgers"] == 0
    assert cluster_doc["auditor_elected"] is True

    # A second ORIGINAL bookie: with E=Qw=3 on 4 bookies it held a replica of most
    # ledgers; reads must now come from the copies on the replacement.
    second = bookies[1]
    second.kill()
    for lid, payloads in written.items():
        assert gateway.read_all(lid) == list(enumerate(payloads)), f"ledger {lid}"


def _bookies_of(gateway, lid: int) -> set[str]:  # type: ignore[no-untyped-def]
    return {b for f in gateway.metadata(lid)["fragments"] for b in f["bookies"]}


def test_decommission_a_bookie_up_and_one_down_moves_everything_off_them(
    cluster: Cluster,
) -> None:
    """Five bookies; one is killed, then both it (down) and a running one are
    decommissioned (the running one with `quire admin decommission --wait`): both end
    "decommissioned", no fragment names either, and with the running one killed too
    every entry still reads back exactly. The lost-bookie delay is an hour: only the
    decommission moves the data."""
    import subprocess
    import sys

    bookies = start_bookies(cluster, 5)
    gateway = start_gateway(cluster)
    wait_writable(gateway, 5)
    cluster.start("auditor", ["--lost-bookie-delay", "3600", "--audit-interval", "3600"])
    cluster.start("replicator", ["--marks-poll-interval", "1"])
    written: dict[int, list[bytes]] = {}
    for n in range(12):
        lid = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
        payloads = [payload_for(n * 100 + i, 150) for i in range(15)]
        gateway.add_batch(lid, payloads)
        gateway.close(lid)
        written[lid] = payloads
    down, up = bookies[0], bookies[1]
    down.kill()
    r = gateway.http.post(f"/v1/admin/bookies/{down.address}/decommission")
    assert r.status_code == 202 and r.json()["state"] == "decommissioning", r.text
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "--gateway", gateway.url,
         "admin", "decommission", up.address, "--wait", "--timeout", "90"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

    def state(bookie: str) -> str:
        doc = _admin(gateway, "/v1/admin/bookies")
        return next(b["state"] for b in doc["bookies"] if b["id"] == bookie)

    wait_for(lambda: state(down.address) == "decommissioned", 60.0, "the down bookie done")
    assert state(up.address) == "decommissioned"
    for lid in written:
        assert not {down.address, up.address} & _bookies_of(gateway, lid), lid
    assert _admin(gateway, "/v1/admin/under-replicated")["ledgers"] == []
    up.kill()
    for lid, payloads in written.items():
        assert gateway.read_all(lid) == list(enumerate(payloads)), f"ledger {lid}"


def test_decommissioning_a_live_bookie_holding_the_only_copies_moves_them_off(
    cluster: Cluster,
) -> None:
    """A live bookie being decommissioned is a copy source: ledgers with Qw=1 (each
    entry's only copy on one bookie) reach "decommissioned" for their bookie, no fragment
    names it, and with it killed every entry still reads back exactly from elsewhere."""
    bookies = start_bookies(cluster, 3)
    gateway = start_gateway(cluster)
    wait_writable(gateway, 3)
    cluster.start("auditor", ["--lost-bookie-delay", "3600", "--audit-interval", "3600"])
    cluster.start("replicator", ["--marks-poll-interval", "1"])
    written: dict[int, list[bytes]] = {}
    for n in range(6):
        lid = gateway.create(ensemble_size=2, write_quorum=1, ack_quorum=1)["ledger_id"]
        payloads = [payload_for(n * 100 + i, 150) for i in range(10)]
        gateway.add_batch(lid, payloads)
        gateway.close(lid)
        written[lid] = payloads
    counts = {b.address: sum(b.address in _bookies_of(gateway, lid) for lid in written)
              for b in bookies}  # fmt: skip
    leaving = max(bookies, key=lambda b: counts[b.address])
    assert counts[leaving.address] > 0
    r = gateway.http.post(f"/v1/admin/bookies/{leaving.address}/decommission")
    assert r.status_code == 202 and r.json()["state"] == "decommissioning", r.text

    def state() -> str:
        doc = _admin(gateway, "/v1/admin/bookies")
        return str(next(b["state"] for b in doc["bookies"] if b["id"] == leaving.address))

    wait_for(lambda: state() == "decommissioned", 60.0, "the live bookie decommissioned")
    for lid in written:
        assert leaving.address not in _bookies_of(gateway, lid), lid
    assert _admin(gateway, "/v1/admin/under-replicated")["ledgers"] == []
    leaving.kill()
    for lid, payloads in written.items():
        assert gateway.read_all(lid) == list(enumerate(payloads)), f"ledger {lid}"


def _copy_share(secret: str | None, lid: int, source: str, target: str, last: int) -> None:
    """Store on ``target`` (recovery adds) every entry of ``lid`` that ``source`` holds."""

    async def copy() -> None:
        pool = BookieClientPool(secret)
        try:
            got = await pool.get(source).read_range(lid, 0, last)
            records = [r._replace(recovery=True) for r in got.records]
            assert records and (await pool.get(target).add(records)).stored == len(records)
        finally:
            await pool.aclose()

    asyncio.run(copy())


def test_a_decommissioned_bookie_a_fragment_names_again_is_moved_off_again(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """Completion can race a gateway that had not seen the request yet (it chose the
    bookie, then wrote its metadata after the auditor's walk): a decommissioned bookie
    that a fragment names again is decommissioning again until the ledger is moved off
    it (its only copies read from it) and then decommissioned again, every entry
    readable with it killed."""
    bookies = start_bookies(cluster, 3)
    gateway = start_gateway(cluster)
    wait_writable(gateway, 3)
    auditor = start_auditor(cluster, ["--lost-bookie-delay", "3600", "--audit-interval", "3600"])
    cluster.start("replicator", ["--marks-poll-interval", "1"])
    leaving = bookies[0].address

    def state() -> str:
        doc = _admin(gateway, "/v1/admin/bookies")
        return str(next(b["state"] for b in doc["bookies"] if b["id"] == leaving))

    r = gateway.http.post(f"/v1/admin/bookies/{leaving}/decommission")
    assert r.status_code == 202, r.text
    wait_for(lambda: state() == "decommissioned", 30.0, "nothing on it: decommissioned")
    lid = gateway.create(ensemble_size=2, write_quorum=1, ack_quorum=1)["ledger_id"]
    payloads = [payload_for(i, 100) for i in range(10)]
    gateway.add_batch(lid, payloads)
    gateway.close(lid)
    # What the late gateway would have written: the leaving bookie in the ensemble,
    # holding the only copy of its share.
    data, stat = zk_client.get(zkpaths.ledger(lid))
    metadata = ledger_metadata(zk_client, lid)
    assert not names(metadata, leaving)
    replaced = metadata.fragments[0].bookies[0]
    _copy_share(cluster.secret, lid, replaced, leaving, len(payloads) - 1)
    late = metadata.replace_bookie(0, replaced, leaving)
    zk_client.set(zkpaths.ledger(lid), late.to_json(), stat.version)
    assert (
        poll_client().delete(f"http://{replaced}/v1/ledgers/{lid}", timeout=10.0).status_code == 204
    )
    auditor.audit_and_wait()

    def moved_off() -> bool:
        return state() == "decommissioned" and not names(ledger_metadata(zk_client, lid), leaving)

    wait_for(moved_off, 60.0, "the ledger moved off the bookie and it decommissioned again")
    bookies[0].kill()
    assert gateway.read_all(lid) == list(enumerate(payloads))
