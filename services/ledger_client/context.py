"""What the ledger client's runners share, built once by the service that runs the
client (docs/style.md §7): the gateway in its lifespan, the replication worker for the
recoveries it runs.

The context holds only long-lived clients and stores, each typed as the small
Protocol the client needs of it, the client's settings and metrics, plus a clock and
a seeded ``random.Random``, so tests pass fakes (an in-memory metadata store, fake
bookies, a fixed clock). The write handles and recoveries are not here:
``services.ledger_client.handles`` holds them beside the context (the gateway's
``gateway.service.Gateway`` keeps both).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from services.bookie_client import BookieAddResult, LacInfo, RangeResult
from services.errors import InvalidArgument
from services.ledger_client.metrics import LedgerClientMetrics
from services.ledger_client.settings import LedgerClientSettings
from services.protocol.messages import WritableBookies
from services.protocol.metadata import LedgerMetadata
from services.protocol.placement import rack_counts
from services.protocol.reads_lac import SeenLacs
from services.wire.framing import FramedRecord
from services.zk.ledger_store import VersionedLedger

log = logging.getLogger(__name__)


class LedgerMetadataStore(Protocol):
    """Ledger metadata with versions (``services.zk.ledger_store.LedgerStore``)."""

    @property
    def connected(self) -> bool:
        """Whether ZooKeeper can answer now (its session is connected)."""
        ...

    async def new_ledger_id(self) -> int: ...

    async def create(self, metadata: LedgerMetadata) -> VersionedLedger: ...

    async def get(self, ledger_id: int) -> VersionedLedger: ...

    async def get_many(
        self, ledger_ids: list[int]
    ) -> list[VersionedLedger | InvalidArgument | None]: ...

    async def compare_and_set(self, metadata: LedgerMetadata, version: int) -> VersionedLedger:
        """``MetadataConflict`` when the version moved, ``LedgerNotFound`` when deleted."""
        ...

    async def delete(self, ledger_id: int, unless_changed: tuple[str, int] | None = None) -> None:
        """With ``unless_changed`` (a znode and its version) only while it is unchanged."""
        ...

    async def list(self, after: int | None, limit: int) -> tuple[list[int], int | None]: ...


class BookieRegistryView(Protocol):
    """The registered bookies (``services.zk.registry.BookieRegistry``)."""

    @property
    def writable(self) -> list[str]: ...

    def address_of(self, bookie_id: str) -> str: ...

    def instance_of(self, bookie_id: str) -> str | None:
        """The instance id the bookie registered with (None: unknown)."""
        ...

    @property
    def racks(self) -> Mapping[str, str | None]:
        """Every registered bookie and its rack (None: it registered none)."""
        ...


class BookieApi(Protocol):
    """What the gateway asks of one bookie (``services.bookie_client.BookieClient``). Its
    senders use ``start_add`` (a callback-driven add) when the client has it, and
    otherwise run ``add`` in a task (services/ledger_client/senders.py)."""

    async def add(
        self, records: list[FramedRecord], timeout_s: float | None = None
    ) -> BookieAddResult: ...

    async def read_entry(self, ledger_id: int, entry_id: int) -> FramedRecord: ...

    async def read_range(
        self,
        ledger_id: int,
        first: int,
        last: int,
        max_entries: int = ...,
        max_bytes: int = ...,
        stride: int = ...,
        residues: tuple[int, ...] = ...,
    ) -> RangeResult: ...

    async def read_lac(
        self, ledger_id: int, after: int | None = None, wait_ms: int = 0
    ) -> LacInfo: ...

    async def write_lacs(self, lacs: Mapping[int, int]) -> int: ...

    async def fence(self, ledger_id: int) -> LacInfo: ...

    async def delete_ledger(self, ledger_id: int) -> None: ...


class BookieLookup(Protocol):
    """The long-lived client of each bookie (``services.bookie_client.BookieClientPool``)."""

    def get(self, bookie_id: str, address: str | None = None) -> BookieApi: ...


def monotonic_ms() -> int:
    """Milliseconds from a monotonic clock (the protocol core's time)."""
    return int(time.monotonic() * 1000)


@dataclass
class LedgerClientContext:
    settings: LedgerClientSettings
    ledgers: LedgerMetadataStore
    registry: BookieRegistryView
    bookies: BookieLookup
    metrics: LedgerClientMetrics
    clock: Callable[[], int] = monotonic_ms
    rng: random.Random = field(default_factory=random.Random)
    # The highest LAC this client learnt from bookies per ledger
    # (services/ledger_client/runners/read.py).
    lacs_seen: SeenLacs = field(default_factory=SeenLacs)

    def writable_bookies(self) -> list[str]:
        """Registered, writable bookies that may join an ensemble."""
        return self.registry.writable

    def writable_event(self) -> WritableBookies:
        """The writable bookies with their registered instances, for the protocol core
        (new fragments record which instance of each bookie they were written to)."""
        ids = self.registry.writable
        racks = tuple((b, r) for b, r in sorted(self.registry.racks.items()) if r is not None)
        return WritableBookies(tuple(ids), tuple(self.registry.instance_of(b) for b in ids), racks)

    def warn_unspread(self, metadata: LedgerMetadata) -> None:
        """Log that ``metadata``'s last fragment was placed without the rack spread
        (``placement.Placement.spread`` false): too few racks, or bookies on them."""
        log.warning(
            "ensemble placed without the rack spread: too few racks or bookies on them",
            extra={
                "fields": {
                    "ledger_id": metadata.ledger_id,
                    "ensemble": list(metadata.ensemble),
                    "write_quorum": metadata.write_quorum,
                    "racks": rack_counts(self.registry.racks),
                }
            },
        )

    def bookie(self, bookie_id: str) -> BookieApi:
        """The long-lived client of a bookie, reached at its registered address."""
        return self.bookies.get(bookie_id, self.registry.address_of(bookie_id))
