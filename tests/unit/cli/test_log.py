"""`quire log` without a gateway: names, positions and keys checked with the gateway's
rules before any call, appends sent in order with one Idempotency-Key per request,
reads paged until caught up, and `tail --follow` long-polling on `next` until Ctrl-C
(exit 0). The gateway is an httpx.MockTransport."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import pytest
from typer.testing import CliRunner

import services.cli.log as cli_log
from services.cli.app import app
from services.cli.client import GatewayClient
from services.cli.log_io import (
    LogAppender,
    PositionedRecord,
    page_json,
    position_text,
    read_records,
    render,
    request_key,
)
from services.errors import InvalidArgument, QuireError

Handler = Callable[[httpx.Request], httpx.Response]


def _client(handler: Handler) -> GatewayClient:
    return GatewayClient("http://gw.test:8080", transport=httpx.MockTransport(handler))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@contextmanager
def _gateway(monkeypatch: pytest.MonkeyPatch, handler: Handler) -> Iterator[None]:
    """Every `quire log` command of the block talks to ``handler``."""
    monkeypatch.setattr(cli_log, "_client", lambda ctx: _client(handler))
    yield


# -- arguments -----------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["log", "show", "bad/name"],
        ["log", "show", "x" * 201],
        ["log", "create", "ok", "--ensemble", "0"],
        ["log", "read", "ok", "--from", "1"],
        ["log", "read", "ok", "--from", "1:2:3"],
        ["log", "read", "ok", "--from", "-1:0"],
        ["log", "read", "ok", "--from", "a:b"],
        ["log", "read", "ok", "--from", "1:99999999999999999999"],
        ["log", "read", "ok", "--limit", "0"],
        ["log", "tail", "ok", "--from", "1:"],
        ["log", "tail", "ok", "--wait-ms", "30001"],
        ["log", "truncate", "ok"],
        ["log", "truncate", "ok", "--before", "x"],
        ["log", "append", "ok", "--key", ""],
        ["log", "append", "ok", "--key", "k" * 129],
        ["log", "append", "ok", "--key", "caf\u00e9", "x"],
        ["log", "append", "ok", "--batch", "10001"],
        ["log", "append", "ok", "x", "--file", "f"],
        ["log", "list", "--limit", "1001"],
        ["log", "delete", "-y", "ok", "bad name"],
    ],
)
def test_bad_usage_exits_2_before_any_call(args: list[str]) -> None:
    """Bad names, positions, keys and options are refused by the parser (exit 2) with the
    gateway's rules; the gateway, which does not exist here, is never called (exit 3)."""
    result = CliRunner().invoke(app, ["--gateway", "http://127.0.0.1:9", *args])
    assert result.exit_code == 2, result.output


def test_a_bad_position_names_the_form() -> None:
    """The message says what a position looks like and echoes what was given."""
    result = CliRunner().invoke(app, ["--gateway", "http://127.0.0.1:9", "log", "read", "ok",
                                      "--from", "7-3"])  # fmt: skip
    assert result.exit_code == 2
    assert "LID:EID" in result.output and "7-3" in result.output


def test_positions_in_either_api_form_print_as_text() -> None:
    """`"LID:EID"` and `{"ledger_id", "entry_id"}` answers both print `LID:EID`; a
    malformed one is an error, not a traceback."""
    assert position_text("4:9") == "4:9"
    assert position_text({"ledger_id": 4, "entry_id": 9}) == "4:9"
    with pytest.raises(QuireError):
        position_text({"ledger_id": -1, "entry_id": 0})


def test_request_keys_stay_the_same_across_runs_and_within_bounds() -> None:
    """The first request sends the key itself, the Nth after it KEY#N (the same on a
    re-run); a key that would grow past 128 characters is refused."""
    assert [request_key("k", i) for i in range(3)] == ["k", "k#1", "k#2"]
    assert request_key("k" * 128, 0) == "k" * 128
    with pytest.raises(InvalidArgument):
        request_key("k" * 127, 1)


# -- appending -----------------------------------------------------------------


