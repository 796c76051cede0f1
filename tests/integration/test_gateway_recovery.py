"""Fencing and recovery across real gateway processes (docs/protocol.md, "Fencing and
recovery"): a killed writer, a writer presumed dead that is not, concurrent recoveries,
and reads that never fence."""

from __future__ import annotations

import threading
import time

import httpx

from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Appender,
    assert_error,
    check_read_back,
    metric_value,
    payload_for,
    start_bookies,
    start_gateway,
    wait_writable,
)


def test_killed_writer_recovered_elsewhere_keeps_every_acknowledged_entry(
    cluster: Cluster,
) -> None:
    """Persistence: after the writer gateway is SIGKILLed mid-stream and another gateway
    recovers the ledger, its last entry is >= every acknowledged id and every
    acknowledged entry reads back byte-exact, in order, with no gap (pages and NDJSON)."""
    start_bookies(cluster, 3)
    writer = start_gateway(cluster)
    other = start_gateway(cluster)
    wait_writable(writer, 3)
    ledger = writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    lid = ledger["ledger_id"]
    # Two clients at once, so adds are in flight when the writer dies.
    singles = Appender(writer.url, lid).start()
    batches = Appender(writer.url, lid, batch=5).start()
    singles.wait_count(40)
    batches.wait_count(40)
    writer.proc.kill()
    wait_for(lambda: not singles.running and not batches.running, 30, "appenders to stop")
    acked = {**singles.acked, **batches.acked}
    sent = singles.sent | batches.sent

    closed = other.recover(lid)
    assert closed["state"] == "CLOSED"
    last = closed["last_entry_id"]
    assert last >= max(acked)
    pages = other.read_all(lid)
    check_read_back(pages, last, acked, sent)
    assert other.read_ndjson(lid) == pages
    assert closed["length"] == sum(len(data) for _, data in pages)
    assert other.metadata(lid) == closed
    assert other.recover(lid) == closed  # a CLOSED ledger is returned unchanged


def test_presumed_dead_writer_is_fenced_and_never_acknowledged_again(cluster: Cluster) -> None:
    """Fencing / single writer: a writer paused (SIGSTOP) while another gateway recovers
    gets ledger_fenced once resumed, for the add it had received while paused and for
    every later add; none is acknowledged and the closed ledger's last entry does not
    change."""
    start_bookies(cluster, 3)
    writer = start_gateway(cluster)
    other = start_gateway(cluster)
    wait_writable(writer, 3)
    lid = writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    for n in range(10):
        writer.add(lid, payload_for(n))

    writer.proc.pause()
    stalled: dict[str, httpx.Response] = {}

    def stalled_add() -> None:
        with httpx.Client(base_url=writer.url, timeout=60.0) as http:
            stalled["r"] = http.post(f"/v1/ledgers/{lid}/entries", content=b"sent while paused")

    thread = threading.Thread(target=stalled_add, daemon=True)
    try:
        thread.start()
        closed = other.recover(lid)
    finally:
        writer.proc.resume()
    assert closed["state"] == "CLOSED" and closed["last_entry_id"] == 9

    thread.join(60)
    assert "r" in stalled
    assert_error(stalled["r"], 409, "ledger_fenced")
    assert "unknown" in stalled["r"].json()["message"]
    for n in range(3):
        r = writer.request("POST", f"/v1/ledgers/{lid}/entries", content=payload_for(100 + n))
        assert_error(r, 409, "ledger_fenced")
    r = writer.request("POST", f"/v1/ledgers/{lid}/entries", json={"entries": ["AAAA"]})
    assert_error(r, 409, "ledger_fenced")
    assert other.metadata(lid) == closed
    assert writer.metadata(lid) == closed
    assert [eid for eid, _ in other.read_all(lid)] == list(range(10))


