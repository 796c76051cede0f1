"""Ensemble changes with real processes (docs/protocol.md, "Failure while writing"): a bookie
of the ensemble killed or turned read-only during a write stream is replaced by a new
fragment, writes continue, and nothing acknowledged is lost."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from services.cluster.processes import poll_client
from services.wire import digest, framing
from services.wire.framing import FramedRecord
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Appender,
    assert_error,
    check_read_back,
    log_text,
    metric_value,
    start_bookies,
    start_gateway,
    wait_writable,
)


def _replaced_while_writing(cluster: Cluster, fail_bookie) -> None:  # type: ignore[no-untyped-def]
    """Stream adds, fail one bookie of the ensemble with ``fail_bookie(id)``, and check
    the ensemble change and the ledger's contents after close."""
    procs = {p.address: p for p in start_bookies(cluster, 4, ["--disk-check-interval", "0.2"])}
    gateway = start_gateway(cluster)
    wait_writable(gateway, 4)
    ledger = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    lid = ledger["ledger_id"]
    ensemble = ledger["fragments"][0]["bookies"]
    (spare,) = set(procs) - set(ensemble)
    victim = ensemble[1]

    appender = Appender(gateway.url, lid, batch=2).start()
    appender.wait_count(30)
    fail_bookie(procs[victim])
    at_failure = appender.count
    appender.wait_count(at_failure + 40, deadline_s=40)
    fragments = wait_for(
        lambda: len(f := gateway.metadata(lid)["fragments"]) >= 2 and f,
        20,
        "a new fragment in the metadata",
    )
    appender.stop()
    assert not appender.errors, appender.errors

    last_fragment = fragments[-1]
    assert victim not in last_fragment["bookies"]
    assert spare in last_fragment["bookies"]
    assert [b for b in last_fragment["bookies"] if b != spare] == [b for b in ensemble
                                                                   if b != victim]  # fmt: skip
    assert 0 < last_fragment["first_entry_id"] <= at_failure + 2
    assert metric_value(gateway.metrics(), "quire_gateway_ensemble_changes_total") >= 1

    closed = gateway.close(lid)
    assert closed["state"] == "CLOSED"
    assert closed["last_entry_id"] == max(appender.acked)
    entries = gateway.read_all(lid)
    check_read_back(entries, closed["last_entry_id"], appender.acked, appender.sent)
    assert closed["length"] == sum(len(d) for _, d in entries)
    # A fresh gateway agrees (it reads from the bookies only).
    other = start_gateway(cluster)
    assert other.read_ndjson(lid) == entries


def test_killed_bookie_is_replaced_and_nothing_acknowledged_is_lost(cluster: Cluster) -> None:
    """A bookie of the ensemble SIGKILLed during a write stream (4 bookies, E=3, Qw=2,
    Qa=2): writes continue, a new fragment replaces it with the spare bookie, and every
    acknowledged entry reads back after close (reads fail over past the dead bookie)."""
    _replaced_while_writing(cluster, lambda proc: proc.kill())


def test_read_only_bookie_is_replaced_like_a_failed_one(cluster: Cluster) -> None:
    """A bookie of the ensemble turning read-only during a write stream triggers an
    ensemble change the same way, and nothing acknowledged is lost."""

    def make_read_only(proc) -> None:  # type: ignore[no-untyped-def]
        r = poll_client().post(
            f"{proc.url}/v1/admin/disk-threshold", json={"readonly_free_ratio": 0.9999}
        )
        assert r.status_code == 200, r.text
        wait_for(
            lambda: poll_client().get(f"{proc.url}/v1/info").json()["state"] == "readonly",
            10,
            "the bookie to turn read-only",
        )

    _replaced_while_writing(cluster, make_read_only)


def test_reads_fail_over_when_a_replica_is_killed(cluster: Cluster) -> None:
    """Reads with failover: with one bookie of a closed ledger's ensemble killed, every
    entry still reads back (ranges, NDJSON, single entries) from the other replica of
    its write set, and the failovers are counted."""
    procs = {p.address: p for p in start_bookies(cluster, 3)}
    gateway = start_gateway(cluster)
    wait_writable(gateway, 3)
    lid = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    payloads = [f"entry {n}".encode() * (n + 1) for n in range(12)]
    gateway.add_batch(lid, payloads)
    gateway.close(lid)
    procs[gateway.metadata(lid)["fragments"][0]["bookies"][0]].kill()
    before = metric_value(gateway.metrics(), "quire_gateway_read_failovers_total")
    assert [d for _, d in gateway.read_all(lid)] == payloads
    assert [d for _, d in gateway.read_ndjson(lid)] == payloads
    assert [gateway.entry(lid, n) for n in range(12)] == payloads
    assert metric_value(gateway.metrics(), "quire_gateway_read_failovers_total") > before


