"""Durable cursors with real processes (docs/api.md "Logs: cursors"; docs/logs.md
"Durable cursors"; gateway/logs/cursors.py): a cursor created at each kind of start,
reads through it, acks that only move forward (also concurrent ones through two
gateways), lag figures against a count, acks answered before a gateway's SIGKILL kept,
a cursor seen through every gateway, deleted with its log, refused input, and acks kept
across a ZooKeeper restart."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.cluster.processes import ZooKeeperProcess
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.integration.log_support import LogClient, Pos, error_code, metric, records_of

FLUSH = ["--cursor-flush-ms", "30"]


@dataclass
class Env:
    cluster: Cluster
    a: LogClient
    b: LogClient


@pytest.fixture(scope="module")
def env(zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """Three bookies and two gateways, acks flushed every 30 ms."""
    with module_cluster(zookeeper, tmp_path_factory.mktemp("logs-cursors")) as c:
        start_bookies(c, 3)
        gateways = [start_gateway(c, FLUSH), start_gateway(c, FLUSH)]
        for g in gateways:
            wait_writable(g, 3)
            g.close_client()
        clients = Env(c, LogClient(gateways[0].proc.url), LogClient(gateways[1].proc.url))
        try:
            yield clients
        finally:
            clients.a.close()
            clients.b.close()


def text(p: Pos) -> str:
    return f"{p[0]}:{p[1]}"


def cursor_call(
    g: LogClient, method: str, log: str, cursor: str, suffix: str = "", **kw: Any
) -> httpx.Response:
    return g.http.request(method, f"/v1/logs/{log}/cursors/{cursor}{suffix}", **kw)


def make(
    g: LogClient, log: str, cursor: str, start: Any = None, status: int = 201
) -> dict[str, Any]:
    body = {"start": start} if start is not None else None
    r = cursor_call(g, "PUT", log, cursor, json=body)
    assert r.status_code == status, r.text
    doc: dict[str, Any] = r.json()
    return doc


def show(g: LogClient, log: str, cursor: str) -> dict[str, Any]:
    r = cursor_call(g, "GET", log, cursor)
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def ack(g: LogClient, log: str, cursor: str, p: Pos) -> dict[str, Any]:
    r = cursor_call(g, "POST", log, cursor, "/ack", json={"position": text(p)})
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def counts(g: LogClient) -> tuple[float, float]:
    """The gateway's cursor acks received and positions written (its metrics)."""
    page = g.metrics()
    return (
        metric(page, "quire_gateway_cursor_acks_total"),
        metric(page, "quire_gateway_cursor_writes_total"),
    )


def read_through(g: LogClient, log: str, cursor: str) -> list[Pos]:
    r = g.http.get(f"/v1/logs/{log}/records", params={"cursor": cursor})
    assert r.status_code == 200, r.text
    return [p for p, _ in records_of(r.json())]


def written_log(g: LogClient, name: str, other: LogClient) -> list[tuple[Pos, bytes]]:
    """A log of two closed ledgers (3 and 2 records) and an open one (2 records), all
    readable through ``other`` too (the bookies' LAC follows the writer's shortly)."""
    g.create(name)
    g.take_writer(name)
    g.append(name, [b"r0"])
    g.append(name, [b"r1", b"r2"])
    first = g.show(name)["ledgers"][0]
    g.roll(name)
    g.wait_closed(first)
    g.append(name, [b"r3", b"r4"])
    second = g.show(name)["ledgers"][1]
    g.roll(name)
    g.wait_closed(second)
    g.append(name, [b"r5"])
    g.append(name, [b"r6"])
    wait_for(lambda: len(other.read_all(name)) == 7, 10.0, "the LAC to reach the bookies")
    return g.read_all(name)


