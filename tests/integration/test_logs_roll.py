"""Log rolls and truncation with real processes: rolls on demand and a truncation
under concurrent appends, tailing readers (on the writer and on another gateway) and
whole-log readers; automatic rolls by size, entry count and age (docs/api.md "Logs";
gateway/logs/writer.py, gateway/logs/reads.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial

import pytest

from tests.harness import Cluster, wait_for
from tests.integration.log_support import (
    ACKED,
    Appenders,
    LogClient,
    Pos,
    Tailer,
    duplicates,
    error_code,
    in_log_order,
    metric,
    records_of,
)
from tests.shared import StandardCluster, unique_name

ROLL_ENTRIES = 30
ROLL_BYTES = 20_000
ROLL_AGE_S = 2.0


@pytest.fixture(scope="module")
def roll_cluster(
    shared_cluster: StandardCluster,
) -> Iterator[tuple[Cluster, dict[str, LogClient]]]:
    """The standard cluster's two plain gateways (A, B) and one with small roll settings
    (S) (tests/shared.py); every log name comes from ``unique_name``."""
    small = [
        "--log-roll-entries", str(ROLL_ENTRIES),
        "--log-roll-bytes", str(ROLL_BYTES),
        "--log-roll-age-s", str(ROLL_AGE_S),
    ]  # fmt: skip
    gateways = {
        "a": shared_cluster.writer,
        "b": shared_cluster.reader,
        "s": shared_cluster.gateway(small),
    }
    clients = {key: LogClient(g.url) for key, g in gateways.items()}
    try:
        yield shared_cluster.cluster, clients
    finally:
        for client in clients.values():
            client.close()


@pytest.fixture
def gws(
    roll_cluster: tuple[Cluster, dict[str, LogClient]], request: pytest.FixtureRequest
) -> Iterator[dict[str, LogClient]]:
    """The module's gateways; the processes' log tails are printed when a test fails."""
    cluster, clients = roll_cluster
    failed = request.session.testsfailed
    yield clients
    if request.session.testsfailed > failed:
        print(cluster.log_tails())


class WholeReader:
    """Reads the whole log from its start again and again until stopped; each pass
    must hold no record twice and be in order (a 400 from a truncated position
    restarts the pass)."""

    def __init__(self, url: str, name: str) -> None:
        self.url, self.name = url, name
        self.passes = 0
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> WholeReader:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()

    def _run(self) -> None:
        client = LogClient(self.url)
        try:
            while not self._stop.is_set():
                seen: list[tuple[Pos, bytes]] = []
                start: str | None = None
                while True:
                    r = client.read(self.name, start, limit=37)
                    if r.status_code == 400 and error_code(r) == "invalid_argument":
                        break
                    if r.status_code != 200:
                        self.problems.append(f"{r.status_code} {r.text}")
                        return
                    doc = r.json()
                    seen += records_of(doc)
                    start = doc["next"]
                    if doc["caught_up"]:
                        break
                if duplicates(d for _, d in seen):
                    self.problems.append(
                        f"a record twice in one pass: {duplicates(d for _, d in seen)}"
                    )
                if not _ordered([p for p, _ in seen]):
                    self.problems.append(f"out of log order: {[p for p, _ in seen]}")
                self.passes += 1
        finally:
            client.close()


def _ordered(ids: list[Pos]) -> bool:
    """Each ledger's records in one run with entry ids increasing, no ledger twice."""
    done: set[int] = set()
    for prev, cur in zip(ids, ids[1:], strict=False):
        if cur[0] == prev[0]:
            if cur[1] <= prev[1]:
                return False
        elif cur[0] in done:
            return False
        else:
            done.add(prev[0])
    return True


def test_rolls_and_truncate_under_concurrent_and_tailing_readers(gws: dict[str, LogClient]) -> None:
    """Appends go on while the log rolls several times and a truncation removes its
    oldest ledgers; tailing readers on the writer and on another gateway see every
    record exactly once, in log order, with no gap but the truncated ledgers (a reader
    left in a truncated ledger gets 400 invalid_argument and restarts from the log's
    start); whole-log readers never see a record twice."""
    a, b = gws["a"], gws["b"]
    name = unique_name("roll-truncate")
    a.create(name)
    a.take_writer(name)
    tailers = [Tailer(a.url, name).start(), Tailer(b.url, name).start()]
    whole = WholeReader(b.url, name).start()
    load = Appenders(a.url, name, threads=2, batch=4)
    load.start()
    try:
        for _ in range(4):
            # Ten more than acknowledged at the last roll: at most 2 x 4 records were still
            # in flight to the rolled-out ledger, so every ledger gets some (an empty one
            # ends before position (L, 0) and would be truncated with the ones before).
            load.wait_acked(load.acked_records() + 10)
            a.roll(name)
        ledgers_before = a.show(name)["ledgers"]
        assert len(ledgers_before) == 5
        # The ledgers about to be truncated are closed: what they hold is known now.
        for lid in ledgers_before[:2]:
            a.wait_closed(lid)
        head = [rec for rec in a.read_all(name) if rec[0][0] in ledgers_before[:2]]
        # A reader left inside the first ledger, to see the truncation from there.
        r = b.read(name, limit=1)
        assert r.status_code == 200, r.text
        left_at = r.json()["next"]
        assert left_at.startswith(f"{ledgers_before[0]}:")
        truncated = a.truncate(name, (ledgers_before[2], 0))
        assert truncated["ledgers"] == ledgers_before[2:]
        # A tailer that starts where the reader was left: 400, then from the start.
        late = Tailer(b.url, name, start=left_at).start()
        tailers.append(late)
        load.wait_acked(load.acked_records() + 10)
        a.roll(name)
        load.wait_acked(load.acked_records() + 10)
    finally:
        load.stop()
    assert not [r.detail for r in load.snapshot() if r.outcome != ACKED]
    r = b.read(name, left_at)
    assert r.status_code == 400 and error_code(r) == "invalid_argument", r.text
    restarted = b.read(name, limit=1)
    assert restarted.status_code == 200, restarted.text
    assert records_of(restarted.json())[0][0] == (ledgers_before[2], 0)

    a.roll(name)  # closes the last ledger the appenders wrote: everything is readable
    ledgers = a.show(name)["ledgers"]
    rest = a.read_all(name)
    everything = head + rest
    acked = {p for req in load.snapshot() for p in req.payloads}
    assert sorted(d for _, d in everything) == sorted(acked)
    last = rest[-1][0]
    for tailer in tailers:
        wait_for(partial(tailer.has, last), 30, f"the tailer on {tailer.url} to reach {last}")
    for tailer in tailers:
        tailer.stop()
    whole.stop()
    assert not whole.problems and whole.passes >= 1, whole.problems
    truncated_ids = set(ledgers_before[:2])
    assert late.restarts == 1 and late.snapshot() == rest
    for tailer in tailers:
        seen = tailer.snapshot()
        assert not tailer.errors, tailer.errors
        assert not duplicates(d for _, d in seen), tailer.url
        assert in_log_order(seen, ledgers_before[:2] + ledgers), tailer.url
        # No gap but the truncated ledgers: everything still in the log, in order.
        assert [rec for rec in seen if rec[0][0] not in truncated_ids] == rest, tailer.url
        missed = {rec for rec in head} - set(seen)
        assert all(p[0] in truncated_ids for p, _ in missed)


