"""`quire status` without a cluster: the verdict of services/cli/status_check.py for
each kind of trouble, and the command against a fake gateway (an httpx mock transport):
its JSON keys, its screen, its exit codes (0 / 12 / 13, 3 and 5 as for every command)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from services.cli import limits as cli_limits
from services.cli import status as cli_status
from services.cli.app import app
from services.cli.client import GatewayClient
from services.cli.status_check import EXIT_CRITICAL, EXIT_WARNING, overall, problems

STATUS_KEYS = {
    "status",
    "exit_code",
    "problems",
    "gateway",
    "auditor",
    "replication_enabled",
    "bookies",
    "under_replicated",
    "logs",
    "errors",
}


def _bookie(bookie_id: str, state: str) -> dict[str, Any]:
    up = state not in ("down", "decommissioned")
    return {
        "id": bookie_id,
        "address": bookie_id,
        "state": state,
        "ledgers": 3 if up else None,
        "free_bytes": 2 * 1024**3 if up else None,
        "total_bytes": 8 * 1024**3 if up else None,
        "free_ratio": 0.25 if up else None,
        "instance_id": "i",
        "entries_added": 0,
    }


class Fake:
    """The gateway's answers to the calls of `quire status`, each changeable."""

    def __init__(self) -> None:
        self.ready = True
        self.auditor: str | None = "127.0.0.1:8091"
        self.enabled = True
        self.states = {"127.0.0.1:3181": "writable", "127.0.0.1:3182": "writable"}
        self.marks: list[dict[str, Any]] = []
        self.logs = [f"log-{i:05d}" for i in range(7)]
        self.fail: dict[str, httpx.Response] = {}
        self.paths: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.paths.append(path)
        if path in self.fail:
            return self.fail[path]
        if path == "/health":
            if self.ready:
                return httpx.Response(200, json={"status": "ok"})
            return httpx.Response(503, json={"error": "unavailable", "message": "not ready"})
        if path == "/v1/admin/cluster":
            return httpx.Response(200, json={
                "auditor_elected": self.auditor is not None, "auditor_id": self.auditor,
                "replication_enabled": self.enabled,
                "under_replicated_ledgers": len(self.marks),
                "bookies": {"writable": 0, "readonly": 0, "unavailable": 0},
            })  # fmt: skip
        if path == "/v1/admin/bookies":
            rows = [_bookie(b, s) for b, s in sorted(self.states.items())]
            return httpx.Response(200, json={"bookies": rows})
        if path == "/v1/admin/under-replicated":
            limit = int(request.url.params["limit"])
            return httpx.Response(200, json={"ledgers": self.marks[:limit], "next": None})
        if path == "/v1/logs":
            limit = int(request.url.params["limit"])
            after = request.url.params.get("after")
            rest = [n for n in self.logs if after is None or n > after]
            page = rest[:limit]
            return httpx.Response(
                200, json={"logs": page, "next": page[-1] if len(rest) > limit else None}
            )
        return httpx.Response(404, json={"error": "not_found", "message": path})


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Fake]:
    gateway = Fake()
    transport = httpx.MockTransport(gateway.handle)

    def client(url: str, token: str | None = None, ca_file: Path | None = None) -> GatewayClient:
        assert ca_file is None
        return GatewayClient(url, token, transport=transport)

    monkeypatch.setattr(cli_status, "GatewayClient", client)
    yield gateway


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["--gateway", "http://gw.test:8080", "status", *args])


def status_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = run("--json", *args)
    doc = json.loads(result.stdout)
    assert set(doc) == STATUS_KEYS, doc
    assert doc["exit_code"] == result.exit_code
    assert result.stderr == ""  # no progress, no noise
    return result.exit_code, doc


def _mark(ledger_id: int) -> dict[str, Any]:
    return {"ledger_id": ledger_id, "missing_bookies": ["127.0.0.1:3182"],
            "marked_at": 1_700_000_000_000, "progress": {"bytes_copied": 2048},
            "worker": "127.0.0.1:8092"}  # fmt: skip


def test_healthy_cluster_is_ok_exit_0(fake: Fake) -> None:
    """All well: exit 0, status ok, no problems, every part filled in from the API."""
    code, doc = status_json()
    assert code == 0 and doc["status"] == "ok" and doc["problems"] == []
    assert doc["gateway"] == {"url": "http://gw.test:8080", "ready": True}
    assert doc["auditor"] == {"elected": True, "id": "127.0.0.1:8091"}
    assert doc["replication_enabled"] is True
    assert doc["bookies"]["counts"] == {"writable": 2, "readonly": 0, "down": 0,
                                        "decommissioning": 0, "decommissioned": 0}  # fmt: skip
    assert [b["id"] for b in doc["bookies"]["list"]] == sorted(fake.states)
    assert doc["under_replicated"] == {"count": 0, "first": []}
    assert doc["logs"] == {"count": 7, "complete": True, "first": fake.logs[:5]}
    screen = run()
    assert screen.exit_code == 0 and "OK" in screen.stdout
    assert all(b in screen.stdout for b in fake.states) and "log-00000" in screen.stdout


