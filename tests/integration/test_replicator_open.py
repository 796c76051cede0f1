"""OPEN ledgers whose last fragment lost a bookie: the worker waits for the grace
period, then recovers (fences and closes) an idle writer's ledger and copies it; a
writer that keeps writing replaces the bookie itself and is never fenced."""

from __future__ import annotations

import time
from pathlib import Path

from kazoo.client import KazooClient

from services.cluster.processes import ServiceProcess, poll_client
from services.protocol.metadata import LedgerState
from services.zk import paths as zkpaths
from tests.harness import Cluster, wait_for
from tests.integration.auto_support import (
    fragment_complete,
    holds_for,
    ledger_metadata,
    mark_ledger,
    marked_ledgers,
    names,
    start_replicator,
)
from tests.integration.gateway_support import (
    Appender,
    check_read_back,
    payload_for,
    start_bookies,
    start_gateway,
    wait_writable,
)

GRACE_S = 3.0


def stored_entries(bookie: ServiceProcess, lid: int) -> int:
    r = poll_client().get(f"{bookie.url}/v1/ledgers/{lid}/stored", timeout=10)
    assert r.status_code == 200, r.text
    entries: int = r.json()["entries"]
    return entries


def test_an_idle_writers_open_ledger_is_fenced_closed_and_replicated_after_the_grace(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """An open ledger (E=3 Qw=3 Qa=2) whose writer is idle loses a bookie of its last
    fragment: before the grace period the worker leaves it open; after it the ledger
    is fenced, closed with every acknowledged entry, and fully replicated; the old
    writer's next add gets ledger_fenced."""
    procs = {p.address: p for p in start_bookies(cluster, 4)}
    gateway = start_gateway(cluster)
    wait_writable(gateway, 4)
    lid = gateway.create(ensemble_size=3, write_quorum=3, ack_quorum=2)["ledger_id"]
    acked = {}
    for i in range(12):
        payload = payload_for(i, 500)
        acked[gateway.add(lid, payload)["entry_id"]] = payload
    dead = ledger_metadata(zk_client, lid).fragments[0].bookies[2]
    # An add returns with two acks of three: the writer is idle once the third bookie has
    # every entry too. Killed earlier, it fails the writer's last add, which then changes
    # its ensemble itself, as in the next test.
    wait_for(lambda: stored_entries(procs[dead], lid) == len(acked), 20, "all on every bookie")
    procs[dead].kill()
    start_replicator(cluster, ["--open-ledger-grace", str(GRACE_S), "--marks-poll-interval", "0.5"])
    mark_ledger(zk_client, lid, [dead])

    def open_as_written() -> bool:
        metadata = ledger_metadata(zk_client, lid)
        return metadata.state is LedgerState.OPEN and len(metadata.fragments) == 1

    holds_for(open_as_written, GRACE_S * 0.6, "the open ledger waits for the grace period")
    wait_for(lambda: not marked_ledgers(zk_client), 40, "the open ledger recovered and repaired")
    metadata = ledger_metadata(zk_client, lid)
    assert metadata.state is LedgerState.CLOSED
    assert metadata.last_entry_id == max(acked)
    assert not names(metadata, dead)
    assert fragment_complete(metadata) == []
    r = gateway.request(
        "POST",
        f"/v1/ledgers/{lid}/entries",
        content=b"late",
        headers={"Content-Type": "application/octet-stream"},
    )
    assert r.status_code == 409 and r.json()["error"] == "ledger_fenced", r.text
    assert dict(gateway.read_all(lid)) == acked


def test_a_writer_that_keeps_writing_replaces_the_bookie_itself_and_is_not_fenced(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """A writer adding all along loses a bookie of its ensemble: it changes its ensemble
    itself; the worker copies the earlier (now not last) fragment at once, never fences
    the ledger (the writer goes on without an error), and every acknowledged entry reads
    back after the writer closes it."""
    procs = {p.address: p for p in start_bookies(cluster, 4)}
    gateway = start_gateway(cluster, ["--bookie-add-timeout-ms", "1000"])
    wait_writable(gateway, 4)
    lid = gateway.create(ensemble_size=3, write_quorum=3, ack_quorum=2)["ledger_id"]
    appender = Appender(gateway.url, lid, batch=5).start()
    try:
        appender.wait_count(50)
        dead = ledger_metadata(zk_client, lid).fragments[0].bookies[0]
        procs[dead].kill()
        start_replicator(cluster, ["--open-ledger-grace", str(GRACE_S)])
        mark_ledger(zk_client, lid, [dead])
        wait_for(lambda: not marked_ledgers(zk_client), 40, "the earlier fragment repaired")
        metadata = ledger_metadata(zk_client, lid)
        assert metadata.state is LedgerState.OPEN
        assert len(metadata.fragments) >= 2 and not names(metadata, dead)
        count = appender.count
        appender.wait_count(count + 20)
        assert appender.running and appender.errors == []
    finally:
        appender.stop()
    closed = gateway.close(lid)
    metadata = ledger_metadata(zk_client, lid)
    assert fragment_complete(metadata) == []
    check_read_back(gateway.read_all(lid), closed["last_entry_id"], appender.acked, appender.sent)


def test_an_old_mark_does_not_shorten_the_grace_of_a_restarting_bookie(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """The grace of an open ledger's last fragment runs from when its bookie was first
    seen missing, not from an hour-old mark: a ledger marked long ago for a bookie of an
    earlier fragment, whose last fragment's bookie restarts while its writer is idle, is
    repaired (the earlier fragment) but never fenced; once the bookie is back the mark
    clears and the writer's adds succeed."""
    grace_s = 30.0  # room for the bookie to restart on a loaded machine
    procs = {p.address: p for p in start_bookies(cluster, 5)}
    gateway = start_gateway(cluster, ["--bookie-add-timeout-ms", "1000"])
    wait_writable(gateway, 5)
    lid = gateway.create(ensemble_size=3, write_quorum=3, ack_quorum=2)["ledger_id"]
    for i in range(5):
        gateway.add(lid, payload_for(i))
    old = ledger_metadata(zk_client, lid).fragments[0].bookies[0]
    procs[old].kill()

    def changed() -> bool:
        gateway.add(lid, payload_for(99))
        return len(ledger_metadata(zk_client, lid).fragments) >= 2

    wait_for(changed, 30, "the writer to replace the killed bookie by an ensemble change")
    metadata = ledger_metadata(zk_client, lid)
    restarting = next(
        b for b in metadata.last_fragment.bookies if b not in metadata.fragments[0].bookies
    )
    start_replicator(
        cluster,
        ["--open-ledger-grace", str(grace_s), "--marks-poll-interval", "0.5",
         "--bookie-request-timeout-ms", "2000"],
    )  # fmt: skip
    procs[restarting].stop()
    wait_for(lambda: not zk_client.exists(zkpaths.bookie(restarting)), 20, "the bookie to leave")
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    mark_ledger(zk_client, lid, [old], marked_at_ms=an_hour_ago)
    wait_for(
        lambda: old not in ledger_metadata(zk_client, lid).fragments[0].bookies,
        40,
        "the earlier fragment repaired",
    )
    holds_for(
        lambda: ledger_metadata(zk_client, lid).state is LedgerState.OPEN,
        3.0,
        "the open ledger waits for the grace period of the restarting bookie",
    )
    procs[restarting].start()
    procs[restarting].wait_healthy(30)
    wait_for(lambda: not marked_ledgers(zk_client), 40, "the mark to clear with the bookie back")
    metadata = ledger_metadata(zk_client, lid)
    assert metadata.state is LedgerState.OPEN
    assert restarting in metadata.last_fragment.bookies
    for i in range(5):
        gateway.add(lid, payload_for(200 + i))
    assert not names(ledger_metadata(zk_client, lid), old)


def test_a_postponed_open_ledger_is_cleared_once_its_bookie_is_back(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """A worker that postponed an open ledger (its last fragment's bookie missing) looks
    at it again as soon as that bookie registers again: the mark clears within seconds,
    long before the grace ends, and the writer is never fenced."""
    grace_s = 120.0
    procs = {p.address: p for p in start_bookies(cluster, 3)}
    gateway = start_gateway(cluster, ["--bookie-add-timeout-ms", "1000"])
    wait_writable(gateway, 3)
    lid = gateway.create(ensemble_size=3, write_quorum=3, ack_quorum=2)["ledger_id"]
    for i in range(3):
        gateway.add(lid, payload_for(i))
    replicator = start_replicator(
        cluster,
        ["--open-ledger-grace", str(grace_s), "--marks-poll-interval", "0.5",
         "--bookie-request-timeout-ms", "2000"],
    )  # fmt: skip
    restarting = ledger_metadata(zk_client, lid).last_fragment.bookies[0]
    procs[restarting].stop()
    wait_for(lambda: not zk_client.exists(zkpaths.bookie(restarting)), 20, "the bookie to leave")
    mark_ledger(zk_client, lid, [restarting])
    wait_for(
        lambda: f"ledger {lid} is open" in Path(replicator.log_path).read_text(errors="replace"),
        30,
        "the worker to postpone the open ledger",
    )
    procs[restarting].start()
    procs[restarting].wait_healthy(30)
    back_at = time.monotonic()
    wait_for(lambda: not marked_ledgers(zk_client), 30, "the mark to clear with the bookie back")
    assert time.monotonic() - back_at < grace_s / 2
    metadata = ledger_metadata(zk_client, lid)
    assert metadata.state is LedgerState.OPEN
    assert restarting in metadata.last_fragment.bookies
    gateway.add(lid, payload_for(3))
