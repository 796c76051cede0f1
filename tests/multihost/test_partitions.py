"""Partitions between hosts during writes (issue 38, section 2): every service on a host
of its own, a three-server ZooKeeper ensemble, and the network cut between some of
them while a ledger is written and recovered."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.harness import wait_for
from tests.integration.gateway_support import (
    Gateway,
    assert_error,
    check_read_back,
    payload_for,
    wait_writable,
)
from tests.multihost.checks import client_of
from tests.multihost.layout import Layout, start_layout
from tests.multihost.network import Network

ENTRIES_BEFORE = 20
ENTRIES_CUT_OFF = 20
ZOOKEEPER_LOST_S = 20.0


@pytest.fixture(scope="module")
def layout(network: Network, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layout]:
    """Three ZooKeeper servers, three bookies and two gateways, each on its own host."""
    base: Path = tmp_path_factory.mktemp("hosts")
    started = start_layout(network, base, zookeepers=3, bookies=3, gateways=2)
    try:
        yield started
    finally:
        started.stop()


class Appender:
    """Adds to one ledger through one gateway in a thread of its own until an add is
    refused; records what was sent, what was acknowledged and the refusal."""

    def __init__(self, gateway: Gateway, ledger_id: int, first: int):
        self.gateway, self.ledger_id, self.next = gateway, ledger_id, first
        self.acked: dict[int, bytes] = {}
        self.sent: set[bytes] = set()
        self.refusal: httpx.Response | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Appender:
        self.thread.start()
        return self

    def _run(self) -> None:
        while True:
            payload = payload_for(self.next)
            self.next += 1
            self.sent.add(payload)
            r = self.gateway.request(
                "POST", f"/v1/ledgers/{self.ledger_id}/entries", content=payload
            )
            if r.status_code != 200:
                self.refusal = r
                return
            self.acked[r.json()["entry_id"]] = payload


def test_a_writer_cut_from_zookeeper_is_fenced_by_a_recovery_elsewhere(
    network: Network, layout: Layout, logs_on_failure: None
) -> None:
    """Fencing and recovery (docs/protocol.md "Fencing and recovery"): a writer gateway
    partitioned from every ZooKeeper server but not from the bookies keeps acknowledging
    adds; another gateway recovers the ledger while adds are in flight; the closed
    ledger holds every acknowledged entry byte-exact and nothing never sent, and the old
    writer refuses with 409 ``ledger_fenced`` (docs/api.md), during the partition and
    after it heals."""
    writer_service, other_service = layout.gateways
    writer, other = client_of(layout, writer_service), client_of(layout, other_service)
    wait_writable(writer, 3)
    lid = writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    acked: dict[int, bytes] = {}
    for n in range(ENTRIES_BEFORE):
        acked[writer.add(lid, payload_for(n))["entry_id"]] = payload_for(n)
    network.partition([writer_service.node], layout.zookeeper_hosts)
    try:
        wait_for(lambda: not writer_service.healthy(), ZOOKEEPER_LOST_S, "the writer to lose ZK")
        appender = Appender(client_of(layout, writer_service), lid, ENTRIES_BEFORE).start()
        wait_for(lambda: len(appender.acked) >= ENTRIES_CUT_OFF, 30.0, "adds cut off from ZK")
        closed = other.recover(lid)
        appender.thread.join(30.0)
        assert not appender.thread.is_alive(), "the old writer still acknowledges adds"
        assert appender.refusal is not None
        assert_error(appender.refusal, 409, "ledger_fenced")
        late = writer.request("POST", f"/v1/ledgers/{lid}/entries", content=b"late")
        assert_error(late, 409, "ledger_fenced")
    finally:
        network.heal()
    acked |= appender.acked
    assert closed["state"] == "CLOSED"
    assert closed["last_entry_id"] >= max(acked)
    pages = other.read_all(lid)
    sent = {payload_for(n) for n in range(ENTRIES_BEFORE)} | appender.sent
    check_read_back(pages, closed["last_entry_id"], acked, sent)
    wait_for(writer_service.healthy, ZOOKEEPER_LOST_S, "the writer to reach ZooKeeper again")
    again = writer.request("POST", f"/v1/ledgers/{lid}/entries", content=b"later")
    assert_error(again, 409, "ledger_fenced")
    assert writer.metadata(lid) == closed


def test_a_bookie_cut_from_the_writer_is_replaced_and_nothing_acknowledged_is_lost(
    network: Network, layout: Layout, logs_on_failure: None
) -> None:
    """Failure while writing (docs/protocol.md "Failure while writing"): one bookie of an
    E=2 ensemble partitioned from the writer gateway (still up, still registered, and
    reachable from everyone else) is replaced at its index by the third bookie, and adds
    go on; the ledger, closed by its writer, holds every acknowledged entry byte-exact
    and nothing never sent, read through the other gateway; the cut-off bookie is in the
    first fragment only."""
    writer_service, other_service = layout.gateways
    writer, other = client_of(layout, writer_service), client_of(layout, other_service)
    wait_writable(writer, 3)
    lid = writer.create(ensemble_size=2, write_quorum=2, ack_quorum=2)["ledger_id"]
    acked: dict[int, bytes] = {}
    for n in range(ENTRIES_BEFORE):
        acked[writer.add(lid, payload_for(n))["entry_id"]] = payload_for(n)
    first_ensemble = writer.metadata(lid)["fragments"][0]["bookies"]
    victim = next(b for b in layout.bookies if f"{b.node.name}:{b.port}" in first_ensemble)
    victim_id = f"{victim.node.name}:{victim.port}"
    network.partition([writer_service.node], [victim.node])
    try:
        for n in range(ENTRIES_BEFORE, ENTRIES_BEFORE + ENTRIES_CUT_OFF):
            acked[writer.add(lid, payload_for(n))["entry_id"]] = payload_for(n)
        closed = writer.close(lid)
    finally:
        network.heal()
    fragments = closed["fragments"]
    assert len(fragments) == 2, fragments
    assert victim_id in fragments[0]["bookies"]
    assert victim_id not in fragments[1]["bookies"]
    assert fragments[1]["first_entry_id"] <= ENTRIES_BEFORE
    sent = {payload_for(n) for n in range(ENTRIES_BEFORE + ENTRIES_CUT_OFF)}
    check_read_back(other.read_all(lid), closed["last_entry_id"], acked, sent)
    assert closed["last_entry_id"] == ENTRIES_BEFORE + ENTRIES_CUT_OFF - 1


def test_the_ensemble_has_one_leader_and_the_others_follow(layout: Layout) -> None:
    leader = layout.zookeeper_leader()
    modes = sorted(str(z.mode()) for z in layout.zookeepers if z is not leader)
    assert leader.mode() == "leader"
    assert modes == ["follower", "follower"]
