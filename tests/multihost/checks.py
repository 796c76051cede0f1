"""What the multi-host scenarios ask of a layout: a gateway as the client host reaches it,
what a bookie really stores of a ledger (read from the bookie itself), and what the
ledger's fragments say it must store (its share of each entry's write set)."""

from __future__ import annotations

from typing import Any

from services.protocol.replication import holds
from services.wire import framing
from tests.integration.gateway_support import Gateway
from tests.multihost.layout import HostService, Layout
from tests.multihost.network import HostTransport

# Entries asked of a bookie per range read (its own page bound is larger).
STORED_PAGE_ENTRIES = 1000


def client_of(layout: Layout, gateway: HostService) -> Gateway:
    """The gateway as the test's client host reaches it."""
    return Gateway(gateway, transport=HostTransport(layout.client))


def bookie_get(layout: Layout, bookie: str, path: str, **params: int) -> Any:
    """``GET path`` of the bookie with id ``bookie``, asked from the client host."""
    with layout.client.http_client(timeout_s=10.0) as http:
        return http.get(f"http://{bookie}{path}", params=params)


def stored_on(layout: Layout, bookie: str, ledger_id: int, last: int) -> dict[int, bytes]:
    """Every entry of ``ledger_id`` up to ``last`` that the bookie ``bookie`` serves, with
    its payload (nothing when it does not know the ledger)."""
    found: dict[int, bytes] = {}
    first = 0
    while first <= last:
        r = bookie_get(
            layout, bookie, f"/v1/ledgers/{ledger_id}/entries",
            **{"from": first, "to": last, "max_entries": STORED_PAGE_ENTRIES},
        )  # fmt: skip
        if r.status_code == 404:
            return found
        assert r.status_code == 200, r.text
        records = framing.decode(r.content)
        if not records:
            return found
        found |= {rec.entry_id: bytes(rec.payload) for rec in records}
        first = records[-1].entry_id + 1
    return found


def expected_on(metadata: dict[str, Any], last: int) -> dict[str, set[int]]:
    """For each bookie a fragment names: the entries up to ``last`` that the fragments
    say it stores (docs/protocol.md: index i of an ensemble stores entry e when i is in
    e's write set)."""
    size, quorum = metadata["ensemble_size"], metadata["write_quorum"]
    fragments = metadata["fragments"]
    out: dict[str, set[int]] = {}
    for n, fragment in enumerate(fragments):
        first = fragment["first_entry_id"]
        end = fragments[n + 1]["first_entry_id"] - 1 if n + 1 < len(fragments) else last
        ids = range(first, min(end, last) + 1)
        for index, bookie in enumerate(fragment["bookies"]):
            mine = out.setdefault(bookie, set())
            mine.update(e for e in ids if holds(e, index, size, quorum))
    return out
