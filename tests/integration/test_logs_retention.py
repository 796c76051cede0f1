"""Retention with real processes (docs/api.md "Retention"; docs/logs.md "Retention";
services/protocol/retention.py, auditor/retention.py): the policy set at create,
changed by merge patch and shown on the log; each limit applied to a log under appends
while a reader tails its head (usage within one ledger's size of the limit, the reader
never sees a gap); durable cursors holding data back only with retain_for_cursors, the
backlog bound, cursors told what they missed; bookies' space given back; refused input.

The auditor runs a pass every 0.5 s; a test that must see a pass complete after a
change asks the elected auditor for one (``POST /v1/retention``, which answers once a
pass that started after the request is done)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from services.cli.app import app as cli_app
from services.cluster.processes import ZooKeeperProcess
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.integration.log_support import LogClient, Pos, error_code, metric, records_of
from tests.shared import unique_name


@dataclass
class Env:
    cluster: Cluster
    log: LogClient
    auditor: httpx.Client
    bookies: list[str]


@pytest.fixture(scope="module")
def env(zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """Three bookies, a gateway and an auditor passing every 0.5 s."""
    with module_cluster(zookeeper, tmp_path_factory.mktemp("logs-retention")) as c:
        bookies = start_bookies(c, 3)
        gateway = start_gateway(c)
        wait_writable(gateway, 3)
        gateway.close_client()
        auditor = c.start("auditor", ["--retention-interval", "0.5", "--audit-interval", "3600"])
        client = LogClient(gateway.proc.url)
        auditor_http = httpx.Client(base_url=auditor.url, timeout=30.0)
        wait_for(lambda: auditor_http.get("/v1/status").json()["elected"], 20, "election")
        try:
            yield Env(c, client, auditor_http, [f"127.0.0.1:{b.port}" for b in bookies])
        finally:
            client.close()
            auditor_http.close()


def create(env: Env, retention: dict[str, Any] | None, status: int = 201) -> str:
    name = unique_name("ret")
    body = {"retention": retention} if retention is not None else None
    r = env.log.http.put(f"/v1/logs/{name}", json=body)
    assert r.status_code == status, r.text
    return name


def patch(env: Env, name: str, body: Any) -> httpx.Response:
    return env.log.http.patch(f"/v1/logs/{name}", json=body)


def usage(env: Env, name: str) -> dict[str, Any]:
    r = env.log.http.get(f"/v1/logs/{name}", params={"usage": "true"})
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()["usage"]
    return doc


def retention_pass(env: Env) -> dict[str, Any]:
    """A pass that starts after this call, done."""
    r = env.auditor.post("/v1/retention")
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def settled_pass(env: Env, *names: str) -> dict[str, Any]:
    """A pass once every ledger of each log but its last is CLOSED (a rolled-out ledger
    closes just after its roll; the walk stops at one still open)."""

    def settled() -> bool:
        for name in names:
            for ledger_id in env.log.show(name)["ledgers"][:-1]:
                if env.log.http.get(f"/v1/ledgers/{ledger_id}").json()["state"] != "CLOSED":
                    return False
        return True

    wait_for(settled, 20, "rolled-out ledgers to close")
    return retention_pass(env)


def append_n(env: Env, name: str, count: int, size: int = 32, start: int = 0) -> list[Pos]:
    """``count`` records (batches of 50), each its sequence number padded to ``size``."""
    out: list[Pos] = []
    for first in range(start, start + count, 50):
        batch = [
            str(i).encode().ljust(size, b".") for i in range(first, min(first + 50, start + count))
        ]
        out += env.log.append(name, batch)
    return out


def seq(data: bytes) -> int:
    return int(data.rstrip(b"."))


def test_a_policy_is_set_at_create_changed_by_merge_patch_and_shown(env: Env) -> None:
    name = create(env, {"max_age_s": 3600, "max_records": 1000})
    shown = env.log.show(name)["retention"]
    assert shown == {
        "max_age_s": 3600,
        "max_bytes": None,
        "max_records": 1000,
        "retain_for_cursors": False,
        "max_backlog_bytes": None,
    }
    # Merge patch: a value sets, null clears, what is not named stays.
    r = patch(env, name, {"retention": {"max_records": None, "max_bytes": 4096}})
    assert r.status_code == 200, r.text
    assert r.json()["retention"]["max_bytes"] == 4096
    assert r.json()["retention"]["max_records"] is None
    assert env.log.show(name)["retention"]["max_age_s"] == 3600
    # The same policy as a merge-patch document type.
    r = env.log.http.patch(
        f"/v1/logs/{name}",
        content=b'{"retention": {"retain_for_cursors": true, "max_backlog_bytes": 100}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["retention"]["max_backlog_bytes"] == 100
    # A PUT of an existing log changes nothing (PATCH does).
    r = env.log.http.put(f"/v1/logs/{name}", json={"retention": {"max_records": 1}})
    assert r.status_code == 200 and r.json()["retention"]["max_records"] is None
    r = patch(env, name, {"retention": None})
    assert r.status_code == 200 and r.json()["retention"] is None
    assert create(env, None) and env.log.show(name)["retention"] is None


@pytest.mark.parametrize(
    "body",
    [
        {"retention": {"max_bytes": 0}},
        {"retention": {"max_records": -5}},
        {"retention": {"max_age_s": "1h"}},
        {"retention": {"max_bytes": 1.5}},
        {"retention": {"max_size": 10}},
        {"retention": {"max_backlog_bytes": 10}},
        {"retention": []},
        {"retention": {}, "name": "x"},
        {},
        [],
    ],
)
def test_bad_policies_are_400_and_change_nothing(env: Env, body: Any) -> None:
    name = create(env, {"max_records": 500})
    before = env.log.show(name)
    r = patch(env, name, body)
    assert r.status_code == 400 and error_code(r) == "invalid_argument", r.text
    assert env.log.show(name) == before
    # The same policies refused at create: no log is made.
    if isinstance(body, dict) and isinstance(body.get("retention"), dict) and len(body) == 1:
        other = unique_name("ret-bad")
        r = env.log.http.put(f"/v1/logs/{other}", json=body)
        assert r.status_code == 400 and error_code(r) == "invalid_argument", r.text
        assert env.log.http.get(f"/v1/logs/{other}").status_code == 404


def test_a_patch_of_an_unknown_log_is_404(env: Env) -> None:
    r = patch(env, unique_name("nope"), {"retention": {"max_records": 5}})
    assert r.status_code == 404 and error_code(r) == "log_not_found", r.text


def test_usage_counts_what_was_appended(env: Env) -> None:
    name = create(env, None)
    env.log.take_writer(name)
    append_n(env, name, 120, size=100)
    env.log.roll(name)
    append_n(env, name, 30, size=100, start=120)
    doc = usage(env, name)
    assert doc["records"] == 150 and doc["ledgers"] == 2
    # Ledger lengths: each record's bytes and the log layer's envelope.
    assert 150 * 100 <= doc["bytes"] <= 150 * 200
    assert doc["oldest_ms"] is not None and doc["oldest_ms"] <= time.time() * 1000
    assert "usage" not in env.log.show(name)


@dataclass
class Tail:
    """A reader at a log's head: every record it sees, in order."""

    env: Env
    name: str
    seen: list[int] = field(default_factory=list)
    ledgers: Counter[int] = field(default_factory=Counter)  # records seen per ledger
    gaps: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> Tail:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        client = LogClient(self.env.log.url)
        start: str | None = None
        last: Pos | None = None
        try:
            while not self.stop.is_set():
                r = client.read(self.name, start, limit=1000, wait_ms=200)
                if r.status_code != 200:
                    self.gaps.append(f"read answered {r.status_code}: {r.text}")
                    return
                doc = r.json()
                for position, data in records_of(doc):
                    if last is not None and not (
                        position == (last[0], last[1] + 1) or position[1] == 0
                    ):
                        self.gaps.append(f"{position} after {last}")
                    if self.seen and seq(data) != self.seen[-1] + 1:
                        self.gaps.append(f"record {seq(data)} after {self.seen[-1]}")
                    self.seen.append(seq(data))
                    self.ledgers[position[0]] += 1
                    last = position
                start = doc["next"]
        finally:
            client.close()

    def finish(self, count: int) -> None:
        wait_for(lambda: len(self.seen) >= count or self.gaps, 30, "the tail to catch up")
        self.stop.set()
        assert self.thread is not None
        self.thread.join(10)
        assert not self.gaps, self.gaps[:5]
        assert self.seen == list(range(count))


