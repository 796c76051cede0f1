"""A whole rack lost (issue 38, section 2): bookies on three racks, each on a host of its
own, ledgers written with E=3, Qw=2 spread over the racks; every bookie host of one
rack killed at once; nothing acknowledged is lost, and auto-recovery re-replicates onto
the remaining racks (docs/operations.md "Racks")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import wait_for
from tests.integration.gateway_support import Gateway, payload_for, wait_writable
from tests.multihost.layout import Layout, start_layout
from tests.multihost.network import HostTransport, Network

RACKS = ("a", "a", "b", "b", "c", "c")
LEDGERS = 6
ENTRIES = 20
RECOVERY_S = 60.0


@pytest.fixture(scope="module")
def layout(network: Network, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layout]:
    """Three ZooKeeper servers, six bookies on racks a, a, b, b, c, c, a gateway, an
    auditor and a replication worker with short timers, each on its own host."""
    base: Path = tmp_path_factory.mktemp("hosts")
    started = start_layout(
        network,
        base,
        bookies=len(RACKS),
        gateways=1,
        auditors=1,
        replicators=1,
        auditor_args=["--lost-bookie-delay", "1", "--audit-interval", "3600"],
        replicator_args=["--marks-poll-interval", "1"],
        racks=RACKS,
    )
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def logs_on_failure(layout: Layout, request: pytest.FixtureRequest) -> Iterator[None]:
    """The tail of every log of the layout when the test failed."""
    yield
    if getattr(getattr(request.node, "rep_call", None), "failed", False):
        print(layout.log_tails())


def _admin(gateway: Gateway, path: str) -> dict[str, Any]:
    r = gateway.request("GET", path)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_a_lost_rack_loses_nothing_and_recovery_spreads_over_the_others(
    layout: Layout, logs_on_failure: None
) -> None:
    """docs/operations.md Racks: the Admin API shows each bookie's rack and every ledger
    of E=3, Qw=2 on the three racks; with both bookies of rack c killed, an open ledger
    goes on taking adds on racks a and b, every acknowledged entry of every ledger reads
    back byte-exact at once, and within a bound no fragment names a bookie of rack c, no
    mark is left, and every entry still reads back byte-exact from the copies."""
    gateway = Gateway(layout.gateways[0], transport=HostTransport(layout.client))
    wait_writable(gateway, len(RACKS))
    racks = {b["id"]: b["rack"] for b in _admin(gateway, "/v1/admin/bookies")["bookies"]}
    assert sorted(racks.values()) == sorted(RACKS)

    written: dict[int, list[bytes]] = {}
    for n in range(LEDGERS):
        lid = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
        written[lid] = [payload_for(n * 1000 + i, 100) for i in range(ENTRIES)]
        gateway.add_batch(lid, written[lid])
        ensemble = gateway.metadata(lid)["fragments"][0]["bookies"]
        assert {racks[b] for b in ensemble} == {"a", "b", "c"}
    *closed, open_lid = written
    for lid in closed:
        gateway.close(lid)

    lost = [b for b in layout.bookies if racks[f"{b.node.name}:{b.port}"] == "c"]
    for bookie in lost:
        bookie.kill()
    lost_ids = {f"{b.node.name}:{b.port}" for b in lost}
    for lid in closed:  # one replica of each entry is left on racks a and b
        assert gateway.read_all(lid) == list(enumerate(written[lid])), f"ledger {lid}"
    more = [payload_for(99_000 + i, 100) for i in range(ENTRIES)]
    gateway.add_batch(open_lid, more)  # the writer replaces its rack-c bookie
    written[open_lid] += more
    gateway.close(open_lid)

    def recovered() -> bool:
        for lid in written:
            for fragment in gateway.metadata(lid)["fragments"]:
                if lost_ids & set(fragment["bookies"]):
                    return False
        marks: list[Any] = _admin(gateway, "/v1/admin/under-replicated")["ledgers"]
        return not marks

    wait_for(recovered, RECOVERY_S, "every fragment off rack c and no mark left")
    for lid, payloads in written.items():
        assert gateway.read_all(lid) == list(enumerate(payloads)), f"ledger {lid}"
