"""A bookie wiped and brought back empty under its id as a new instance (issue 38,
section 1 "wipe a bookie"), with an auditor and a replication worker on hosts of their
own: the cluster finds what the new instance lacks and re-replicates it. One ZooKeeper
server is enough here: nothing is cut from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import wait_for
from tests.integration.gateway_support import Gateway, payload_for, wait_writable
from tests.multihost.checks import bookie_get, client_of, expected_on, stored_on
from tests.multihost.faults import wipe
from tests.multihost.layout import Layout, start_layout
from tests.multihost.network import Network

LEDGERS = 4
ENTRIES = 20
# Longer than the wipe takes (the old session's expiry, the format, the start): the
# bookie is back before it counts as lost, so only the full audit's replica check can
# find what the new instance lacks. A bookie lost for good: tests/integration/
# test_autorecovery.py.
LOST_BOOKIE_DELAY_S = 120
AUDIT_INTERVAL_S = 2
REPAIRED_S = 60.0
# How long a worker leaves an open ledger's last fragment to its writer.
OPEN_LEDGER_GRACE_S = 2


@pytest.fixture(scope="module")
def layout(network: Network, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layout]:
    """One ZooKeeper server, four bookies, one gateway, one auditor (a full audit every
    two seconds) and one replication worker."""
    base: Path = tmp_path_factory.mktemp("hosts")
    started = start_layout(
        network,
        base,
        zookeepers=1,
        bookies=4,
        gateways=1,
        auditors=1,
        replicators=1,
        auditor_args=[
            "--lost-bookie-delay", str(LOST_BOOKIE_DELAY_S),
            "--audit-interval", str(AUDIT_INTERVAL_S),
        ],
        replicator_args=[
            "--marks-poll-interval", "1", "--open-ledger-grace", str(OPEN_LEDGER_GRACE_S),
        ],
    )  # fmt: skip
    try:
        yield started
    finally:
        started.stop()


def instance_of(layout: Layout, bookie: str) -> str:
    r = bookie_get(layout, bookie, "/v1/info")
    assert r.status_code == 200, r.text
    return str(r.json()["instance_id"])


def replicated(layout: Layout, gateway: Gateway, written: dict[int, list[bytes]]) -> bool:
    """No mark is left, and every bookie each ledger's fragments name serves its share
    of the ledger's entries, byte-exact (read from the bookie itself)."""
    r = gateway.request("GET", "/v1/admin/under-replicated")
    assert r.status_code == 200, r.text
    if r.json()["ledgers"]:
        return False
    for lid, payloads in written.items():
        metadata = gateway.metadata(lid)
        last = metadata["last_entry_id"]
        for bookie, share in expected_on(metadata, last).items():
            held = stored_on(layout, bookie, lid, last)
            if any(held.get(e) != payloads[e] for e in share):
                return False
    return True


def test_a_wiped_bookie_back_as_a_new_instance_is_refilled_by_the_replicators(
    layout: Layout, logs_on_failure: None
) -> None:
    """Auto-recovery (docs/protocol.md "Auto-recovery"): closed ledgers (E=3, Qw=2, Qa=2)
    on four bookies; one bookie named by some of them loses its disk and comes back
    under its id, empty, with a new instance id (``quire bookie format``: docs/api.md,
    "Processes and how they start"). Within a bound the auditor's replica check has found
    what it lacks and the replication worker has copied it back or moved its share to
    another bookie: no mark is left, every bookie a fragment names serves its share
    byte-exact, and every ledger reads back whole through the gateway."""
    gateway = client_of(layout, layout.gateways[0])
    wait_writable(gateway, 4)
    written: dict[int, list[bytes]] = {}
    for n in range(LEDGERS):
        lid = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
        payloads = [payload_for(n * 1000 + i, 200) for i in range(ENTRIES)]
        gateway.add_batch(lid, payloads)
        gateway.close(lid)
        written[lid] = payloads
    named = [
        {b for f in gateway.metadata(lid)["fragments"] for b in f["bookies"]} for lid in written
    ]
    victim = max(layout.bookies, key=lambda b: sum(b.address in n for n in named))
    holding = [lid for lid, n in zip(written, named, strict=True) if victim.address in n]
    assert holding, "E=3 of four bookies: the victim is in some ensemble"
    before = instance_of(layout, victim.address)
    assert replicated(layout, gateway, written)

    wipe(layout, victim)
    assert instance_of(layout, victim.address) != before
    assert all(not stored_on(layout, victim.address, lid, ENTRIES - 1) for lid in holding)
    wait_for(
        lambda: replicated(layout, gateway, written),
        REPAIRED_S,
        "the wiped bookie's share replicated again",
    )
    for lid, payloads in written.items():
        assert gateway.read_all(lid) == list(enumerate(payloads)), f"ledger {lid}"


def test_an_open_ledger_whose_bookie_is_wiped_is_recovered_and_refilled(
    layout: Layout, logs_on_failure: None
) -> None:
    """An OPEN ledger with an idle writer: a bookie of its only fragment is wiped and back
    as a new instance before it counts as lost. The bookie answers, and the writer
    cannot tell (the new instance would take its next adds), but the share it held is
    gone; the replica check never looks at an open fragment. The auditor marks the
    ledger because the fragment recorded the old instance (docs/protocol.md
    "Auto-recovery"); after the open-ledger grace the worker recovers it (the gateway's
    writer is fenced) and copies it as a CLOSED ledger: every acknowledged entry is on
    its write set again, byte-exact, so that losing another bookie later loses nothing."""
    gateway = client_of(layout, layout.gateways[0])
    wait_writable(gateway, 4)
    lid = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    payloads = [payload_for(50_000 + i, 200) for i in range(ENTRIES)]
    gateway.add_batch(lid, payloads)
    ensemble = gateway.metadata(lid)["fragments"][0]["bookies"]
    victim = next(b for b in layout.bookies if b.address == ensemble[1])

    wipe(layout, victim)
    assert not stored_on(layout, victim.address, lid, ENTRIES - 1)

    def recovered_and_replicated() -> bool:
        metadata = gateway.metadata(lid)
        return metadata["state"] == "CLOSED" and replicated(layout, gateway, {lid: payloads})

    wait_for(recovered_and_replicated, REPAIRED_S, "the open ledger recovered and refilled")
    assert gateway.metadata(lid)["last_entry_id"] == ENTRIES - 1
    assert gateway.read_all(lid) == list(enumerate(payloads))
    late = gateway.request("POST", f"/v1/ledgers/{lid}/entries", content=b"late")
    assert late.status_code == 409, late.text
