"""The last record of a log's closed ledgers: where a conditional append
(``Expected-Last-Position``) compares, when the writer's own ledger holds no record yet.

The ledgers are walked backwards from the newest; each must be CLOSED (a ledger the
writer rolled away from is waited for, as an append's settle waits:
``steps.closed_end``). An empty ledger is passed over. In a non-empty one the last
visible record is its last entry unless the ledger ends with a batch cut short by a
writer crash (``log_records.visible``): only the last batch of a ledger can be cut (a
recovery ends at the last entry it can read in order), so the entries are read back a
page at a time until one is visible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gateway.limits import TAIL_PAGE_ENTRIES
from gateway.logs import steps
from services.errors import Unavailable
from services.ledger_client.runners import read as reads
from services.protocol import log_records
from services.protocol.logs import Position
from services.protocol.reads import digest_key

if TYPE_CHECKING:  # the gateway builds its log writers with itself (gateway/app.py)
    from gateway.service import Gateway


async def last_record(gw: Gateway, ledger_ids: Sequence[int]) -> Position | None:
    """The last visible record of ``ledger_ids`` (a log's ledgers in log order, all
    closed or closing), None when they hold none. ``Unavailable`` when a ledger is not
    closed in time."""
    for ledger_id in reversed(ledger_ids):
        end = await steps.closed_end(gw, ledger_id)
        if end is None:
            raise Unavailable(
                f"ledger {ledger_id} of the log is not closed yet: its last record cannot "
                "be told now; try again"
            )
        if end < 0:  # empty, or gone (truncated away: it holds nothing after the rest)
            continue
        found = await _last_visible(gw, ledger_id, end)
        if found is not None:
            return Position(ledger_id, found)
    return None


async def _last_visible(gw: Gateway, ledger_id: int, end: int) -> int | None:
    metadata = await gw.metadata.ledger(ledger_id)
    key = digest_key(metadata, None)
    stop = end
    while stop >= 0:
        start = first = max(0, stop - TAIL_PAGE_ENTRIES + 1)
        chunk: list[tuple[int, bytes]] = []
        while first <= stop:  # a page may come back shorter than asked
            page = await reads.read_page(gw.ctx, metadata, first, stop, key)
            if not page.entries:
                break
            chunk.extend(page.entries)
            first = page.entries[-1][0] + 1
        for entry_id, stored in reversed(chunk):
            if log_records.visible(entry_id, log_records.decode(stored), end):
                return entry_id
        stop = start - 1
    return None
