"""`quire admin ...` against a fake gateway (an httpx mock transport that answers the
Admin API of docs/api.md): every command's call, its table or --json output, its errors and
exit codes, and the waits of `decommission --wait` and `wait-replicated` with their
deadline."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner

from services.cli import admin as cli_admin
from services.cli.app import app
from services.cli.client import GatewayClient

TOKEN = "admin-token-x1"
PLACEMENT = {
    "checked_at": 1_700_000_000_000,
    "racks": {"rack-1": 1, "rack-2": 1},
    "violations": 2,
    "movable": 1,
    "ledgers": [
        {"ledger_id": 4, "fragments": [0, 50], "movable": True},
        {"ledger_id": 8, "fragments": [0], "movable": False},
    ],
    "truncated": False,
}
ALPHA, BETA = "127.0.0.1:3181", "127.0.0.1:3182"


def _bookie(bookie_id: str, state: str, ledgers: int | None = 12) -> dict[str, Any]:
    return {
        "id": bookie_id,
        "address": bookie_id,
        "state": state,
        "ledgers": ledgers,
        "free_bytes": None if ledgers is None else 3 * 1024**3,
        "total_bytes": None if ledgers is None else 10 * 1024**3,
        "free_ratio": None if ledgers is None else 0.3,
        "instance_id": "inst-" + bookie_id[-1],
        "rack": "rack-" + bookie_id[-1],
    }


@dataclass
class FakeGateway:
    """The Admin API over a little state; ``left`` is the under-replicated count each
    successive cluster poll reports (the last one repeats)."""

    left: list[int] = field(default_factory=lambda: [0])
    enabled: bool = True
    auditor: str | None = "127.0.0.1:8091"
    states: dict[str, str] = field(default_factory=lambda: {ALPHA: "writable", BETA: "down"})
    decommissioned_after_polls: int | None = None
    marks: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    audits: int = 0
    tokens: set[str | None] = field(default_factory=set)
    polls: int = 0

    def cluster(self) -> dict[str, Any]:
        left = self.left[min(self.polls, len(self.left) - 1)]
        self.polls += 1
        return {
            "auditor_elected": self.auditor is not None,
            "auditor_id": self.auditor,
            "replication_enabled": self.enabled,
            "under_replicated_ledgers": left,
            "bookies": {"writable": 1, "readonly": 0, "unavailable": 1},
        }

    def bookie(self, bookie_id: str) -> dict[str, Any]:
        state = self.states[bookie_id]
        if (
            state == "decommissioning"
            and self.decommissioned_after_polls is not None
            and self.polls >= self.decommissioned_after_polls
        ):
            state = self.states[bookie_id] = "decommissioned"
        return _bookie(bookie_id, state, None if state == "down" else 12)

    def handle(self, request: httpx.Request) -> httpx.Response:
        path, method = request.url.path, request.method
        self.calls.append(
            (method, path + ("?" + request.url.query.decode() if request.url.query else ""))
        )
        auth = request.headers.get("authorization")
        self.tokens.add(auth)
        if path.startswith("/v1/admin/bookies/"):
            bookie_id = path.removeprefix("/v1/admin/bookies/").removesuffix("/decommission")
            if bookie_id not in self.states:
                return httpx.Response(
                    404, json={"error": "bookie_not_found", "message": f"no bookie {bookie_id}"}
                )
            if path.endswith("/decommission"):
                if self.states[bookie_id] != "decommissioned":
                    self.states[bookie_id] = "decommissioning"
                return httpx.Response(202, json=self.bookie(bookie_id))
            return httpx.Response(200, json=self.bookie(bookie_id))
        if path == "/v1/admin/cluster":
            return httpx.Response(200, json=self.cluster())
        if path == "/v1/admin/bookies":
            return httpx.Response(
                200, json={"bookies": [self.bookie(b) for b in sorted(self.states)]}
            )
        if path == "/v1/admin/under-replicated":
            limit = int(request.url.params.get("limit", "1000"))
            after = int(request.url.params.get("after", "-1"))
            rows = [m for m in self.marks if m["ledger_id"] > after]
            page = rows[:limit]
            nxt = page[-1]["ledger_id"] if len(rows) > limit else None
            return httpx.Response(200, json={"ledgers": page, "next": nxt})
        if path == "/v1/admin/placement":
            return httpx.Response(200, json=PLACEMENT)
        if path == "/v1/admin/audit":
            self.audits += 1
            return httpx.Response(202, json={"requested": True, "auditor_id": self.auditor})
        if path.startswith("/v1/admin/replication/"):
            self.enabled = path.endswith("/enable")
            return httpx.Response(200, json=self.cluster())
        return httpx.Response(404, json={"error": "not_found", "message": path})


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGateway]:
    gateway = FakeGateway()
    transport = httpx.MockTransport(lambda request: gateway.handle(request))

    def client(url: str, token: str | None = None, ca_file: Path | None = None) -> GatewayClient:
        assert ca_file is None
        return GatewayClient(url, token, transport=transport)

    monkeypatch.setattr(cli_admin, "GatewayClient", client)
    yield gateway


def run(*args: str) -> Any:
    result = CliRunner().invoke(
        app, ["--gateway", "http://gw.test:8080", "--token", TOKEN, "admin", *args]
    )
    return result


def _mark(ledger_id: int, progress: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "ledger_id": ledger_id,
        "missing_bookies": [BETA],
        "marked_at": 1_700_000_000_000,
        "progress": progress,
        "worker": "127.0.0.1:8092" if progress is not None else None,
    }


def test_cluster_table_and_json(fake: FakeGateway) -> None:
    """`cluster` prints a table naming the auditor and the counts, and the API object
    unchanged with --json; the token is sent as a bearer token."""
    table = run("cluster")
    assert table.exit_code == 0, table.output
    assert "127.0.0.1:8091" in table.stdout and "enabled" in table.stdout
    assert "under-replicated ledgers" in table.stdout
    as_json = run("cluster", "--json")
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout) == {
        "auditor_elected": True,
        "auditor_id": "127.0.0.1:8091",
        "replication_enabled": True,
        "under_replicated_ledgers": 0,
        "bookies": {"writable": 1, "readonly": 0, "unavailable": 1},
    }
    assert fake.tokens == {f"Bearer {TOKEN}"}


def test_bookies_table_and_json(fake: FakeGateway) -> None:
    """`bookies` shows each bookie's state and free disk (dashes for a down one);
    --json is the API's listing."""
    table = run("bookies")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    alpha = next(line for line in lines if ALPHA in line)
    beta = next(line for line in lines if BETA in line)
    assert "writable" in alpha and "3.0 GiB" in alpha and "30.0" in alpha
    assert "rack-1" in alpha and "rack-2" in beta
    assert "down" in beta and "-" in beta
    doc = json.loads(run("bookies", "--json").stdout)
    assert [b["id"] for b in doc["bookies"]] == [ALPHA, BETA]
    assert doc["bookies"][1]["state"] == "down" and doc["bookies"][1]["ledgers"] is None