def test_cursors_start_where_asked_and_reads_go_on_after_them(env: Env) -> None:
    """earliest reads every record, latest none until the next append, a position the
    records after it, a time the first record stamped at or after it; each cursor's
    lag_records is the count of records after its position (lag_bytes at least their
    payload); creating an existing cursor answers it unchanged (200)."""
    a, b, log = env.a, env.b, "cur-starts"
    records = written_log(a, log, b)
    assert len(records) == 7
    order = [p for p, _ in records]

    earliest = make(a, log, "e", "earliest")
    assert earliest["position"] is None and earliest["acked_at"] is None
    assert earliest["lag_records"] == 7
    assert earliest["lag_bytes"] >= sum(len(d) for _, d in records)
    assert read_through(a, log, "e") == order

    latest = make(a, log, "l")  # latest is the default
    assert (latest["position"], latest["lag_records"], latest["lag_bytes"]) == (
        text(order[-1]),
        0,
        0,
    )
    assert read_through(b, log, "l") == []

    at = make(b, log, "p", text(order[2]))  # the last record of the first ledger
    assert at["lag_records"] == 4
    assert read_through(a, log, "p") == order[3:]  # on at the next ledger's entry 0

    times = a.http.get(f"/v1/logs/{log}/records").json()["records"]
    by_time = make(a, log, "t", {"time": times[3]["time"]})
    first_then = next(i for i, r in enumerate(times) if r["time"] >= times[3]["time"])
    assert read_through(a, log, "t") == order[first_then:]
    assert by_time["lag_records"] == 7 - first_then

    assert make(a, log, "e", "latest", status=200) == show(a, log, "e")  # unchanged
    [new] = a.append(log, [b"r7"])
    assert read_through(a, log, "l") == [new]
    assert show(a, log, "l")["lag_records"] == 1  # the writer's LAC: readable there now
    listed = a.http.get(f"/v1/logs/{log}/cursors").json()["cursors"]
    assert [c["name"] for c in listed] == ["e", "l", "p", "t"]
    assert [c["lag_records"] for c in listed] == [8, 1, 5, 8 - first_then]


def test_acks_move_forward_only(env: Env) -> None:
    """An ack moves the cursor (moved true, acked_at set, lag down) and a read goes on
    after it; an older or equal ack changes nothing and answers moved false."""
    a, b, log = env.a, env.b, "cur-acks"
    order = [p for p, _ in written_log(a, log, b)]
    make(a, log, "c", "earliest")
    before = {g: counts(g) for g in (a, b)}
    doc = ack(a, log, "c", order[4])
    assert (doc["position"], doc["moved"], doc["lag_records"]) == (text(order[4]), True, 2)
    assert isinstance(doc["acked_at"], int)
    assert read_through(a, log, "c") == order[5:]
    for older in (order[1], order[4]):
        doc = ack(b, log, "c", older)
        assert (doc["position"], doc["moved"]) == (text(order[4]), False)
    assert show(a, log, "c")["position"] == text(order[4])
    # Acks counted where they arrived; only the one that moved the cursor was written.
    assert counts(a) == (before[a][0] + 1, before[a][1] + 1)
    assert counts(b) == (before[b][0] + 2, before[b][1])


def test_concurrent_acks_through_two_gateways_end_at_the_maximum(env: Env) -> None:
    """Eight threads ack shuffled positions through both gateways at once: the cursor
    ends at the highest position acked, seen through either gateway, and no answer shows
    a position below its own ack."""
    log = "cur-concurrent"
    order = [p for p, _ in written_log(env.a, log, env.b)]
    make(env.a, log, "c", "earliest")
    failures: list[str] = []

    def worker(seed: int) -> None:
        g = LogClient(env.a.url if seed % 2 else env.b.url)
        try:
            mine = random.Random(seed).sample(order, len(order))
            for p in mine:
                doc = ack(g, log, "c", p)
                stored = tuple(int(x) for x in doc["position"].split(":"))
                if stored < p:
                    failures.append(f"ack {p} answered {stored}")
        except AssertionError as exc:
            failures.append(str(exc))
        finally:
            g.close()

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failures, failures
    for g in (env.a, env.b):
        assert show(g, log, "c")["position"] == text(order[-1])


def test_acks_answered_before_a_gateway_sigkill_are_kept(env: Env) -> None:
    """Acks answered by a third gateway are all there after it is SIGKILLed at once
    (read through another gateway): an ack is answered only once written."""
    log = "cur-kill"
    order = [p for p, _ in written_log(env.a, log, env.b)]
    make(env.a, log, "c", "earliest")
    victim = start_gateway(env.cluster, FLUSH)
    g = LogClient(victim.proc.url)
    try:
        for p in order[:5]:
            ack(g, log, "c", p)
        victim.proc.kill()
    finally:
        g.close()
        victim.close_client()
    assert show(env.b, log, "c")["position"] == text(order[4])


