"""Reading without recovery: where an entry is, how far a reader may go, and which
replicas are good.

Opening without recovery never fences (PROTOCOL.md): a reader learns the LAC
from the bookies of the last fragment (the highest LAC any of them reports;
the writer piggybacks it on entries and sends explicit updates when idle),
and reads no further than that on an OPEN ledger, no further than the last
entry on a CLOSED one. Every entry up to the LAC was stored on an ack quorum,
so it is on at least Qa bookies of its write set: the reader tries the write
set in order and fails over to the next replica. A replica whose digest does
not verify counts as missing and is never returned.

Readers should keep the highest LAC they have seen: a bookie that just joined
the ensemble may report a lower one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from services.protocol.metadata import LedgerMetadata, LedgerState
from services.wire.digest import record_ok
from services.wire.framing import Record


def record_usable(
    record: Record | None, metadata: LedgerMetadata, entry_id: int, digest_key: bytes = b""
) -> bool:
    """True when ``record`` is entry ``entry_id`` of this ledger and its digest verifies."""
    return (
        record is not None
        and record.ledger_id == metadata.ledger_id
        and record.entry_id == entry_id
        and record.digest_type == metadata.digest_type
        and record_ok(record, digest_key)
    )


def read_sequence(
    metadata: LedgerMetadata, entry_id: int, avoid: Collection[str] = ()
) -> tuple[str, ...]:
    """The bookies to try for ``entry_id``, in order: its write set, with the bookies to
    ``avoid`` (known down or slow) moved to the end. No other bookie stores it."""
    bookies = metadata.write_set_bookies(entry_id)
    return tuple(b for b in bookies if b not in avoid) + tuple(b for b in bookies if b in avoid)


def lac_bookies(metadata: LedgerMetadata) -> tuple[str, ...]:
    """The bookies to ask for the LAC of an open ledger: the last fragment's."""
    return metadata.ensemble


def lac_from_answers(lacs: Iterable[int]) -> int:
    """The LAC a reader may use given some bookies' answers: the highest one (-1 if none)."""
    return max(lacs, default=-1)


def readable_last(metadata: LedgerMetadata, lac: int) -> int:
    """The last entry a reader may return: the last entry of a CLOSED ledger, else the LAC."""
    if metadata.state is LedgerState.CLOSED:
        return metadata.last_entry_id if metadata.last_entry_id is not None else -1
    return lac


def readable_range(
    metadata: LedgerMetadata, lac: int, first: int | None = None, last: int | None = None
) -> range:
    """The entry ids of a range read (API.md): ``first`` defaults to 0 and ``last`` to the
    readable end, and the range is cut at the readable end (possibly empty)."""
    end = readable_last(metadata, lac)
    first = 0 if first is None else first
    last = end if last is None else min(last, end)
    return range(first, last + 1) if first <= last else range(0)
