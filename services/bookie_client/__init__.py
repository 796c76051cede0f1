"""The async client of the bookie HTTP API (bookie/API.md): ``transport`` (HTTP/1.1 on
asyncio streams), ``client`` (one bookie's calls and answers), ``pool`` (one client per
bookie id)."""

from services.bookie_client.client import (
    AddResult,
    BookieClient,
    EntryResult,
    LacInfo,
    RangeResult,
)
from services.bookie_client.pool import BookieClientPool

__all__ = [
    "AddResult",
    "BookieClient",
    "BookieClientPool",
    "EntryResult",
    "LacInfo",
    "RangeResult",
]