def _under_appends(env: Env, policy: dict[str, Any], total: int, size: int) -> Tail:
    """A log with ``policy``, ``total`` records appended while the auditor passes every
    0.5 s, and a reader tailing its head from the first record: the reader saw every
    record in order. Tailing the head: each batch of 50 is appended once the reader has
    read the ones before (a reader further behind than what the policy keeps loses
    records, and is told so by a 400)."""
    name = create(env, policy)
    env.log.take_writer(name)
    tail = Tail(env, name)
    append_n(env, name, 1, size=size)
    tail.start()
    done = 1
    while done < total:
        wait_for(lambda n=done: len(tail.seen) >= n or tail.gaps, 30, "the tail to catch up")
        assert not tail.gaps, tail.gaps[:5]
        step = min(50, total - done)
        append_n(env, name, step, size=size, start=done)
        done += step
    tail.finish(total)
    return tail


def test_max_records_keeps_usage_within_a_ledger_of_the_limit(env: Env) -> None:
    # Rolls at a quarter of the limit: 100 records (and what lands while a roll runs).
    tail = _under_appends(env, {"max_records": 400}, 2_000, 32)
    name = tail.name
    settled_pass(env, name)
    largest = max(tail.ledgers.values())
    doc = usage(env, name)
    closed = _closed_records(env, name)
    # The closed ledgers hold at most the limit, and less by under one ledger.
    assert 400 - largest < closed <= 400, (closed, largest, dict(tail.ledgers))
    assert doc["records"] <= closed + largest
    # The oldest records are gone, the newest readable from the log's first record.
    records = env.log.read_all(name)
    assert [seq(d) for _, d in records] == list(range(2_000 - len(records), 2_000))
    text = env.auditor.get("/metrics").text
    removed = metric(
        text, "quire_auditor_retention_removed_ledgers_total", log=name, reason="records"
    )
    assert removed >= 2_000 // largest - 5
    assert metric(text, "quire_auditor_log_records", log=name) == closed


