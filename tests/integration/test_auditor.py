"""The auditor with real processes (PROTOCOL.md, "Auto-recovery"; issue 8, "Auditor"):
marking a lost bookie's ledgers, ignoring a bookie back within the delay, failover,
audits on demand, stale marks, session loss, decommission."""

from __future__ import annotations

from tests.harness import Cluster, wait_for
from tests.integration.auto_support import marks, start_auditor, wait_elected
from tests.integration.gateway_support import Gateway, start_bookies, start_gateway, wait_writable

FAST = ["--lost-bookie-delay", "1", "--audit-interval", "600"]


def _closed_ledgers(gateway: Gateway, count: int, entries: int = 5) -> list[dict]:
    out = []
    for _ in range(count):
        ledger = gateway.create(ensemble_size=3, write_quorum=3, ack_quorum=2)
        gateway.add_batch(ledger["ledger_id"], [b"entry-%d" % i for i in range(entries)])
        out.append(gateway.close(ledger["ledger_id"]))
    return out


def test_killed_bookie_ledgers_are_marked_naming_it(cluster: Cluster, zk_client) -> None:  # type: ignore[no-untyped-def]
    """A bookie SIGKILLed for good: after the lost-bookie delay every ledger with a
    fragment on it has a mark naming it, and no other ledger is marked."""
    bookies = {p.address: p for p in start_bookies(cluster, 4)}
    gateway = start_gateway(cluster)
    wait_writable(gateway, 4)
    auditor = start_auditor(cluster, FAST)
    wait_elected([auditor])
    ledgers = _closed_ledgers(gateway, 6)
    victim = ledgers[0]["fragments"][0]["bookies"][0]
    on_victim = {m["ledger_id"] for m in ledgers if victim in m["fragments"][0]["bookies"]}
    bookies[victim].kill()
    found = wait_for(lambda: (m := marks(zk_client)) and set(m) == on_victim and m, 20, "marks")
    assert all(missing == [victim] for missing in found.values()), found
