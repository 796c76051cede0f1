"""`quire status` and the `--json` listings against a real cluster (ZooKeeper, three
bookies, a gateway with an admin token, an elected auditor): every listing's JSON is
the API's figures, status is ok (exit 0) on a healthy cluster, a warning (12) with an
under-replicated ledger, and critical (13) once a bookie is killed and the admin API
reports it down; progress never reaches stderr when it is not a terminal (or with
--quiet), and a read into a file draws its bar when stderr is one (a pty).

The CLI runs in-process (typer's CliRunner) for the JSON checks, and as
`python -m services.cli` subprocesses (this checkout's code) where what matters is
what a real stderr receives. The tests share one cluster and run in file order: the
one that kills a bookie comes last."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from typer.testing import CliRunner

from services.cli.app import app as cli_app
from services.cli.status_check import EXIT_CRITICAL, EXIT_WARNING
from services.cluster.processes import ServiceProcess
from services.zk import paths as zkpaths
from tests.harness import Cluster, wait_for
from tests.integration.auto_support import AuditorProc, start_auditor, wait_elected
from tests.integration.gateway_support import (
    Gateway,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)

ADMIN_TOKEN = "admin-token-status-4f1d"
BOOKIES = 3
ROOT = Path(__file__).resolve().parents[2]
SUBPROCESS_TIMEOUT_S = 120.0


@dataclass
class Env:
    cluster: Cluster
    gateway: Gateway
    bookies: list[ServiceProcess]
    auditor: AuditorProc
    zk: KazooClient

    def get(self, path: str, **params: Any) -> Any:
        r = self.gateway.request("GET", path, params=params)
        assert r.status_code == 200, r.text
        return r.json()

    def cli(self, *args: str) -> Any:
        """``quire --gateway URL --token T ARGS`` in-process."""
        base = ["--gateway", self.gateway.url, "--token", ADMIN_TOKEN]
        return CliRunner().invoke(cli_app, [*base, *args])

    def cli_json(self, *args: str, exit_code: int = 0) -> Any:
        result = self.cli(*args, "--json")
        assert result.exit_code == exit_code, (result.exit_code, result.output)
        return json.loads(result.stdout)

    def argv(self, *args: str) -> list[str]:
        """The argv of this checkout's CLI as a subprocess."""
        base = ["--gateway", self.gateway.url, "--token", ADMIN_TOKEN]
        return [sys.executable, "-m", "services.cli", *base, *args]


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with module_cluster(zookeeper, tmp_path_factory.mktemp("cli-status")) as cluster:
        bookies = start_bookies(cluster, BOOKIES)
        gateway = start_gateway(cluster, ["--admin-token", ADMIN_TOKEN], token=ADMIN_TOKEN)
        # A long lost-bookie delay: a killed bookie is "down" and never marked here, so
        # what status reports depends only on what each test does.
        auditor = start_auditor(cluster, ["--lost-bookie-delay", "600"])
        wait_writable(gateway, BOOKIES)
        wait_elected([auditor])
        zk = KazooClient(hosts=zookeeper.connect_string + cluster.zk_root, timeout=10.0)
        zk.start(10.0)
        try:
            yield Env(cluster, gateway, bookies, auditor, zk)
        finally:
            zk.stop()
            zk.close()
            gateway.close_client()


