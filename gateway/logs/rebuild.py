"""Rebuilding a new writer's idempotency window from the log's tail: the keys live in
the entries (``log_records``), so what the previous writer appended is found again
after a hand-over or a crash (``dedup.scan_tail`` does the scan)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from gateway.logs.dedup import CLOCK_SKEW_MS, DedupWindow, scan_tail
from gateway.runners import read as reads
from gateway.service import Gateway
from services.errors import QuireError, present
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.reads import digest_key

log = logging.getLogger(__name__)

# The window rebuild reads the metadata of the log's last ledgers this many at a time.
TAIL_METADATA_BATCH = 16
# A failed window rebuild is tried again, backing off from the first delay.
REBUILD_ATTEMPTS_MAX = 6
REBUILD_RETRY_FIRST_S = 0.2


def wall_ms() -> int:
    return int(time.time() * 1000)


async def rebuild_window(
    gw: Gateway, name: str, window: DedupWindow, previous: Sequence[int]
) -> None:
    """Load the keys of log ``name``'s tail into ``window`` from ``previous`` (the ledgers
    before the new writer's, CLOSED: fenced and recovered, or rolled), retrying with
    back-off; ``window.ready`` is set at the end, with ``window.failed`` when it failed
    for good (keyed appends then answer 503 rather than risk a duplicate)."""
    delay = REBUILD_RETRY_FIRST_S
    for attempt in range(1, REBUILD_ATTEMPTS_MAX + 1):
        error = await _rebuild_once(gw, window, previous)
        if error is None:
            window.ready.set()
            return
        log.warning(
            "could not rebuild the idempotency window from the log's tail",
            extra={"fields": {"log": name, "error": error.code, "attempt": attempt}},
        )
        if attempt < REBUILD_ATTEMPTS_MAX:
            await asyncio.sleep(delay)
            delay *= 2
    window.failed = f"the idempotency window of log {name} could not be rebuilt"
    window.ready.set()


async def _rebuild_once(
    gw: Gateway, window: DedupWindow, previous: Sequence[int]
) -> QuireError | None:
    try:
        metas = await _tail_ledgers(gw, previous, wall_ms() - window.window_ms)
        ledgers = [(lid, present(m.last_entry_id, "closed")) for lid, m in metas.items()]

        async def read_page(lid: int, first: int, last: int) -> list[tuple[int, bytes]]:
            metadata = metas[lid]
            key = digest_key(metadata, None)
            out: list[tuple[int, bytes]] = []
            start = first
            while start <= last:
                page = await reads.read_page(gw.ctx, metadata, start, last, key)
                if not page.entries:
                    break
                out.extend(page.entries)
                start = page.entries[-1][0] + 1
            return out

        found = await scan_tail(ledgers, read_page, wall_ms(), window.window_ms, window.keys_max)
        window.load(found, wall_ms())
    except QuireError as exc:
        return exc
    return None


async def _tail_ledgers(
    gw: Gateway, previous: Sequence[int], cutoff_ms: int
) -> dict[int, LedgerMetadata]:
    """The CLOSED ledgers at the end of ``previous`` that may hold appends newer than
    ``cutoff_ms`` (in log order): read backwards a few at a time, down to the first
    ledger created before the cutoff (it was the current one then)."""
    found: list[tuple[int, LedgerMetadata]] = []
    stop = len(previous)
    while stop > 0:
        start = max(0, stop - TAIL_METADATA_BATCH)
        chunk = list(previous[start:stop])
        answers = await gw.ctx.ledgers.get_many(chunk)
        for lid, answer in reversed(list(zip(chunk, answers, strict=True))):
            if answer is None or isinstance(answer, QuireError):
                continue
            metadata = answer.metadata
            if metadata.state is LedgerState.CLOSED and metadata.last_entry_id is not None:
                found.append((lid, metadata))
            if metadata.created_at < cutoff_ms - CLOCK_SKEW_MS:
                return dict(reversed(found))
        stop = start
    return dict(reversed(found))
