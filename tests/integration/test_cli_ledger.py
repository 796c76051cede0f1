"""`quire ledger ...` against a real cluster (3 bookies and a gateway, shared by the
module's tests, which break nothing of it), run as the installed `quire` console script
in a subprocess, the way people run it: its exit codes, streams, stdin, terminal and
signals. Each test keeps its process-level calls real (stdin lines, raw bytes on stdout,
the WebSocket stream, an exit code and one-line stderr per kind of error, the gateway
and token from the environment); the rest of its calls run in-process through typer's
CliRunner (``here``: the same command, its stdout and stderr apart, its exit code; about
0.4 s of interpreter start-up and imports less per call), as do usage errors and
--help."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner, Result

from services.cli.app import app
from services.cluster.processes import ZooKeeperProcess, free_port_block
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Gateway,
    one_gateway,
    start_gateway,
    wait_writable,
)

QUIRE = Path(sys.executable).parent / "quire"
TIMEOUT_S = 120.0

# Exit codes of services/cli/client.py EXIT_CODES.
USAGE, UNREACHABLE, INVALID, UNAUTHORIZED, NOT_FOUND, CONFLICT = 2, 3, 4, 5, 6, 7


def quire(
    *args: str,
    gateway: str | None = None,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run the console script; stdout and stderr captured as bytes."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")}
    argv = [str(QUIRE), *(["--gateway", gateway] if gateway else []), *args]
    return subprocess.run(
        argv,
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env={**base, **(env or {})},
        timeout=TIMEOUT_S,
    )


def invoke(
    *args: str,
    gateway: str | None = None,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> Result:
    """Run the command in this process through typer's CliRunner, for usage errors and
    --help, where the process boundary shows nothing more (click 8.2+: stdout and stderr
    kept apart), and for ``here``; no QUIRE_* variable of the test run leaks in."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("QUIRE_")}
    argv = [*(["--gateway", gateway] if gateway else []), *args]
    return CliRunner().invoke(
        app, argv, prog_name="quire", env={**unset, **(env or {})}, input=stdin or b""
    )


def here(
    *args: str,
    gateway: str | None = None,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """``invoke`` as a ``CompletedProcess``, like ``quire``'s; an exception the command
    did not turn into an exit shows in its stderr."""
    result = invoke(*args, gateway=gateway, stdin=stdin, env=env)
    stderr = result.stderr_bytes
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += repr(result.exception).encode()
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout_bytes, stderr)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, (proc.returncode, proc.stderr.decode(errors="replace"))
    return proc.stdout.decode()


def error(proc: subprocess.CompletedProcess, exit_code: int, code: str) -> str:
    stderr = proc.stderr.decode(errors="replace")
    assert proc.returncode == exit_code, (proc.returncode, stderr, proc.stdout)
    assert f"error: {code}: " in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr  # one line, no traceback
    return stderr


@dataclass
class Module:
    cluster: Cluster
    gateway: Gateway


@pytest.fixture(scope="module")
def module(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Module]:  # type: ignore[no-untyped-def]
    """3 bookies and a gateway that can place an ensemble of 3, for the module's tests:
    each makes ledgers of its own, and none stops, pauses or reconfigures a process."""
    with one_gateway(zookeeper, tmp_path_factory.mktemp("cli-ledger")) as (cluster, _, gw):
        yield Module(cluster, gw)


@pytest.fixture
def gateway(module: Module) -> Gateway:
    return module.gateway


