"""A reformatted bookie does not un-fence a ledger for its old writer (issue 35 item 3,
docs/protocol.md "Fencing and recovery"): an add answered by another instance of a bookie
than the one the ledger's fragment recorded is a failed bookie for that add. Real bookies
and gateways; the bookie is formatted with ``quire bookie format --force``."""

from __future__ import annotations

from pathlib import Path

from kazoo.client import KazooClient

from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    assert_error,
    payload_for,
    start_gateway,
    wait_writable,
)
from tests.integration.test_cli_bookie_format import format_cmd, run_format

ENTRIES = 10  # ids 0..9; entry 10's write set is the ensemble's indexes 1 and 2


def test_an_old_writer_gets_no_ack_from_a_reformatted_bookie_above_the_closed_end(
    cluster: Cluster, zk_client: KazooClient, tmp_path: Path
) -> None:
    """An old writer's add above a recovered ledger's closed end is never acknowledged,
    even when each bookie of its write set is either reformatted (a new, unfenced
    instance) or was down during the fence. E=3, Qw=2, Qa=2: the writer adds 0..9 and goes
    idle; ensemble[2] stops; another gateway recovers, fencing ensemble[0] and
    ensemble[1], and closes at 9; ensemble[1] is stopped, formatted and restarted;
    ensemble[2] comes back. The idle writer's add of entry 10 goes to ensemble[1] (new
    instance) and ensemble[2] (never fenced): before the fix both stored it and the writer
    acknowledged it above the closed end. Now the answer of the new instance fails that
    bookie, the ensemble change (to the spare, fourth bookie) finds the ledger CLOSED and
    the add fails with ledger_fenced; the ledger reads back closed at 9."""
    bookies = {}
    for i in range(4):
        data_dir = tmp_path / f"bookie-{i}"
        proc = cluster.start_bookie(data_dir=data_dir)
        bookies[proc.address] = (proc, data_dir)
    # A long add time-out: the writer waits for a slow bookie rather than replacing it.
    writer = start_gateway(cluster, ["--bookie-add-timeout-ms", "20000"])
    other = start_gateway(cluster, ["--bookie-request-timeout-ms", "2000"])
    wait_writable(writer, 4)
    wait_writable(other, 4)
    ledger = writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    lid = ledger["ledger_id"]
    ensemble = ledger["fragments"][0]["bookies"]
    for n in range(ENTRIES):
        assert writer.add(lid, payload_for(n))["entry_id"] == n

    (wiped, wiped_dir), (down, _) = bookies[ensemble[1]], bookies[ensemble[2]]
    down.stop()
    closed = other.recover(lid)  # fences ensemble[0] and ensemble[1]
    assert (closed["state"], closed["last_entry_id"]) == ("CLOSED", ENTRIES - 1)
    # The answers of the recorded instances counted: no bookie was replaced meanwhile.
    assert [f["bookies"] for f in closed["fragments"]] == [ensemble]

    wiped.stop()
    registered = f"/bookies/{wiped.address}"
    wait_for(lambda: not zk_client.exists(registered), 30, "the bookie to deregister")
    done = run_format(format_cmd(cluster, wiped.address, wiped_dir, "--force"))
    assert done.returncode == 0, done
    wiped.start()
    wiped.wait_healthy(30.0)
    down.start()
    down.wait_healthy(30.0)

    r = writer.http.post(
        f"/v1/ledgers/{lid}/entries",
        content=payload_for(ENTRIES),
        headers={"Content-Type": "application/octet-stream"},
    )
    assert_error(r, 409, "ledger_fenced")

    metadata = other.metadata(lid)
    assert (metadata["state"], metadata["last_entry_id"]) == ("CLOSED", ENTRIES - 1)
    assert other.read_all(lid) == [(n, payload_for(n)) for n in range(ENTRIES)]
