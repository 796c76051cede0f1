"""The simulated world: a seeded scheduler, a faulty network, in-memory bookies and an
in-memory versioned metadata store.

Everything random draws from one ``random.Random(seed)`` and every callback runs
from one priority queue ordered by (time, sequence number), so a seed replays
exactly. Nothing here iterates a set of strings in an order that matters (string
hashing is randomised per process).

Bookies follow bookie/API.md: an add is stored (durably: a crash loses nothing)
unless the ledger is fenced there and the add is not a recovery add; a read-only
bookie refuses normal adds; the fence flag is set before the fence is answered.
A crashed bookie answers nothing (connection refused) until it restarts.
The network may delay, drop (in either direction), partition a gateway from a
bookie for a while, and corrupt a read answer (the digest must catch it).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from services.errors import invariant
from services.protocol.metadata import LedgerMetadata
from services.wire.digest import record_ok
from services.wire.framing import Record


class Scheduler:
    """Simulated time in ms and a queue of callbacks."""

    def __init__(self) -> None:
        self.now = 0
        self.steps = 0
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0

    def at(self, time: int, callback: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (max(time, self.now), self._seq, callback))

    def after(self, delay: int, callback: Callable[[], None]) -> None:
        self.at(self.now + delay, callback)

    def step(self) -> bool:
        if not self._queue:
            return False
        time, _, callback = heapq.heappop(self._queue)
        self.now = time
        self.steps += 1
        callback()
        return True

    def __len__(self) -> int:
        return len(self._queue)


@dataclass
class Faults:
    """Network and store fault rates of one run (all zero once healed)."""

    delay_max_ms: int = 10
    drop_p: float = 0.0
    corrupt_read_p: float = 0.0
    metadata_fail_p: float = 0.0
    # (gateway, bookie, from ms, to ms): messages between them are lost meanwhile
    partitions: list[tuple[str, str, int, int]] = field(default_factory=list)
    # (bookie, from ms, to ms, extra ms): "clogged" links, every message that long slower
    clogs: list[tuple[str, int, int, int]] = field(default_factory=list)
    slow: dict[str, int] = field(default_factory=dict)  # bookie -> delay multiplier

    def healed(self) -> Faults:
        return Faults(delay_max_ms=self.delay_max_ms)


class Network:
    def __init__(self, scheduler: Scheduler, rng: random.Random, faults: Faults) -> None:
        self.scheduler = scheduler
        self.rng = rng
        self.faults = faults

    def delay(self, bookie: str | None = None) -> int:
        faults = self.faults
        if bookie is None:
            return self.rng.randint(1, faults.delay_max_ms)
        delay = self.rng.randint(1, faults.delay_max_ms * faults.slow.get(bookie, 1))
        now = self.scheduler.now
        for clogged, start, end, extra in faults.clogs:
            if clogged == bookie and start <= now < end:
                delay += extra
        return delay

    def passes(self, gateway: str, bookie: str) -> bool:
        """Whether one message between them gets through now."""
        now = self.scheduler.now
        for gw, b, start, end in self.faults.partitions:
            if gw == gateway and b == bookie and start <= now < end:
                return False
        return not (self.faults.drop_p and self.rng.random() < self.faults.drop_p)

    def corrupt(self) -> bool:
        return bool(self.faults.corrupt_read_p) and self.rng.random() < self.faults.corrupt_read_p


class BookieDown(Exception):
    """Connection refused: the bookie is crashed."""


class BookieReadOnly(Exception):
    pass


@dataclass
class SimBookie:
    bookie_id: str
    ledger_id: int
    on_store: Callable[[str, Record], None]
    up: bool = True
    readonly: bool = False
    fenced: bool = False
    lac: int = -1
    entries: dict[int, Record] = field(default_factory=dict)
    # LAC long polls waiting here: each is called after every add and LAC update
    watchers: list[Callable[[], None]] = field(default_factory=list)

    @property
    def last_entry_id(self) -> int:
        return max(self.entries, default=-1)

    def _check_up(self) -> None:
        if not self.up:
            raise BookieDown(self.bookie_id)

    def add(self, records: tuple[Record, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Store records; the ids stored and the ids refused because the ledger is fenced."""
        self._check_up()
        if self.readonly and any(not r.recovery for r in records):
            raise BookieReadOnly(self.bookie_id)
        stored, fenced = [], []
        for r in records:
            invariant(r.ledger_id == self.ledger_id, "an add for another ledger")
            invariant(record_ok(r), f"bookie {self.bookie_id} got a record with a bad crc32c")
            if self.fenced and not r.recovery:
                fenced.append(r.entry_id)
                continue
            self.entries[r.entry_id] = r
            self.lac = max(self.lac, r.lac)
            stored.append(r.entry_id)
            self.on_store(self.bookie_id, r)
        self._wake()
        return tuple(stored), tuple(fenced)

    def fence(self) -> tuple[int, int]:
        self._check_up()
        self.fenced = True  # persisted before the answer
        return self.lac, max(self.entries, default=-1)

    def write_lac(self, lac: int) -> None:
        self._check_up()
        self.lac = max(self.lac, lac)
        self._wake()

    def _wake(self) -> None:
        watchers, self.watchers = self.watchers, []
        for watcher in watchers:
            watcher()

    def read(self, entry_id: int) -> Record | None:
        self._check_up()
        return self.entries.get(entry_id)

    def read_range(self, first: int, last: int, entries_max: int, bytes_max: int) -> list[Record]:
        """Stored entries in [first, last], ascending: at most ``entries_max`` and, but
        for the first, ``bytes_max`` payload bytes (bookie/API.md)."""
        self._check_up()
        found: list[Record] = []
        size = 0
        for entry_id in range(first, last + 1):
            record = self.entries.get(entry_id)
            if record is None:
                continue
            if len(found) >= entries_max or found and size + len(record.payload) > bytes_max:
                break
            found.append(record)
            size += len(record.payload)
        return found

    def read_lac(self) -> int:
        self._check_up()
        return self.lac


def corrupted(record: Record) -> Record:
    payload = bytes([record.payload[0] ^ 0xFF]) + record.payload[1:] if record.payload else b"?"
    return replace(record, payload=payload)


class MetadataCell:
    """One ledger's znode: bytes and a version, compare-and-set. Readers get the value
    parsed back from the bytes (once per version: ``LedgerMetadata`` is immutable)."""

    def __init__(self, metadata: LedgerMetadata) -> None:
        self.data = metadata.to_json()
        self.version = 0
        self.history: list[tuple[int, LedgerMetadata]] = [(0, metadata)]
        self._parsed = LedgerMetadata.from_json(self.data)

    @property
    def metadata(self) -> LedgerMetadata:
        return self._parsed

    def compare_and_set(self, metadata: LedgerMetadata, expected: int) -> bool:
        if expected != self.version:
            return False
        self.data = metadata.to_json()
        self._parsed = LedgerMetadata.from_json(self.data)
        self.version += 1
        self.history.append((self.version, metadata))
        return True
