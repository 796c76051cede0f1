"""Rack-aware placement on a real cluster (docs/operations.md "Racks"): bookies register
their racks, a ledger that cannot be spread over too few racks is placed all the same
with a logged warning, the auditor reports it, and once a third rack registers the
replication workers move one replica there and the report clears."""

from __future__ import annotations

import time
from typing import Any

from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import Gateway, payload_for, start_gateway, wait_writable

ENTRIES = 30
FALLBACK = "ensemble placed without the rack spread"


def _admin(gateway: Gateway, path: str) -> dict[str, Any]:
    r = gateway.request("GET", path)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _racks_of(gateway: Gateway, lid: int) -> list[set[str | None]]:
    """The racks of each fragment of the ledger, as the Admin API shows the bookies'."""
    racks = {b["id"]: b["rack"] for b in _admin(gateway, "/v1/admin/bookies")["bookies"]}
    fragments = gateway.metadata(lid)["fragments"]
    return [{racks.get(b) for b in fragment["bookies"]} for fragment in fragments]


def _report_after_audit(gateway: Gateway, since_ms: int) -> dict[str, Any]:
    """The auditor's placement report of a check that ended after ``since_ms``."""
    found: dict[str, Any] = {}

    def fresh() -> bool:
        found.update(_admin(gateway, "/v1/admin/placement"))
        return (found.get("checked_at") or 0) > since_ms

    wait_for(fresh, 30.0, "a placement report of a check after the request")
    return found


def test_too_few_racks_fall_back_with_a_warning_and_a_returning_rack_gets_its_replica(
    cluster: Cluster,
) -> None:
    """E=3, Qw=2 on racks a and b cannot put every write quorum on two racks: the gateway
    creates the ledger all the same and logs the warning; the auditor reports the ledger,
    not movable; a bookie of rack c registering makes it movable, a worker moves one
    replica to rack c, the fragment spans the three racks, the report clears, and every
    entry reads back byte-exact."""
    for rack in ("a", "a", "b", "b"):
        cluster.start_bookie(extra_args=["--rack", rack], wait=False)
    gateway = start_gateway(cluster)
    wait_writable(gateway, 4)
    cluster.start("auditor", ["--lost-bookie-delay", "1", "--audit-interval", "3600"])
    cluster.start("replicator", ["--marks-poll-interval", "1"])
    racks = sorted(b["rack"] for b in _admin(gateway, "/v1/admin/bookies")["bookies"])
    assert racks == ["a", "a", "b", "b"]

    lid = gateway.create(ensemble_size=3, write_quorum=2, ack_quorum=2)["ledger_id"]
    payloads = [payload_for(i, 100) for i in range(ENTRIES)]
    gateway.add_batch(lid, payloads)
    gateway.close(lid)
    assert _racks_of(gateway, lid) == [{"a", "b"}]
    wait_for(lambda: FALLBACK in gateway.proc.log_path.read_text(), 10.0, "the warning")

    asked_at = int(time.time() * 1000)
    r = gateway.request("POST", "/v1/admin/audit")
    assert r.status_code == 202, r.text
    report = _report_after_audit(gateway, asked_at)
    assert report["racks"] == {"a": 2, "b": 2}
    assert report["violations"] == 1 and report["movable"] == 0
    assert report["ledgers"] == [{"ledger_id": lid, "fragments": [0], "movable": False}]

    cluster.start_bookie(extra_args=["--rack", "c"])
    wait_for(
        lambda: (
            _racks_of(gateway, lid) == [{"a", "b", "c"}]
            and _admin(gateway, "/v1/admin/under-replicated")["ledgers"] == []
        ),
        60.0,
        "a replica moved to rack c and the mark cleared",
    )
    # A check that began before the move may still report it; the one asked now does not.
    r = gateway.request("POST", "/v1/admin/audit")
    assert r.status_code == 202, r.text
    wait_for(
        lambda: _admin(gateway, "/v1/admin/placement")["violations"] == 0,
        30.0,
        "a placement report without the ledger",
    )
    assert _admin(gateway, "/v1/admin/cluster")["placement_violations"] == 0
    assert gateway.read_all(lid) == list(enumerate(payloads))
