"""Where a read from a time starts (docs/api.md, ``GET /v1/logs/{name}/records``
``from_time``; docs/logs.md "Reading from a time"), and the time of a log's last entry.

Every entry carries its append's stamp (services/protocol/log_records.py), and the
stamps never go backwards in log order (services/protocol/log_append.py, "Stamps"). The
first record stamped at or after a time T is thus found without a scan (``find_start``):

1. A binary search over the log's ledgers for the first non-empty one whose LAST stamp
   is >= T. A probe that lands on an empty ledger (known empty from its metadata, or
   an open ledger with nothing readable) moves right to the next non-empty one, at
   the cost of metadata look-ups, not entry reads. A probe reads the ledger's first
   and last entries (two one-entry reads); a CLOSED ledger's two stamps never change
   and are kept per gateway (``MetadataCache.stamps``), so a repeated search finds
   them without a read. The open last ledger is read up to its LAC.
2. A binary search over that ledger's entry ids for the first entry stamped >= T
   (one-entry reads; every entry of a batch carries the batch's stamp, so it lands on
   the batch's first entry).

Entry reads: at most about 2 * log2(ledgers) + log2(entries of one ledger) + 2, each
counted in ``quire_gateway_log_time_search_reads_total``. A T past every record
starts at the end of the log, where a read tails it: after the last readable entry,
or, when the open ledger's LAC falls inside a batch (its ``remaining`` > 0), at the
first entry stamped as that batch (its head, or an earlier batch of the same stamp),
so that a reader never starts inside a batch (batches are atomic to readers; one more
binary search, in that case only).

Entries without a stamp (continuations written before every entry carried one, and
entries not written by the log layer) count as older than any time: a search in
such old data may start up to one batch late. A ledger attached to a log
(``POST /v1/logs/{name}/ledgers``) carries the stamps its writer gave (a Spark task's
run time), which may be older than the appends before it: the search then assumes an
order that does not hold there, and may start after records stamped >= T.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from services.errors import LedgerNotFound
from services.ledger_client.runners import read as reads
from services.protocol import log_records
from services.protocol.logs import Position
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.reads import digest_key

if TYPE_CHECKING:  # the gateway builds its log writers with itself (gateway/app.py)
    from gateway.service import Gateway

# The stamp a search gives an entry without one: older than any time.
UNSTAMPED_MS = -1


@dataclass(frozen=True, slots=True)
class Span:
    """The readable part of a listed ledger: entries 0..``end`` (-1: none); ``closed``:
    it never changes (its stamps may be kept)."""

    end: int
    closed: bool


class StampsKept(Protocol):
    """The first and last stamps of CLOSED ledgers (bounded; ``MetadataCache``)."""

    def stamps(self, ledger_id: int) -> tuple[int, int] | None: ...

    def keep_stamps(self, ledger_id: int, first_ms: int, last_ms: int) -> None: ...


# The readable part of the ledger at an index of the list.
SpanOf = Callable[[int], Awaitable[Span]]
# One entry's stamp (None: none) and ``remaining`` (ledger id, entry id, the ledger's
# readable end).
TimeOf = Callable[[int, int, int], Awaitable[tuple[int | None, int]]]


async def find_start(
    ledgers: Sequence[int], span_of: SpanOf, time_of: TimeOf, kept: StampsKept, from_ms: int
) -> Position | None:
    """The position of the first entry of ``ledgers`` (a log's list, in log order)
    stamped >= ``from_ms``, or the end of the log when none is (see the module
    docstring); None when the list is empty."""
    if not ledgers:
        return None

    async def stamp(ledger_id: int, entry_id: int, end: int) -> int:
        found, _ = await time_of(ledger_id, entry_id, end)
        return UNSTAMPED_MS if found is None else found

    async def first_at(ledger_id: int, lo: int, hi: int, end: int, at_ms: int) -> int:
        """The first entry of ``lo..hi`` stamped >= ``at_ms`` (``hi`` is)."""
        while lo < hi:
            mid = (lo + hi) // 2
            if await stamp(ledger_id, mid, end) >= at_ms:
                hi = mid
            else:
                lo = mid + 1
        return lo

    async def ends(index: int, span: Span) -> tuple[int, int]:
        lid = ledgers[index]
        known = kept.stamps(lid) if span.closed else None
        if known is not None:
            return known
        first = await stamp(lid, 0, span.end)
        last = first if span.end == 0 else await stamp(lid, span.end, span.end)
        if span.closed:
            kept.keep_stamps(lid, first, last)
        return first, last

    spans: dict[int, Span] = {}

    async def span_at(index: int) -> Span:
        span = spans.get(index)
        if span is None:
            span = spans[index] = await span_of(index)
        return span

    found: tuple[int, Span, int] | None = None  # index, its span, its first stamp
    lo, hi = 0, len(ledgers)
    while lo < hi:
        mid = (lo + hi) // 2
        index = mid
        while index < hi and (await span_at(index)).end < 0:
            index += 1  # empty: the next non-empty one tells
        if index == hi:
            hi = mid
            continue
        span = await span_at(index)
        first, last = await ends(index, span)
        if last >= from_ms:
            found, hi = (index, span, first), mid
        else:
            lo = index + 1
    if found is None:  # past every record: the end of the log
        lid, span = ledgers[-1], await span_at(len(ledgers) - 1)
        if span.closed or span.end < 0:
            return Position(lid, span.end + 1)
        last_ms, remaining = await time_of(lid, span.end, span.end)
        if remaining == 0 or last_ms is None:
            return Position(lid, span.end + 1)
        # The LAC is inside a batch: start at its first entry, never inside it.
        return Position(lid, await first_at(lid, 0, span.end, span.end, last_ms))
    index, span, first = found
    lid = ledgers[index]
    if first >= from_ms:
        return Position(lid, 0)
    return Position(lid, await first_at(lid, 1, span.end, span.end, from_ms))  # 0 is older


async def entry_time(
    gw: Gateway, metadata: LedgerMetadata, entry_id: int, end: int
) -> tuple[int | None, int]:
    """The stamp (None: it has none) and ``remaining`` of entry ``entry_id`` of a ledger
    readable up to ``end``, read once."""
    key = digest_key(metadata, None)

    def read(current: LedgerMetadata) -> Awaitable[bytes]:
        return reads.read_single(gw.ctx, current, entry_id, end, key)

    entry = log_records.decode(await gw.metadata.reading(metadata, read))
    return entry.time_ms, entry.remaining


async def last_stamp(gw: Gateway, ledgers: Sequence[int]) -> int | None:
    """The stamp of the last entry of the last non-empty CLOSED ledger of ``ledgers``
    (walking back over empty ones and ones gone, one entry read in all), or None when
    there is none or it has no stamp. A new writer's stamps start there
    (gateway/logs/writer.py)."""
    for ledger_id in reversed(ledgers):
        try:
            metadata = await gw.metadata.ledger(ledger_id)
        except LedgerNotFound:
            continue  # truncated away meanwhile
        end = metadata.last_entry_id
        if metadata.state is not LedgerState.CLOSED or end is None or end < 0:
            continue
        stamp, _ = await entry_time(gw, metadata, end, end)
        return stamp
    return None
