"""The async client of the bookie HTTP API (docs/api.md "Bookie"): ``transport`` (HTTP/1.1 on
asyncio streams), ``channel`` and ``adds`` (the gateway's callback-driven adds),
``client`` (one bookie's calls), ``answers`` and ``results`` (what its answers become),
``pool`` (one client per bookie id), ``limits`` (their bounds)."""

from services.bookie_client.client import BookieClient
from services.bookie_client.pool import BookieClientPool
from services.bookie_client.results import (
    BookieAddResult,
    EntryResult,
    LacInfo,
    RangeResult,
    StoredInfo,
)

__all__ = [
    "BookieAddResult",
    "BookieClient",
    "BookieClientPool",
    "EntryResult",
    "LacInfo",
    "RangeResult",
    "StoredInfo",
]
