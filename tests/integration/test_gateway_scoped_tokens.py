"""Scoped tokens on real processes (docs/api.md "Scoped tokens"): two gateways of the
standard cluster started with a token file, one serving adds and appends on its fast
path and one with --no-fast-path, so both paths are held to the same rules; the
WebSocket streams; the CLI's answer to a 403; the file changed while the gateways run;
and no token in their log files."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.http.scopes import token_digest
from gateway.limits import TOKEN_FILE_POLL_S
from tests.harness import wait_for
from tests.integration.gateway_support import Gateway, assert_error
from tests.integration.stream_support import Stream
from tests.integration.test_cli_ledger import invoke
from tests.shared import StandardCluster, unique_name

WRITER = "orders-writer-token-5d0c1e7a9b"
READER = "reader-token-0b8f3c61d2"
ADMIN = "admin-token-93ae17f0c4"
NEWCOMER = "newcomer-token-41c9d02b7e"
TOKENS = (WRITER, READER, ADMIN, NEWCOMER)
FORBIDDEN_EXIT = 14  # services/cli/client.py EXIT_CODES


def token_file(*tokens: tuple[str, str, str, str]) -> str:
    """A token file of (name, token, scope, cover) rows; cover is TOML for the keys."""
    return "".join(
        f'[[token]]\nname = "{name}"\nsha256 = "{token_digest(token)}"\nscope = "{scope}"\n'
        f"{cover}\n\n"
        for name, token, scope, cover in tokens
    )


EVERYTHING = 'ledgers = "*"\nlogs = "*"'
FIRST = token_file(
    ("orders-writer", WRITER, "write", 'logs = ["orders-*"]'),
    ("reader", READER, "read", EVERYTHING),
    ("admin", ADMIN, "admin", EVERYTHING),
)


def replace_file(path: Path, text: str) -> None:
    """Write a new version of the file whole, as an operator should (write, rename): the
    gateway never reads half of it."""
    new = path.with_suffix(".new")
    new.write_text(text)
    os.replace(new, path)


@dataclass
class Env:
    path: Path
    fast: Gateway  # the admin token; fast path on
    routed: Gateway  # the admin token; --no-fast-path

    def as_(self, gw: Gateway, token: str | None) -> Gateway:
        return Gateway(gw.proc, token=token)


@pytest.fixture(scope="module")
def env(shared_cluster: StandardCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    path = tmp_path_factory.mktemp("tokens") / "tokens.toml"
    path.write_text(FIRST)
    flags = ["--token-file", str(path), "--log-level", "debug"]
    fast = shared_cluster.gateway(flags, token=ADMIN)
    routed = shared_cluster.gateway([*flags, "--no-fast-path"], token=ADMIN)
    yield Env(path, fast, routed)


def _forbidden(r, lacking: str) -> None:  # type: ignore[no-untyped-def]
    assert_error(r, 403, "forbidden")
    message = r.json()["message"]
    assert lacking in message, message
    assert not any(token in message for token in TOKENS)


@pytest.mark.parametrize("path_kind", ["fast", "routed"])
def test_write_token_writes_its_logs_only(env: Env, path_kind: str) -> None:
    """A write token for orders-* creates orders-... logs and appends to them (fast path
    and routes alike); it is 403 forbidden on another log, on deleting and truncating its
    own, on creating a ledger and on the Admin API, and those calls change nothing."""
    gw = env.fast if path_kind == "fast" else env.routed
    writer = env.as_(gw, WRITER)
    orders, billing = unique_name("orders"), unique_name("billing")
    assert writer.request("PUT", f"/v1/logs/{orders}").status_code == 201
    assert writer.request("POST", f"/v1/logs/{orders}/writer").status_code == 200
    r = writer.request("POST", f"/v1/logs/{orders}/records", content=b"one")
    assert r.status_code == 200, r.text
    r = writer.request("POST", f"/v1/logs/{orders}/records", json={"entries": ["dHdv"]})
    assert r.status_code == 200, r.text

    assert gw.request("PUT", f"/v1/logs/{billing}").status_code == 201
    assert gw.request("POST", f"/v1/logs/{billing}/writer").status_code == 200
    for method, path, lacking in (
        ("PUT", f"/v1/logs/{billing}", f"write scope on log '{billing}'"),
        ("POST", f"/v1/logs/{billing}/records", f"write scope on log '{billing}'"),
        ("GET", f"/v1/logs/{billing}/records", f"read scope on log '{billing}'"),
        ("DELETE", f"/v1/logs/{orders}", f"admin scope on log '{orders}'"),
        ("POST", f"/v1/logs/{orders}/truncate?before=0:0", "admin scope"),
        ("POST", "/v1/ledgers", "write scope on every ledger"),
        ("GET", "/v1/admin/cluster", "read scope on the cluster"),
        ("POST", "/v1/admin/audit", "admin scope on the cluster"),
    ):
        _forbidden(writer.request(method, path, content=b"x"), lacking)
    assert gw.request("GET", f"/v1/logs/{billing}/records").json()["records"] == []
    records = gw.request("GET", f"/v1/logs/{orders}/records").json()["records"]
    assert [r["data"] for r in records] == ["b25l", "dHdv"]


def test_write_token_streams_to_its_logs_only(env: Env) -> None:
    """The WebSocket stream is judged by the same token: appending to orders-... works
    (token in the header or in the auth message); to another log it is refused with
    forbidden and 4403 before any record is taken."""
    gw = env.fast
    orders, billing = unique_name("orders"), unique_name("billing")
    for name in (orders, billing):
        assert gw.request("PUT", f"/v1/logs/{name}").status_code == 201
        assert gw.request("POST", f"/v1/logs/{name}/writer").status_code == 200
    by_header = Stream.open(gw.url, f"/v1/logs/{orders}/stream", token=WRITER)
    assert by_header.send_all([b"h"]) and by_header.end() == 1000
    by_message = Stream.open(gw.url, f"/v1/logs/{orders}/stream", auth_message={"token": WRITER})
    assert by_message.send_all([b"m"]) and by_message.end() == 1000
    for opened in (
        Stream.open(gw.url, f"/v1/logs/{billing}/stream", token=WRITER, expect_credits=False),
        Stream.open(
            gw.url,
            f"/v1/logs/{billing}/stream",
            auth_message={"token": WRITER},
            expect_credits=False,
        ),
        Stream.open(gw.url, f"/v1/logs/{orders}/stream", token=READER, expect_credits=False),
    ):
        assert opened.wait_closed() == 4403
        assert opened.error is not None and opened.error["error"] == "forbidden"
    assert len(gw.request("GET", f"/v1/logs/{orders}/records").json()["records"]) == 2
    assert gw.request("GET", f"/v1/logs/{billing}/records").json()["records"] == []


def test_read_token_reads_and_cannot_write(env: Env) -> None:
    """A read token over everything reads ledgers, logs and the Admin API, and every
    write, delete and admin action is 403 forbidden; a missing or unknown token is 401."""
    gw = env.fast
    lid = gw.create()["ledger_id"]
    gw.add(lid, b"zero")
    name = unique_name("orders")
    assert gw.request("PUT", f"/v1/logs/{name}").status_code == 201
    reader = env.as_(gw, READER)
    assert reader.entry(lid, 0) == b"zero"
    assert reader.request("GET", f"/v1/logs/{name}").status_code == 200
    assert reader.request("GET", "/v1/logs", params={"prefix": "orders-"}).status_code == 200
    assert reader.request("GET", "/v1/admin/cluster").status_code == 200
    for method, path in (
        ("POST", f"/v1/ledgers/{lid}/entries"),
        ("POST", f"/v1/ledgers/{lid}/close"),
        ("DELETE", f"/v1/ledgers/{lid}"),
        ("POST", "/v1/ledgers"),
        ("POST", f"/v1/logs/{name}/writer"),
        ("POST", "/v1/admin/replication/disable"),
    ):
        assert_error(reader.request(method, path, content=b"x"), 403, "forbidden")
    for token in (None, "not-a-token", token_digest(READER)):
        r = env.as_(gw, token).request("GET", f"/v1/ledgers/{lid}")
        assert_error(r, 401, "unauthorized")
    assert gw.lac(lid) == 0 and gw.metadata(lid)["state"] == "OPEN"


def test_admin_token_does_everything(env: Env) -> None:
    """An admin token over everything creates, writes, deletes and acts on the cluster."""
    admin = env.as_(env.routed, ADMIN)
    lid = admin.create()["ledger_id"]
    assert admin.add(lid, b"a")["entry_id"] == 0
    assert admin.request("DELETE", f"/v1/ledgers/{lid}").status_code == 204
    name = unique_name("billing")
    assert admin.request("PUT", f"/v1/logs/{name}").status_code == 201
    assert admin.request("DELETE", f"/v1/logs/{name}").status_code == 204
    assert admin.request("POST", "/v1/admin/audit").status_code == 202


def test_cli_reports_a_403_in_one_line(env: Env) -> None:
    """`quire --token T` with a token whose scope is short: one line `forbidden: ...`
    naming the missing scope, exit 14, and never the token."""
    name = unique_name("orders")
    assert env.fast.request("PUT", f"/v1/logs/{name}").status_code == 201
    # In this process (the console script of a worktree's shared venv runs the main
    # checkout's code); tests/integration/test_cli_ledger.py runs the script itself.
    result = invoke("--token", READER, "log", "append", name, "x", gateway=env.fast.url)
    assert result.exit_code == FORBIDDEN_EXIT, (result.exit_code, result.stderr)
    assert result.stderr.startswith("quire: error: forbidden: "), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "write scope on log" in result.stderr and READER not in result.stderr


def test_token_file_changes_take_effect_without_a_restart(env: Env) -> None:
    """Docs/api.md "Scoped tokens", reload: a new version of the file is in force within
    the poll interval (a token added works, a token removed is 401); a version that
    cannot be used keeps the tokens in force and logs one line; a change the poll cannot
    see (same size, inode and modification time) is read on SIGHUP."""
    gws = (env.fast, env.routed)
    pids = [gw.proc.pid for gw in gws]
    assert all(pids)

    def status(gw: Gateway, token: str) -> int:
        return env.as_(gw, token).request("GET", "/v1/logs").status_code

    replace_file(
        env.path,
        token_file(
            ("admin", ADMIN, "admin", EVERYTHING),
            ("newcomer", NEWCOMER, "read", EVERYTHING),
        ),
    )
    for gw in gws:
        wait_for(lambda gw=gw: status(gw, NEWCOMER) == 200, 10, "the new token in force")
        assert status(gw, READER) == 401
    replace_file(env.path, "[[token]]\nname = 'broken'\n")
    for gw in gws:
        wait_for(lambda gw=gw: _log_lines(gw, "not reloaded"), 10, "the refused version logged")
    # Logged once, not on every poll: the count stays one for two more poll intervals
    # (an observation of an absence, not a synchronisation).
    observe_until = time.monotonic() + 2 * TOKEN_FILE_POLL_S + 0.5
    while time.monotonic() < observe_until:
        for gw in gws:
            lines = _log_lines(gw, "not reloaded")
            assert len(lines) == 1 and "the 2 tokens in force stay" in lines[0], lines
        time.sleep(0.1)
    for gw in gws:
        assert status(gw, NEWCOMER) == 200 and status(gw, ADMIN) == 200

    # Same size and modification time, written in place: only SIGHUP reads it.
    replace_file(env.path, FIRST)
    for gw in gws:
        wait_for(lambda gw=gw: status(gw, READER) == 200, 10, "the first file back")
    stat = env.path.stat()
    swapped = FIRST.replace(token_digest(READER), token_digest(NEWCOMER)).encode()
    assert len(swapped) == stat.st_size
    # The poll compares (mtime, size, inode): the write in place changes the mtime until
    # the utime puts it back. Nothing makes the two atomic, so they are done right after
    # a reload on SIGHUP, which restarts each gateway's poll interval (token_file.py
    # watch): the next poll is a full interval away from the two system calls.
    reloads = [_reloads(gw) for gw in gws]
    for gw in gws:
        gw.proc.signal(signal.SIGHUP)
    for gw, before in zip(gws, reloads, strict=True):
        wait_for(
            lambda gw=gw, before=before: _reloads(gw) > before,
            10,
            "the reload on SIGHUP",
        )
    fd = os.open(env.path, os.O_WRONLY)
    try:
        os.pwrite(fd, swapped, 0)
        os.utime(fd, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    finally:
        os.close(fd)
    after = env.path.stat()
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (
        stat.st_mtime_ns,
        stat.st_size,
        stat.st_ino,
    )
    # The poll saw no change: READER stays in force for two more poll intervals.
    observe_until = time.monotonic() + 2 * TOKEN_FILE_POLL_S + 0.5
    while time.monotonic() < observe_until:
        assert status(env.fast, READER) == 200
        time.sleep(0.1)
    for gw in gws:
        gw.proc.signal(signal.SIGHUP)
        wait_for(lambda gw=gw: status(gw, NEWCOMER) == 200, 10, "the file read on SIGHUP")
        assert status(gw, READER) == 401
        assert gw.request("GET", "/health").status_code == 200
    replace_file(env.path, FIRST)
    for gw in gws:
        wait_for(lambda gw=gw: status(gw, READER) == 200, 10, "the first file back")


def _log_lines(gw: Gateway, text: str) -> list[str]:
    """The lines of the gateway's log holding ``text``."""
    return [line for line in Path(gw.proc.log_path).read_text().splitlines() if text in line]


def _reloads(gw: Gateway) -> int:
    """How many times the gateway logged a successful reload of the token file."""
    return sum("not reloaded" not in line for line in _log_lines(gw, "reloaded: "))


def test_no_token_appears_in_logs_metrics_or_the_openapi_document(env: Env) -> None:
    """After the calls above (debug access lines included), neither gateway's log file,
    /metrics nor /openapi.json holds any token or its hash."""
    for gw in (env.fast, env.routed):
        texts = [
            Path(gw.proc.log_path).read_text(errors="replace"),
            gw.request("GET", "/metrics").text,
            gw.request("GET", "/openapi.json").text,
        ]
        assert '"status": 403' in texts[0]  # the log has the access lines of the calls
        for token in TOKENS:
            for text in texts:
                assert token not in text and token_digest(token) not in text
