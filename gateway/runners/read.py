"""Reading ledgers: LAC, single entries and pages, with failover and digest checks.

Reads never fence. An OPEN (or IN_RECOVERY) ledger is read up to its LAC: the
writer gateway knows it exactly; any other gateway asks the bookies of the last
fragment and takes the highest LAC they report (which may trail the writer's by
the entries not yet followed by another add or LAC update). A CLOSED ledger is
read up to its last entry.

A page of a range is fetched with one range read per "cover" bookie of each
fragment: indexes 0, Qw, 2·Qw, … of the ensemble, which together hold every
entry (bookie ``i`` stores entry ``e`` when ``(i - e) mod E < Qw``). An entry
a cover bookie should have but did not return, or returned with a bad digest,
is read from the other bookies of its write set in order (failover); a corrupt
replica is skipped, never returned. An entry at or below the LAC that no
replica can serve is ``BookieUnavailable``.

A bookie that hangs (stopped, overloaded) must not stall reads for the bookie
client's whole time-out per request. So reads are speculative, as in
BookKeeper: a replica that has not answered within ``SPECULATIVE_READ_S`` gets
the next replica asked in parallel (the first valid answer wins); a cover
bookie whose range read has not answered by then is given up for the page and
its entries are read from their other replicas, the slow bookie last; and a
LAC read uses the bookies that answered by then (any bookie's LAC is a lower
bound of the writer's).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from gateway.context import GatewayContext
from services.errors import BookieUnavailable, EntryNotFound, LedgerNotFound, QuireError
from services.limits import PAGE_BYTES_MAX, PAGE_ENTRIES_MAX
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.wire import digest
from services.wire.framing import Record

log = logging.getLogger(__name__)

LAC_REPOLL_DELAY_S = 0.02  # between long polls of one bookie that answered too early
SPECULATIVE_READ_S = 2.0  # a replica slower than this: ask another one in parallel


@dataclass(frozen=True, slots=True)
class Page:
    entries: list[tuple[int, bytes]]
    next_entry_id: int | None


def read_key(metadata: LedgerMetadata, password: str | None) -> bytes:
    """The digest key a reader verifies with (HMAC ledgers: derived from the password)."""
    if metadata.digest_type == "hmac-sha256":
        return digest.mac_key((password or "").encode())
    return b""


async def bookies_lac(ctx: GatewayContext, metadata: LedgerMetadata) -> int:
    """The highest LAC the bookies of the last fragment report (-1 if none knows any).
    Once ``SPECULATIVE_READ_S`` passed and some bookie reported a LAC, bookies still
    silent are not waited for."""
    bookies = metadata.ensemble
    tasks = [asyncio.ensure_future(ctx.bookie(b).read_lac(metadata.ledger_id)) for b in bookies]
    try:
        done, pending = await asyncio.wait(tasks, timeout=SPECULATIVE_READ_S)
        if pending and not any(t.exception() is None for t in done):
            await asyncio.wait(pending)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    answers = [t.exception() or t.result() for t in tasks if t.done() and not t.cancelled()]
    lacs = [a.lac for a in answers if not isinstance(a, BaseException)]
    not_found = [a for a in answers if isinstance(a, LedgerNotFound)]
    if not lacs and len(not_found) < len(bookies):
        raise BookieUnavailable(
            f"no bookie of ledger {metadata.ledger_id}'s last fragment answered its LAC"
        )
    return max(lacs, default=-1)


async def wait_bookies_lac(
    ctx: GatewayContext, metadata: LedgerMetadata, after: int, wait_ms: int
) -> int:
    """Long poll: the first LAC above ``after`` any bookie reports within ``wait_ms``,
    else the highest LAC known when the time is up.

    A bookie's long poll also ends when it stores an entry past ``after`` whose
    piggybacked LAC is not past it yet (the LAC that covers it comes with the next
    add or the writer's explicit LAC update, a few ms later). Such a bookie is asked
    again after ``LAC_REPOLL_DELAY_S`` while time is left, so the poll answers when
    the LAC passes ``after``, not merely when an entry arrives (with E == Qw every
    bookie answers that way and the poll used to return at once, LAC unchanged).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_ms / 1000

    def poll(bookie: str, delay_s: float = 0.0) -> asyncio.Future:
        async def run():  # type: ignore[no-untyped-def]
            if delay_s:
                await asyncio.sleep(delay_s)
            left_ms = max(0, int((deadline - loop.time()) * 1000))
            return bookie, await ctx.bookie(bookie).read_lac(metadata.ledger_id, after, left_ms)

        return asyncio.ensure_future(run())

    pending = {poll(b) for b in metadata.ensemble}
    best = -1
    try:
        while pending:
            # A bookie that hangs is not waited for past the deadline (plus a grace).
            left_s = max(0.0, deadline - loop.time()) + SPECULATIVE_READ_S
            done, pending = await asyncio.wait(
                pending, timeout=left_s, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                break
            for task in done:
                if task.exception() is not None:
                    continue  # that bookie sits this poll out
                bookie, info = task.result()
                best = max(best, info.lac)
                if info.lac <= after and deadline - loop.time() > LAC_REPOLL_DELAY_S:
                    pending.add(poll(bookie, LAC_REPOLL_DELAY_S))
            if best > after:
                return best
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    if best < 0:
        best = await bookies_lac(ctx, metadata)
    return best


def _valid(record: Record, metadata: LedgerMetadata, entry_id: int, key: bytes) -> bool:
    return (
        record.ledger_id == metadata.ledger_id
        and record.entry_id == entry_id
        and record.digest_type == metadata.digest_type
        and digest.record_ok(record, key)
    )


async def read_entry(
    ctx: GatewayContext,
    metadata: LedgerMetadata,
    entry_id: int,
    key: bytes,
    suspects: frozenset[str] | set[str] = frozenset(),
) -> Record:
    """One entry from its write set, trying each replica in order (``suspects``, bookies
    that already failed or hung in this request, last) until a valid one. A replica
    that fails moves on to the next at once; one that is silent for
    ``SPECULATIVE_READ_S`` gets the next asked in parallel."""
    order = sorted(metadata.write_set_bookies(entry_id), key=lambda b: b in suspects)
    errors: list[str] = []
    asked: dict[asyncio.Future, str] = {}
    try:
        while order or asked:
            if order:
                bookie = order.pop(0)
                call = ctx.bookie(bookie).read_entry(metadata.ledger_id, entry_id)
                asked[asyncio.ensure_future(call)] = bookie
            done, _ = await asyncio.wait(
                asked, timeout=SPECULATIVE_READ_S if order else None,
                return_when=asyncio.FIRST_COMPLETED,
            )  # fmt: skip
            if not done:
                ctx.metrics.read_failovers.inc()  # speculative: the next replica too
            for task in done:
                bookie = asked.pop(task)
                exc = task.exception()
                if exc is not None:
                    if not isinstance(exc, QuireError):
                        raise exc
                    errors.append(f"{bookie}: {exc.code}")
                    ctx.metrics.read_failovers.inc()
                    continue
                record = task.result()
                if _valid(record, metadata, entry_id, key):
                    return record
                log.warning(
                    "corrupt replica skipped",
                    extra={"fields": {"ledger_id": metadata.ledger_id, "entry_id": entry_id,
                                      "bookie": bookie}},
                )  # fmt: skip
                errors.append(f"{bookie}: digest mismatch")
                ctx.metrics.read_failovers.inc()
    finally:
        for task in asked:
            task.cancel()
        await asyncio.gather(*asked, return_exceptions=True)
    raise BookieUnavailable(
        f"entry {entry_id} of ledger {metadata.ledger_id} could not be read from any replica "
        f"({'; '.join(errors)})"
    )


def _cover_indexes(ensemble_size: int, write_quorum: int) -> list[int]:
    return list(range(0, ensemble_size, write_quorum))


async def read_page(
    ctx: GatewayContext,
    metadata: LedgerMetadata,
    first: int,
    last: int,
    key: bytes,
    entries_max: int = PAGE_ENTRIES_MAX,
    bytes_max: int = PAGE_BYTES_MAX,
) -> Page:
    """Entries ``first``..``last`` (already cut at the readable end), bounded by count and
    bytes (the first entry is always returned); ``next_entry_id`` is where to go on."""
    if first > last:
        return Page([], None)
    last = min(last, first + entries_max - 1)
    fragment = metadata.fragment_for(first)
    index = metadata.fragments.index(fragment)
    if index + 1 < len(metadata.fragments):
        last = min(last, metadata.fragments[index + 1].first_entry_id - 1)
    cover = [fragment.bookies[i] for i in _cover_indexes(
        metadata.ensemble_size, metadata.write_quorum)]  # fmt: skip
    calls = {
        asyncio.ensure_future(
            ctx.bookie(b).read_range(
                metadata.ledger_id, first, last, max_entries=last - first + 1, max_bytes=bytes_max
            )
        ): b
        for b in cover
    }
    done, pending = await asyncio.wait(calls, timeout=SPECULATIVE_READ_S)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    suspects = {calls[t] for t in pending} | {calls[t] for t in done if t.exception() is not None}
    found: dict[int, Record] = {}
    for task in done:
        if task.exception() is not None:
            continue
        answer = task.result()
        for record in answer.records:
            if first <= record.entry_id <= last and record.entry_id not in found:
                if _valid(record, metadata, record.entry_id, key):
                    found[record.entry_id] = record
    entries: list[tuple[int, bytes]] = []
    size = 0
    entry_id = first
    while entry_id <= last:
        record = found.get(entry_id)
        if record is None:
            ctx.metrics.read_failovers.inc()
            record = await read_entry(ctx, metadata, entry_id, key, suspects)
        if entries and size + len(record.payload) > bytes_max:
            break
        entries.append((entry_id, record.payload))
        size += len(record.payload)
        entry_id += 1
    ctx.metrics.entries_read.inc(len(entries))
    return Page(entries, entry_id)


async def readable_end(
    ctx: GatewayContext, metadata: LedgerMetadata, writer_lac: int | None
) -> int:
    """The last entry a reader may see now: last entry (CLOSED), else the LAC."""
    if metadata.state is LedgerState.CLOSED:
        return metadata.last_entry_id if metadata.last_entry_id is not None else -1
    if writer_lac is not None:
        return writer_lac
    return await bookies_lac(ctx, metadata)


async def read_single(
    ctx: GatewayContext, metadata: LedgerMetadata, entry_id: int, end: int, key: bytes
) -> bytes:
    if entry_id > end:
        raise EntryNotFound(
            f"entry {entry_id} of ledger {metadata.ledger_id} is past the readable end {end}"
        )
    record = await read_entry(ctx, metadata, entry_id, key)
    ctx.metrics.entries_read.inc()
    return record.payload
