"""Where a read from a time starts (gateway/logs/time_search.py ``find_start``; docs/api.md
``GET /v1/logs/{name}/records`` ``from_time``): over an in-memory log of ledgers and
stamped entries, the first entry stamped >= T, found in a logarithmic number of entry
reads, with empty ledgers, batches sharing a stamp, T before and after everything, and
the stamps of CLOSED ledgers kept."""

from __future__ import annotations

import asyncio
import math
import random

import pytest

from gateway.logs import time_search as ts
from services.protocol.logs import Position


class Kept:
    """``MetadataCache``'s stamps, as a plain dict."""

    def __init__(self) -> None:
        self.items: dict[int, tuple[int, int]] = {}

    def stamps(self, ledger_id: int) -> tuple[int, int] | None:
        return self.items.get(ledger_id)

    def keep_stamps(self, ledger_id: int, first_ms: int, last_ms: int) -> None:
        self.items[ledger_id] = (first_ms, last_ms)


class FakeLog:
    """Ledgers 100, 101, ... each a list of stamps (entry id = index), with each entry's
    ``remaining`` in ``remaining`` (0 when not given); the last one OPEN when
    ``open_last``."""

    def __init__(
        self,
        ledgers: list[list[int | None]],
        open_last: bool = False,
        remaining: dict[int, list[int]] | None = None,
    ) -> None:
        self.ids = [100 + i for i in range(len(ledgers))]
        self.entries = dict(zip(self.ids, ledgers, strict=True))
        self.remaining = remaining or {}
        self.open_last = open_last
        self.reads = 0
        self.kept = Kept()

    async def span_of(self, index: int) -> ts.Span:
        closed = not (self.open_last and index == len(self.ids) - 1)
        return ts.Span(len(self.entries[self.ids[index]]) - 1, closed)

    async def time_of(self, ledger_id: int, entry_id: int, end: int) -> tuple[int | None, int]:
        assert 0 <= entry_id <= end
        self.reads += 1
        remaining = self.remaining.get(ledger_id)
        return self.entries[ledger_id][entry_id], remaining[entry_id] if remaining else 0

    def find(self, from_ms: int) -> Position | None:
        return asyncio.run(ts.find_start(self.ids, self.span_of, self.time_of, self.kept, from_ms))

    def scan(self, from_ms: int) -> Position:
        """The answer by a full scan."""
        for lid in self.ids:
            for entry_id, stamp in enumerate(self.entries[lid]):
                if stamp is not None and stamp >= from_ms:
                    return Position(lid, entry_id)
        last = self.ids[-1]
        return Position(last, len(self.entries[last]))


def random_log(rng: random.Random, ledgers: int, entries_max: int) -> FakeLog:
    """Monotone stamps in batches (a batch's entries share its stamp), with empty
    ledgers among them."""
    stamp = 1_000
    out: list[list[int | None]] = []
    for _ in range(ledgers):
        ledger: list[int | None] = []
        if rng.random() > 0.2:
            while len(ledger) < rng.randint(1, entries_max):
                stamp += rng.choice([0, 1, 5, 30])
                ledger += [stamp] * rng.randint(1, 4)
        out.append(ledger)
    return FakeLog(out)


def test_an_empty_list_has_no_start() -> None:
    assert FakeLog([]).find(5) is None


def test_before_everything_is_the_first_record_and_after_it_the_end() -> None:
    """T before the first stamp: the first entry of the first non-empty ledger; T past
    every stamp: the end of the log (after the last readable entry)."""
    log = FakeLog([[], [10, 10, 20], [], [30, 40], []])
    assert log.find(0) == Position(101, 0)
    assert log.find(41) == Position(104, 0)  # the last ledger is empty: its entry 0
    assert FakeLog([[10], [20, 30]]).find(31) == Position(101, 2)


def test_a_stamp_shared_by_a_batch_starts_at_the_batch() -> None:
    """Entries of one batch share its stamp: T equal to it lands on its first entry, even
    across equal stamps of the batch before (the first entry stamped >= T)."""
    log = FakeLog([[5, 7, 7, 7, 9], [9, 9, 12]])
    assert log.find(7) == Position(100, 1)
    assert log.find(9) == Position(100, 4)
    assert log.find(10) == Position(101, 2)


def test_an_open_last_ledger_is_searched_up_to_its_end() -> None:
    """The open ledger's readable part (up to its LAC) is searched; its stamps are not
    kept (they may still grow)."""
    log = FakeLog([[1, 2], [3, 4, 5]], open_last=True)
    assert log.find(4) == Position(101, 1)
    assert 101 not in log.kept.items
    assert log.find(6) == Position(101, 3)


def test_past_everything_never_starts_inside_a_batch_the_lac_cuts() -> None:
    """The open ledger's LAC falls inside a batch (entries 2-4 stamped 7, LAC 3): a time
    past every record starts at the batch's first entry, not after the LAC (a reader
    would see the batch's tail without its head)."""
    log = FakeLog([[1], [5, 6, 7, 7]], open_last=True, remaining={101: [0, 0, 2, 1]})
    assert log.find(8) == Position(101, 2)
    whole = FakeLog([[1], [5, 6, 7]], open_last=True, remaining={101: [0, 0, 0]})
    assert whole.find(8) == Position(101, 3)


def test_entries_without_a_stamp_count_as_older() -> None:
    """Old continuations (no stamp) are older than any time: the search passes them."""
    log = FakeLog([[10, None, None, 20], [30]])
    assert log.find(15) == Position(100, 3)
    assert log.find(10) == Position(100, 0)


@pytest.mark.parametrize("seed", range(20))
def test_the_search_agrees_with_a_scan_in_logarithmic_reads(seed: int) -> None:
    """For many logs and times (stamps, one below, one above): the position of a full
    scan, with at most 2*log2(ledgers) + log2(entries) + 4 entry reads; a repeated
    search reads no closed ledger's ends again."""
    rng = random.Random(seed)
    log = random_log(rng, rng.randint(1, 120), rng.randint(1, 300))
    stamps = sorted({s for e in log.entries.values() for s in e if s is not None})
    entries_max = max(1, *(len(e) for e in log.entries.values()))
    bound = 2 * math.log2(len(log.ids)) + math.log2(entries_max) + 4
    times = [0, *stamps, *(s + 1 for s in stamps), *(s - 1 for s in stamps)]
    for t in rng.sample(times, min(len(times), 60)):
        cold = FakeLog(list(log.entries.values()))
        assert cold.find(t) == cold.scan(t), t
        assert cold.reads <= bound, (t, cold.reads, bound)
        before = cold.reads
        assert cold.find(t) == cold.scan(t)
        assert cold.reads - before <= math.log2(entries_max) + 1  # the ledgers' ends kept
