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

Kept, not only rebuilt: a writer that rolled a small ledger and closed it reads it back
once and saves its keys beside the log (``save_keys``; services/protocol/saved_keys.py,
services/zk/saved_keys_store.py). The walk takes a saved ledger's keys from there
(``TailScan.take_saved``: the same rules as reading it) without reading its metadata or
its entries, and reads every other ledger as above, several small ones at a time
(``TailScan``): the previous writer's last ledger (fenced and recovered by this one,
never saved), a ledger whose save was lost with its writer, an attached or a large
one. A window holding thousands of small ledgers then costs one ZooKeeper listing and a
few pipelined reads instead of two bookie reads per ledger.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING

from gateway.limits import (
    DEDUP_CLOCK_SKEW_MS,
    REBUILD_ATTEMPTS_MAX,
    REBUILD_RETRY_FIRST_S,
    TAIL_METADATA_BATCH,
    TAIL_METADATA_BATCH_MAX,
    TAIL_READ_AHEAD_LEDGERS,
)
from gateway.logs.dedup import LogWindow, TailScan
from gateway.logs.steps import LOG_METADATA_KEY, WRITER_METADATA_KEY
from services.clock import wall_ms
from services.errors import QuireError
from services.ledger_client.runners import read as reads
from services.limits import IDEMPOTENCY_WINDOW_MAX_S
from services.protocol import saved_keys
from services.protocol.dedup import Appended
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.reads import digest_key
from services.protocol.saved_keys import SavedLedger
from services.zk.ledger_store import VersionedLedger
from services.zk.saved_keys_store import SavedKeysStore, Tail

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
    gw: Gateway,
    name: str,
    window: LogWindow,
    previous: Sequence[int],
    saved_store: SavedKeysStore,
) -> None:
    """Load the keys of log ``name``'s tail into ``window`` from ``previous`` (the ledgers
    before the new writer's, CLOSED: fenced and recovered, or rolled), retrying with
    back-off; ``window.ready`` is set at the end, with ``window.failed`` when it failed
    for good (keyed appends then answer 503 rather than risk a duplicate). An error
    that is not a ``QuireError`` (a bug) fails it for good at once, logged with its
    traceback: keyed appends waiting for the window must get an answer, never hang."""
    try:
        rebuilt = await _rebuild_with_retries(gw, name, window, previous, saved_store)
    except Exception:  # noqa: BLE001 - see the docstring
        log.exception("the idempotency window's rebuild failed", extra={"fields": {"log": name}})
        rebuilt = False
    if not rebuilt:
        window.failed = f"the idempotency window of log {name} could not be rebuilt"
    window.ready.set()


async def _rebuild_with_retries(
    gw: Gateway,
    name: str,
    window: LogWindow,
    previous: Sequence[int],
    saved_store: SavedKeysStore,
) -> bool:
    """``_rebuild_once`` until it succeeds (True) or ``REBUILD_ATTEMPTS_MAX`` failed."""
    delay = REBUILD_RETRY_FIRST_S
    for attempt in range(1, REBUILD_ATTEMPTS_MAX + 1):
        error = await _rebuild_once(gw, name, window, previous, saved_store)
        if error is None:
            return True
        log.warning(
            "could not rebuild the idempotency window from the log's tail",
            extra={"fields": {"log": name, "error": error.code, "attempt": attempt}},
        )
        if attempt < REBUILD_ATTEMPTS_MAX:
            await asyncio.sleep(delay)
            delay *= 2
    return False


# Reads the metadata of ledgers (``LedgerStore.get_many``): None for one that does not
# exist, an error for one whose metadata is not valid.
MetadataReader = Callable[[list[int]], Awaitable[Sequence[VersionedLedger | QuireError | None]]]
# Reads the entries ``first``..``last`` of a CLOSED ledger, in order.
EntryReader = Callable[[LedgerMetadata, int, int], Awaitable[list[tuple[int, bytes]]]]


def _entry_reader(gw: Gateway) -> EntryReader:
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

    return read_entries


