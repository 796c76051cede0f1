"""Rebuilding a new writer's idempotency window from the log's tail: the keys live in
the entries (``log_records``), so what the previous writer appended is found again
after a hand-over or a crash (``dedup.scan_tail`` does the scan).

The walk goes back along the log's ledger list (log order) and ends at the first
record older than the window in a ledger a log writer made for itself (marked
``steps.WRITER_METADATA_KEY``): the gateway stamps such a ledger's appends as it makes
them, after the ledger joined the log, so every append before that record in the log
is older still (up to clock skew between gateways). No other time ends it: a ledger's
creation time is not when it joined the log (a writer's ledger may be listed long
after it was made, when taking the role took several attempts), and a ledger attached
to the log (``POST /v1/logs/{name}/ledgers``, e.g. a Spark task's) was made and its
records stamped when its task ran, possibly minutes before it was attached behind
newer appends (``tail_kind``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING

from gateway.limits import (
    REBUILD_ATTEMPTS_MAX,
    REBUILD_RETRY_FIRST_S,
    TAIL_METADATA_BATCH,
    TAIL_METADATA_BATCH_MAX,
)
from gateway.logs.dedup import LogWindow, TailScan
from gateway.logs.steps import LOG_METADATA_KEY, WRITER_METADATA_KEY
from services.clock import wall_ms
from services.errors import QuireError
from services.ledger_client.runners import read as reads
from services.protocol.dedup import Appended
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.reads import digest_key
from services.zk.ledger_store import VersionedLedger

if TYPE_CHECKING:  # the gateway builds its log writers with itself (gateway/app.py)
    from gateway.service import Gateway

log = logging.getLogger(__name__)


class TailKind(Enum):
    """How the window rebuild treats one ledger of the log (``tail_kind``)."""

    WRITER = "writer"  # read for keys; a record older than the window ends the walk
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
    gw: Gateway, name: str, window: LogWindow, previous: Sequence[int]
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


# Reads the metadata of ledgers (``LedgerStore.get_many``): None for one that does not
# exist, an error for one whose metadata is not valid.
MetadataReader = Callable[[list[int]], Awaitable[Sequence[VersionedLedger | QuireError | None]]]
# Reads the entries ``first``..``last`` of a CLOSED ledger, in order.
EntryReader = Callable[[LedgerMetadata, int, int], Awaitable[list[tuple[int, bytes]]]]


async def _rebuild_once(
    gw: Gateway, window: LogWindow, previous: Sequence[int]
) -> QuireError | None:
    async def read_entries(
        metadata: LedgerMetadata, first: int, last: int
    ) -> list[tuple[int, bytes]]:
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

    try:
        found = await walk_tail(
            gw.ctx.ledgers.get_many,
            read_entries,
            previous,
            wall_ms(),
            window.keys.window_ms,
            window.keys.keys_max,
        )
        window.keys.load(found, wall_ms())
    except QuireError as exc:
        return exc
    return None


async def walk_tail(
    read_metadata: MetadataReader,
    read_entries: EntryReader,
    previous: Sequence[int],
    now_ms: int,
    window_ms: int,
    keys_max: int,
) -> list[tuple[str, Appended]]:
    """The keyed appends at the end of ``previous`` (a log's ledgers, in log order),
    oldest first: the ledger list is walked backwards, its metadata read a batch at a
    time (doubling), and each batch's CLOSED ledgers scanned backwards for keys
    (``dedup.TailScan``) before the batch before it is read, until the scan stops (see
    the module docstring; also after ``keys_max`` keys or ``DEDUP_REBUILD_ENTRIES_MAX``
    entries) or the list ends. Attached ledgers are passed over unread. A failed read
    fails the walk (the rebuild tries again); a ledger deleted meanwhile (a
    truncation) or whose metadata is not valid has no entries to read and is passed
    over."""
    scan = TailScan(now_ms, window_ms, keys_max)
    metas: dict[int, LedgerMetadata] = {}

    async def read_page(ledger_id: int, first: int, last: int) -> list[tuple[int, bytes]]:
        return await read_entries(metas[ledger_id], first, last)

    stop = len(previous)
    batch = TAIL_METADATA_BATCH
    while stop > 0 and not scan.done:
        start = max(0, stop - batch)
        batch = min(batch * 2, TAIL_METADATA_BATCH_MAX)
        chunk = list(previous[start:stop])
        answers = await read_metadata(chunk)
        ledgers: list[tuple[int, int]] = []
        unordered: set[int] = set()
        for lid, answer in zip(chunk, answers, strict=True):
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
            end = metadata.last_entry_id
            if kind is TailKind.ATTACHED or metadata.state is not LedgerState.CLOSED or end is None:
                continue
            metas[lid] = metadata
            ledgers.append((lid, end))
            if kind is TailKind.UNMARKED:
                unordered.add(lid)
        await scan.scan(ledgers, read_page, unordered)
        stop = start
    return scan.found()