def test_under_replicated_pages_and_progress(fake: FakeGateway) -> None:
    """`under-replicated` shows missing bookies and progress; --limit gives one page and
    says how to go on, --all follows every page, --json prints the rows and next."""
    progress = {"fragments_done": 1, "fragments_total": 2, "entries_copied": 40}
    fake.marks = [_mark(1), _mark(5, {**progress, "bytes_copied": 2048}), _mark(9)]
    page = run("under-replicated", "--limit", "2")
    assert page.exit_code == 0, page.output
    assert (
        "1/2 fragments" in page.stdout
        and "2.0 KiB" in page.stdout
        and "127.0.0.1:8092" in page.stdout
    )
    assert "more after 5" in page.stderr
    every = json.loads(run("under-replicated", "--limit", "2", "--all", "--json").stdout)
    assert [m["ledger_id"] for m in every["ledgers"]] == [1, 5, 9] and every["next"] is None
    assert ("GET", "/v1/admin/under-replicated?limit=2&after=5") in fake.calls
    fake.marks = []
    empty = run("under-replicated")
    assert empty.exit_code == 0 and "no under-replicated ledgers" in empty.stderr


def test_audit_and_replication_switch(fake: FakeGateway) -> None:
    """`audit` asks once and names the auditor; `replication disable|enable` flip the
    switch and print what they did."""
    audit = run("audit")
    assert audit.exit_code == 0 and fake.audits == 1 and "127.0.0.1:8091" in audit.stdout
    fake.auditor = None
    assert "no auditor is elected" in run("audit").stdout
    off = run("replication", "disable")
    assert off.exit_code == 0 and "replication disabled" in off.stdout and fake.enabled is False
    on = json.loads(run("replication", "enable", "--json").stdout)
    assert on["replication_enabled"] is True and fake.enabled is True


