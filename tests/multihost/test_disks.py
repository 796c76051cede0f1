"""A bookie's disk filling (issue 38, section 2): every bookie's data dir on a small tmpfs
of its own (tests/multihost/faults.py), filled with a ballast file while a ledger is
written, then freed. One ZooKeeper server is enough here: nothing is cut from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.wire import framing
from tests.harness import wait_for
from tests.integration.bookie_support import sealed
from tests.integration.gateway_support import (
    Appender,
    Gateway,
    assert_error,
    check_read_back,
    wait_writable,
)
from tests.multihost.checks import bookie_get, client_of, expected_on, stored_on
from tests.multihost.faults import fill_disk, free_disk
from tests.multihost.layout import HostService, Layout, start_layout
from tests.multihost.network import HostTransport, Network

DISK_BYTES = 32 * 1024 * 1024
# Under the bookie's default read-only threshold (5% of the disk, 1.6 MiB).
LEFT_BYTES = 512 * 1024
ENTRIES_BEFORE = 30
ENTRIES_AFTER = 30
STATE_S = 15.0
# A ledger id no gateway creates (they count up from a small number), for direct adds.
DIRECT_LEDGER = 9_000_001
LARGE_ENTRY_BYTES = 1024 * 1024


@pytest.fixture(scope="module")
def layout(network: Network, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layout]:
    """One ZooKeeper server, four bookies on 32 MiB disks of their own, one gateway."""
    base: Path = tmp_path_factory.mktemp("hosts")
    started = start_layout(
        network, base, zookeepers=1, bookies=4, gateways=1, bookie_disk_bytes=DISK_BYTES
    )
    try:
        yield started
    finally:
        started.stop()


def info(layout: Layout, bookie: HostService) -> dict[str, Any]:
    """The bookie's own ``GET /v1/info`` (docs/api.md), asked from the client host."""
    r = bookie_get(layout, bookie.address, "/v1/info")
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def registered_state(gateway: Gateway, bookie: HostService) -> str:
    """The bookie's state as the gateway's Admin API reads it from ZooKeeper."""
    r = gateway.request("GET", f"/v1/admin/bookies/{bookie.address}")
    assert r.status_code == 200, r.text
    return str(r.json()["state"])


def wait_state(layout: Layout, gateway: Gateway, bookie: HostService, state: str) -> None:
    """Until the bookie says ``state`` itself and its registration says so too."""
    wait_for(lambda: info(layout, bookie)["state"] == state, STATE_S, f"{bookie.name} {state}")
    wait_for(
        lambda: registered_state(gateway, bookie) == state,
        STATE_S,
        f"{bookie.name} registered {state}",
    )