def test_round_trip(gateway: Gateway, tmp_path: Path) -> None:
    """create → append (arguments, a file, stdin lines in batches) → read in every
    format, byte-exact and in order → show/list → close → recover → delete."""
    url = gateway.url
    created = json.loads(
        ok(here("ledger", "create", "-e", "3", "-w", "2", "-a", "2", "--meta", "k=v", gateway=url))
    )
    lid = created["ledger_id"]
    assert created["state"] == "OPEN"
    assert (created["ensemble_size"], created["write_quorum"], created["ack_quorum"]) == (3, 2, 2)
    assert created["metadata"] == {"k": "v"}

    one = json.loads(ok(here("ledger", "append", str(lid), "hello", gateway=url)))
    assert one["entry_id"] == 0 and one["entries"] == 1 and one["last_add_confirmed"] >= 0
    two = json.loads(ok(here("ledger", "append", str(lid), "a", "b c", gateway=url)))
    assert (two["first_entry_id"], two["last_entry_id"], two["entries"]) == (1, 2, 2)

    blob = bytes(range(256)) * 40  # binary, not UTF-8
    (tmp_path / "blob").write_bytes(blob)
    three = json.loads(ok(here("ledger", "append", str(lid), "-f", str(tmp_path / "blob"),
                                gateway=url)))  # fmt: skip
    assert three["entry_id"] == 3 and three["bytes"] == len(blob)

    lines = b"".join(b"line %d\n" % i for i in range(25))
    many = json.loads(
        ok(quire("ledger", "append", str(lid), "--lines", "--batch", "10", gateway=url,
                 stdin=lines))
    )  # fmt: skip
    assert (many["first_entry_id"], many["last_entry_id"], many["entries"]) == (4, 28, 25)

    raw = quire("ledger", "read", str(lid), "--from", "3", "--to", "3", "--raw", gateway=url)
    assert raw.returncode == 0 and raw.stdout == blob, raw.stderr
    text = ok(here("ledger", "read", str(lid), "--from", "4", gateway=url))
    assert text.encode() == lines
    head = ok(here("ledger", "read", str(lid), "--to", "2", "--ids", gateway=url))
    assert head.splitlines() == ["0\thello", "1\ta", "2\tb c"]
    as_json = ok(here("ledger", "read", str(lid), "--format", "json", gateway=url))
    docs = [json.loads(line) for line in as_json.splitlines()]
    assert [d["entry_id"] for d in docs] == list(range(29))
    assert gateway.read_ndjson(lid) == [(d["entry_id"], base64.b64decode(d["data"])) for d in docs]
    b64 = ok(here("ledger", "read", str(lid), "--from", "0", "--to", "0", "--format", "base64",
                   gateway=url))  # fmt: skip
    assert b64 == "aGVsbG8=\n"

    shown = json.loads(ok(here("ledger", "show", str(lid), gateway=url)))
    assert shown["ledger_id"] == lid and shown["state"] == "OPEN"
    other = json.loads(ok(here("ledger", "create", "-e", "1", "-w", "1", "-a", "1",
                                gateway=url)))["ledger_id"]  # fmt: skip
    assert ok(here("ledger", "create", "-q", gateway=url)).strip().isdigit()
    listed = ok(here("ledger", "list", "--limit", "1", "--all", gateway=url)).split()
    assert [int(x) for x in listed] == sorted(int(x) for x in listed)
    assert {lid, other} <= {int(x) for x in listed}
    page = here("ledger", "list", "--limit", "1", gateway=url)
    assert len(ok(page).split()) == 1 and b"--all" in page.stderr
    assert json.loads(ok(here("ledger", "list", "--json", "--all", gateway=url)))["next"] is None

    closed = json.loads(ok(here("ledger", "close", str(lid), gateway=url)))
    assert closed["state"] == "CLOSED" and closed["last_entry_id"] == 28
    error(here("ledger", "append", str(lid), "late", gateway=url), CONFLICT, "ledger_closed")
    assert ok(here("ledger", "read", str(lid), "--from", "28", gateway=url)) == "line 24\n"

    recovered = json.loads(ok(here("ledger", "recover", str(other), gateway=url)))
    assert recovered["state"] == "CLOSED" and recovered["last_entry_id"] == -1

    refused = here("ledger", "delete", str(other), gateway=url)  # no terminal, no --yes
    assert refused.returncode != 0 and b"--yes" in refused.stderr
    ok(here("ledger", "show", str(other), gateway=url))
    assert ok(here("ledger", "delete", "--yes", str(other), gateway=url)).strip() == (
        f"deleted ledger {other}"
    )
    error(here("ledger", "show", str(other), gateway=url), NOT_FOUND, "ledger_not_found")


