"""The replica check's I/O: ask each live bookie, in bulk, which entries it stores.

For a page of ledgers, each bookie is asked once per ``STORED_BATCH_MAX`` ledgers
(``BookieClient.stored_many``; ``--audit-verify all`` digest-checks every entry, which
only the one-ledger call does, so it asks ledger by ledger), with at most
``concurrency`` requests in flight in all. A bookie that fails or does not answer
within the request time-out (a hung bookie) is skipped for the rest of the audit: a
time-out is no proof of loss, so nothing is marked for it, and no mark it is part of
is cleared.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence

from auditor.decisions import StoredView, settled_shares
from auditor.limits import STORED_BATCH_LEDGERS_MAX
from services.bookie_client import BookieClient, BookieClientPool
from services.errors import LedgerNotFound, QuireError
from services.protocol.metadata import LedgerMetadata

log = logging.getLogger(__name__)


class ReplicaChecker:
    """One audit's replica check (it remembers the bookies it skipped)."""

    def __init__(
        self,
        pool: BookieClientPool,
        address_of: Callable[[str], str],
        verify: str,
        concurrency: int,
    ) -> None:
        self.pool = pool
        self.address_of = address_of
        self.verify = verify
        self._slots = asyncio.Semaphore(concurrency)
        self.skipped: set[str] = set()

    async def check(
        self, ledgers: Sequence[LedgerMetadata], live: Collection[str]
    ) -> dict[int, dict[str, StoredView]]:
        """ledger id -> bookie -> its answer, for every live bookie with a settled share
        of the ledger that answered."""
        wanted: dict[str, list[int]] = {}
        for metadata in ledgers:
            for bookie in settled_shares(metadata):
                if bookie in live and bookie not in self.skipped:
                    wanted.setdefault(bookie, []).append(metadata.ledger_id)
        out: dict[int, dict[str, StoredView]] = {}
        calls = [
            self._ask(bookie, ids[i : i + STORED_BATCH_LEDGERS_MAX], out)
            for bookie, ids in wanted.items()
            for i in range(0, len(ids), STORED_BATCH_LEDGERS_MAX)
        ]
        await asyncio.gather(*calls)
        return out

    async def _ask(
        self, bookie: str, ledger_ids: list[int], out: dict[int, dict[str, StoredView]]
    ) -> None:
        async with self._slots:
            if bookie in self.skipped:
                return
            client = self.pool.get(bookie, self.address_of(bookie))
            try:
                if self.verify == "all":
                    answers: list[StoredView] = [await self._one(client, lid) for lid in ledger_ids]
                else:
                    answers = list(await client.stored_many(ledger_ids, verify=self.verify))
            except QuireError as exc:
                log.warning("replica check skips bookie %s for this audit: %s", bookie, exc)
                self.skipped.add(bookie)
                return
        for lid, info in zip(ledger_ids, answers, strict=True):
            out.setdefault(lid, {})[bookie] = info

    async def _one(self, client: BookieClient, ledger_id: int) -> StoredView:
        try:
            return await client.stored(ledger_id, verify="all")
        except LedgerNotFound:
            return _Unknown()


class _Unknown:
    """A bookie's answer for a ledger it knows nothing of."""

    known = False
    ranges: tuple[tuple[int, int], ...] = ()
    corrupt: tuple[int, ...] = ()
    truncated = False

    def holds(self, entry_id: int) -> bool:
        return False