def _run(argv: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        argv, input=stdin, capture_output=True, cwd=ROOT, timeout=SUBPROCESS_TIMEOUT_S,
        env={k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")},
    )  # fmt: skip


def _mark(zk: KazooClient, ledger_id: int, missing: list[str]) -> None:
    doc = {"missing_bookies": missing, "marked_at": 1_700_000_000_000}
    zk.create(zkpaths.under_replicated(ledger_id), json.dumps(doc).encode(), makepath=True)


def test_every_listing_json_is_the_apis_figures(env: Env) -> None:
    """ledger list, log list (also --long), admin bookies, cluster and under-replicated:
    each --json object carries exactly what the API answers."""
    ledgers = [env.gateway.create(ensemble_size=2, write_quorum=2, ack_quorum=2)["ledger_id"]
               for _ in range(3)]  # fmt: skip
    env.gateway.add(ledgers[0], b"hello")
    for name in ("alpha", "beta"):
        r = env.gateway.request("PUT", f"/v1/logs/{name}")
        assert r.status_code == 201, r.text

    listed = env.cli_json("ledger", "list", "--all", "--limit", "2")
    assert listed == {"ledgers": env.get("/v1/ledgers")["ledgers"], "next": None}
    assert set(ledgers) <= set(listed["ledgers"])
    long = env.cli_json("ledger", "list", "--long")
    assert long["details"] == [env.get(f"/v1/ledgers/{i}") for i in long["ledgers"]]
    first = long["details"][long["ledgers"].index(ledgers[0])]
    assert first["length"] == 5 and first["state"] == "OPEN"

    logs = env.cli_json("log", "list", "--long")
    assert logs["logs"] == env.get("/v1/logs")["logs"] == ["alpha", "beta"]
    assert logs["next"] is None
    assert logs["details"] == [env.get(f"/v1/logs/{n}") for n in ("alpha", "beta")]

    bookies = env.cli_json("admin", "bookies")
    api_bookies = env.get("/v1/admin/bookies")["bookies"]
    assert [b["id"] for b in bookies["bookies"]] == [b["id"] for b in api_bookies]
    assert [b["state"] for b in bookies["bookies"]] == ["writable"] * BOOKIES
    # Figures that do not move between two reads of a quiet cluster:
    for key in ("id", "address", "state", "instance_id", "total_bytes"):
        assert [b[key] for b in bookies["bookies"]] == [b[key] for b in api_bookies], key
    assert env.cli_json("admin", "cluster") == env.get("/v1/admin/cluster")
    assert env.cli_json("admin", "under-replicated", "--all") == {"ledgers": [], "next": None}


def test_status_of_a_healthy_cluster_is_ok(env: Env) -> None:
    """Exit 0, "ok", no problems; the auditor, bookies and logs are the API's."""
    doc = env.cli_json("status")
    assert doc["status"] == "ok" and doc["exit_code"] == 0 and doc["problems"] == []
    assert doc["gateway"] == {"url": env.gateway.url, "ready": True}
    assert doc["auditor"] == {"elected": True, "id": env.auditor.id}
    assert doc["replication_enabled"] is True
    assert doc["bookies"]["counts"]["writable"] == BOOKIES
    assert [b["id"] for b in doc["bookies"]["list"]] == sorted(b.address for b in env.bookies)
    assert doc["under_replicated"] == {"count": 0, "first": []}
    assert doc["logs"] == {"count": 2, "complete": True, "first": ["alpha", "beta"]}
    screen = env.cli("status")
    assert screen.exit_code == 0 and "OK" in screen.stdout
    assert all(b.address in screen.stdout for b in env.bookies)


def test_status_with_an_under_replicated_ledger_is_a_warning(env: Env) -> None:
    """A mark makes status exit 12 with the ledger listed (as the under-replicated
    listing shows it); once the mark is gone it is ok again."""
    ledger_id = env.gateway.create()["ledger_id"]
    missing = [env.bookies[0].address]
    _mark(env.zk, ledger_id, missing)
    try:
        doc = env.cli_json("status", exit_code=EXIT_WARNING)
        assert doc["status"] == "warning"
        assert [p["check"] for p in doc["problems"]] == ["under_replicated"]
        assert doc["under_replicated"]["count"] == 1
        row = doc["under_replicated"]["first"][0]
        assert row["ledger_id"] == ledger_id and row["missing_bookies"] == missing
        listing = env.cli_json("admin", "under-replicated")
        assert listing["ledgers"] == env.get("/v1/admin/under-replicated")["ledgers"]
        assert listing["ledgers"][0]["ledger_id"] == ledger_id
    finally:
        env.zk.delete(zkpaths.under_replicated(ledger_id))
    assert env.cli_json("status")["status"] == "ok"


def test_json_and_non_terminal_output_have_no_progress_noise(env: Env, tmp_path: Path) -> None:
    """Appends from files and stdin and reads into files, run as subprocesses whose
    stderr is a pipe: stderr stays empty, the data arrives whole."""
    lines = b"".join(b"record %d\n" % i for i in range(3000))
    (tmp_path / "in.txt").write_bytes(lines)
    created = _run(env.argv("ledger", "create", "-q"))
    lid = created.stdout.decode().strip()
    appended = _run(env.argv("ledger", "append", lid, "--lines", "-f", str(tmp_path / "in.txt")))
    assert appended.returncode == 0 and appended.stderr == b"", appended.stderr
    assert json.loads(appended.stdout)["entries"] == 3000
    out = tmp_path / "out.txt"
    read = _run(env.argv("ledger", "read", lid, "--output", str(out)))
    assert read.returncode == 0 and read.stderr == b"" and read.stdout == b"", read.stderr
    assert out.read_bytes() == lines

    assert _run(env.argv("log", "writer", "alpha")).returncode == 0
    log_append = _run(env.argv("log", "append", "alpha"), stdin=lines)
    assert log_append.returncode == 0 and log_append.stderr == b"", log_append.stderr
    as_json = _run(env.argv("log", "read", "alpha", "--json"))
    assert as_json.returncode == 0 and as_json.stderr == b"", as_json.stderr
    assert len(json.loads(as_json.stdout)["records"]) == 3000
    status = _run(env.argv("status", "--json"))
    assert status.returncode == 0 and status.stderr == b""
    assert json.loads(status.stdout)["logs"]["count"] == 2


def _with_terminal_stderr(argv: list[str]) -> tuple[int, bytes]:
    """Run ``argv`` with stderr on a pseudo-terminal; its exit code and what it drew."""
    master, slave = pty.openpty()
    drawn: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other side closed
                return
            if not chunk:
                return
            drawn.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, cwd=ROOT,
            timeout=SUBPROCESS_TIMEOUT_S,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")},
                 "TERM": "xterm", "COLUMNS": "120"},
        )  # fmt: skip
    finally:
        os.close(slave)
        reader.join(10.0)
        os.close(master)
    return proc.returncode, b"".join(drawn)