def test_password(gateway: Gateway, module: Module) -> None:
    """A ledger created with a password needs it (flag or QUIRE_LEDGER_PASSWORD) to
    append, read, close and delete; a missing or wrong one is 401 and changes nothing;
    show needs none. The password is never printed, nor logged by the gateway."""
    url, secret = gateway.url, "pa55-w0rd-never-shown"
    env = {"QUIRE_LEDGER_PASSWORD": secret}
    outputs: list[bytes] = []

    def run(*args: str, **kw) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
        proc = here(*args, gateway=url, **kw)
        outputs.extend((proc.stdout, proc.stderr))
        return proc

    lid = int(ok(run("ledger", "create", "-q", "--password", secret)))
    error(run("ledger", "append", str(lid), "x"), UNAUTHORIZED, "unauthorized")
    error(run("ledger", "append", str(lid), "x", "--password", "wrong"), UNAUTHORIZED,
          "unauthorized")  # fmt: skip
    assert json.loads(ok(run("ledger", "append", str(lid), "x", env=env)))["entry_id"] == 0
    assert (
        json.loads(ok(run("ledger", "append", str(lid), "y", "--password", secret)))["entry_id"]
        == 1
    )
    error(run("ledger", "read", str(lid)), UNAUTHORIZED, "unauthorized")
    assert ok(run("ledger", "read", str(lid), env=env)) == "x\ny\n"
    shown = json.loads(ok(run("ledger", "show", str(lid))))
    assert "password" not in shown and shown["ledger_id"] == lid
    error(run("ledger", "close", str(lid)), UNAUTHORIZED, "unauthorized")
    error(run("ledger", "delete", "--yes", str(lid)), UNAUTHORIZED, "unauthorized")
    assert json.loads(ok(run("ledger", "close", str(lid), env=env)))["last_entry_id"] == 1
    ok(run("ledger", "delete", "--yes", str(lid), env=env))
    error(run("ledger", "show", str(lid)), NOT_FOUND, "ledger_not_found")

    assert all(secret.encode() not in out for out in outputs)
    for proc in module.cluster.processes:
        assert secret not in Path(proc.log_path).read_text(errors="replace"), proc.name


def test_append_stream(gateway: Gateway, tmp_path: Path) -> None:
    """`ledger append --stream`: arguments and --lines over one WebSocket, the same
    summary as the REST append, the entries read back in order; a password ledger
    needs its password (a wrong one is 401 and stores nothing); once the ledger is
    recovered (fenced and closed by the recovery), a stream to it fails with
    ledger_fenced in one clear line and stores nothing."""
    url, secret = gateway.url, "stream-pa55"
    lid = int(ok(here("ledger", "create", "-q", "--password", secret, gateway=url)))
    run = lambda *a, **kw: here("ledger", "append", str(lid), "--stream", *a, gateway=url, **kw)  # noqa: E731
    error(run("x", "--password", "wrong"), UNAUTHORIZED, "unauthorized")
    one = json.loads(ok(run("first", "--password", secret)))
    assert one == {
        "ledger_id": lid, "entries": 1, "bytes": 5, "first_entry_id": 0, "last_entry_id": 0,
        "last_add_confirmed": one["last_add_confirmed"], "entry_id": 0,
    }  # fmt: skip
    lines = [f"line-{i}" for i in range(2_500)]
    source = tmp_path / "lines.txt"
    source.write_text("".join(f"{line}\n" for line in lines))
    summary = json.loads(
        ok(quire("ledger", "append", str(lid), "--stream", "--lines", "--file", str(source),
                 "-q", "--password", secret, gateway=url))
    )  # fmt: skip
    assert summary["entries"] == 2_500 and summary["first_entry_id"] == 1
    assert summary["last_entry_id"] == 2_500 and summary["last_add_confirmed"] == 2_500
    assert summary["bytes"] == sum(map(len, lines))
    env = {"QUIRE_LEDGER_PASSWORD": secret}
    read = ok(here("ledger", "read", str(lid), gateway=url, env=env)).splitlines()
    assert read == ["first", *lines]

    ok(here("ledger", "recover", str(lid), gateway=url, env=env))  # fences it
    error(run("late", "--password", secret), CONFLICT, "ledger_fenced")
    assert ok(here("ledger", "read", str(lid), gateway=url, env=env)).splitlines() == read