def test_decommission_unknown_bookie_is_a_clear_error(fake: FakeGateway) -> None:
    """An unknown bookie: one line `quire: error: bookie_not_found: ...`, exit 6."""
    result = run("decommission", "10.0.0.1:1")
    assert result.exit_code == 6
    assert "quire: error: bookie_not_found" in result.stderr
    assert "Traceback" not in result.output


def test_decommission_without_wait_prints_the_state(fake: FakeGateway) -> None:
    """Without --wait, decommission calls once and prints the new state."""
    result = run("decommission", ALPHA)
    assert result.exit_code == 0, result.output
    assert f"bookie {ALPHA}: decommissioning" in result.stdout
    assert fake.calls == [("POST", f"/v1/admin/bookies/{ALPHA}/decommission")]


def test_decommission_wait_shows_progress_until_decommissioned(fake: FakeGateway) -> None:
    """--wait polls until the bookie is decommissioned, printing ledgers left and MB
    copied as they change, then exits 0."""
    fake.left = [3, 2, 0]
    fake.decommissioned_after_polls = 3
    fake.marks = [_mark(4, {"bytes_copied": 2_500_000})]
    result = run("decommission", BETA, "--wait", "--interval", "0.1", "--timeout", "30")
    assert result.exit_code == 0, result.output
    assert "3 ledgers left" in result.stderr and "0 ledgers left" in result.stderr
    assert "2.5 MB copied" in result.stderr
    assert f"decommission of {BETA}: done" in result.stdout
    assert fake.states[BETA] == "decommissioned"


def test_wait_replicated_times_out_with_its_exit_code(fake: FakeGateway) -> None:
    """wait-replicated exits 11 with a clear line when the cluster is not whole by the
    deadline, and warns once that replication is disabled, however many polls fit before
    the deadline. (The polls up to the deadline, on a fake clock:
    test_admin_wait.py's ``test_wait_until_gives_up_at_the_deadline``. Counting them
    here depended on how fast this machine made the first: on a loaded CI machine it
    took the whole 0.3 s.)"""
    fake.left = [4]
    fake.enabled = False
    result = run("wait-replicated", "--interval", "0.1", "--timeout", "0.3")
    assert result.exit_code == cli_admin.EXIT_WAIT_TIMEOUT, result.output
    assert "timeout" in result.stderr and "not done after 0.3 s" in result.stderr
    assert result.stderr.count("replication is disabled") == 1
    assert fake.polls >= 1


def test_wait_replicated_returns_at_once_when_whole(fake: FakeGateway) -> None:
    """Nothing under-replicated: one poll, exit 0."""
    result = run("wait-replicated", "--timeout", "5")
    assert result.exit_code == 0, result.output
    assert "re-replication: done" in result.stdout and fake.polls == 1


