"""The simulated world: a seeded scheduler, a faulty network, in-memory bookies and an
in-memory versioned metadata store.

Everything random draws from one ``random.Random(seed)`` and every callback runs
from one priority queue ordered by (time, sequence number), so a seed replays
exactly. Nothing here iterates a set of strings in an order that matters (string
hashing is randomised per process).

The bookies are in ``bookie``. The network may delay, drop (in either direction),
partition a gateway from a bookie for a while, corrupt a read answer (the digest
must catch it), and deliver a request twice (a client's retry on a stale
connection: the first delivery's answer may be lost, the second may come late).
The metadata store may fail, apply a compare-and-set whose caller already gave up
(it timed out; the write lands later), and serve stale reads.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from services.protocol.metadata import LedgerMetadata
from services.wire.framing import FramedRecord


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
    duplicate_p: float = 0.0  # an add or fence delivered twice (a retry)
    late_cas_p: float = 0.0  # a CAS times out for its caller and lands later
    stale_read_ms: int = 0  # recoverers' and readers' metadata reads lag up to this

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
            return 1 + int(self.rng.random() * faults.delay_max_ms)
        delay = 1 + int(self.rng.random() * faults.delay_max_ms * faults.slow.get(bookie, 1))
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


def corrupted(record: FramedRecord) -> FramedRecord:
    payload = bytes([record.payload[0] ^ 0xFF]) + record.payload[1:] if record.payload else b"?"
    return record._replace(payload=payload)


class MetadataCell:
    """One ledger's znode: bytes and a version, compare-and-set. Readers get the value
    parsed back from the bytes (once per version: ``LedgerMetadata`` is immutable).

    Reads may be stale, as a ZooKeeper follower's are: ``read(gateway, lag_ms)``
    returns the newest version written at least ``lag_ms`` ago, but never one older
    than that gateway already saw (a session's reads are monotonic)."""

    def __init__(self, metadata: LedgerMetadata, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.data = metadata.to_json()
        self.version = 0
        self._parsed = LedgerMetadata.from_json(self.data)
        self.history: list[tuple[int, LedgerMetadata, int]] = [(0, self._parsed, -1)]
        self._seen: dict[str, int] = {}

    @property
    def metadata(self) -> LedgerMetadata:
        return self._parsed

    def read(self, gateway: str, lag_ms: int = 0) -> tuple[LedgerMetadata, int]:
        """What ``gateway`` reads now, up to ``lag_ms`` behind the store."""
        floor = self._seen.get(gateway, 0)
        version, metadata = self.version, self._parsed
        if lag_ms > 0:
            horizon = self.scheduler.now - lag_ms
            for v, md, written_at in reversed(self.history):
                if v <= floor or written_at <= horizon:
                    version, metadata = v, md
                    break
        self._seen[gateway] = max(floor, version)
        return metadata, version

    def compare_and_set(self, metadata: LedgerMetadata, expected: int) -> bool:
        if expected != self.version:
            return False
        self.data = metadata.to_json()
        self._parsed = LedgerMetadata.from_json(self.data)
        self.version += 1
        self.history.append((self.version, self._parsed, self.scheduler.now))
        return True
