"""Reading a ledger's entries for the Ledgers API: where a reader's view ends now, the
read latency, and the pages of a streamed range read ahead of the one being sent
(binary frames or NDJSON lines)."""

from __future__ import annotations

import asyncio
import collections
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pybase64

from gateway.service import Gateway
from services.ledger_client.runners import read as reads
from services.limits import PAGE_ENTRIES_MAX, RANGE_ENTRIES_MAX, READ_AHEAD_PAGES
from services.protocol.metadata import LedgerMetadata
from services.protocol.reads import page_last, readable_end
from services.wire import entries_stream

T = TypeVar("T")


async def timed_read(
    gw: Gateway, metadata: LedgerMetadata, read: Callable[[LedgerMetadata], Awaitable[T]]
) -> T:
    """``read(metadata)``, observed in the read latency histogram. When no replica could
    serve it, ZooKeeper's current metadata is read (``MetadataCache.reading``): a kept
    copy that names a bookie swapped out since is read again with it, and a ledger
    deleted meanwhile (by another gateway, while this one kept its metadata or holds
    its write handle) is 404 ledger_not_found, not 503."""
    started = time.monotonic()
    try:
        return await gw.metadata.reading(metadata, read)
    finally:
        gw.metrics.read_latency.observe(time.monotonic() - started)


async def last_readable(gw: Gateway, metadata: LedgerMetadata) -> int:
    """The last entry a reader may see now (``reads.readable_end``): the last entry of a
    CLOSED ledger, else the LAC (this gateway's write handle's, else the bookies', never
    less than the highest this gateway saw before: ``reads.bookies_lac``)."""
    end = readable_end(metadata, gw.handles.writer_lac(metadata.ledger_id))
    if end is None:
        end = readable_end(metadata, await reads.bookies_lac(gw.ctx, metadata))
    return end


async def read_ahead(
    gw: Gateway, metadata: LedgerMetadata, page: reads.Page, stop: int, key: bytes
) -> AsyncIterator[reads.Page]:
    """``page`` (already read) and the pages after it up to ``stop``.

    The next ``READ_AHEAD_PAGES`` pages are read from the bookies while the one before is
    sent, so that the bookies' reads, the digest checks and the client's transfer overlap
    instead of taking turns. ``page`` was planned as ``PAGE_ENTRIES_MAX`` entries (the
    first answer comes soon); each page ahead is planned as a range of ``size`` entries:
    ``RANGE_ENTRIES_MAX`` until a page comes back shorter than planned (cut by its byte
    bound), then that page's length; the pages planned after a short one are dropped
    and planned again from where it ended."""
    ahead: collections.deque[tuple[int, asyncio.Task[reads.Page]]] = collections.deque()
    planned_last = (
        page_last(metadata, page.entries[0][0], stop, PAGE_ENTRIES_MAX) if page.entries else stop
    )
    size = RANGE_ENTRIES_MAX

    async def read(first: int, last: int) -> reads.Page:
        return await timed_read(
            gw,
            metadata,
            lambda current: reads.read_page(
                gw.ctx, current, first, last, key, entries_max=last - first + 1
            ),
        )

    def plan(first: int) -> None:
        last = page_last(metadata, first, stop, size)
        ahead.append((last, asyncio.ensure_future(read(first, last))))

    async def drop() -> None:
        for _, task in ahead:
            task.cancel()
        await asyncio.gather(*(task for _, task in ahead), return_exceptions=True)
        ahead.clear()

    try:
        while page.entries:
            got = page.entries[-1][0]
            if got < planned_last:  # cut short by its byte bound: plan by what came
                size = len(page.entries)
                await drop()
            next_first = ahead[-1][0] + 1 if ahead else got + 1
            while len(ahead) < READ_AHEAD_PAGES and next_first <= stop:
                plan(next_first)
                next_first = ahead[-1][0] + 1
            yield page
            if not ahead:
                return
            planned_last, task = ahead.popleft()
            page = await task
    finally:  # the client went away (or a read failed) mid-stream
        await drop()


async def frames(
    gw: Gateway, metadata: LedgerMetadata, page: reads.Page, stop: int, key: bytes
) -> AsyncIterator[bytes]:
    """The binary frames (``services.wire.entries_stream``) of ``page`` (already read) and
    of the pages after it up to ``stop``."""
    async for each in read_ahead(gw, metadata, page, stop, key):
        yield entries_stream.encode_frames(each.entries)


async def ndjson(
    gw: Gateway, metadata: LedgerMetadata, page: reads.Page, stop: int, key: bytes
) -> AsyncIterator[bytes]:
    """The NDJSON lines of ``page`` (already read) and of the pages after it up to ``stop``."""
    async for each in read_ahead(gw, metadata, page, stop, key):
        yield b"".join(
            json.dumps({"entry_id": eid, "data": pybase64.b64encode_as_string(data)}).encode()
            + b"\n"
            for eid, data in each.entries
        )
