"""Reads across a log's ledgers, in log order (docs/api.md: GET /v1/logs/{name}/records).

A read starts at a position of the log (its first record when none is given; for a
read from a time, the position ``start_at_time`` finds: gateway/logs/time_search.py)
and goes through the list of ledgers in order:

- a CLOSED ledger is read up to its last entry, then the read goes on at the next
  ledger's entry 0;
- an OPEN ledger is read up to its LAC (this gateway's write handle's when it holds
  it, else what the bookies report) and the read stops there: a ledger after it may
  not be read before it is closed, or the order would break.

Only whole appends are shown (``log_records.visible``): a batch shows once all its
entries are readable, and a batch cut short by a writer crash never shows. Each
record is answered with its stamp (``time``, null for data written before every
entry carried one). Reads never fence. ``caught_up`` says the read reached what is
readable now; with ``wait_ms`` an empty read waits (in slices, re-reading the list, so
a roll or a new writer is seen) until a record is readable or the time is up: a time
drawn from the last sixteenth of ``wait_ms`` (services/protocol/long_poll.py).

A listed ledger that is gone is never skipped: truncated while the read went through
the list, the records read so far are answered (or the read is 400 like any truncated
position); still listed, the read fails with ``log_ledger_missing``.

The list and the ledgers' metadata come from ``MetadataCache`` (gateway/metadata_cache.py):
while ZooKeeper cannot answer, a read goes through the list this gateway read last and
the ledgers' metadata it kept, so it answers a prefix of the log's one order rather
than 503 (docs/logs.md "While ZooKeeper elects a leader").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import pybase64

from gateway.limits import TRUNCATED_RETRIES_MAX, USAGE_LOOKUPS_IN_FLIGHT, WAIT_SLICE_MS
from gateway.logs import operations as log_ops
from gateway.logs import time_search
from gateway.logs.schemas import position_json
from services.errors import (
    InvalidArgument,
    LedgerNotFound,
    LogLedgerMissing,
    MetadataUnavailable,
)
from services.ledger_client.runners import read as reads
from services.limits import PAGE_BYTES_MAX
from services.protocol import log_records, long_poll, retention
from services.protocol.cursors import LedgerSpan, lag
from services.protocol.logs import LogMetadata, Position
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.reads import digest_key

if TYPE_CHECKING:  # the gateway builds its log writers with itself (gateway/app.py)
    from gateway.service import Gateway


@dataclass(slots=True)
class RecordsPage:
    records: list[tuple[Position, bytes, int | None]] = field(default_factory=list)
    next: Position | None = None
    caught_up: bool = False
    size: int = 0

    def to_api(self) -> dict[str, Any]:
        return {
            "records": [
                {
                    "position": position_json(p.ledger_id, p.entry_id),
                    "data": pybase64.b64encode_as_string(data),
                    "time": time_ms,
                }
                for p, data, time_ms in self.records
            ],
            "next": str(self.next) if self.next is not None else None,
            "caught_up": self.caught_up,
        }


@dataclass(frozen=True, slots=True)
class Readable:
    """The readable part of a listed ledger: entries 0..``end`` (-1: none), whether the
    ledger is CLOSED, and the bytes of those entries when known (a CLOSED ledger's
    length, this gateway's write handle's acknowledged length; None otherwise)."""

    metadata: LedgerMetadata
    end: int
    closed: bool
    length: int | None


async def read(
    gw: Gateway, name: str, start: Position | None, limit: int, wait_ms: int
) -> RecordsPage:
    # An empty read waits a little less than asked, drawn per poll (``long_poll``), so
    # that readers that started together do not all ask again at once.
    deadline = time.monotonic() + long_poll.wait_ms(wait_ms) / 1000
    truncated = 0
    zookeeper_only = False
    while True:
        try:
            current = await log_ops.get_for_read(
                gw, name, tailing=wait_ms > 0, current=zookeeper_only
            )
        except MetadataUnavailable as exc:
            if not zookeeper_only:
                raise
            raise MetadataUnavailable(
                f"position {start} is not in the list of log {name} this gateway has, and "
                f"ZooKeeper cannot tell whether it is new ({exc.message}); retry"
            ) from None
        try:
            page, waiting_on = await _read_once(gw, current, start, limit)
        except _NotListed as exc:
            if zookeeper_only:
                raise InvalidArgument(str(exc)) from None
            # The list read may be behind the log: the copy kept while ZooKeeper does not
            # answer, or the writer's copy before its watch fired. A position another
            # gateway handed out is then in a ledger not listed here yet: ask ZooKeeper
            # itself before answering 400, and 503 (retry) if it cannot answer.
            zookeeper_only = True
            continue
        except _Truncated as exc:
            if exc.page.records:
                return exc.page  # the next read, from in the truncated part, is 400
            truncated += 1
            if start is not None or truncated >= TRUNCATED_RETRIES_MAX:
                raise InvalidArgument(
                    f"position {exc.position} is not in log {name} (truncated meanwhile)"
                ) from None
            continue  # from the log's first record: read the list again
        zookeeper_only = False
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if page.records or remaining_ms <= 0 or gw.stopping.began:
            return page  # (or the gateway's shutdown began: answer now, gateway/stopping.py)
        with gw.stopping:  # a long poll waiting
            await _wait(gw, name, waiting_on, remaining_ms)
        if start is None and page.next is not None:
            start = page.next


async def start_at_time(gw: Gateway, name: str, from_ms: int) -> Position | None:
    """Where a read of log ``name`` from time ``from_ms`` starts: the first record
    stamped >= ``from_ms``, or the end of the log (``time_search.find_start``); None
    when the log has no ledger yet."""
    for _ in range(TRUNCATED_RETRIES_MAX):
        ledgers = (await log_ops.get_for_read(gw, name)).ledgers
        try:
            return await _search(gw, name, ledgers, from_ms)
        except _Truncated:
            continue  # the list changed under the search: read it again
    raise InvalidArgument(f"log {name} was truncated during every search by time; read again")


async def _search(gw: Gateway, name: str, ledgers: Sequence[int], from_ms: int) -> Position | None:
    searches = gw.metrics.log_time_search_reads
    metadata: dict[int, LedgerMetadata] = {}

    async def span_of(index: int) -> time_search.Span:
        lid = ledgers[index]
        ledger = await readable(gw, lid, index == len(ledgers) - 1)
        if ledger is None:
            await _missing(gw, name, Position(lid, 0), RecordsPage())
        metadata[lid] = ledger.metadata
        return time_search.Span(ledger.end, ledger.closed)

    async def time_of(ledger_id: int, entry_id: int, end: int) -> tuple[int | None, int]:
        searches.inc()
        return await time_search.entry_time(gw, metadata[ledger_id], entry_id, end)

    return await time_search.find_start(ledgers, span_of, time_of, gw.metadata, from_ms)


async def readable(gw: Gateway, ledger_id: int, last: bool) -> Readable | None:
    """The readable part of a listed ledger. This gateway's write handle tells only for
    the log's LAST ledger: a handle on an earlier one may be stale (a new writer fenced
    and closed it; its metadata says where it ends)."""
    runner = gw.handles.live(ledger_id) if last else None
    if runner is not None:
        return Readable(runner.metadata, runner.lac, False, runner.length)
    try:
        metadata = await gw.metadata.ledger(ledger_id)
    except LedgerNotFound:
        return None  # truncated or deleted meanwhile
    if metadata.state is LedgerState.CLOSED:
        end = metadata.last_entry_id
        return Readable(metadata, end if end is not None else -1, True, metadata.length)
    return Readable(metadata, await reads.bookies_lac(gw.ctx, metadata), False, None)


async def _read_once(
    gw: Gateway, log: LogMetadata, start: Position | None, limit: int
) -> tuple[RecordsPage, Readable | None]:
    """One pass: the page, and the open ledger the read stopped at (None: it stopped
    at the end of the list)."""
    page = RecordsPage()
    if not log.ledgers:
        page.next, page.caught_up = start, True
        if start is not None:
            raise _NotListed(f"position {start} is not in log {log.name} (it is empty)")
        return page, None
    if start is None:
        start = Position(log.ledgers[0], 0)
    index = log.index_of(start.ledger_id)
    if index is None and (resumed := retention.resume_at(log, start)) is not None:
        start, index = resumed, 0  # just past a ledger retention removed: no gap
    if index is None:
        raise _NotListed(f"position {start} is not in log {log.name} (truncated, or never in it)")
    page.next = start
    position = start
    while True:
        ledger = await readable(gw, position.ledger_id, index == len(log.ledgers) - 1)
        if ledger is None:
            await _missing(gw, log.name, position, page)
        if ledger.closed and position.entry_id > ledger.end + 1:
            raise InvalidArgument(
                f"position {position} is past the end of ledger {position.ledger_id} "
                f"(last entry {ledger.end})"
            )
        try:
            full = await _read_ledger(gw, ledger, position, limit, page)
        except LedgerNotFound:  # its kept metadata outlived it: truncated or deleted
            await _missing(gw, log.name, position, page)
        if full:
            return page, None
        if not ledger.closed:
            page.caught_up = True
            return page, ledger
        index += 1
        if index >= len(log.ledgers):
            page.caught_up = True
            return page, None
        position = Position(log.ledgers[index], 0)
        page.next = position


class _NotListed(Exception):
    """The position asked for is in no ledger of the list this read went by."""


class _Truncated(Exception):
    """A listed ledger was truncated away while this read went through the list."""

    def __init__(self, position: Position, page: RecordsPage) -> None:
        super().__init__(str(position))
        self.position = position
        self.page = page


async def _missing(gw: Gateway, name: str, position: Position, page: RecordsPage) -> NoReturn:
    """A ledger of the list is gone. Truncated meanwhile (the log no longer lists it):
    ``_Truncated``. Still listed: ``LogLedgerMissing``, never a page that ends there as
    if the log did (the records after it would be skipped without a word)."""
    current = (await log_ops.get(gw, name)).log
    if position.ledger_id in current.ledgers:
        raise LogLedgerMissing(
            f"log {name} lists ledger {position.ledger_id}, which does not exist: "
            f"the log cannot be read in order past {position}"
        )
    raise _Truncated(position, page)


async def _read_ledger(
    gw: Gateway, ledger: Readable, position: Position, limit: int, page: RecordsPage
) -> bool:
    """Add the visible records of ``ledger`` from ``position`` to ``page``; True when the
    page is full (``limit`` records or the byte bound), False when the ledger's readable
    records ran out."""
    lid = position.ledger_id
    key = digest_key(ledger.metadata, None)
    first = position.entry_id
    while first <= ledger.end:
        want = min(ledger.end, first + (limit - len(page.records)) - 1)
        got = await gw.metadata.reading(ledger.metadata, _page_of(gw, first, want, key))
        if not got.entries:
            return False
        for entry_id, data in got.entries:
            record = log_records.decode(data)
            if not log_records.visible(entry_id, record, ledger.end):
                return False  # the rest of the ledger's readable part is this batch
            if page.records and page.size + len(record.data) > PAGE_BYTES_MAX:
                return True
            page.records.append((Position(lid, entry_id), record.data, record.time_ms))
            page.size += len(record.data)
            page.next = Position(lid, entry_id + 1)
            if len(page.records) >= limit:
                return True
        first = got.entries[-1][0] + 1
    return False


def _page_of(
    gw: Gateway, first: int, last: int, key: bytes
) -> Callable[[LedgerMetadata], Awaitable[reads.Page]]:
    """The read of entries ``first``..``last`` of a ledger, given its metadata."""

    def read(metadata: LedgerMetadata) -> Awaitable[reads.Page]:
        return reads.read_page(gw.ctx, metadata, first, last, key)

    return read


async def _wait(gw: Gateway, name: str, ledger: Readable | None, remaining_ms: int) -> None:
    """Wait for more to read, at most ``remaining_ms``.

    On this gateway's own write handle of the log's open ledger, the whole time: every
    change that can make more of the log readable wakes the handle's waiters (an add
    moves the LAC; a roll closes the handle; a fence stops it being live; the log
    writer losing its role, to another writer or a delete that its watch on the log's
    znode learns, wakes them: writer.py ``_lose``). So 10,000 tailing readers of this
    gateway's logs cost nothing while nothing is appended (benchmarks/README.md, "Many
    open things"); they were woken every ``WAIT_SLICE_MS`` to re-read the list, which
    took 80 % of a core at 2,500 readers.

    Otherwise in slices of ``WAIT_SLICE_MS``, the list re-read between them (by
    ``read``), so that a roll or a new writer elsewhere is seen: the LAC of an open ledger
    another gateway writes (long polls to its bookies), or, at the end of the list,
    simply the time."""
    slice_ms = min(remaining_ms, WAIT_SLICE_MS)
    if ledger is None:
        await asyncio.sleep(slice_ms / 1000)
        return
    lid = ledger.metadata.ledger_id
    runner = gw.handles.live(lid)
    if runner is not None:
        writer = gw.logs.get(name) if gw.log_writers else None
        stopping = gw.stopping
        try:
            if writer is not None and writer.runner is runner:
                await runner.wait_lac(
                    ledger.end,
                    remaining_ms / 1000,
                    until=lambda: writer.lost is not None or stopping.began,
                )
                return
            await runner.wait_lac(ledger.end, slice_ms / 1000, until=lambda: stopping.began)
        except LedgerNotFound:
            pass  # the ledger was deleted meanwhile: the list, read again, says what is left
        return
    await reads.wait_bookies_lac(gw.ctx, ledger.metadata, ledger.end, slice_ms)


async def usage(gw: Gateway, log_meta: LogMetadata) -> retention.Usage:
    """The log's ledgers, records and bytes from ledger metadata (closed ledgers' kept
    by ``MetadataCache``), its open last ledger's records from its LAC and bytes from
    this gateway's handle, else estimated from the mean record size of the rest."""
    ledgers = log_meta.ledgers
    spans: list[LedgerSpan] = []
    created: list[int] = []
    for start in range(0, len(ledgers), USAGE_LOOKUPS_IN_FLIGHT):
        chunk = ledgers[start : start + USAGE_LOOKUPS_IN_FLIGHT]
        parts = await asyncio.gather(
            *(readable(gw, lid, start + i == len(ledgers) - 1) for i, lid in enumerate(chunk))
        )
        for lid, part in zip(chunk, parts, strict=True):
            if part is None:  # truncated meanwhile
                spans.append(LedgerSpan(lid, -1, 0))
                created.append(0)
            else:
                spans.append(LedgerSpan(lid, part.end, part.length))
                created.append(part.metadata.created_at)
    records, size = lag(None, spans)
    oldest = created[0] if created and created[0] > 0 else None
    return retention.Usage(len(ledgers), records, size, oldest)
