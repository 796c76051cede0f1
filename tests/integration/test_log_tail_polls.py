"""Tailing reads as long polls, with real processes (issue 42, "many open things"):
an empty long poll ends in the last sixteenth of its ``wait_ms``, never after it, at a
time drawn per poll (services/protocol/long_poll.py); a read on the gateway that writes
the log takes the log's list from the writer's copy instead of ZooKeeper
(``LogWriter.listed``), and that copy never hides a change: a roll there, a truncation
or a new writer elsewhere (docs/logs.md, docs/api.md "Conventions")."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial

import httpx
import pytest

from tests.harness import wait_for
from tests.integration.log_support import LogClient, error_code, metric, records_of
from tests.shared import StandardCluster, unique_name

WRITER_HITS = "quire_gateway_metadata_cache_hits_total"
WAIT_MS = 6400  # the empty polls' wait: drawn over its last sixteenth, 400 ms


@pytest.fixture
def gws(shared_cluster: StandardCluster) -> Iterator[tuple[LogClient, LogClient]]:
    """The standard cluster's two plain gateways: A (the logs' writer here) and B."""
    a = LogClient(shared_cluster.writer.url)
    b = LogClient(shared_cluster.reader.url)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def writer_hits(client: LogClient) -> float:
    return metric(client.metrics(), WRITER_HITS, reason="writer")


def copy_in_use(a: LogClient, name: str) -> None:
    """Until A serves long polls of ``name`` from its writer's copy (its watch read the
    log once the role was taken or the log changed; only long polls take it)."""

    def served() -> bool:
        before = writer_hits(a)
        assert a.read(name, wait_ms=10).status_code == 200
        return writer_hits(a) > before

    wait_for(served, 10, f"reads of {name} served from the writer's copy")


def timed(calls: Sequence[Callable[[], httpx.Response]]) -> list[tuple[float, httpx.Response]]:
    """Run ``calls`` at once, each on its own thread: (ms it took, its answer) each."""
    out: list[tuple[float, httpx.Response] | None] = [None] * len(calls)

    def run(i: int) -> None:
        started = time.monotonic()
        answer = calls[i]()
        out[i] = ((time.monotonic() - started) * 1000, answer)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert all(item is not None for item in out)
    return [item for item in out if item is not None]


def written_log(gateway: LogClient) -> str:
    """A new log whose writer is ``gateway``."""
    name = unique_name("poll")
    gateway.create(name)
    gateway.take_writer(name)
    return name


def test_empty_long_polls_end_in_the_last_sixteenth_at_different_times(
    gws: tuple[LogClient, LogClient],
) -> None:
    """Empty polls of 6,400 ms (records on the writer gateway and on another, a
    ledger's LAC on both) each answer after 6,000 to 6,400 ms plus the answer's way
    back, and eight of them asked at once do not end together (their waits are drawn
    over 400 ms: wide enough that a stall of the loaded machine, which ends every wait
    due during it at once, does not gather them all; 200 ms did once in a full run)."""
    a, b = gws
    name = written_log(a)
    (position,) = a.append(name, [b"one"])
    after = f"{position[0]}:{position[1] + 1}"
    lac = f"/v1/ledgers/{position[0]}/lac"
    lac_params = {"after": position[1], "wait_ms": WAIT_MS}
    clients = [LogClient(a.url, 60) for _ in range(4)] + [LogClient(b.url, 60) for _ in range(4)]
    try:
        calls = [
            partial(client.read, name, after, wait_ms=WAIT_MS)
            if i % 2 == 0
            else partial(client.http.get, lac, params=lac_params)
            for i, client in enumerate(clients)
        ]
        answers = timed(calls)
    finally:
        for client in clients:
            client.close()
    for ms, answer in answers:
        assert answer.status_code == 200, answer.text
        doc = answer.json()
        assert doc.get("records", []) == [] and doc.get("last_add_confirmed", 0) == 0, doc
        assert WAIT_MS * 15 // 16 - 5 <= ms <= WAIT_MS + 1500, [ms for ms, _ in answers]
    waited = [ms for ms, _ in answers]
    assert max(waited) - min(waited) > 50, waited


def test_polls_on_the_writer_take_its_copy_and_elsewhere_zookeepers(
    gws: tuple[LogClient, LogClient],
) -> None:
    """Each pass of a poll on the writer gateway (one before its wait, one after) takes
    the log's list from the writer's copy (``reason="writer"``); polls on another
    gateway read ZooKeeper and take no such copy."""
    a, b = gws
    name = written_log(a)
    (position,) = a.append(name, [b"one"])
    after = f"{position[0]}:{position[1] + 1}"
    copy_in_use(a, name)
    before_a, before_b = writer_hits(a), writer_hits(b)
    for _ in range(3):
        r = a.read(name, after, wait_ms=100)
        assert r.status_code == 200 and r.json()["records"] == [], r.text
        r = b.read(name, after, wait_ms=100)
        assert r.status_code == 200 and r.json()["records"] == [], r.text
    assert writer_hits(a) - before_a >= 6
    assert writer_hits(b) == before_b


def test_a_poll_on_the_writer_sees_a_roll_there(gws: tuple[LogClient, LogClient]) -> None:
    """A poll waiting at the end of the log on the writer gateway (its first pass done)
    answers the record appended after a roll there (in the new ledger) as soon as it
    lands: the roll drops the writer's copy of the list, so the poll does not go on
    waiting at the end of the old one until its 20 s are up."""
    a, _ = gws
    name = written_log(a)
    (first,) = a.append(name, [b"one"])
    copy_in_use(a, name)
    poller = LogClient(a.url, 60)
    try:
        answers: list[tuple[float, httpx.Response]] = []
        thread = threading.Thread(
            target=lambda: answers.extend(
                timed([lambda: poller.read(name, f"{first[0]}:{first[1] + 1}", wait_ms=20_000)])
            )
        )
        before = writer_hits(a)
        thread.start()
        wait_for(lambda: writer_hits(a) > before, 10, "the poll's first pass")
        new = a.roll(name)
        (second,) = a.append(name, [b"two"])
        thread.join(30)
    finally:
        poller.close()
    assert second[0] == new
    ((ms, answer),) = answers
    assert answer.status_code == 200, answer.text
    assert records_of(answer.json()) == [(second, b"two")]
    assert ms < 10_000, ms


def test_reads_on_the_writer_after_a_truncation_elsewhere(
    gws: tuple[LogClient, LogClient],
) -> None:
    """Once B answered a truncation, reads on the writer gateway A never return a
    truncated position: a read from the start begins at the first ledger kept, and a
    read from a truncated position is 400 (A's copy of the list was dropped when its
    watch fired; a read with the old list would start in the truncated ledger, find it
    deleted, and fail)."""
    a, b = gws
    name = written_log(a)
    (old,) = a.append(name, [b"old"])
    kept = a.roll(name)
    (new,) = a.append(name, [b"new"])
    a.wait_closed(old[0])
    copy_in_use(a, name)
    assert [d for _, d in a.read_all(name)] == [b"old", b"new"]
    b.truncate(name, (kept, 0))
    for wait_ms in (0, 10, 0, 10, 10):  # plain reads ask ZooKeeper, polls take the copy
        r = a.read(name, wait_ms=wait_ms)
        assert r.status_code == 200, r.text
        assert records_of(r.json()) == [(new, b"new")]
        r = a.read(name, f"{old[0]}:{old[1]}", wait_ms=wait_ms)
        assert r.status_code == 400 and error_code(r) == "invalid_argument", r.text
    assert a.show(name)["ledgers"] == [kept]


def test_reads_on_the_old_writer_see_the_new_writers_records(
    gws: tuple[LogClient, LogClient],
) -> None:
    """Once B took the writer role and appended, a tail read on A (the old writer, whose
    copy of the list ended at its own ledger) from just after A's record reads on into
    B's ledger: it answers B's record (as soon as B's bookies report it readable), not
    an empty page at the end of its 10 s."""
    a, b = gws
    name = written_log(a)
    (mine,) = a.append(name, [b"from a"])
    copy_in_use(a, name)
    b.take_writer(name)
    (position,) = b.append(name, [b"from b"])
    r = a.read(name, f"{mine[0]}:{mine[1] + 1}", wait_ms=10_000)
    assert r.status_code == 200, r.text
    assert records_of(r.json()) == [(position, b"from b")]
    assert [d for _, d in a.read_all(name)] == [b"from a", b"from b"]


def test_the_fast_path_answers_a_read_as_fastapi_does(gws: tuple[LogClient, LogClient]) -> None:
    """A tailing read taken by the fast path (gateway/fastpath.py: ``from``, ``limit``,
    ``wait_ms``) answers the same status, type and bytes as the route behind FastAPI
    (the same read with a parameter the fast path does not take): records, an empty
    read at the end, an unknown log, a position not in the log."""
    a, _ = gws
    name = written_log(a)
    ledger = a.append(name, [b"one", b"\x00two"])[0][0]
    a.append(name, [b"three"])
    queries = [
        f"from={ledger}:0&limit=2",
        f"from={ledger}%3A1&limit=100&wait_ms=0",
        f"from={ledger}:3&wait_ms=50",
        "limit=1",
        f"from={ledger + 1_000_000}:0",
    ]
    paths = [f"/v1/logs/{name}/records?{q}" for q in queries]
    paths.append(f"/v1/logs/{unique_name('none')}/records?from=1:0")
    for path in paths:
        fast = a.http.get(path)
        slow = a.http.get(path + "&fastapi=1")
        assert (fast.status_code, fast.content) == (slow.status_code, slow.content), path
        assert fast.headers["content-type"] == slow.headers["content-type"], path
        assert fast.status_code in (200, 400, 404), fast.text