def test_writer_killed_after_an_ensemble_change_is_recovered_elsewhere(
    cluster: Cluster,
) -> None:
    """Persistence across both failures: a bookie killed (ensemble change), then the
    writer killed; another gateway recovers the last fragment, and every acknowledged
    entry of both fragments reads back (the first fragment via failover)."""
    procs = {p.address: p for p in start_bookies(cluster, 4)}
    writer = start_gateway(cluster)
    other = start_gateway(cluster)
    wait_writable(writer, 4)
    ledger = writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    lid = ledger["ledger_id"]
    appender = Appender(writer.url, lid, batch=3).start()
    appender.wait_count(30)
    procs[ledger["fragments"][0]["bookies"][0]].kill()
    wait_for(lambda: len(writer.metadata(lid)["fragments"]) == 2, 20, "an ensemble change")
    appender.wait_count(appender.count + 30)
    writer.proc.kill()
    wait_for(lambda: not appender.running, 30, "the appender to stop")

    closed = other.recover(lid)
    assert closed["state"] == "CLOSED" and len(closed["fragments"]) == 2
    entries = other.read_all(lid)
    check_read_back(entries, closed["last_entry_id"], appender.acked, appender.sent)
    assert closed["length"] == sum(len(d) for _, d in entries)


def test_reads_are_not_blocked_by_a_hanging_bookie(cluster: Cluster) -> None:
    """A bookie of the ensemble that hangs (SIGSTOP) costs a read a few seconds at most,
    not the bookie client's time-out per entry: pages, NDJSON and single entries of a
    closed ledger, and LAC, long poll and pages of an open one on another gateway."""
    procs = {p.address: p for p in start_bookies(cluster, 3)}
    writer = start_gateway(cluster)
    reader = start_gateway(cluster)
    wait_writable(writer, 3)
    closed_id = writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    payloads = [f"entry {n}".encode() for n in range(30)]
    writer.add_batch(closed_id, payloads)
    hanging = procs[writer.close(closed_id)["fragments"][0]["bookies"][0]]
    open_id = writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    writer.add_batch(open_id, payloads)
    wait_for(lambda: reader.lac(open_id) == 29, 5, "the reader to see LAC 29")

    def timed(call):  # type: ignore[no-untyped-def]
        started = time.monotonic()
        value = call()
        return value, time.monotonic() - started

    hanging.pause()
    try:
        entries, elapsed = timed(lambda: reader.read_all(closed_id))
        assert [d for _, d in entries] == payloads and elapsed < 6, elapsed
        entries, elapsed = timed(lambda: writer.read_ndjson(closed_id))
        assert [d for _, d in entries] == payloads and elapsed < 6, elapsed
        for n in (0, 2):  # the hanging bookie is first in entry 0's write set, last in 2's
            data, elapsed = timed(lambda n=n: reader.entry(closed_id, n))
            assert data == payloads[n] and elapsed < 6, elapsed
        lac, elapsed = timed(lambda: reader.lac(open_id))
        assert lac == 29 and elapsed < 6, elapsed
        lac, elapsed = timed(lambda: reader.lac(open_id, after=29, wait_ms=500))
        assert lac == 29 and elapsed < 6, elapsed
        entries, elapsed = timed(lambda: reader.read_all(open_id))
        assert [d for _, d in entries] == payloads and elapsed < 8, elapsed
    finally:
        hanging.resume()


def test_a_corrupt_replica_is_skipped_never_returned(cluster: Cluster) -> None:
    """Digest verification on read: an hmac-sha256 entry overwritten on one bookie with a
    record sealed under another key is skipped (the other replica answers, in pages,
    NDJSON and single reads); with every replica corrupt the read fails 503 and the
    forged bytes are never returned."""
    procs = {p.address: p for p in start_bookies(cluster, 3)}
    gateway = start_gateway(cluster)
    wait_writable(gateway, 3)
    password = "corrupt-test"
    lid = gateway.create(password=password, digest="hmac-sha256")["ledger_id"]
    payloads = [f"entry {n}".encode() for n in range(6)]
    gateway.add_batch(lid, payloads, password=password)
    closed = gateway.close(lid, password=password)
    bookies = closed["fragments"][0]["bookies"]

    def forge(entry_id: int, bookie: str) -> None:
        """Replace the stored replica on disk (a bookie refuses to overwrite an entry with
        other bytes through its API): stop it, rewrite the row, start it again."""
        record = FramedRecord(
            lid, entry_id, entry_id - 1, b"forged", digest_type="hmac-sha256",
            length=sum(map(len, payloads[: entry_id + 1])),
        )  # fmt: skip
        record = digest.seal(record, digest.mac_key(b"another password"))
        proc = procs[bookie]
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

    write_set = [bookies[(3 + i) % 3] for i in range(2)]  # entry 3, E=3, Qw=2
    forge(3, write_set[0])
    assert [d for _, d in gateway.read_all(lid, password)] == payloads
    assert [d for _, d in gateway.read_ndjson(lid, password)] == payloads
    assert gateway.entry(lid, 3, password) == payloads[3]
    forge(3, write_set[1])
    headers = {"X-Ledger-Password": password}
    r = gateway.request("GET", f"/v1/ledgers/{lid}/entries/3", headers=headers)
    assert_error(r, 503, "bookie_unavailable")
    r = gateway.request("GET", f"/v1/ledgers/{lid}/entries", headers=headers)
    assert_error(r, 503, "bookie_unavailable")
    r = gateway.request(
        "GET", f"/v1/ledgers/{lid}/entries", headers={**headers, "Accept": "application/x-ndjson"}
    )
    assert_error(r, 503, "bookie_unavailable")  # not a 200 with a broken stream
    assert set(procs) >= set(bookies)