def test_errors(gateway: Gateway) -> None:
    """API errors print `quire: error: CODE: MESSAGE` on one stderr line and exit with
    the code of their class; an unreachable gateway names its URL; bad usage is 2."""
    url = gateway.url
    stderr = error(quire("ledger", "show", "987654", gateway=url), NOT_FOUND, "ledger_not_found")
    assert "987654" in stderr
    error(here("ledger", "read", "987654", gateway=url), NOT_FOUND, "ledger_not_found")
    error(here("ledger", "append", "987654", "x", gateway=url), NOT_FOUND, "ledger_not_found")
    error(here("ledger", "delete", "-y", "987654", gateway=url), NOT_FOUND, "ledger_not_found")
    error(quire("ledger", "create", "-e", "2", "-w", "3", gateway=url), INVALID, "invalid_argument")

    lid = int(ok(here("ledger", "create", "-q", gateway=url)))
    backwards = invoke("ledger", "read", str(lid), "--from", "5", "--to", "1", gateway=url)
    assert backwards.exit_code == USAGE and "--from" in backwards.stderr
    assert ok(here("ledger", "read", str(lid), gateway=url)) == ""  # empty, open

    dead = "http://127.0.0.1:9"  # discard port: nothing listens
    stderr = error(quire("ledger", "show", "1", gateway=dead), UNREACHABLE, "gateway_unreachable")
    assert dead in stderr
    env_url = quire("ledger", "show", "1", env={"QUIRE_GATEWAY": dead})
    assert env_url.returncode == UNREACHABLE and dead.encode() in env_url.stderr

    bad_meta = invoke("ledger", "create", "--meta", "novalue", gateway=url)
    assert bad_meta.exit_code == USAGE and "KEY=VALUE" in bad_meta.stderr
    for command in ("create", "append", "read", "close", "recover", "show", "list", "delete"):
        helped = invoke("ledger", command, "--help")
        assert helped.exit_code == 0, (helped.exit_code, helped.stderr)
        assert "Usage" in helped.stdout


def test_token(module: Module) -> None:
    """With a gateway run with --api-token, the commands need the global --token (or
    QUIRE_TOKEN): without it they exit 5 unauthorized, with it they work."""
    token = "t0ken-for-the-cli"
    gw = start_gateway(module.cluster, ["--api-token", token], token=token)
    try:
        wait_writable(gw, 3)
        error(quire("ledger", "create", gateway=gw.url), UNAUTHORIZED, "unauthorized")
        error(quire("--token", "nope", "ledger", "list", gateway=gw.url), UNAUTHORIZED,
              "unauthorized")  # fmt: skip
        lid = int(ok(here("--token", token, "ledger", "create", "-q", gateway=gw.url)))
        env = {"QUIRE_TOKEN": token}
        ok(quire("ledger", "append", str(lid), "tok", gateway=gw.url, env=env))
        assert ok(here("ledger", "read", str(lid), gateway=gw.url, env=env)) == "tok\n"
        error(here("ledger", "read", str(lid), gateway=gw.url), UNAUTHORIZED, "unauthorized")
    finally:
        gw.close_client()
        gw.proc.stop()


def test_quire_up_gateway_serves_the_ledger_commands(
    zookeeper: ZooKeeperProcess, zk_root: str, tmp_path: Path
) -> None:
    """`quire up` starts a gateway on --gateway-port, and `quire ledger` works against
    it end to end; SIGTERM then stops everything it started."""
    port = free_port_block(4)
    up = subprocess.Popen(
        [str(QUIRE), "up", "--zk", zookeeper.connect_string, "--zk-root", zk_root,
         "--data-dir", str(tmp_path / "data"), "--gateway-port", str(port),
         "--without", "auditor", "--without", "replicator"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")},
        start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(up.stdout), daemon=True)
    reader.start()
    children: set[int] = set()
    try:

        def ready() -> bool:
            try:
                children.update(c.pid for c in psutil.Process(up.pid).children(recursive=True))
            except psutil.Error:
                pass
            assert up.poll() is None, "".join(lines)
            return any("quire up: ready" in line for line in lines)

        wait_for(ready, 150.0, "quire up to be ready")
        url = f"http://127.0.0.1:{port}"
        assert any(line.startswith("gateway") and url in line for line in lines), lines
        lid = int(ok(quire("ledger", "create", "-q", gateway=url)))
        ok(quire("ledger", "append", str(lid), "--lines", gateway=url, stdin=b"one\ntwo\n"))
        assert ok(quire("ledger", "read", str(lid), gateway=url)) == "one\ntwo\n"
        assert json.loads(ok(quire("ledger", "close", str(lid), gateway=url)))["state"] == (
            "CLOSED"
        )
        up.send_signal(signal.SIGTERM)
        assert up.wait(60.0) == 0, "".join(lines)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        for pid in children:
            if psutil.pid_exists(pid):
                try:
                    psutil.Process(pid).kill()
                except psutil.Error:
                    pass
        reader.join(5.0)