def _closed_records(env: Env, name: str) -> int:
    """Records in the log's CLOSED ledgers (from their metadata)."""
    total = 0
    for ledger_id in env.log.show(name)["ledgers"]:
        doc = env.log.http.get(f"/v1/ledgers/{ledger_id}").json()
        if doc["state"] == "CLOSED":
            total += doc["last_entry_id"] + 1
    return total


def _closed_bytes(env: Env, name: str) -> int:
    total = 0
    for ledger_id in env.log.show(name)["ledgers"]:
        doc = env.log.http.get(f"/v1/ledgers/{ledger_id}").json()
        if doc["state"] == "CLOSED":
            total += doc["length"]
    return total


def test_max_bytes_keeps_usage_within_a_ledger_of_the_limit(env: Env) -> None:
    # 256 KiB, rolled every 64 KiB (and what lands while a roll runs); 1 KiB records,
    # about 2 MiB appended.
    limit = 256 * 1024
    tail = _under_appends(env, {"max_bytes": limit}, 2_000, 1024)
    name = tail.name
    settled_pass(env, name)
    # A record's bytes in a ledger: its payload and the log layer's envelope.
    per_record = 1024 + 64
    largest = max(tail.ledgers.values()) * per_record
    closed = _closed_bytes(env, name)
    assert limit - largest < closed <= limit, (closed, largest)
    assert usage(env, name)["bytes"] <= closed + largest
    text = env.auditor.get("/metrics").text
    assert metric(text, "quire_auditor_retention_removed_bytes_total", log=name) >= (
        2_000 * 1024 - limit - largest
    )