def test_a_cursor_lives_and_dies_with_its_log(env: Env) -> None:
    """Deleting the log deletes its cursors: a log made again under the name has none
    (404 cursor_not_found), and the deleted log's cursor calls are 404 log_not_found."""
    a, b, log = env.a, env.b, "cur-delete"
    written_log(a, log, b)
    make(a, log, "c", "earliest")
    make(a, log, "d")
    assert b.http.delete(f"/v1/logs/{log}").status_code == 204
    assert error_code(cursor_call(a, "GET", log, "c")) == "log_not_found"
    assert error_code(a.http.get(f"/v1/logs/{log}/cursors")) == "log_not_found"
    a.create(log)
    assert error_code(cursor_call(b, "GET", log, "c")) == "cursor_not_found"
    assert a.http.get(f"/v1/logs/{log}/cursors").json() == {"cursors": []}
    make(b, log, "c", "earliest")  # an empty log: before its first record
    assert cursor_call(a, "DELETE", log, "c").status_code == 204
    assert error_code(cursor_call(a, "DELETE", log, "c")) == "cursor_not_found"


def test_refused_input(env: Env) -> None:
    """Unknown cursors are 404 cursor_not_found on every route; bad names, starts, ack
    bodies, acks and starts outside the log or past a closed ledger's end, and a read
    with both cursor and from are 400."""
    a, b, log = env.a, env.b, "cur-bad"
    order = [p for p, _ in written_log(a, log, b)]
    make(a, log, "c", "earliest")
    past_first = (order[2][0], order[2][1] + 1)  # past the first (closed) ledger's end
    r = a.http.get(f"/v1/logs/{log}/records", params={"cursor": "nope"})
    assert (r.status_code, error_code(r)) == (404, "cursor_not_found")
    for method, suffix, kw in (
        ("GET", "", {}),
        ("DELETE", "", {}),
        ("POST", "/ack", {"json": {"position": text(order[0])}}),
    ):
        r = cursor_call(a, method, log, "nope", suffix, **kw)
        assert (r.status_code, error_code(r)) == (404, "cursor_not_found"), r.text
    assert error_code(cursor_call(a, "GET", "no-such-log", "c")) == "log_not_found"
    bad = [
        cursor_call(a, "PUT", log, "x" * 201),
        cursor_call(a, "PUT", log, "a%20b"),
        cursor_call(a, "PUT", log, "s", json={"start": "soon"}),
        cursor_call(a, "PUT", log, "s", json={"start": "999:0"}),
        cursor_call(a, "PUT", log, "s", json={"start": "latest", "x": 1}),
        cursor_call(a, "POST", log, "c", "/ack", json={"position": "1"}),
        cursor_call(a, "POST", log, "c", "/ack", json={}),
        cursor_call(a, "POST", log, "c", "/ack", json={"position": "999:0"}),
        cursor_call(a, "POST", log, "c", "/ack", json={"position": text(past_first)}),
        cursor_call(a, "PUT", log, "s", json={"start": text(past_first)}),
        a.http.get(f"/v1/logs/{log}/records", params={"cursor": "c", "from": text(order[0])}),
        a.http.get(f"/v1/logs/{log}/records", params={"cursor": "c", "from_time": "0"}),
        a.http.get(f"/v1/logs/{log}/records", params={"cursor": "a b"}),
    ]
    for r in bad:
        assert (r.status_code, error_code(r)) == (400, "invalid_argument"), r.text
    assert show(a, log, "c")["position"] is None


def test_acks_survive_a_zookeeper_restart(
    zookeeper_of_its_own: ZooKeeperProcess, tmp_path: Path
) -> None:
    """On a ZooKeeper of its own, SIGKILLed and started again on its data: the cursor
    and its last answered ack are there when it is back, a read through the cursor goes
    on after it, and acks move it again (an answered ack is written by ZooKeeper, which
    keeps it on disk)."""
    zookeeper = zookeeper_of_its_own
    with module_cluster(zookeeper, tmp_path) as c:
        start_bookies(c, 3)
        gateway = start_gateway(c, FLUSH)
        wait_writable(gateway, 3)
        gateway.close_client()
        g = LogClient(gateway.proc.url)
        try:
            log = "cur-zk"
            order = [p for p, _ in written_log(g, log, g)]
            make(g, log, "c", "earliest")
            ack(g, log, "c", order[3])
            zookeeper.kill()
            zookeeper.start()
            zookeeper.wait_ready(60.0)
            wait_for(lambda: cursor_call(g, "GET", log, "c").status_code == 200, 20.0, "ZooKeeper")
            assert show(g, log, "c")["position"] == text(order[3])
            assert read_through(g, log, "c") == order[4:]
            assert ack(g, log, "c", order[6])["moved"] is True
        finally:
            g.close()