def test_a_read_into_a_file_draws_a_bar_on_a_terminal(env: Env, tmp_path: Path) -> None:
    """stderr a terminal: the read into a file draws its bar there; --quiet draws
    nothing. The file is whole either way."""
    lid = env.gateway.create()["ledger_id"]
    env.gateway.add_batch(lid, [b"entry %d" % i for i in range(2000)])
    out = tmp_path / "out.txt"
    code, drawn = _with_terminal_stderr(env.argv("ledger", "read", str(lid), "-o", str(out)))
    assert code == 0, drawn
    assert b"reading" in drawn and b"2000/2000" in drawn, drawn[-2000:]
    assert out.read_bytes().count(b"\n") == 2000
    code, drawn = _with_terminal_stderr(env.argv("ledger", "read", str(lid), "-o", str(out), "-q"))
    assert code == 0 and drawn == b"", drawn


def test_status_with_a_bookie_killed_is_critical(env: Env) -> None:
    """Kill a bookie; once the admin API says it is down, status exits 13, names it in
    "problems" and shows it down on the screen."""
    victim = env.bookies[-1]
    victim.kill()

    def down() -> bool:
        rows = env.get("/v1/admin/bookies")["bookies"]
        return any(b["id"] == victim.address and b["state"] == "down" for b in rows)

    wait_for(down, 30.0, "the admin API to report the killed bookie down")
    doc = env.cli_json("status", exit_code=EXIT_CRITICAL)
    assert doc["status"] == "critical" and doc["exit_code"] == EXIT_CRITICAL
    assert {"severity": "critical", "check": "bookie_down",
            "message": f"bookie {victim.address} is down"} in doc["problems"]  # fmt: skip
    assert doc["bookies"]["counts"]["down"] == 1
    row = next(b for b in doc["bookies"]["list"] if b["id"] == victim.address)
    assert row["state"] == "down" and row["ledgers"] is None
    screen = env.cli("status")
    assert screen.exit_code == EXIT_CRITICAL
    assert "CRITICAL" in screen.stdout and f"bookie {victim.address} is down" in screen.stdout