def test_max_age_removes_ledgers_closed_longer_ago(env: Env) -> None:
    # Rolls every second (max_age_s / 4, not below 1 s); ledgers go 2 s after closing.
    name = _under_appends(env, {"max_age_s": 2}, 300, 32).name
    first = env.log.show(name)["ledgers"]

    # Idle: the writer's ledger rolls by age, every closed ledger expires, the last
    # (empty, open) one stays.
    def only_the_empty_ledger() -> bool:
        retention_pass(env)
        doc = usage(env, name)
        return doc["records"] == 0 and doc["ledgers"] == 1

    wait_for(only_the_empty_ledger, 20, "every record to expire")
    assert not set(first) & set(env.log.show(name)["ledgers"])
    assert env.log.read_all(name) == []
    # Appends go on after it.
    assert env.log.append(name, [b"after"])


def test_a_cursor_holds_data_back_only_with_retain_for_cursors(env: Env) -> None:
    policy = {"max_records": 200}
    held = create(env, {**policy, "retain_for_cursors": True})
    free = create(env, policy)
    for name in (held, free):
        env.log.take_writer(name)
        r = env.log.http.put(f"/v1/logs/{name}/cursors/slow", json={"start": "earliest"})
        assert r.status_code == 201, r.text
        append_n(env, name, 1_000)
    report = settled_pass(env, held, free)
    assert report["ledgers_held_for_cursors"] >= 1
    # Held: every record still there, the cursor's lag the whole log.
    assert usage(env, held)["records"] == 1_000
    cursor = show_cursor(env, held)
    assert cursor["lag_records"] == 1_000 and cursor["skipped_records"] == 0
    text = env.auditor.get("/metrics").text
    assert metric(text, "quire_auditor_retention_held_ledgers", log=held) >= 1
    # Not held: the closed ledgers are cut to the limit, and the cursor that read
    # nothing is told how much it missed; a read through it goes on at the log's first
    # record.
    assert _closed_records(env, free) <= 200
    left = usage(env, free)["records"]
    cursor = show_cursor(env, free)
    assert cursor["skipped_records"] == 1_000 - left and cursor["skipped_at"] is not None
    r = env.log.http.get(f"/v1/logs/{free}/records", params={"cursor": "slow", "limit": 1})
    assert r.status_code == 200, r.text
    # (No record left when the last closed ledger alone held more than the limit.)
    assert [seq(d) for _, d in records_of(r.json())] == ([1_000 - left] if left else [])
    # The held log's cursor acks its way forward: whole ledgers it acked to their end
    # go, nothing it had not acked does.
    acked = env.log.read_all(held)[549][0]
    r = env.log.http.post(
        f"/v1/logs/{held}/cursors/slow/ack", json={"position": f"{acked[0]}:{acked[1]}"}
    )
    assert r.status_code == 200, r.text
    retention_pass(env)
    records = [seq(d) for _, d in env.log.read_all(held)]
    assert 0 < records[0] <= 550 and records == list(range(records[0], 1_000))
    assert show_cursor(env, held)["skipped_records"] == 0


def show_cursor(env: Env, name: str) -> dict[str, Any]:
    r = env.log.http.get(f"/v1/logs/{name}/cursors/slow")
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def test_the_backlog_bound_drops_the_oldest_and_tells_the_cursor(env: Env) -> None:
    name = create(
        env,
        {"max_records": 200, "retain_for_cursors": True, "max_backlog_bytes": 64 * 1024},
    )
    env.log.take_writer(name)
    r = env.log.http.put(f"/v1/logs/{name}/cursors/slow", json={"start": "earliest"})
    assert r.status_code == 201, r.text
    append_n(env, name, 2_000, size=1000)  # ledgers of 100 KiB and more
    settled_pass(env, name)
    # Every ledger held for the cursor is over the bound alone: all went, and the
    # cursor was told of each record.
    cursor = show_cursor(env, name)
    assert cursor["skipped_records"] == 2_000 - usage(env, name)["records"] >= 1_500
    text = env.auditor.get("/metrics").text
    assert (
        metric(text, "quire_auditor_retention_removed_ledgers_total", log=name, reason="backlog")
        >= 1
    )
    assert (
        metric(text, "quire_auditor_retention_skipped_records_total", log=name)
        == (cursor["skipped_records"])
    )