def test_appender_sends_raw_singles_and_json_batches_with_one_key_each() -> None:
    """One record is a raw body, several a JSON batch of base64; each request carries
    its own Idempotency-Key; the summary spans every request."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.headers["content-type"] == "application/json":
            count = len(json.loads(request.content)["entries"])
            first = sum(1 for r in seen[:-1] for _ in _records(r))
            return httpx.Response(200, json={
                "first_position": {"ledger_id": 5, "entry_id": first},
                "last_position": {"ledger_id": 5, "entry_id": first + count - 1},
            })  # fmt: skip
        return httpx.Response(200, json={"position": "5:0"})

    with _client(handler) as client:
        appender = LogAppender(client, "events", key="job-1")
        appender.send([b"a"])
        appender.send([b"b", b"c"])
        appender.send([])  # nothing: no request
    assert [r.url.path for r in seen] == ["/v1/logs/events/records"] * 2
    assert seen[0].content == b"a"
    assert json.loads(seen[1].content) == {"entries": [_b64(b"b"), _b64(b"c")]}
    assert [r.headers["idempotency-key"] for r in seen] == ["job-1", "job-1#1"]
    assert appender.summary() == {"log": "events", "records": 3, "bytes": 3,
                                  "first_position": "5:0", "last_position": "5:2"}  # fmt: skip


def _records(request: httpx.Request) -> list[bytes]:
    if request.headers["content-type"] == "application/json":
        return [base64.b64decode(e) for e in json.loads(request.content)["entries"]]
    return [request.content]


def test_append_command_batches_stdin_lines_and_reports_what_was_acked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Lines of stdin go in batches of --batch, in order; when a request fails, the
    records acknowledged before are named on stderr and the exit code is the error's."""
    bodies: list[list[bytes]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if len(bodies) == 2:
            return httpx.Response(409, json={"error": "not_writer", "message": "lost it"})
        bodies.append(_records(request))
        n = sum(map(len, bodies))
        return httpx.Response(200, json={"first_position": f"1:{n - len(bodies[-1])}",
                                         "last_position": f"1:{n - 1}"})  # fmt: skip

    with _gateway(monkeypatch, handler):
        result = CliRunner().invoke(app, ["log", "append", "ev", "--batch", "2"],
                                    input="a\nb\nc\nd\ne\n")  # fmt: skip
    assert bodies == [[b"a", b"b"], [b"c", b"d"]]
    assert result.exit_code == 7
    assert "not_writer: lost it" in result.output
    assert "4 records were acknowledged before the error (positions 1:0..1:3)" in result.output


# -- reading -------------------------------------------------------------------


def _pages(*pages: dict) -> tuple[Handler, list[httpx.Request]]:
    """A gateway that answers the reads with ``pages`` in turn."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=pages[len(seen) - 1])

    return handler, seen


def _page(records: list[tuple[str, bytes]], following: str, caught_up: bool) -> dict:
    return {
        "records": [{"position": {"ledger_id": int(p.split(":")[0]),
                                  "entry_id": int(p.split(":")[1])}, "data": _b64(d),
                     "time": 1_000 + i}
                    for i, (p, d) in enumerate(records)],
        "next": following,
        "caught_up": caught_up,
    }  # fmt: skip


def test_read_pages_until_caught_up_from_each_next() -> None:
    """Each page is asked for from the previous one's `next`; reading stops once a
    page is caught up."""
    handler, seen = _pages(
        _page([("1:0", b"a"), ("1:1", b"b")], "2:0", False),
        _page([("2:0", b"c")], "2:1", True),
    )
    with _client(handler) as client:
        got = list(read_records(client, "ev", None, None))
    assert [r.data for p in got for r in p.records] == [b"a", b"b", b"c"]
    assert "from" not in seen[0].url.params and seen[1].url.params["from"] == "2:0"
    assert got[-1].next == "2:1" and got[-1].caught_up


def test_read_stops_at_the_limit() -> None:
    """--limit N asks for at most the records still wanted and stops once it has them."""
    handler, seen = _pages(
        _page([("1:0", b"a"), ("1:1", b"b")], "1:2", False),
        _page([("1:2", b"c")], "1:3", False),
    )
    with _client(handler) as client:
        got = list(read_records(client, "ev", "1:0", 3))
    assert [r.url.params["limit"] for r in seen] == ["3", "1"]
    assert sum(len(p.records) for p in got) == 3


def test_render_and_page_json() -> None:
    """A record is a text line (bytes that are not UTF-8 escaped), optionally after its
    position; JSON carries base64, positions as LID:EID and the record's time."""
    record = PositionedRecord("3:4", b"hi \xff", 7)
    assert render(record, False, False) == b"hi \\xff\n"
    assert render(record, False, True) == b"3:4\thi \\xff\n"
    assert json.loads(render(record, True, False)) == {
        "position": "3:4", "data": _b64(b"hi \xff"), "time": 7,
    }  # fmt: skip
    assert page_json([record], "3:5", True) == {
        "records": [{"position": "3:4", "data": _b64(b"hi \xff"), "time": 7}], "next": "3:5",
        "caught_up": True,
    }  # fmt: skip


def test_read_command_json_is_one_object(monkeypatch: pytest.MonkeyPatch) -> None:
    """`read --json` prints one object with every record and where to go on from."""
    handler, _ = _pages(_page([("1:0", b"a")], "1:1", True))
    with _gateway(monkeypatch, handler):
        result = CliRunner().invoke(app, ["log", "read", "ev", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "records": [{"position": "1:0", "data": _b64(b"a"), "time": 1_000}],
        "next": "1:1", "caught_up": True,
    }  # fmt: skip


def test_read_from_a_time_sends_from_time_once_then_goes_on_from_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`read --from-time T` (ms or RFC 3339) asks the first page with from_time=T (ms)
    and no from, then goes on from each page's next; `--since 10m` sends now - 10 min."""
    for given, expected in [("1795946400000", 1_795_946_400_000),
                            ("2026-11-29T10:00:00Z", 1_795_946_400_000)]:  # fmt: skip
        handler, seen = _pages(
            _page([("1:0", b"a")], "1:1", False), _page([("1:1", b"b")], "1:2", True)
        )
        with _gateway(monkeypatch, handler):
            result = CliRunner().invoke(app, ["log", "read", "ev", "--from-time", given])
        assert result.exit_code == 0, result.output
        assert result.stdout == "a\nb\n"
        assert seen[0].url.params.get("from_time") == str(expected)
        assert "from" not in seen[0].url.params
        assert seen[1].url.params["from"] == "1:1" and "from_time" not in seen[1].url.params
    handler, seen = _pages(_page([], "1:0", True))
    monkeypatch.setattr("services.cli.log.wall_ms", lambda: 1_000_000_000)
    with _gateway(monkeypatch, handler):
        result = CliRunner().invoke(app, ["log", "read", "ev", "--since", "10m"])
    assert result.exit_code == 0, result.output
    assert seen[0].url.params["from_time"] == str(1_000_000_000 - 600_000)


ONE_START = "give one of --from, --since, --from-time and --cursor"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "10m", "--from-time", "0"], ONE_START),
        (["--from", "1:0", "--since", "1h"], ONE_START),
        (["--from", "1:0", "--from-time", "5"], ONE_START),
        (["--cursor", "c", "--from", "1:0"], ONE_START),
        (["--cursor", "c", "--since", "1h"], ONE_START),
        (["--ack"], "--ack acknowledges to a --cursor"),
        (["--cursor", "a/b"], "invalid cursor name"),
        (["--since", "10 minutes"], "s, m, h or d"),
        (["--since", "-1m"], "s, m, h or d"),
        (["--from-time", "yesterday"], "RFC 3339"),
    ],
)
def test_read_start_options_are_exclusive_and_checked(
    monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    """--from, --since, --from-time and --cursor: at most one, each well formed (--ack
    only with --cursor), else exit 2 with one clear line and no call to the gateway."""
    handler, seen = _pages()
    with _gateway(monkeypatch, handler):
        result = CliRunner().invoke(app, ["log", "read", "ev", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert seen == []


def test_tail_follow_long_polls_on_next_and_exits_0_on_ctrl_c(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`tail -f` prints each page's records, asks again from its `next` with wait_ms
    (also after a caught-up page), and a Ctrl-C during a poll ends it with exit 0."""
    pages = [
        _page([("1:0", b"a")], "1:1", True),
        _page([("1:1", b"b")], "1:2", True),
    ]
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) > len(pages):
            raise KeyboardInterrupt
        return httpx.Response(200, json=pages[len(seen) - 1])

    with _gateway(monkeypatch, handler):
        result = CliRunner().invoke(app, ["log", "tail", "ev", "-f", "--wait-ms", "250"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "a\nb\n"
    assert [r.url.params.get("from") for r in seen] == [None, "1:1", "1:2"]
    assert all(r.url.params["wait_ms"] == "250" for r in seen)


def test_tail_without_follow_stops_when_caught_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --follow, tail reads until caught up, without waiting at the gateway."""
    handler, seen = _pages(
        _page([("1:0", b"a")], "1:1", False),
        _page([("1:1", b"b")], "1:2", True),
    )
    with _gateway(monkeypatch, handler):
        result = CliRunner().invoke(app, ["log", "tail", "ev", "--positions"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "1:0\ta\n1:1\tb\n"
    assert len(seen) == 2 and all("wait_ms" not in r.url.params for r in seen)


def test_list_follows_name_cursors(monkeypatch: pytest.MonkeyPatch) -> None:
    """`list --all` pages on the name in `next` until it is null."""
    handler, seen = _pages({"logs": ["a", "b"], "next": "b"}, {"logs": ["c"], "next": None})
    with _gateway(monkeypatch, handler):
        result = CliRunner().invoke(app, ["log", "list", "--all", "--limit", "2"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "a\nb\nc\n"
    assert seen[1].url.params["after"] == "b"
