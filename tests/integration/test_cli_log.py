"""`quire log ...` against a real cluster (the standard cluster's two gateways). The
walks through the commands (``log``) run them in-process through typer's CliRunner
(tests/integration/test_cli_ledger.py ``here``); the hand-over to the second gateway and
`tail --follow` with its signals run the installed `quire` console script in a
subprocess, the way people run it."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import threading
from dataclasses import dataclass
from typing import IO

import pytest

from tests.harness import wait_for
from tests.integration.gateway_support import Gateway
from tests.integration.test_cli_ledger import (
    CONFLICT,
    NOT_FOUND,
    QUIRE,
    USAGE,
    error,
    here,
    ok,
    quire,
)
from tests.shared import StandardCluster, unique_name


@dataclass
class Env:
    first: Gateway
    second: Gateway


@pytest.fixture(scope="module")
def env(shared_cluster: StandardCluster) -> Env:
    """The standard cluster's two plain gateways (tests/shared.py); every log name comes
    from ``unique_name``."""
    return Env(shared_cluster.writer, shared_cluster.reader)


def log(env: Env, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return here("log", *args, gateway=env.first.url, stdin=stdin)


def doc(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(ok(proc))


def test_round_trip(env: Env) -> None:
    """create → writer → append (arguments, stdin lines in batches, a key sent twice
    appends once and prints the same position) → read (text, positions, --json with
    each record's time, --from, --limit, --from-time, --since) → tail → roll →
    truncate → show → list → delete, each through the console script, every record
    back byte-exact and in order."""
    name = unique_name("cli-round")
    created = doc(log(env, "create", name, "-e", "3", "-w", "2", "-a", "2"))
    assert created == {"name": name, "ledgers": [], "writer": None, "retention": None}
    assert doc(log(env, "create", name))["name"] == name  # exists: same log
    taken = doc(log(env, "writer", name))
    assert taken["epoch"] >= 1 and isinstance(taken["ledger_id"], int)
    lid = taken["ledger_id"]

    one = doc(log(env, "append", name, "r0"))
    assert one["records"] == 1 and one["position"] == f"{lid}:0"
    two = doc(log(env, "append", name, "r1", "r2"))
    assert (two["first_position"], two["last_position"]) == (f"{lid}:1", f"{lid}:2")
    lines = b"".join(f"s{i}\n".encode() for i in range(5))
    piped = doc(log(env, "append", name, "--batch", "2", stdin=lines))
    assert piped["records"] == 5 and piped["bytes"] == 10
    assert (piped["first_position"], piped["last_position"]) == (f"{lid}:3", f"{lid}:7")
    keyed = doc(log(env, "append", name, "--key", "k-1", "once"))
    again = doc(log(env, "append", name, "--key", "k-1", "once"))
    assert keyed["position"] == again["position"] == f"{lid}:8"

    expected = ["r0", "r1", "r2", *(f"s{i}" for i in range(5)), "once"]
    read = log(env, "read", name)
    assert ok(read).splitlines() == expected
    assert f"next {lid}:9 (caught up)" in read.stderr.decode()
    with_positions = ok(log(env, "read", name, "-p", "--from", f"{lid}:7"))
    assert with_positions == f"{lid}:7\ts4\n{lid}:8\tonce\n"
    page = doc(log(env, "read", name, "--json", "--limit", "2"))
    assert [base64.b64decode(r["data"]) for r in page["records"]] == [b"r0", b"r1"]
    assert [r["position"] for r in page["records"]] == [f"{lid}:0", f"{lid}:1"]
    assert page["next"] == f"{lid}:2"
    times = [r["time"] for r in doc(log(env, "read", name, "--json"))["records"]]
    assert times == sorted(times) and times[1] == times[2]  # r1, r2: one batch, one stamp
    from_s4 = ok(log(env, "read", name, "-p", "--from-time", str(times[7])))
    assert from_s4.splitlines()[-1] == f"{lid}:8\tonce"  # from the first stamped >= it
    assert ok(log(env, "read", name, "--since", "1d")).splitlines() == expected
    assert ok(log(env, "read", name, "--from-time", str(times[-1] + 1))) == ""
    assert ok(log(env, "tail", name)).splitlines() == expected

    rolled = doc(log(env, "roll", name))["ledger_id"]
    assert rolled != lid
    assert doc(log(env, "append", name, "after-roll"))["position"] == f"{rolled}:0"
    assert ok(log(env, "read", name)).splitlines() == [*expected, "after-roll"]
    shown = doc(log(env, "show", name))
    assert shown["ledgers"][-2:] == [lid, rolled] and shown["writer"]["epoch"] == taken["epoch"]
    truncated = doc(log(env, "truncate", name, "--before", f"{rolled}:0"))
    assert truncated["ledgers"] == [rolled]
    assert ok(log(env, "read", name)) == "after-roll\n"

    assert name in ok(log(env, "list")).splitlines()
    listed = doc(log(env, "list", "--json", "--limit", "1", "--all"))
    assert name in listed["logs"] and listed["next"] is None
    assert ok(log(env, "delete", "--yes", name)) == f"deleted log {name}\n"
    error(log(env, "show", name), NOT_FOUND, "log_not_found")


def _collect(stream: IO[bytes], lines: list[str]) -> None:
    for line in stream:
        lines.append(line.decode().rstrip("\n"))


def test_tail_follow_picks_up_new_records_and_stops_cleanly_on_sigint(env: Env) -> None:
    """`tail --follow` prints what is there, then a record appended after it started
    (long-polling on `next`), and exits 0 on SIGINT."""
    name = unique_name("cli-follow")
    ok(log(env, "create", name))
    ok(log(env, "writer", name))
    ok(log(env, "append", name, "before"))
    argv = [str(QUIRE), "--gateway", env.first.url, "log", "tail", name, "-f",
            "--wait-ms", "2000"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[str] = []
    reader = threading.Thread(target=_collect, args=(proc.stdout, lines), daemon=True)
    reader.start()
    try:
        wait_for(lambda: lines == ["before"], 30.0, "tail to print the existing record")
        ok(log(env, "append", name, "after"))
        wait_for(lambda: lines == ["before", "after"], 30.0, "tail to print the new record")
        assert proc.poll() is None  # still following
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30.0) == 0, proc.stderr.read() if proc.stderr else b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10.0)
    assert lines == ["before", "after"]
    ok(log(env, "delete", "-y", name))


def test_errors(env: Env) -> None:
    """A gateway that lost the writer role forwards the append to the new writer; a key
    reused with another body is idempotency_key_reused (exit 7, one line); an unknown log is
    log_not_found (6); bad names and positions are refused before any call (2)."""
    name = unique_name("cli-errors")
    ok(log(env, "create", name))
    ok(log(env, "writer", name))
    ok(log(env, "append", name, "--key", "same", "body-1"))
    error(log(env, "append", name, "--key", "same", "other"), CONFLICT,
          "idempotency_key_reused")  # fmt: skip
    ok(quire("log", "writer", name, gateway=env.second.url))
    appended = doc(quire("log", "append", name, "new", gateway=env.second.url))
    assert appended["records"] == 1
    # Both gateways read the old writer's one record, then the new writer's: the other
    # gateway once the bookies know the new record is confirmed (its LAC, sent after it).
    wait_for(lambda: ok(log(env, "read", name)) == "body-1\nnew\n", 10.0, "the new record")
    ok(log(env, "append", name, "late"))
    assert ok(quire("log", "read", name, gateway=env.second.url)) == "body-1\nnew\nlate\n"

    error(log(env, "read", unique_name("no-such-log")), NOT_FOUND, "log_not_found")
    bad_position = log(env, "read", name, "--from", "3:x")
    assert bad_position.returncode == USAGE and b"LID:EID" in bad_position.stderr
    bad_before = log(env, "truncate", name, "--before", "-1:0")
    assert bad_before.returncode == USAGE and b"LID:EID" in bad_before.stderr
    bad_name = log(env, "show", "bad/name")
    assert bad_name.returncode == USAGE and b"A-Za-z0-9._-" in bad_name.stderr
    ok(log(env, "delete", "-y", name))


def test_append_expect_and_the_gateways(env: Env) -> None:
    """`log append --expect`: `none` on an empty log appends; a stale position exits 15
    (position_mismatch, one line) and appends nothing; the batches of one command chain
    (each expects the one before); a bad value is a usage error. `admin gateways` lists
    both gateways, serving."""
    name = unique_name("cli-expect")
    ok(log(env, "create", name))
    first = doc(log(env, "append", name, "--expect", "none", "a", "b", "--batch", "1"))
    assert first["records"] == 2
    error(log(env, "append", name, "--expect", "none", "c"), 15, "position_mismatch")
    chained = doc(
        log(env, "append", name, "--expect", first["last_position"], "c", "d", "--batch", "1")
    )
    assert chained["records"] == 2
    assert ok(log(env, "read", name)) == "a\nb\nc\nd\n"
    bad = log(env, "append", name, "--expect", "x:1", "e")
    assert bad.returncode == USAGE and b"Expected-Last-Position" in bad.stderr
    listed = json.loads(ok(here("admin", "gateways", "--json", gateway=env.first.url)))
    addresses = {g["address"]: g["draining"] for g in listed["gateways"]}
    assert addresses.get(env.first.proc.address) is False
    assert addresses.get(env.second.proc.address) is False
    table = ok(here("admin", "gateways", gateway=env.first.url))
    assert env.first.proc.address in table and "serving" in table


def test_cursors(env: Env) -> None:
    """`log cursor create|show|list|ack|delete` and `log read --cursor C --ack`
    (docs/cli.md, docs/api.md "Logs: cursors"): a read through a cursor prints what
    follows its position and --ack moves it to the last record printed, so the next read
    prints only what came since; an older ack prints moved false; an unknown cursor is
    cursor_not_found (exit 6), a bad name or --ack without --cursor a usage error (2)."""
    name = unique_name("cli-cursors")
    ok(log(env, "create", name))
    lid = doc(log(env, "writer", name))["ledger_id"]
    ok(log(env, "append", name, "r0", "r1", "r2"))
    created = doc(log(env, "cursor", "create", name, "c", "--start", "earliest"))
    assert (created["name"], created["position"], created["lag_records"]) == ("c", None, 3)
    latest = doc(log(env, "cursor", "create", name, "l"))
    assert (latest["position"], latest["lag_records"]) == (f"{lid}:2", 0)

    first = log(env, "read", name, "--cursor", "c", "--ack", "--limit", "2")
    assert ok(first) == "r0\nr1\n"
    assert f"cursor c acked {lid}:1" in first.stderr.decode()
    assert doc(log(env, "cursor", "show", name, "c"))["position"] == f"{lid}:1"
    ok(log(env, "append", name, "r3"))
    assert ok(log(env, "read", name, "--cursor", "c", "--ack")) == "r2\nr3\n"
    assert ok(log(env, "read", name, "--cursor", "c")) == ""
    assert ok(log(env, "read", name, "--cursor", "l")) == "r3\n"

    older = doc(log(env, "cursor", "ack", name, "l", f"{lid}:0"))
    assert (older["position"], older["moved"]) == (f"{lid}:2", False)
    moved = doc(log(env, "cursor", "ack", name, "l", f"{lid}:3"))
    assert (moved["position"], moved["moved"], moved["lag_records"]) == (f"{lid}:3", True, 0)
    listed = doc(log(env, "cursor", "list", name))["cursors"]
    assert [(c["name"], c["position"]) for c in listed] == [("c", f"{lid}:3"), ("l", f"{lid}:3")]

    assert "deleted cursor l" in ok(log(env, "cursor", "delete", name, "l"))
    error(log(env, "cursor", "show", name, "l"), NOT_FOUND, "cursor_not_found")
    error(log(env, "read", name, "--cursor", "l"), NOT_FOUND, "cursor_not_found")
    assert log(env, "cursor", "show", name, "bad/name").returncode == USAGE
    assert log(env, "read", name, "--ack").returncode == USAGE
    assert log(env, "read", name, "--cursor", "c", "--from", f"{lid}:0").returncode == USAGE
    ok(log(env, "delete", "-y", name))