def test_space_is_given_back_on_the_bookies(env: Env) -> None:
    name = create(env, None)
    env.log.take_writer(name)
    append_n(env, name, 3_000, size=2_000)
    env.log.roll(name)
    ledgers = env.log.show(name)["ledgers"]
    stored_before = sum(_stored_bytes(env, b) for b in env.bookies)
    r = patch(env, name, {"retention": {"max_records": 100}})
    assert r.status_code == 200, r.text
    # The filled ledger goes (in this pass, or in the periodic one before it: passes
    # run one at a time, so its deletes are done either way); the open one stays.
    settled_pass(env, name)
    assert env.log.show(name)["ledgers"] == ledgers[-1:]
    # The auditor deleted the entries on every bookie that had them (not left to the
    # bookies' garbage collection: no orphan waits).
    stored_after = sum(_stored_bytes(env, b) for b in env.bookies)
    assert stored_after < stored_before - 2 * 3_000 * 2_000, (stored_before, stored_after)


def _stored_bytes(env: Env, bookie: str) -> int:
    """Every ledger byte the bookie stores: live, orphaned or waiting for deletion."""
    r = env.log.http.get(f"/v1/admin/bookies/{bookie}/storage")
    assert r.status_code == 200, r.text
    doc = r.json()
    return int(doc["live"]["bytes"]) + int(doc["orphaned_bytes"]) + int(doc["pending_delete_bytes"])


def test_the_auditor_reports_its_last_pass(env: Env) -> None:
    status = env.auditor.get("/v1/status").json()
    assert status["last_retention"] is not None
    assert status["last_retention"]["logs"] >= 1


def cli(env: Env, *args: str) -> Any:
    """``quire --gateway URL ARGS`` in-process: (exit code, stdout, output)."""
    result = CliRunner().invoke(cli_app, ["--gateway", env.log.url, *args])
    return result


def test_the_cli_sets_changes_and_shows_a_policy(env: Env) -> None:
    name = unique_name("ret-cli")
    result = cli(env, "log", "create", name, "--max-age", "7d", "--max-bytes", "10GiB")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["retention"]["max_age_s"] == 7 * 86_400
    assert json.loads(result.stdout)["retention"]["max_bytes"] == 10 << 30
    result = cli(
        env, "log", "retention", name, "--max-bytes", "none", "--max-records", "1000",
        "--retain-for-cursors", "--max-backlog", "64MiB",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["retention"] == {
        "max_age_s": 7 * 86_400,
        "max_bytes": None,
        "max_records": 1000,
        "retain_for_cursors": True,
        "max_backlog_bytes": 64 << 20,
    }
    assert doc["usage"] == {"ledgers": 0, "records": 0, "bytes": 0, "oldest_ms": None}
    # Without options it only shows; --clear removes the policy.
    assert json.loads(cli(env, "log", "retention", name).stdout)["retention"] == doc["retention"]
    result = cli(env, "log", "retention", name, "--clear")
    assert result.exit_code == 0 and json.loads(result.stdout)["retention"] is None
    # Bad units are usage errors (exit 2), nothing sent; the gateway's 400 is exit 3.
    for bad in (["--max-age", "7x"], ["--max-bytes", "-1"], ["--max-records", "0"]):
        result = cli(env, "log", "retention", name, *bad)
        assert result.exit_code == 2, result.output
    result = cli(env, "log", "retention", name, "--max-backlog", "1MiB")
    assert result.exit_code != 0 and "retain_for_cursors" in result.output
    assert env.log.show(name)["retention"] is None