def test_a_bookie_whose_disk_fills_under_load_turns_read_only_and_the_writer_moves_on(
    layout: Layout, logs_on_failure: None
) -> None:
    """Read-only bookies (docs/api.md "POST /v1/entries", docs/protocol.md "Failure while
    writing"): a bookie of a ledger's ensemble whose disk fills under the threshold while
    the ledger is written turns read-only (its /v1/info and its registration say so); the
    writer replaces it by an ensemble change and its adds go on without an error; the
    bookie still serves every entry the fragments say it holds, byte-exact; the closed
    ledger reads back with every acknowledged entry; freed, the bookie turns writable
    again and takes a new ledger's adds."""
    gateway = client_of(layout, layout.gateways[0])
    wait_writable(gateway, 4)
    lid = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    first = gateway.metadata(lid)["fragments"][0]["bookies"]
    victim = next(b for b in layout.bookies if b.address == first[0])
    appender = Appender(gateway.url, lid, transport=HostTransport(layout.client)).start()
    try:
        appender.wait_count(ENTRIES_BEFORE)
        fill_disk(layout, victim, leave_bytes=LEFT_BYTES)
        wait_state(layout, gateway, victim, "readonly")
        wait_for(
            lambda: victim.address not in gateway.metadata(lid)["fragments"][-1]["bookies"],
            STATE_S,
            "the writer to replace the read-only bookie",
        )
        appender.wait_count(appender.count + ENTRIES_AFTER)
        appender.stop()
        assert appender.errors == []
        closed = gateway.close(lid)
        last = closed["last_entry_id"]
        fragments = closed["fragments"]
        assert len(fragments) >= 2 and victim.address in fragments[0]["bookies"]
        assert all(victim.address not in f["bookies"] for f in fragments[1:]), fragments
        held = stored_on(layout, victim.address, lid, last)
        expected = expected_on(closed, last)[victim.address]
        assert expected and expected <= set(held), sorted(expected - set(held))
        assert all(held[e] == appender.acked[e] for e in expected if e in appender.acked)
        check_read_back(gateway.read_all(lid), last, appender.acked, appender.sent)
    finally:
        appender.stop()
        free_disk(layout, victim)
    wait_state(layout, gateway, victim, "writable")
    again = gateway.create(ensemble_size=4, write_quorum=4, ack_quorum=4)
    assert victim.address in again["fragments"][0]["bookies"]
    gateway.add(again["ledger_id"], b"room again")
    assert gateway.close(again["ledger_id"])["last_entry_id"] == 0


def test_an_add_that_finds_the_disk_full_is_refused_whole_and_the_bookie_turns_read_only(
    layout: Layout, logs_on_failure: None
) -> None:
    """docs/api.md "Errors" (``bookie_read_only``): with the free-space threshold at 0 the
    disk check never notices, and the disk fills completely; an add of a 1 MiB entry then
    gets 503 ``bookie_read_only`` with the error body (not a 500), nothing of it is
    stored, the bookie stays up, turns read-only at once and still serves what it held;
    freed, it turns writable again and the same add is stored."""
    gateway = client_of(layout, layout.gateways[0])
    bookie = layout.bookies[-1]
    url = f"http://{bookie.address}"
    with layout.client.http_client(timeout_s=30.0) as http:

        def add(eid: int, payload: bytes) -> Any:
            body = framing.encode([sealed(DIRECT_LEDGER, eid, payload)])
            headers = {"Content-Type": framing.MEDIA_TYPE}
            return http.post(f"{url}/v1/entries", content=body, headers=headers)

        def threshold(ratio: float) -> None:
            r = http.post(f"{url}/v1/admin/disk-threshold", json={"readonly_free_ratio": ratio})
            assert r.status_code == 200, r.text

        wait_state(layout, gateway, bookie, "writable")
        assert add(0, b"before the disk filled").json() == {"stored": 1, "rejected": []}
        threshold(0.0)
        try:
            fill_disk(layout, bookie)
            large = bytes(range(256)) * (LARGE_ENTRY_BYTES // 256)
            refused = add(1, large)
            assert_error(refused, 503, "bookie_read_only")
            assert "disk is full" in refused.json()["message"]
            assert bookie.alive()
            assert info(layout, bookie)["state"] == "readonly"
            missing = http.get(f"{url}/v1/ledgers/{DIRECT_LEDGER}/entries/1")
            assert_error(missing, 404, "entry_not_found")
            held = http.get(f"{url}/v1/ledgers/{DIRECT_LEDGER}/entries/0")
            assert held.status_code == 200, held.text
            assert framing.decode(held.content)[0].payload == b"before the disk filled"
            wait_state(layout, gateway, bookie, "readonly")
            assert_error(add(1, large), 503, "bookie_read_only")
        finally:
            free_disk(layout, bookie)
            threshold(0.05)
        wait_state(layout, gateway, bookie, "writable")
        assert add(1, large).json() == {"stored": 1, "rejected": []}
        stored = http.get(f"{url}/v1/ledgers/{DIRECT_LEDGER}/entries/1")
        assert framing.decode(stored.content)[0].payload == large