def test_ctrl_c_during_a_wait_exits_130_without_a_traceback(
    fake: FakeGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while waiting ends the command cleanly with 130."""
    fake.left = [2]

    def interrupted(*_args: object, **_kwargs: object) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_admin, "wait_until", interrupted)
    result = run("wait-replicated")
    assert result.exit_code == cli_admin.EXIT_INTERRUPTED
    assert "interrupted" in result.stderr and "Traceback" not in result.output


def test_transient_gateway_errors_do_not_end_a_wait(fake: FakeGateway) -> None:
    """A 503 during a wait is reported and retried; the wait ends when the cluster is
    whole."""
    fake.left = [1, 0]
    original = fake.handle
    failures = [1]

    def flaky(request: httpx.Request) -> httpx.Response:
        if failures and request.url.path == "/v1/admin/cluster" and fake.polls == 1:
            failures.pop()
            return httpx.Response(503, json={"error": "unavailable", "message": "blip"})
        return original(request)

    fake.handle = flaky  # type: ignore[method-assign]
    result = run("wait-replicated", "--interval", "0.1", "--timeout", "30")
    assert result.exit_code == 0, result.output
    assert "unavailable: blip; retrying" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["under-replicated", "--limit", "0"],
        ["under-replicated", "--limit", "1001"],
        ["wait-replicated", "--interval", "0"],
        ["wait-replicated", "--timeout", "-1"],
        ["decommission"],
        ["replication", "toggle"],
    ],
)
def test_bad_usage_exits_2_before_any_call(fake: FakeGateway, args: list[str]) -> None:
    """Impossible options are refused by the parser; the gateway is never called."""
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert fake.calls == []


def test_unreachable_gateway_is_exit_3() -> None:
    """No gateway at the URL: one error line naming it, exit 3."""
    result = CliRunner().invoke(app, ["--gateway", "http://127.0.0.1:9", "admin", "cluster"])
    assert result.exit_code == 3
    assert "gateway_unreachable" in result.stderr and "127.0.0.1:9" in result.stderr


def test_progress_bar_on_a_terminal(fake: FakeGateway, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the wait draws a rich progress bar with ledgers left, MB copied and
    the rates, and ends complete."""
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=160, color_system=None)
    monkeypatch.setattr(cli_admin, "err", terminal)
    fake.left = [2, 1, 0]
    fake.marks = [_mark(4, {"bytes_copied": 3_000_000})]
    result = run("wait-replicated", "--interval", "0.1", "--timeout", "30")
    assert result.exit_code == 0, result.output
    text = screen.getvalue()
    assert "re-replication" in text and "ledgers/min" in text
    assert "0 left, 3.0 MB" in text and "re-replication: done" in result.stdout


def test_quiet_and_json_waits_print_no_progress(fake: FakeGateway) -> None:
    """--quiet keeps stderr free of progress; decommission --json --wait prints the one
    JSON object on stdout and nothing else, and exits 0 once decommissioned."""
    fake.left = [2, 0]
    quiet = run("wait-replicated", "--quiet", "--interval", "0.1", "--timeout", "30")
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert quiet.stdout == "re-replication: done\n"
    fake.polls = 0
    fake.left = [3, 0]
    fake.decommissioned_after_polls = 2
    result = run("decommission", BETA, "--wait", "--json", "--interval", "0.1", "--timeout", "30")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert json.loads(result.stdout)["state"] == "decommissioning"
    assert fake.states[BETA] == "decommissioned"


def test_placement_lists_the_misplaced_ledgers(fake: FakeGateway) -> None:
    """`placement` shows the auditor's report (docs/api.md GET /v1/admin/placement): the
    counts and racks in the title, each ledger's fragments and whether it is movable;
    --json is the API's object; a mark asking for a move says so."""
    table = run("placement")
    assert table.exit_code == 0, table.output
    assert "2 ledger(s) on too few racks, 1 movable" in table.stdout
    rows = [line.strip("│ ") for line in table.stdout.splitlines()]
    assert "0, 50" in next(line for line in rows if line.startswith("4 "))
    assert "no" in next(line for line in rows if line.startswith("8 "))
    assert json.loads(run("placement", "--json").stdout) == PLACEMENT
    fake.marks = [{**_mark(3), "missing_bookies": [], "misplaced": True}]
    assert "move" in run("under-replicated").stdout
