"""Reads from a time with real processes (docs/api.md ``GET /v1/logs/{name}/records``
``from_time`` and ``time``; docs/logs.md "Reading from a time"; gateway/logs/time_search.py):
a log of many ledgers, its records' stamps in log order, the first record a read from
a time returns against a full scan, the entries a search reads (logarithmic), RFC 3339
times, refused input, and stamps across a writer hand-over."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from services.cluster.processes import ZooKeeperProcess
from tests.integration.gateway_support import (
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.integration.log_support import LogClient, Pos, error_code, pos

LEDGERS = 42
SEARCH_READS = re.compile(r"^quire_gateway_log_time_search_reads_total (\S+)$", re.M)


@dataclass
class Env:
    a: LogClient
    b: LogClient


@pytest.fixture(scope="module")
def env(zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """Three bookies and two gateways."""
    with module_cluster(zookeeper, tmp_path_factory.mktemp("logs-from-time")) as c:
        start_bookies(c, 3)
        gateways = [start_gateway(c), start_gateway(c)]
        for g in gateways:
            wait_writable(g, 3)
            g.close_client()
        clients = Env(LogClient(gateways[0].proc.url), LogClient(gateways[1].proc.url))
        try:
            yield clients
        finally:
            clients.a.close()
            clients.b.close()


def timed_records(g: LogClient, name: str) -> list[tuple[Pos, int]]:
    """Every record readable now, in log order, with its time."""
    out: list[tuple[Pos, int]] = []
    start: str | None = None
    while True:
        r = g.read(name, start)
        assert r.status_code == 200, r.text
        doc = r.json()
        for record in doc["records"]:
            assert isinstance(record["time"], int), record
            out.append((pos(record["position"]), record["time"]))
        start = doc["next"]
        if doc["caught_up"]:
            return out


def read_from_time(g: LogClient, name: str, t: str | int, **params: Any) -> dict[str, Any]:
    r = g.http.get(f"/v1/logs/{name}/records", params={"from_time": t, "limit": 1, **params})
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def search_reads(g: LogClient) -> float:
    found = SEARCH_READS.search(g.metrics())
    return float(found.group(1)) if found else 0.0


def test_reads_from_a_time_start_at_the_first_record_stamped_then(env: Env) -> None:
    """A log of 42+ ledgers (rolls between small appends and batches, some ledgers
    empty): every record carries a time, never smaller than the one before it in log
    order; for times taken from the records (some, one ms below, one above), the read
    from that time starts at the first record a full scan finds stamped >= it, with
    entry reads logarithmic in the log's size per search (the metric; a linear walk
    would read one per ledger), and a repeated search reading no ledger's ends again;
    past every record the read starts at the end and tails the next append; RFC 3339
    names the same instant."""
    a, name = env.a, "from-time"
    a.create(name)
    a.take_writer(name)
    for i in range(LEDGERS):
        if i % 7 != 3:  # some ledgers stay empty
            a.append(name, [f"r{i}-0".encode()])
            a.append(name, [f"r{i}-1".encode(), f"r{i}-2".encode(), f"r{i}-3".encode()])
        a.roll(name)
    a.append(name, [b"open-0", b"open-1"])  # the last ledger stays open
    records = timed_records(a, name)
    times = [t for _, t in records]
    assert times == sorted(times), "stamps go backwards in log order"
    ledgers = len(a.show(name)["ledgers"])
    assert ledgers > LEDGERS
    bound = 2 * math.log2(ledgers) + math.log2(4) + 4

    def scan(t: int) -> Pos | None:
        return next((p for p, stamp in records if stamp >= t), None)

    probes = sorted({times[0] - 1, *times[:: max(1, len(times) // 25)], times[-1]})
    probes += [probes[len(probes) // 2] + 1, times[-1] - 1]
    # A cold search (no ledger's stamps kept yet): a probe per halving of the list.
    middle = times[len(times) // 2]
    before = search_reads(a)
    assert read_from_time(a, name, middle)["records"][0]["time"] == middle
    assert 0 < search_reads(a) - before <= bound
    for t in probes:
        before = search_reads(a)
        doc = read_from_time(a, name, t)
        cost = search_reads(a) - before
        expected = scan(t)
        assert expected is not None
        assert [pos(r["position"]) for r in doc["records"]] == [expected], t
        assert cost <= bound, (t, cost, bound)
        again = search_reads(a)
        assert read_from_time(a, name, t)["records"] == doc["records"]
        assert search_reads(a) - again <= math.log2(4) + 3  # closed ledgers' ends kept

    rfc = datetime.fromtimestamp(times[len(times) // 2] / 1000, UTC).isoformat()
    mid = read_from_time(a, name, rfc.replace("+00:00", "Z"))
    assert mid["records"] == read_from_time(a, name, times[len(times) // 2])["records"]

    end = read_from_time(a, name, times[-1] + 1)
    assert end["records"] == [] and end["caught_up"]
    a.append(name, [b"later"])
    tail = a.read(name, end["next"], wait_ms=5_000)
    assert tail.status_code == 200, tail.text
    assert [r["data"] for r in tail.json()["records"]] == ["bGF0ZXI="]  # b"later"


def test_from_with_from_time_and_bad_times_are_refused(env: Env) -> None:
    """``from`` and ``from_time`` together, and a time that is neither ms since the epoch
    nor RFC 3339 with an offset: 400 invalid_argument."""
    a, name = env.a, "from-time-bad"
    a.create(name)
    both = a.http.get(f"/v1/logs/{name}/records", params={"from_time": "0", "from": "1:0"})
    assert both.status_code == 400 and error_code(both) == "invalid_argument", both.text
    for bad in ["yesterday", "2026-11-29T10:00:00", "-5", "1.5"]:
        r = a.http.get(f"/v1/logs/{name}/records", params={"from_time": bad})
        assert r.status_code == 400 and error_code(r) == "invalid_argument", (bad, r.text)
        assert "from_time must be" in r.json()["message"]
    empty = read_from_time(a, name, 0)  # a log with no ledger yet: from its start
    assert empty["records"] == [] and empty["caught_up"]


def test_stamps_stay_in_order_across_a_writer_hand_over(env: Env) -> None:
    """Appends on gateway A, the writer role taken by gateway B, appends on B: every time
    in log order is >= the one before (B's stamps start at the log's last one)."""
    a, b, name = env.a, env.b, "from-time-handover"
    a.create(name)
    a.take_writer(name)
    for i in range(5):
        a.append(name, [f"a{i}".encode(), f"a{i}+".encode()])
    b.take_writer(name)
    for i in range(5):
        b.append(name, [f"b{i}".encode()])
    times = [t for _, t in timed_records(b, name)]
    assert len(times) == 15
    assert times == sorted(times)
