"""In-memory fakes of what ``LedgerClientContext`` holds: a versioned ledger metadata store,
a registry view, and bookies that store, fence and refuse like real ones (docs/api.md "Bookie"),
so the runners run on a real asyncio loop without processes."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry

from services.bookie_client import BookieAddResult, LacInfo, RangeResult
from services.errors import (
    BookieUnavailable,
    EntryNotFound,
    LedgerNotFound,
    MetadataConflict,
)
from services.ledger_client.context import LedgerClientContext, monotonic_ms
from services.ledger_client.metrics import LedgerClientMetrics
from services.ledger_client.settings import LedgerClientSettings
from services.protocol.metadata import LedgerMetadata
from services.wire.framing import FramedRecord
from services.zk.ledger_store import VersionedLedger


class FakeLedgerStore:
    """Ledger znodes with versions; ``compare_and_set`` is a real CAS."""

    def __init__(self) -> None:
        self.nodes: dict[int, VersionedLedger] = {}
        self.writes: list[LedgerMetadata] = []
        self._next_id = 1
        self.connected = True

    async def new_ledger_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def create(self, metadata: LedgerMetadata) -> VersionedLedger:
        self.nodes[metadata.ledger_id] = VersionedLedger(metadata, 0)
        return self.nodes[metadata.ledger_id]

    async def get(self, ledger_id: int) -> VersionedLedger:
        if ledger_id not in self.nodes:
            raise LedgerNotFound(f"no ledger {ledger_id}")
        return self.nodes[ledger_id]

    async def get_many(self, ledger_ids: list[int]) -> list[VersionedLedger | None]:
        return [self.nodes.get(ledger_id) for ledger_id in ledger_ids]

    async def compare_and_set(self, metadata: LedgerMetadata, version: int) -> VersionedLedger:
        current = await self.get(metadata.ledger_id)
        if current.version != version:
            raise MetadataConflict(f"ledger {metadata.ledger_id} is at {current.version}")
        self.writes.append(metadata)
        self.nodes[metadata.ledger_id] = VersionedLedger(metadata, version + 1)
        return self.nodes[metadata.ledger_id]

    async def delete(self, ledger_id: int, unless_changed: tuple[str, int] | None = None) -> None:
        self.nodes.pop(ledger_id, None)

    async def list(self, after: int | None, limit: int) -> tuple[list[int], int | None]:
        ids = sorted(i for i in self.nodes if after is None or i > after)
        return ids[:limit], None


class FakeBookie:
    """One bookie: stores records, keeps a fence flag per ledger, or is down. Its answers
    name its instance; ``reformat()`` makes it a new, empty instance."""

    def __init__(self, bookie_id: str) -> None:
        self.bookie_id = bookie_id
        self.instance_id = f"{bookie_id}#1"
        self.down = False
        self.gate: asyncio.Event | None = None  # when set: adds and fences wait for it
        self.entries: dict[tuple[int, int], FramedRecord] = {}
        self.fenced: set[int] = set()
        self.lacs: dict[int, int] = {}
        self.adds: list[list[FramedRecord]] = []

    def reformat(self) -> None:
        """What ``quire bookie format`` and a restart do: a new instance, nothing stored."""
        generation = int(self.instance_id.rpartition("#")[2]) + 1
        self.instance_id = f"{self.bookie_id}#{generation}"
        self.entries.clear()
        self.fenced.clear()
        self.lacs.clear()

    def _check(self) -> None:
        if self.down:
            raise BookieUnavailable(f"bookie {self.bookie_id} is down")

    async def _pass_gate(self) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self._check()

    async def add(
        self, records: list[FramedRecord], timeout_s: float | None = None
    ) -> BookieAddResult:
        await self._pass_gate()
        self.adds.append(list(records))
        rejected = []
        for r in records:
            if r.ledger_id in self.fenced and not r.recovery:
                rejected.append((r.ledger_id, r.entry_id, "ledger_fenced"))
                continue
            self.entries[(r.ledger_id, r.entry_id)] = r
            self.lacs[r.ledger_id] = max(self.lacs.get(r.ledger_id, -1), r.lac)
        return BookieAddResult(len(records) - len(rejected), rejected, self.instance_id)

    def last_entry(self, ledger_id: int) -> int:
        return max((e for lid, e in self.entries if lid == ledger_id), default=-1)

    async def read_entry(self, ledger_id: int, entry_id: int) -> FramedRecord:
        self._check()
        record = self.entries.get((ledger_id, entry_id))
        if record is None:
            error = EntryNotFound(f"no entry {ledger_id}/{entry_id}")
            error.bookie_instance_id = self.instance_id  # type: ignore[attr-defined]
            raise error
        return record

    async def read_range(
        self, ledger_id: int, first: int, last: int, max_entries: int = 1_000,
        max_bytes: int = 1 << 23, stride: int = 0, residues: tuple[int, ...] = (),
    ) -> RangeResult:  # fmt: skip
        self._check()
        ids = [e for lid, e in sorted(self.entries) if lid == ledger_id and first <= e <= last
               and (not stride or e % stride in residues)]  # fmt: skip
        records = [self.entries[(ledger_id, e)] for e in ids[:max_entries]]
        return RangeResult(records, self.last_entry(ledger_id), self.instance_id)

    async def read_lac(self, ledger_id: int, after: int | None = None, wait_ms: int = 0) -> LacInfo:
        self._check()
        lac = self.lacs.get(ledger_id, -1)
        fenced = ledger_id in self.fenced
        last = self.last_entry(ledger_id)
        return LacInfo(ledger_id, lac, last, fenced, instance_id=self.instance_id)

    async def write_lacs(self, lacs: Mapping[int, int]) -> int:
        self._check()
        for ledger_id, lac in lacs.items():
            self.lacs[ledger_id] = max(self.lacs.get(ledger_id, -1), lac)
        return len(lacs)

    async def fence(self, ledger_id: int) -> LacInfo:
        await self._pass_gate()
        self.fenced.add(ledger_id)  # persisted before the answer
        return await self.read_lac(ledger_id)

    async def delete_ledger(self, ledger_id: int) -> None:
        self._check()
        for key in [k for k in self.entries if k[0] == ledger_id]:
            del self.entries[key]


class FakeBookies:
    """The registry view and the client lookup at once: every bookie is registered and
    writable unless it is down."""

    def __init__(self, ids: list[str]) -> None:
        self.bookies = {b: FakeBookie(b) for b in ids}

    @property
    def writable(self) -> list[str]:
        return [b for b, bookie in self.bookies.items() if not bookie.down]

    def address_of(self, bookie_id: str) -> str:
        return bookie_id

    def instance_of(self, bookie_id: str) -> str | None:
        bookie = self.bookies.get(bookie_id)
        return bookie.instance_id if bookie is not None else None

    @property
    def racks(self) -> dict[str, str | None]:
        return {b: None for b in self.bookies}

    def get(self, bookie_id: str, address: str | None = None) -> FakeBookie:
        return self.bookies[bookie_id]


def make_context(
    bookies: FakeBookies,
    store: FakeLedgerStore | None = None,
    clock: Callable[[], int] | None = None,
    **settings: int,
) -> LedgerClientContext:
    return LedgerClientContext(
        settings=LedgerClientSettings(**settings),
        ledgers=store or FakeLedgerStore(),
        registry=bookies,
        bookies=bookies,
        metrics=LedgerClientMetrics(CollectorRegistry(), "gateway"),
        clock=clock or monotonic_ms,
        rng=random.Random(7),
    )