ADD_TIMEOUT_MS = 800  # the default
# Beyond the add time-out, the stall covers the ensemble change (a registry read, one
# metadata CAS through ZooKeeper, the re-send) and a few adds, on a shared machine where
# two test workers, JVMs and other clusters take the cores. 0.8 + 4 s still fails the
# bug this guards against: the hung bookie holding its adds for the bookie client's 10 s
# request time-out.
STALL_SLACK_S = 4.0


def test_a_hung_bookie_is_replaced_after_the_add_timeout(cluster: Cluster) -> None:
    """Issue 7 item 8b: a bookie of the ensemble that hangs (SIGSTOP) during a stream of
    single-entry adds (4 bookies, E=3, Qw=Qa=2) holds the adds of its write sets only
    for the add time-out (--bookie-add-timeout-ms), not the bookie client's 10 s request
    time-out: it is replaced like a dead one, the stall (SIGSTOP to three more
    acknowledged adds, which needs at least one entry of its write sets) stays under the
    add time-out plus slack, and every acknowledged entry reads back after close."""
    procs = {p.address: p for p in start_bookies(cluster, 4)}
    gateway = start_gateway(cluster, ["--bookie-add-timeout-ms", str(ADD_TIMEOUT_MS)])
    wait_writable(gateway, 4)
    ledger = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    lid = ledger["ledger_id"]
    ensemble = ledger["fragments"][0]["bookies"]
    victim = procs[ensemble[1]]

    appender = Appender(gateway.url, lid).start()
    appender.wait_count(30)
    victim.pause()
    try:
        stopped_at = time.monotonic()
        at_stop = appender.count
        appender.wait_count(at_stop + 3, deadline_s=15)
        stall_s = time.monotonic() - stopped_at
        print(f"\nadd stall after SIGSTOP: {stall_s:.3f} s (add time-out {ADD_TIMEOUT_MS} ms)")
        appender.wait_count(appender.count + 20)
        appender.stop()
    finally:
        victim.resume()
    assert not appender.errors, appender.errors
    assert stall_s < ADD_TIMEOUT_MS / 1000 + STALL_SLACK_S, stall_s
    fragments = gateway.metadata(lid)["fragments"]
    assert len(fragments) >= 2 and victim.address not in fragments[-1]["bookies"]

    closed = gateway.close(lid)
    assert closed["last_entry_id"] == max(appender.acked)
    entries = gateway.read_all(lid)
    check_read_back(entries, closed["last_entry_id"], appender.acked, appender.sent)


def test_an_entry_stored_with_other_bytes_replaces_the_bookie_for_that_ledger_only(
    cluster: Cluster,
) -> None:
    """Issue 7 item 8: a bookie that already stores the next entry of ledger A with other
    bytes answers entry_exists for the gateway's add. The add is never counted as stored
    there: ledger A replaces that bookie (a new fragment from that entry), the add is
    acknowledged, and the entry reads back with the gateway's bytes. Ledger B, written
    through the same gateway and bookies meanwhile, keeps its one fragment."""
    start_bookies(cluster, 4)
    gateway = start_gateway(cluster)
    wait_writable(gateway, 4)
    a = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    bookies = a["fragments"][0]["bookies"]
    b = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    lid_a, lid_b = a["ledger_id"], b["ledger_id"]
    before = [f"a{n}".encode() for n in range(4)]
    gateway.add_batch(lid_a, before)
    gateway.add_batch(lid_b, [b"b0", b"b1"])
    holder = bookies[4 % 3]  # first of entry 4's write set (E=3, Qw=2)
    length = sum(map(len, before)) + len(b"other bytes")
    forged = FramedRecord(lid_a, 4, 3, b"other bytes", digest_type="crc32c", length=length)
    r = poll_client().post(
        f"http://{holder}/v1/entries",
        content=framing.encode([digest.seal(forged, b"")]),
        headers={"Content-Type": framing.MEDIA_TYPE},
    )
    assert r.status_code == 200 and r.json()["stored"] == 1, r.text

    assert gateway.add(lid_a, b"a4")["entry_id"] == 4
    gateway.add_batch(lid_b, [b"b2", b"b3"])
    fragments = gateway.metadata(lid_a)["fragments"]
    assert [f["first_entry_id"] for f in fragments] == [0, 4]
    assert holder not in fragments[-1]["bookies"]
    assert len(gateway.metadata(lid_b)["fragments"]) == 1
    assert "entry_exists" in log_text(cluster)
    gateway.close(lid_a)
    assert [d for _, d in gateway.read_all(lid_a)] == [*before, b"a4"]
    assert [d for _, d in gateway.read_all(lid_b)] == [b"b0", b"b1", b"b2", b"b3"]