Change = Callable[[Fake], None]


@pytest.mark.parametrize(
    ("change", "check", "exit_code"),
    [
        (lambda f: f.states.update({"127.0.0.1:3182": "down"}), "bookie_down", EXIT_CRITICAL),
        (lambda f: setattr(f, "auditor", None), "no_auditor", EXIT_CRITICAL),
        (lambda f: setattr(f, "marks", [_mark(4), _mark(9)]), "under_replicated", EXIT_WARNING),
        (lambda f: setattr(f, "enabled", False), "replication_disabled", EXIT_WARNING),
        (lambda f: f.states.update({"127.0.0.1:3181": "readonly"}), "bookie_readonly",
         EXIT_WARNING),
        (lambda f: f.states.update({"127.0.0.1:3181": "decommissioning"}),
         "bookie_decommissioning", EXIT_WARNING),
        (lambda f: setattr(f, "states", {"127.0.0.1:3181": "readonly"}), "no_writable_bookie",
         EXIT_CRITICAL),
    ],
)  # fmt: skip
def test_each_trouble_has_its_check_and_exit_code(
    fake: Fake, change: Change, check: str, exit_code: int
) -> None:
    """Each kind of trouble is named in "problems" and gives its documented exit code,
    in --json and on the screen alike."""
    change(fake)
    code, doc = status_json()
    assert code == exit_code
    assert check in [p["check"] for p in doc["problems"]], doc["problems"]
    assert doc["status"] == ("critical" if exit_code == EXIT_CRITICAL else "warning")
    assert run().exit_code == exit_code


def test_under_replicated_shows_the_count_and_the_first(fake: Fake) -> None:
    """The count is the cluster's; --first bounds the rows listed, with their progress."""
    fake.marks = [_mark(i) for i in range(8)]
    code, doc = status_json("--first", "3")
    assert code == EXIT_WARNING
    assert doc["under_replicated"]["count"] == 8
    assert [m["ledger_id"] for m in doc["under_replicated"]["first"]] == [0, 1, 2]
    assert doc["under_replicated"]["first"][0]["progress"] == {"bytes_copied": 2048}
    screen = run("--first", "3").stdout
    assert "Under-replicated ledgers: 8" in screen and "2.0 KiB" in screen


def test_gateway_not_ready_is_critical_and_asks_nothing_else(fake: Fake) -> None:
    fake.ready = False
    code, doc = status_json()
    assert code == EXIT_CRITICAL and doc["problems"][0]["check"] == "gateway_not_ready"
    assert doc["bookies"] is None and doc["auditor"] is None and doc["logs"] is None
    assert fake.paths == ["/health"]


def test_a_failed_admin_call_is_reported_not_raised(fake: Fake) -> None:
    """metadata_unavailable on one call: that part is null, the error is listed, the
    rest is still shown, and the status is critical."""
    fake.fail["/v1/admin/bookies"] = httpx.Response(
        503, json={"error": "metadata_unavailable", "message": "zk slow"}
    )
    code, doc = status_json()
    assert code == EXIT_CRITICAL and doc["bookies"] is None
    assert doc["errors"] == [{"call": "GET /v1/admin/bookies", "code": "metadata_unavailable",
                              "message": "zk slow"}]  # fmt: skip
    assert doc["auditor"]["elected"] is True and doc["logs"]["count"] == 7


def test_wrong_token_and_unreachable_gateway_are_the_usual_errors(fake: Fake) -> None:
    fake.fail["/v1/admin/cluster"] = httpx.Response(
        401, json={"error": "unauthorized", "message": "admin token needed"}
    )
    refused = run("--json")
    assert refused.exit_code == 5 and refused.stdout == ""
    assert "quire: error: unauthorized: admin token needed" in refused.stderr


def test_unreachable_gateway_is_exit_3() -> None:
    result = CliRunner().invoke(app, ["--gateway", "http://127.0.0.1:9", "status", "--json"])
    assert result.exit_code == 3 and "gateway_unreachable" in result.stderr
    assert result.stdout == ""


def test_logs_beyond_the_counted_pages_are_marked_incomplete(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_limits, "STATUS_LOG_PAGES_MAX", 1)
    monkeypatch.setattr(cli_status, "LIST_LIMIT_MAX", 3)
    _, doc = status_json()
    assert doc["logs"] == {"count": 3, "complete": False, "first": fake.logs[:3]}
    assert "Logs: 3+" in run().stdout


def test_overall_is_the_worst_severity() -> None:
    doc: dict[str, Any] = {
        "gateway": {"ready": True}, "errors": [], "auditor": {"elected": True, "id": "a"},
        "bookies": {"counts": {"writable": 1}, "list": [{"id": "b", "state": "writable"}]},
        "under_replicated": {"count": 1, "first": []}, "replication_enabled": True,
    }  # fmt: skip
    assert overall(problems(doc)) == "warning"
    doc["bookies"]["list"].append({"id": "c", "state": "down"})
    found = problems(doc)
    assert overall(found) == "critical" and found[0].check == "bookie_down"
    assert overall([]) == "ok"