async def _rebuild_once(
    gw: Gateway,
    name: str,
    window: LogWindow,
    previous: Sequence[int],
    saved_store: SavedKeysStore,
) -> QuireError | None:
    try:
        saved: dict[int, SavedLedger] = {}
        try:
            cutoff_ms = wall_ms() - window.keys.window_ms - DEDUP_CLOCK_SKEW_MS
            saved = await saved_store.read(name, cutoff_ms)
        except QuireError as exc:  # a cache: the ledgers are read instead
            log.warning(
                "could not read the log's saved keys; the rebuild reads its ledgers",
                extra={"fields": {"log": name, "error": exc.code}},
            )
        found = await walk_tail(
            gw.ctx.ledgers.get_many,
            _entry_reader(gw),
            previous,
            wall_ms(),
            window.keys.window_ms,
            window.keys.keys_max,
            saved,
        )
        window.keys.load(found, wall_ms())
    except QuireError as exc:
        return exc
    return None


async def save_keys(
    gw: Gateway,
    saved_store: SavedKeysStore,
    name: str,
    metadata: LedgerMetadata,
    tail: Tail | None,
) -> Tail | None:
    """Save the keys of a ledger of log ``name`` which this writer rolled and closed (its
    metadata as the close answered it), for the next writer's rebuild (see the module
    docstring): it must be CLOSED and a writer's; its entries are read back in one page
    and their summary added to the log's saved keys. A ledger over
    ``saved_keys.ENTRIES_MAX`` entries is not saved. Returns the tail of the saved keys
    for the next save."""
    ledger_id = metadata.ledger_id
    end = metadata.last_entry_id
    if (
        metadata.state is not LedgerState.CLOSED
        or end is None
        or tail_kind(metadata) is not TailKind.WRITER
        or end + 1 > saved_keys.ENTRIES_MAX
    ):
        return tail
    entries = await _entry_reader(gw)(metadata, 0, end) if end >= 0 else []
    summary = saved_keys.summarise(ledger_id, end, entries)
    kept_ms = int(IDEMPOTENCY_WINDOW_MAX_S * 1000) + DEDUP_CLOCK_SKEW_MS
    return await saved_store.save(name, summary, wall_ms(), kept_ms, tail)


async def walk_tail(
    read_metadata: MetadataReader,
    read_entries: EntryReader,
    previous: Sequence[int],
    now_ms: int,
    window_ms: int,
    keys_max: int,
    saved: Mapping[int, SavedLedger] | None = None,
    read_ahead: int = TAIL_READ_AHEAD_LEDGERS,
) -> list[tuple[str, Appended]]:
    """The keyed appends at the end of ``previous`` (a log's ledgers, in log order),
    oldest first: the ledger list is walked backwards; a ledger in ``saved`` has its keys
    taken from there (``TailScan.take_saved``); the others' metadata is read a batch at
    a time (doubling, a batch ending at a saved ledger), and each batch's CLOSED
    ledgers scanned backwards for keys (``dedup.TailScan``) before the ledgers before
    it, until the scan stops (see the module docstring; also after ``keys_max`` keys or
    ``DEDUP_REBUILD_ENTRIES_MAX`` entries) or the list ends. Attached ledgers are passed
    over unread. A failed read fails the walk (the rebuild tries again); a ledger
    deleted meanwhile (a truncation) or whose metadata is not valid has no entries to
    read and is passed over. ``read_ahead`` 0 reads one page at a time and makes no
    task (the log simulator drives the walk without an event loop: ``TailScan``)."""
    saved = saved or {}
    scan = TailScan(now_ms, window_ms, keys_max, read_ahead=read_ahead)
    metas: dict[int, LedgerMetadata] = {}

    async def read_page(ledger_id: int, first: int, last: int) -> list[tuple[int, bytes]]:
        return await read_entries(metas[ledger_id], first, last)

    stop = len(previous)
    batch = TAIL_METADATA_BATCH
    while stop > 0 and not scan.done:
        known = saved.get(previous[stop - 1])
        if known is not None:
            scan.take_saved(known)
            stop -= 1
            continue
        start = stop - 1
        while start > max(0, stop - batch) and previous[start - 1] not in saved:
            start -= 1
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
