"""What the gateway's routes and runners share, built once in the lifespan (STYLE.md §7)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from gateway.metrics import GatewayMetrics
from services.bookie_client import BookieClient, BookieClientPool
from services.settings import GatewaySettings
from services.zk.ledger_store import LedgerStore
from services.zk.registry import BookieRegistry
from services.zk.store import MetadataStore


@dataclass
class GatewayContext:
    settings: GatewaySettings
    store: MetadataStore
    ledgers: LedgerStore
    registry: BookieRegistry
    bookies: BookieClientPool
    metrics: GatewayMetrics
    rng: random.Random = field(default_factory=random.Random)

    def writable_bookies(self) -> list[str]:
        """Registered, writable bookies that may join an ensemble."""
        return self.registry.writable

    def bookie(self, bookie_id: str) -> BookieClient:
        """The long-lived client of a bookie, reached at its registered address."""
        return self.bookies.get(bookie_id, self.registry.address_of(bookie_id))
