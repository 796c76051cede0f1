"""Listings and progress of `quire` without a gateway (an httpx mock transport): a
listing is lines when piped, a table on a terminal or with --long, one JSON object
with --json (--long adds "details"); progress bars are drawn only when stderr is a
terminal and never with --quiet, and a read into a file draws one there."""

from __future__ import annotations

import base64
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner

import services.cli.ledger as cli_ledger
import services.cli.log as cli_log
from services.cli import listing, progress
from services.cli.app import app
from services.cli.client import GatewayClient
from services.cli.progress import AppendProgress, ReadProgress

LEDGER_IDS = [3, 5, 8]


def _ledger(ledger_id: int) -> dict[str, Any]:
    return {"ledger_id": ledger_id, "state": "CLOSED", "ensemble_size": 3, "write_quorum": 2,
            "ack_quorum": 2, "digest": "crc32c", "last_entry_id": 9, "length": 4096,
            "fragments": [{"first_entry_id": 0, "bookies": ["a", "b", "c"]}],
            "metadata": {}, "created_at": 1_700_000_000_000}  # fmt: skip


def handle(request: httpx.Request) -> httpx.Response:
    path = request.url.path
    if path == "/v1/ledgers":
        return httpx.Response(200, json={"ledgers": LEDGER_IDS, "next": None})
    if path == "/v1/ledgers/5":  # deleted between the listing and its details
        return httpx.Response(404, json={"error": "ledger_not_found", "message": "5"})
    if path.startswith("/v1/ledgers/") and path.endswith("/entries"):
        lines = [json.dumps({"entry_id": i, "data": base64.b64encode(b"e%d" % i).decode()})
                 for i in range(10)]  # fmt: skip
        return httpx.Response(200, text="\n".join(lines) + "\n")
    if path.startswith("/v1/ledgers/"):
        return httpx.Response(200, json=_ledger(int(path.rsplit("/", 1)[1])))
    if path == "/v1/logs":
        return httpx.Response(200, json={"logs": ["orders"], "next": None})
    if path == "/v1/logs/orders":
        writer = {"gateway": "127.0.0.1:8080", "epoch": 2}
        return httpx.Response(200, json={"name": "orders", "ledgers": [1, 2, 3, 4],
                                         "writer": writer})  # fmt: skip
    return httpx.Response(404, json={"error": "not_found", "message": path})


@pytest.fixture(autouse=True)
def gateway(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def client(ctx: Any, password: str | None = None) -> GatewayClient:
        transport = httpx.MockTransport(handle)
        return GatewayClient("http://gw.test", None, password, transport=transport)

    monkeypatch.setattr(cli_ledger, "_client", client)
    monkeypatch.setattr(cli_log, "_client", client)
    yield


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """stderr is a terminal (a rich console that says so, drawing into a buffer)."""
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, color_system=None)
    monkeypatch.setattr(progress, "err", console)
    return screen


def test_listing_piped_is_one_item_per_line() -> None:
    result = CliRunner().invoke(app, ["ledger", "list"])
    assert result.exit_code == 0 and result.stdout == "3\n5\n8\n"


def test_listing_on_a_terminal_is_a_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "stdout_is_terminal", lambda: True)
    result = CliRunner().invoke(app, ["ledger", "list"])
    assert result.exit_code == 0
    assert "Ledgers" in result.stdout and "┃ ledger" in result.stdout
    assert all(str(i) in result.stdout for i in LEDGER_IDS)


def test_long_listing_has_each_ledgers_details_and_survives_a_deleted_one() -> None:
    result = CliRunner().invoke(app, ["ledger", "list", "--long"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "CLOSED" in out and "3/2/2" in out and "4.0 KiB" in out and "2023-11-14" in out
    assert "deleted" in out  # ledger 5


def test_long_json_adds_details_in_listing_order() -> None:
    plain = json.loads(CliRunner().invoke(app, ["ledger", "list", "--json"]).stdout)
    assert plain == {"ledgers": LEDGER_IDS, "next": None}
    long = json.loads(CliRunner().invoke(app, ["ledger", "list", "--json", "-l"]).stdout)
    assert long["ledgers"] == LEDGER_IDS and long["next"] is None
    assert [d and d["ledger_id"] for d in long["details"]] == [3, None, 8]


def test_log_long_listing_shows_writer_and_last_ledgers() -> None:
    result = CliRunner().invoke(app, ["log", "list", "--long"])
    assert result.exit_code == 0, result.output
    assert "orders" in result.stdout and "127.0.0.1:8080 (epoch 2)" in result.stdout
    assert "2, 3, 4" in result.stdout
    doc = json.loads(CliRunner().invoke(app, ["log", "list", "--json", "--long"]).stdout)
    assert doc["details"][0]["writer"]["epoch"] == 2


def test_read_into_a_file_draws_a_bar_on_a_terminal(tmp_path: Path, terminal: io.StringIO) -> None:
    """--output writes the entries to the file; the bar (of the 10 entries a closed ledger
    with last entry 9 has) goes to the terminal, nothing to stdout."""
    out = tmp_path / "entries.txt"
    result = CliRunner().invoke(app, ["ledger", "read", "3", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text() == "".join(f"e{i}\n" for i in range(10))
    assert result.stdout == "" and "10/10" in terminal.getvalue()


def test_quiet_turns_the_bar_off_even_on_a_terminal(tmp_path: Path, terminal: io.StringIO) -> None:
    out = tmp_path / "entries.txt"
    result = CliRunner().invoke(app, ["ledger", "read", "3", "-o", str(out), "--quiet"])
    assert result.exit_code == 0 and out.read_text().count("\n") == 10
    assert terminal.getvalue() == ""


def test_no_bar_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    out = tmp_path / "entries.txt"
    result = CliRunner().invoke(app, ["ledger", "read", "3", "-o", str(out)])
    assert result.exit_code == 0 and result.stderr == "" and result.stdout == ""


def test_bars_are_off_when_not_wanted(terminal: io.StringIO) -> None:
    """The classes draw nothing when stderr is no terminal, with quiet, or when the
    results go to the same terminal; and they still count."""
    assert progress.progress_wanted() is True
    assert progress.progress_wanted(quiet=True) is False
    assert progress.progress_wanted(output_is_terminal=True) is False
    with AppendProgress(100, quiet=True) as bar:
        bar.advance(1, 10)
    with ReadProgress(False, None) as reading:
        reading.advance(5)
        reading.advance_many(2, 7)
    assert (reading.items, reading.bytes) == (3, 12)
    assert terminal.getvalue() == ""
    with AppendProgress(100) as bar:
        bar.advance(4, 100)
    assert "appending" in terminal.getvalue() and "4 entries" in terminal.getvalue()


def test_stdout_is_terminal_copes_with_a_replaced_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert progress.stdout_is_terminal() is False
