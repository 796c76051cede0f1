"""The end of a chaos run (tests/chaos/run.py ``_read_back``), against a fake cluster that
records the calls: every ledger is closed and every log's writer taken before the full
audit is asked for. The audit checks settled spans only, so a Qa < Qw ledger left open
by a killed writer and closed after the audit kept its gap on a bookie unrepaired (one
seed in four, before this order)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx

from tests.chaos import run
from tests.chaos.history import History
from tests.chaos.workload import Context, Plan
from tests.multihost.layout import Layout
from tests.multihost.network import Host

GATEWAYS = {"gateway1": "http://gateway1:8080", "gateway2": "http://gateway2:8080"}
AUDITOR = "http://auditor1:3280"
BOOKIE = "http://bookie1:3181"


class FakeCluster:
    """Answers what the read-back asks; an audit asked for is complete at once."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.audit_asked_ms: int | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        self.calls.append(f"{request.method} {url.host}{url.path}")
        path = url.path
        if path == "/v1/admin/audit":
            self.audit_asked_ms = int(time.time() * 1000)
            return httpx.Response(202, json={})
        if path == "/v1/status":
            last = None
            if self.audit_asked_ms is not None:
                last = {"kind": "full", "started_at": self.audit_asked_ms, "complete": True}
            return httpx.Response(200, json={"last_audit": last})
        if path == "/v1/admin/under-replicated":
            return httpx.Response(200, json={"ledgers": []})
        if path == "/v1/stored":
            ids = json.loads(request.content)["ledger_ids"]
            return httpx.Response(
                200, json={"ledgers": [{"ledger_id": i, "ranges": []} for i in ids]}
            )
        if path.endswith("/entries"):
            return httpx.Response(200, json={"entries": [], "next": None})
        if path.endswith("/records"):
            return httpx.Response(200, json={"records": [], "next": None, "caught_up": True})
        if path.startswith("/v1/logs/") and request.method == "GET":
            return httpx.Response(200, json={"ledgers": [7]})
        if path.startswith("/v1/ledgers/") and request.method == "GET":
            return httpx.Response(200, json={"state": "CLOSED", "last_entry_id": -1})
        return httpx.Response(200, json={})


def test_every_ledger_is_closed_and_every_log_fenced_before_the_full_audit(
    tmp_path: Path,
) -> None:
    fake = FakeCluster()
    http = httpx.Client(transport=httpx.MockTransport(fake))
    layout = SimpleNamespace(
        auditors=[SimpleNamespace(url=AUDITOR)],
        bookies=[SimpleNamespace(node=SimpleNamespace(name="bookie1"), port=3181, url=BOOKIE)],
    )
    ctx = Context(History(tmp_path / "history.jsonl"), dict(GATEWAYS), cast(Host, None))
    ctx.ledgers += [3, 5]
    plan = Plan(logs=1, streamers=0)
    final: dict[str, Any] = dict(
        run._read_back(cast(Layout, layout), http, ctx, plan, time.monotonic())
    )
    audit = fake.calls.index("POST gateway1/v1/admin/audit")
    before = fake.calls[:audit]
    for lid in (3, 5):
        assert f"POST gateway1/v1/ledgers/{lid}/recover" in before
    assert "POST gateway1/v1/logs/chaos-0/writer" in before
    assert not any(c.startswith("GET gateway") and "/entries" in c for c in before)
    assert final["replication"]["remaining"] == []
    assert set(final["ledgers"]["3"]) == set(GATEWAYS)