def _wait_rolls(s: LogClient, name: str, reason: str, count: int) -> None:
    wait_for(
        lambda: (
            metric(s.metrics(), "quire_gateway_log_rolls_total", log=name, reason=reason) >= count
        ),
        20,
        f"{count} rolls of {name} by {reason}",
    )


def _rolls(s: LogClient, name: str, reason: str) -> float:
    return metric(s.metrics(), "quire_gateway_log_rolls_total", log=name, reason=reason)


def _append_until(s: LogClient, name: str, reason: str, payloads: list[bytes]) -> list[bytes]:
    """Append ``payloads`` one by one until the log rolled twice by ``reason`` (a roll
    runs while appends go on to the old ledger, so how many it takes varies); the
    records appended."""
    for count, payload in enumerate(payloads, 1):
        s.append(name, [payload])
        if _rolls(s, name, reason) >= 2:
            return payloads[:count]
    raise AssertionError(f"{len(payloads)} appends to {name} did not roll it twice by {reason}")


def _appended_once(s: LogClient, name: str, payloads: list[bytes]) -> list[int]:
    """Every record readable once, in append order; the log's ledgers."""
    s.roll(name)  # the last ledger closed: its records are readable through any reader
    records = s.read_all(name)
    assert [d for _, d in records] == payloads
    ledgers: list[int] = s.show(name)["ledgers"]
    assert in_log_order(records, ledgers)
    return ledgers


def test_auto_roll_by_size_entries_and_age(gws: dict[str, LogClient]) -> None:
    """A gateway with small roll settings rolls a log's ledger by size, by entry count
    and by age: each trigger adds ledgers to the log's list while appends go on, every
    record is readable exactly once, and quire_gateway_log_rolls_total counts the
    rolls under their reason."""
    s = gws["s"]
    # By entry count: many small records (far below the size limit).
    name = unique_name("auto-entries")
    s.create(name)
    s.take_writer(name)
    payloads = _append_until(s, name, "entries", [f"e-{i}".encode() for i in range(200)])
    ledgers = _appended_once(s, name, payloads)
    assert len(ledgers) >= 3
    assert _rolls(s, name, "size") == 0

    # By size: a few big records (far below the entry count limit).
    name = unique_name("auto-size")
    s.create(name)
    s.take_writer(name)
    payloads = _append_until(s, name, "size", [bytes([i]) * 4_000 for i in range(40)])
    ledgers = _appended_once(s, name, payloads)
    assert len(ledgers) >= 3
    assert _rolls(s, name, "entries") == 0

    # By age: a couple of records, then the ledger grows old.
    name = unique_name("auto-age")
    s.create(name)
    first = s.take_writer(name)["ledger_id"]
    payloads = [b"age-0", b"age-1"]
    for payload in payloads:
        s.append(name, [payload])
    _wait_rolls(s, name, "age", 1)
    ledgers = s.show(name)["ledgers"]
    assert ledgers[0] == first and len(ledgers) >= 2
    s.append(name, [b"age-2"])
    payloads.append(b"age-2")
    _appended_once(s, name, payloads)
    text = s.metrics()
    assert metric(text, "quire_gateway_log_rolls_total", log=name, reason="size") == 0
    assert metric(text, "quire_gateway_log_rolls_total", log=name, reason="entries") == 0


def test_a_closed_ledger_holding_one_record_is_read(gws: dict[str, LogClient]) -> None:
    """A rolled-out ledger holding exactly one record (last entry id 0) shows that
    record to readers on any gateway once it is CLOSED (a regression: entry id 0 was
    taken for "no entries")."""
    a, b = gws["a"], gws["b"]
    name = unique_name("one-record-ledger")
    a.create(name)
    first = a.take_writer(name)["ledger_id"]
    position = a.append(name, [b"only"])
    a.roll(name)
    a.wait_closed(first)
    assert a.read_all(name) == [(position[0], b"only")]
    assert b.read_all(name) == [(position[0], b"only")]
