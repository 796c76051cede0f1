"""Explicit LAC updates to one bookie, coalesced across ledgers (``LacSender``; the
client's ``SenderTable``, services/ledger_client/senders.py, keeps one per bookie)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from services.errors import QuireError
from services.ledger_client.context import BookieApi
from services.limits import LAC_BATCH_MAX

log = logging.getLogger(__name__)


class LacSender:
    """Explicit LAC updates to one bookie, coalesced across ledgers.

    An idle ledger tells each bookie of its ensemble its LAC (so tailing readers
    see the last entry). With many ledgers that was one request per ledger and
    bookie; here updates queued while a request is in flight go out together in
    the next one (``POST /v1/lacs``), keeping only the highest LAC per ledger.
    At most one request is in flight per bookie, and at most
    ``lac_batch_max`` ledgers go in one. Updates are best effort: a failed one
    is dropped (the next add carries the LAC anyway)."""

    def __init__(self, bookie_id: str, client: Callable[[], BookieApi]) -> None:
        self.bookie_id = bookie_id
        self._client = client
        self._pending: dict[int, int] = {}
        self._task: asyncio.Task[None] | None = None

    def update(self, ledger_id: int, lac: int) -> None:
        if lac > self._pending.get(ledger_id, -2):
            self._pending[ledger_id] = lac
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch: dict[int, int] = {}
                for ledger_id in list(self._pending)[:LAC_BATCH_MAX]:
                    batch[ledger_id] = self._pending.pop(ledger_id)
                try:
                    await self._client().write_lacs(batch)
                except QuireError as exc:
                    log.debug("LAC update to %s failed: %s", self.bookie_id, exc.code)
        finally:
            self._task = None

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
