"""Events into and effects out of the read operations (``reads.ReadOp``, ``reads_lac.LacOp``).

Like the write handle and the recovery (``messages``), a read operation never does
I/O. A runner (the gateway's asyncio runner, or the simulator) calls ``start(now)``,
carries out the effects it returns in order, feeds back one event per answer with
``handle(event)``, and after every call asks ``next_deadline()`` and feeds
``messages.Tick(now)`` no later than that. Times are integer milliseconds from any
monotonic clock; every event carries the time it happened. The runner's whole job:

=================  ==========================================================
effect             what the runner does, and the event it feeds back
=================  ==========================================================
ReadRange          ``read_range`` on ``bookie`` -> ``RangeAnswered(records)``
                   (the records as the bookie sent them: the operation checks
                   ids and digests), or ``RequestFailed(code)``.
ReadEntry          ``read_entry`` on ``bookie`` -> ``EntryAnswered(record)``
                   or ``RequestFailed(code)`` (``entry_not_found`` too).
ReadLac            ``read_lac`` on ``bookie`` (a long poll when ``after`` is
                   set and ``wait_ms > 0``) -> ``LacAnswered(lac)`` or
                   ``RequestFailed(code)``.
CancelRequests     abandon those requests: their answers are no longer
                   needed (feeding them anyway is harmless: they are ignored).
ReplicaCorrupt     log it: a replica whose digest did not verify was skipped.
ReadDone, LacDone  the operation's answer (entries, or the LAC).
ReadFailed         the operation's error (``exception()`` raises it).
=================  ==========================================================

Every request carries a ``request_id`` unique within its operation; the answer
names it. Each bookie request needs a time-out of its own in the runner (a
hanging bookie must turn into an event); the operation's own deadlines only
decide when to stop waiting for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.errors import QuireError
from services.protocol.messages import Tick
from services.wire.framing import FramedRecord

# ---------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class RangeAnswered:
    request_id: int
    records: tuple[FramedRecord, ...]
    now: int


@dataclass(frozen=True, slots=True)
class EntryAnswered:
    request_id: int
    record: FramedRecord
    now: int


@dataclass(frozen=True, slots=True)
class LacAnswered:
    request_id: int
    lac: int
    now: int


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """The bookie refused or did not answer; ``code`` is the API error code (say
    ``entry_not_found``, ``ledger_not_found``, ``bookie_unavailable``)."""

    request_id: int
    code: str
    now: int


ReadEvent = RangeAnswered | EntryAnswered | LacAnswered | RequestFailed | Tick


# ---------------------------------------------------------------------- effects


@dataclass(frozen=True, slots=True)
class ReadRange:
    """Entries ``first``..``last`` that ``bookie`` stores, at most ``entries_max`` of
    them and about ``bytes_max`` payload bytes; with a ``stride``, only those whose
    ``entry_id mod stride`` is one of ``residues`` (``read_cover``)."""

    request_id: int
    bookie: str
    ledger_id: int
    first: int
    last: int
    entries_max: int
    bytes_max: int
    stride: int = 0
    residues: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ReadEntry:
    request_id: int
    bookie: str
    ledger_id: int
    entry_id: int


@dataclass(frozen=True, slots=True)
class ReadLac:
    """The bookie's LAC of the ledger; with ``after``, a long poll of ``wait_ms``."""

    request_id: int
    bookie: str
    ledger_id: int
    after: int | None = None
    wait_ms: int = 0


@dataclass(frozen=True, slots=True)
class CancelRequests:
    request_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ReplicaCorrupt:
    bookie: str
    ledger_id: int
    entry_id: int


@dataclass(frozen=True, slots=True)
class ReadDone:
    """Entries in id order (never empty unless the range was) and where a next page
    starts (``None``: the range was empty)."""

    entries: tuple[tuple[int, bytes], ...]
    next_entry_id: int | None


@dataclass(frozen=True, slots=True)
class LacDone:
    """The LAC; ``known_nowhere`` when every bookie asked said it has no such ledger
    (nothing written to it yet, or deleted: only the metadata tells which)."""

    lac: int
    known_nowhere: bool = False


@dataclass(frozen=True, slots=True)
class ReadFailed:
    """The read (or LAC read) failed with ``error``: ``BookieUnavailable`` when no
    replica serves an entry at or below the readable end, ``EntryNotFound`` for a
    single entry past it."""

    error: type[QuireError]
    message: str

    def exception(self) -> QuireError:
        return self.error(self.message)


ReadEffect = (
    ReadRange
    | ReadEntry
    | ReadLac
    | CancelRequests
    | ReplicaCorrupt
    | ReadDone
    | LacDone
    | ReadFailed
)