def test_concurrent_recoveries_converge_on_the_same_last_entry(cluster: Cluster) -> None:
    """Agreement: two recoveries of the same ledger started together on two gateways
    (the writer killed mid-stream) both answer CLOSED with the same last entry and
    length, which is also what ZooKeeper holds."""
    start_bookies(cluster, 3)
    writer = start_gateway(cluster)
    first = start_gateway(cluster)
    second = start_gateway(cluster)
    wait_writable(writer, 3)
    lid = writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    appender = Appender(writer.url, lid, batch=3).start()
    appender.wait_count(30)
    writer.proc.kill()
    wait_for(lambda: not appender.running, 30, "the appender to stop")

    barrier = threading.Barrier(2)
    results: dict[str, dict] = {}

    def recover(name: str, gateway) -> None:  # type: ignore[no-untyped-def]
        barrier.wait(10)
        results[name] = gateway.recover(lid)

    threads = [
        threading.Thread(target=recover, args=(n, g), daemon=True)
        for n, g in (("first", first), ("second", second))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert set(results) == {"first", "second"}
    a, b = results["first"], results["second"]
    assert a["state"] == b["state"] == "CLOSED"
    assert a["last_entry_id"] == b["last_entry_id"] >= max(appender.acked)
    assert a["length"] == b["length"]
    assert first.metadata(lid) == a
    check_read_back(first.read_all(lid), a["last_entry_id"], appender.acked, appender.sent)
    assert second.read_all(lid) == first.read_all(lid)
    # Exactly one recovery closed the ledger (the CAS): the other found it CLOSED, in
    # its CAS or already before it started (then it ran no recovery at all).
    closed_here = sum(
        metric_value(g.metrics(), "quire_gateway_recoveries_total", 'outcome="closed"')
        for g in (first, second)
    )
    assert closed_here == 1


def test_reads_from_another_gateway_never_fence(cluster: Cluster) -> None:
    """Opening without recovery never fences: LAC reads (plain and long poll), range and
    single-entry reads of an OPEN ledger from a non-writer gateway leave the writer
    appending successfully, and the ledger OPEN."""
    start_bookies(cluster, 3)
    writer = start_gateway(cluster)
    reader = start_gateway(cluster)
    wait_writable(writer, 3)
    lid = writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    for n in range(5):
        writer.add(lid, payload_for(n))
    wait_for(lambda: reader.lac(lid) == 4, 10, "the reader to learn LAC 4")
    assert reader.lac(lid, after=4, wait_ms=100) == 4
    assert [e for e, _ in reader.read_all(lid)] == list(range(5))
    assert [e for e, _ in reader.read_ndjson(lid)] == list(range(5))
    assert reader.entry(lid, 4) == payload_for(4)
    assert reader.metadata(lid)["state"] == "OPEN"
    for n in range(5, 10):
        assert writer.add(lid, payload_for(n))["entry_id"] == n
    assert writer.add_batch(lid, [payload_for(10), payload_for(11)])["last_entry_id"] == 11
    assert reader.metadata(lid)["state"] == "OPEN"
    closed = writer.close(lid)
    assert closed["last_entry_id"] == 11
    assert [d for _, d in reader.read_all(lid)] == [payload_for(n) for n in range(12)]


def test_recovery_while_the_writer_keeps_appending(cluster: Cluster) -> None:
    """Fencing, live: another gateway recovers while the writer is appending at full
    speed. The writer's client gets ledger_fenced (never a success after it), every
    acknowledged entry is <= the last entry and reads back exactly."""
    start_bookies(cluster, 3)
    writer = start_gateway(cluster)
    other = start_gateway(cluster)
    wait_writable(writer, 3)
    lid = writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    appenders = [Appender(writer.url, lid, batch=b).start() for b in (1, 4)]
    for a in appenders:
        a.wait_count(30)
    closed = other.recover(lid)
    wait_for(lambda: not any(a.running for a in appenders), 30, "the appenders to be fenced")
    for a in appenders:
        assert a.statuses[-1] == 409 and "ledger_fenced" in a.errors[-1], a.errors
        assert all(s == 200 for s in a.statuses[:-1])
    acked = {k: v for a in appenders for k, v in a.acked.items()}
    sent = set().union(*(a.sent for a in appenders))
    check_read_back(other.read_all(lid), closed["last_entry_id"], acked, sent)
    r = writer.request("POST", f"/v1/ledgers/{lid}/entries", content=b"after")
    assert_error(r, 409, "ledger_fenced")
    assert other.metadata(lid) == closed


def test_recovery_is_not_blocked_by_a_hanging_bookie(cluster: Cluster) -> None:
    """A recovery does not wait for a bookie that hangs (SIGSTOP): fencing is complete
    once every write set is covered, and the ledger closes at the right entry well
    before the bookie client's 10 s time-out."""
    bookies = start_bookies(cluster, 3)
    writer = start_gateway(cluster)
    other = start_gateway(cluster)
    wait_writable(writer, 3)
    lid = writer.create(ensemble_size=3, write_quorum=3, ack_quorum=2)["ledger_id"]
    for n in range(10):
        writer.add(lid, payload_for(n))
    wait_for(lambda: other.lac(lid) == 9, 5, "the idle LAC update")
    hanging = bookies[1]
    hanging.pause()
    try:
        started = time.monotonic()
        closed = other.recover(lid)
        elapsed = time.monotonic() - started
    finally:
        hanging.resume()
    assert closed["state"] == "CLOSED" and closed["last_entry_id"] == 9
    assert elapsed < 8, elapsed
    assert [d for _, d in other.read_all(lid)] == [payload_for(n) for n in range(10)]
    r = writer.request("POST", f"/v1/ledgers/{lid}/entries", content=b"late")
    assert_error(r, 409, "ledger_fenced")


def test_recovery_with_a_dead_bookie_in_the_last_ensemble(cluster: Cluster) -> None:
    """Recovery replaces a dead bookie: the writer and then one bookie of the ensemble
    die mid-stream (4 bookies, E=3, Qw=2, Qa=2); another gateway still recovers the
    ledger with every acknowledged entry."""
    procs = {p.address: p for p in start_bookies(cluster, 4)}
    writer = start_gateway(cluster)
    other = start_gateway(cluster)
    wait_writable(writer, 4)
    ledger = writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    lid = ledger["ledger_id"]
    appenders = [Appender(writer.url, lid, batch=b).start() for b in (1, 3, 5)]
    for a in appenders:
        a.wait_count(20)
    writer.proc.kill()
    procs[ledger["fragments"][0]["bookies"][0]].kill()
    wait_for(lambda: not any(a.running for a in appenders), 30, "the appenders to stop")
    acked = {k: v for a in appenders for k, v in a.acked.items()}
    sent = set().union(*(a.sent for a in appenders))
    r = other.request("POST", f"/v1/ledgers/{lid}/recover")
    assert r.status_code == 200, r.text
    check_read_back(other.read_all(lid), r.json()["last_entry_id"], acked, sent)
