"""The replication worker against real ZooKeeper, bookies and gateway processes: marks
are written directly (as the auditor would), so these tests need no auditor."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kazoo.client import KazooClient

from services.cluster.processes import poll_client
from services.wire import digest
from services.wire.framing import FramedRecord
from tests.bookie_bytes import assert_kept_equals_scan
from tests.harness import Cluster, wait_for
from tests.integration.auto_support import (
    fragment_complete,
    holds_for,
    ledger_metadata,
    mark_ledger,
    marked_ledgers,
    names,
    replicator_status,
    start_replicator,
)
from tests.integration.gateway_support import (
    metric_value,
    payload_for,
    start_bookies,
    start_gateway,
    wait_writable,
)

REPAIR_DEADLINE_S = 40.0


def test_closed_ledgers_are_made_whole_and_survive_a_second_loss(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """Closed ledgers (E=3 Qw=3 Qa=2, and striped E=3 Qw=2) on 4 bookies: after one
    bookie is SIGKILLed and the ledgers marked, the worker makes every fragment whole (no
    fragment names the dead bookie, every bookie named holds its share, the marks are
    gone); then a second ORIGINAL bookie is SIGKILLed and every entry still reads back
    byte-exact through the gateway (the copies are real)."""
    procs = {p.address: p for p in start_bookies(cluster, 4)}
    gateway = start_gateway(cluster)
    wait_writable(gateway, 4)
    written: dict[int, list[bytes]] = {}
    for n, (e, qw, qa) in enumerate([(3, 3, 2), (3, 2, 2), (3, 3, 2), (3, 2, 2)]):
        lid = gateway.create(ensemble_size=e, write_quorum=qw, ack_quorum=qa)["ledger_id"]
        payloads = [payload_for(100 * n + i, 200 + i) for i in range(40)]
        gateway.add_batch(lid, payloads)
        gateway.close(lid)
        written[lid] = payloads
    ensembles = {lid: ledger_metadata(zk_client, lid).fragments[0].bookies for lid in written}
    counts = {b: sum(b in ens for ens in ensembles.values()) for b in procs}
    dead = max(counts, key=lambda b: counts[b])
    affected = [lid for lid, ens in ensembles.items() if dead in ens]
    assert len(affected) >= 3
    procs[dead].kill()
    for lid in affected:
        mark_ledger(zk_client, lid, [dead])
    replicator = start_replicator(cluster, ["--bookie-request-timeout-ms", "2000"])

    def whole() -> bool:
        return not marked_ledgers(zk_client) and not any(
            names(ledger_metadata(zk_client, lid), dead) for lid in written
        )

    wait_for(whole, REPAIR_DEADLINE_S, "every fragment repaired and the marks gone")
    for lid in written:
        assert fragment_complete(ledger_metadata(zk_client, lid)) == []
    metrics = poll_client().get(f"{replicator.url}/metrics").text
    assert metric_value(metrics, "quire_replicator_ledgers_replicated_total") == len(affected)
    assert metric_value(metrics, "quire_replicator_entries_replicated_total") > 0
    assert replicator_status(replicator)["in_flight"] == []

    # The copies' bytes are counted as they are written back (bookie/storage.py, "Kept
    # byte counts").
    for address, proc in procs.items():
        if address != dead:
            assert_kept_equals_scan(data_dir_of(proc))

    second = next(b for b in ensembles[affected[0]] if b != dead)
    procs[second].kill()
    for lid, payloads in written.items():
        assert [d for _, d in gateway.read_all(lid)] == payloads


def data_dir_of(proc) -> Path:  # type: ignore[no-untyped-def]
    return Path(proc.argv[proc.argv.index("--data-dir") + 1])


def _forge(proc, lid: int, entry_id: int, length: int) -> None:  # type: ignore[no-untyped-def]
    """Overwrite one stored replica on disk with a record sealed under another key."""
    record = digest.seal(
        FramedRecord(
            lid, entry_id, entry_id - 1, b"forged", digest_type="hmac-sha256", length=length
        ),
        digest.mac_key(b"another password"),
    )
    data_dir = Path(proc.argv[proc.argv.index("--data-dir") + 1])
    proc.stop()
    with sqlite3.connect(data_dir / "bookie.db") as db:
        changed = db.execute(
            "UPDATE entries SET payload = ?, digest = ? WHERE ledger_id = ? AND entry_id = ?",
            (record.payload, bytes(record.digest), lid, entry_id),
        ).rowcount
    assert changed == 1
    proc.start()
    proc.wait_healthy(30.0)


def test_hmac_ledger_is_copied_verified_and_a_corrupt_replica_is_not_copied(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """An hmac-sha256 ledger (its MAC key sealed in the metadata, the password never):
    the worker verifies every copied entry; entries whose replica on one survivor is
    forged are taken from the other survivor, so the target holds the true bytes and a
    read through the new ensemble (the forging bookie killed) is byte-exact."""
    procs = {p.address: p for p in start_bookies(cluster, 4)}
    gateway = start_gateway(cluster)
    wait_writable(gateway, 4)
    password = "replicate-me"
    created = gateway.create(
        password=password, digest="hmac-sha256", ensemble_size=3, write_quorum=3, ack_quorum=2
    )
    lid = created["ledger_id"]
    assert "mac_key_sealed" not in created and "password" not in str(created).lower()
    payloads = [payload_for(i, 300) for i in range(20)]
    gateway.add_batch(lid, payloads, password=password)
    gateway.close(lid, password=password)
    assert "mac_key_sealed" not in gateway.metadata(lid)
    ensemble = ledger_metadata(zk_client, lid).fragments[0].bookies
    assert ledger_metadata(zk_client, lid).mac_key_sealed
    dead, forger, _ = ensemble
    lengths = [sum(map(len, payloads[: i + 1])) for i in range(len(payloads))]
    for entry_id in (2, 7):
        _forge(procs[forger], lid, entry_id, lengths[entry_id])
    procs[dead].kill()
    replicator = start_replicator(cluster)
    mark_ledger(zk_client, lid, [dead])
    wait_for(lambda: not marked_ledgers(zk_client), REPAIR_DEADLINE_S, "the ledger repaired")
    metadata = ledger_metadata(zk_client, lid)
    assert not names(metadata, dead)
    target = next(b for b in metadata.fragments[0].bookies if b not in ensemble)
    procs[forger].kill()
    assert [d for _, d in gateway.read_all(lid, password)] == payloads
    assert target in procs
    metrics = poll_client().get(f"{replicator.url}/metrics").text
    assert metric_value(metrics, "quire_replicator_entries_replicated_total") == len(payloads)


def test_disabled_replication_repairs_nothing_until_enabled(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """While /underreplication/disabled exists the worker repairs nothing and the mark
    stays (status says enabled false); once it is deleted the ledger is repaired."""
    procs = {p.address: p for p in start_bookies(cluster, 4)}
    gateway = start_gateway(cluster)
    wait_writable(gateway, 4)
    lid = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    gateway.add_batch(lid, [payload_for(i) for i in range(10)])
    gateway.close(lid)
    dead = ledger_metadata(zk_client, lid).fragments[0].bookies[0]
    procs[dead].kill()
    zk_client.create("/underreplication/disabled", b"", makepath=True)
    replicator = start_replicator(cluster, ["--marks-poll-interval", "0.2"])
    mark_ledger(zk_client, lid, [dead])
    wait_for(lambda: replicator_status(replicator)["enabled"] is False, 10, "status disabled")
    # Many poll intervals pass with the mark untouched and no lock taken.
    holds_for(
        lambda: (
            marked_ledgers(zk_client) == [lid]
            and names(ledger_metadata(zk_client, lid), dead)
            and not zk_client.exists(f"/underreplication/locks/{lid}")
        ),
        3.0,
        "nothing repaired while disabled",
    )
    zk_client.delete("/underreplication/disabled")
    wait_for(lambda: not marked_ledgers(zk_client), REPAIR_DEADLINE_S, "repair after enable")
    assert not names(ledger_metadata(zk_client, lid), dead)
    assert replicator_status(replicator)["enabled"] is True


def test_a_live_bookie_lacking_its_share_is_filled_in_place(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """Three bookies, E=3: a bookie that lost one ledger's replica (deleted on it) and is
    marked cannot be replaced (every bookie is in the fragment), so the worker copies
    its share back to it: the metadata is unchanged, the mark is gone, and the bookie
    holds every entry of its share again."""
    procs = {p.address: p for p in start_bookies(cluster, 3)}
    gateway = start_gateway(cluster)
    wait_writable(gateway, 3)
    lid = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    gateway.add_batch(lid, [payload_for(i, 300) for i in range(30)])
    gateway.close(lid)
    before = ledger_metadata(zk_client, lid)
    victim = before.fragments[0].bookies[1]
    r = poll_client().delete(f"http://{victim}/v1/ledgers/{lid}", timeout=10.0)
    assert r.status_code == 204, r.text
    assert fragment_complete(before), "the replica is gone before the repair"
    start_replicator(cluster, ["--marks-poll-interval", "1"])
    mark_ledger(zk_client, lid, [victim])
    wait_for(lambda: marked_ledgers(zk_client) == [], REPAIR_DEADLINE_S, "the mark to clear")
    after = ledger_metadata(zk_client, lid)
    assert after.fragments == before.fragments
    assert fragment_complete(after) == []
    assert set(procs) == set(before.fragments[0].bookies)
    # Its share written back (to an id deleted there, maybe still purging) is counted:
    # 20 of the 30 entries of 300 bytes, and nothing of the deleted copy.
    kept = assert_kept_equals_scan(data_dir_of(procs[victim]))
    assert kept[("ledgers", lid)] == 20 * 300 and ("purging", lid) not in kept


def test_a_bookie_filled_in_place_and_then_lost_is_replaced(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """A bookie the worker filled in place and that leaves the registry while the worker
    still repairs another bookie of the ledger is repaired again (replaced), never left
    named when the mark is cleared: the auditor's mark already names it, so its marking
    changes nothing, and nothing else would mark the ledger before the periodic audit.
    Five bookies, E=3 Qw=3: the first bookie lost its replica (filled in place), the
    second is stopped (replaced); copies throttled so that the first is stopped, once
    filled, while the second's share is still being copied."""
    procs = {p.address: p for p in start_bookies(cluster, 5)}
    gateway = start_gateway(cluster)
    wait_writable(gateway, 5)
    lid = gateway.create(ensemble_size=3, write_quorum=3, ack_quorum=2)["ledger_id"]
    payloads = [payload_for(i, 2500) for i in range(60)]
    gateway.add_batch(lid, payloads)
    gateway.close(lid)
    filled, dead = ledger_metadata(zk_client, lid).fragments[0].bookies[:2]
    r = poll_client().delete(f"http://{filled}/v1/ledgers/{lid}", timeout=10.0)
    assert r.status_code == 204, r.text
    procs[dead].stop()
    replicator = start_replicator(
        cluster, ["--marks-poll-interval", "1", "--rereplication-bytes-per-s-max", "25000"]
    )
    mark_ledger(zk_client, lid, [filled, dead])

    def filled_in_place() -> bool:
        jobs = replicator_status(replicator)["in_flight"]
        return any(j["progress"]["fragments_done"] >= 1 for j in jobs)

    wait_for(filled_in_place, REPAIR_DEADLINE_S, f"{filled} filled in place")
    after_fill = ledger_metadata(zk_client, lid)
    assert names(after_fill, dead), "the stopped bookie is still being replaced"
    assert fragment_complete(after_fill, skip=[dead]) == [], "the first one was filled"
    procs[filled].stop()
    wait_for(lambda: not marked_ledgers(zk_client), REPAIR_DEADLINE_S, "the mark to clear")
    after = ledger_metadata(zk_client, lid)
    assert not names(after, dead)
    assert not names(after, filled), f"the mark cleared while {filled}, stopped, is named"
    assert fragment_complete(after) == []
    assert [d for _, d in gateway.read_all(lid)] == payloads
