"""Recovery across a reformat (issue 7 item 1, docs/protocol.md invariants): a bookie that
lost its state before the recovery's fence is a new instance, and its "no such entry"
never counts toward proving an entry absent, even though it answers the fence itself.
Real bookies and gateways; the bookie is formatted with ``quire bookie format --force``."""

from __future__ import annotations

from pathlib import Path

from kazoo.client import KazooClient

from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import payload_for, start_gateway, wait_writable
from tests.integration.test_cli_bookie_format import format_cmd, run_format

ENTRIES = 10  # ids 0..9: the last one's write set is the ensemble's indexes 0 and 1


def test_a_bookie_reformatted_before_the_fence_does_not_close_the_ledger_short(
    cluster: Cluster, zk_client: KazooClient, tmp_path: Path
) -> None:
    """E=3, Qw=2, Qa=2 (absence needs one fenced bookie's "missing"): entry 9 is stored on
    ensemble[0] and ensemble[1] only; the writer dies with LAC 8 known to nobody (entry 8
    carries LAC 7). ensemble[0] is stopped, formatted and restarted empty (a new instance),
    ensemble[1] is SIGSTOPped, and another gateway recovers: ensemble[0] answers the fence
    and says "missing" for entry 9, which before the fix closed the ledger at 8. Now the
    recovery fails (retriable) without closing; after SIGCONT it closes at 9 and every
    acknowledged entry reads back."""
    bookies = {}
    for i in range(3):
        data_dir = tmp_path / f"bookie-{i}"
        proc = cluster.start_bookie(data_dir=data_dir)
        bookies[proc.address] = (proc, data_dir)
    # No explicit LAC from the writer: the bookies' LACs are the ones the entries carry.
    writer = start_gateway(cluster, ["--explicit-lac-delay-ms", "60000"])
    other = start_gateway(cluster, ["--bookie-request-timeout-ms", "2000"])
    wait_writable(writer, 3)
    ledger = writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    lid = ledger["ledger_id"]
    ensemble = ledger["fragments"][0]["bookies"]
    for n in range(ENTRIES):
        assert writer.add(lid, payload_for(n))["entry_id"] == n
    writer.proc.kill()  # never closes the ledger

    (wiped, wiped_dir), (slow, _) = bookies[ensemble[0]], bookies[ensemble[1]]
    wiped.stop()
    registered = f"/bookies/{wiped.address}"
    wait_for(lambda: not zk_client.exists(registered), 30, "the bookie to deregister")
    done = run_format(format_cmd(cluster, wiped.address, wiped_dir, "--force"))
    assert done.returncode == 0, done
    wiped.start()
    wiped.wait_healthy(30.0)

    slow.pause()
    try:
        r = other.http.post(f"/v1/ledgers/{lid}/recover")
        # Not closed short: a retriable failure (entry 9 neither found nor provably absent).
        assert (r.status_code, r.json().get("error")) == (503, "not_enough_bookies"), r.text
        assert other.metadata(lid)["state"] == "IN_RECOVERY"
    finally:
        slow.resume()

    closed = other.recover(lid)
    assert (closed["state"], closed["last_entry_id"]) == ("CLOSED", ENTRIES - 1)
    assert other.read_all(lid) == [(n, payload_for(n)) for n in range(ENTRIES)]
