"""Rebuilding a new writer's idempotency window from the log's tail: the keys live in
the entries (``log_records``), so what the previous writer appended is found again
after a hand-over or a crash (``dedup.scan_tail`` does the scan).

The walk goes back along the log's ledger list (log order), never by time alone: time
stamps follow log order only in the ledgers log writers made for themselves (marked
``steps.WRITER_METADATA_KEY``): such a ledger joins the log when it is made, and its
appends are stamped by the gateway as they are made. A ledger attached to the log
(``POST /v1/logs/{name}/ledgers``, e.g. a Spark task's) was created and stamped when
its task ran, possibly minutes before it joined the log, behind appends newer than
its stamps: its times must not end the walk (``tail_kind``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from enum import Enum

from gateway.logs.dedup import CLOCK_SKEW_MS, DedupWindow, scan_tail
from gateway.logs.steps import LOG_METADATA_KEY, WRITER_METADATA_KEY
from gateway.runners import read as reads
from gateway.service import Gateway
from services.errors import QuireError, present
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.reads import digest_key

log = logging.getLogger(__name__)

# The window rebuild reads the metadata of the log's last ledgers this many at a time at
# first, doubling up to the most (one pipelined read each): a log whose tail is mostly
# attached ledgers, which never end the walk, is walked in few round trips.
TAIL_METADATA_BATCH = 16
TAIL_METADATA_BATCH_MAX = 512
# A failed window rebuild is tried again, backing off from the first delay.
REBUILD_ATTEMPTS_MAX = 6
REBUILD_RETRY_FIRST_S = 0.2


def wall_ms() -> int:
    return int(time.time() * 1000)


class TailKind(Enum):
    """How the window rebuild treats one ledger of the log (``tail_kind``)."""

    WRITER = "writer"  # read for keys; its creation or an old record ends the walk
    UNMARKED = "unmarked"  # read for keys; its times never end the walk
    ATTACHED = "attached"  # passed over unread; its times never end the walk


def tail_kind(metadata: LedgerMetadata) -> TailKind:
    """A ledger a log writer made (``WRITER_METADATA_KEY``) holds the log's appends in
    time order. A ledger with nothing but ``quire.log`` in its custom metadata may be a
    writer's ledger from a gateway older than that mark (or a ledger attached with only
    that key): its keyed appends are read, but its times are not trusted. Any other
    ledger was attached (a Spark task's carries ``quire.job`` and ``quire.task``): it
    holds no append made through the log API, so no key of the window, and its times
    are its task's."""
    custom = metadata.custom
    if WRITER_METADATA_KEY in custom:
        return TailKind.WRITER
    if set(custom) <= {LOG_METADATA_KEY}:
        return TailKind.UNMARKED
    return TailKind.ATTACHED


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
        tail = await _tail_ledgers(gw, previous, wall_ms() - window.window_ms)
        metas = {lid: metadata for lid, metadata, _ in tail}
        ledgers = [(lid, present(m.last_entry_id, "closed")) for lid, m in metas.items()]
        unordered = {lid for lid, _, kind in tail if kind is not TailKind.WRITER}

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

        found = await scan_tail(
            ledgers, read_page, wall_ms(), window.window_ms, window.keys_max, unordered=unordered
        )
        window.load(found, wall_ms())
    except QuireError as exc:
        return exc
    return None


async def _tail_ledgers(
    gw: Gateway, previous: Sequence[int], cutoff_ms: int
) -> list[tuple[int, LedgerMetadata, TailKind]]:
    """The CLOSED ledgers at the end of ``previous`` that may hold keyed appends newer
    than ``cutoff_ms``, in log order: read backwards along the list a few at a time,
    passing over attached ledgers, down to the first writer's ledger created before the
    cutoff (it was the current one then, and everything before it is older). A failed
    read fails the attempt (retried); a ledger deleted meanwhile (a truncation) or whose
    metadata is not valid has no entries to read and is passed over."""
    found: list[tuple[int, LedgerMetadata, TailKind]] = []
    stop = len(previous)
    batch = TAIL_METADATA_BATCH
    while stop > 0:
        start = max(0, stop - batch)
        batch = min(batch * 2, TAIL_METADATA_BATCH_MAX)
        chunk = list(previous[start:stop])
        answers = await gw.ctx.ledgers.get_many(chunk)
        for lid, answer in reversed(list(zip(chunk, answers, strict=True))):
            if isinstance(answer, QuireError):
                log.warning(
                    "a log ledger's metadata is not valid; the idempotency window's "
                    "rebuild passes over it",
                    extra={"fields": {"ledger_id": lid, "error": answer.code}},
                )
                continue
            if answer is None:
                continue
            metadata = answer.metadata
            kind = tail_kind(metadata)
            if kind is TailKind.ATTACHED:
                continue
            if metadata.state is LedgerState.CLOSED and metadata.last_entry_id is not None:
                found.append((lid, metadata, kind))
            if kind is TailKind.WRITER and metadata.created_at < cutoff_ms - CLOCK_SKEW_MS:
                return found[::-1]
        stop = start
    return found[::-1]
