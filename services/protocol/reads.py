"""Reading without recovery: how far a reader may go, which replicas are good, and the
read of a page or of one entry as a state machine (BookKeeper's PendingReadOp).

Opening without recovery never fences (docs/protocol.md): a reader learns the LAC
from the bookies of the last fragment (``reads_lac.LacOp``: the highest LAC any
of them reports; the writer piggybacks it on entries and sends explicit updates
when idle), and reads no further than that on an OPEN ledger, no further than
the last entry on a CLOSED one (``readable_end``, the one place that decides).
Every entry up to the LAC was stored on an ack quorum, so it is on at least Qa
bookies of its write set: the reader tries the write set in order and fails
over to the next replica. A replica whose digest does not verify counts as
missing and is never returned. Readers should keep the highest LAC they have
seen: a bookie that just joined the ensemble may report a lower one.

``ReadOp`` (events in, effects out: ``reads_messages``). A page of a range is
fetched with one range read per "cover" bookie of the fragment holding its
first entry: indexes 0, Qw, 2·Qw, … of the ensemble, which together hold every
entry (bookie ``i`` stores entry ``e`` when ``(i - e) mod E < Qw``), each asked
only for the entries no cover before it stores (``read_cover``); a page never
crosses a fragment boundary. A range read that fails, or has not answered by
``speculative_read_ms`` (its request cancelled), makes its bookie a suspect, and
its entries are asked again, as ranges, from the other bookies storing them
(``read_cover.reask``; the deadline starts again). When no range read is out,
the entries are taken in order; one no range read returned with a good digest is read
from its write set, suspects last, one replica at a time: a replica that fails
or answers a bad digest moves on to the next at once, one silent for
``speculative_read_ms`` gets the next asked in parallel, the first valid
answer wins (the others are cancelled). An entry no replica serves ends the
read with ``BookieUnavailable`` (every entry asked is at or below the readable
end, so some replica should have it). A page holds at most
``page_entries_max`` entries and, but for its first entry, ``page_bytes_max``
payload bytes. A single-entry read is the same failover without the range
read; an entry past the readable end is ``EntryNotFound``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import overload

from services.errors import BookieUnavailable, EntryNotFound, invariant
from services.protocol.limits import ReadLimits
from services.protocol.messages import Tick
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.read_cover import Share, cover_shares, reask
from services.protocol.reads_messages import (
    CancelRequests,
    EntryAnswered,
    RangeAnswered,
    ReadDone,
    ReadEffect,
    ReadEntry,
    ReadEvent,
    ReadFailed,
    ReadRange,
    ReplicaCorrupt,
    RequestFailed,
)
from services.wire.digest import mac_key, record_ok
from services.wire.framing import FramedRecord

# ---------------------------------------------------------------------- the rules


@overload
def readable_end(metadata: LedgerMetadata, lac: int) -> int: ...
@overload
def readable_end(metadata: LedgerMetadata, lac: int | None) -> int | None: ...
def readable_end(metadata: LedgerMetadata, lac: int | None) -> int | None:
    """The last entry a reader may return: the last entry of a CLOSED ledger (whatever
    ``lac`` says), else the LAC. ``None`` when the ledger is not CLOSED and the LAC is
    not known (``lac is None``): learn it first (``reads_lac.LacOp``)."""
    if metadata.state is LedgerState.CLOSED:
        return metadata.last_entry_id if metadata.last_entry_id is not None else -1
    return lac


def digest_key(metadata: LedgerMetadata, password: str | None) -> bytes:
    """The digest key a reader verifies with (HMAC ledgers: derived from the password)."""
    if metadata.digest_type == "hmac-sha256":
        return mac_key((password or "").encode())
    return b""


def record_usable(
    record: FramedRecord | None, metadata: LedgerMetadata, entry_id: int, digest_key: bytes = b""
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


def page_last(metadata: LedgerMetadata, first: int, last: int, entries_max: int) -> int:
    """The last entry of a page from ``first``: at most ``entries_max`` entries, within
    ``last`` and within the fragment holding ``first``."""
    last = min(last, first + entries_max - 1)
    index = metadata.fragments.index(metadata.fragment_for(first))
    if index + 1 < len(metadata.fragments):
        last = min(last, metadata.fragments[index + 1].first_entry_id - 1)
    return last


def lac_bookies(metadata: LedgerMetadata) -> tuple[str, ...]:
    """The bookies to ask for the LAC of an open ledger: the last fragment's."""
    return metadata.ensemble


def lac_from_answers(lacs: Iterable[int]) -> int:
    """The LAC a reader may use given some bookies' answers: the highest one (-1 if none)."""
    return max(lacs, default=-1)


# ---------------------------------------------------------------------- ReadOp


class ReadPhase(StrEnum):
    RANGE = "range"  # waiting for the cover bookies' range reads
    ENTRIES = "entries"  # taking entries in order, failing over per entry
    DONE = "done"


@dataclass(slots=True)
class _EntryRead:
    """The failover read of one entry: replicas still to ask, requests out."""

    entry_id: int
    order: list[str]
    asked: dict[int, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    deadline: int | None = None  # when the next replica is asked in parallel


class ReadOp:
    """One page of a range read, or one entry (``ReadOp.page`` / ``ReadOp.entry``)."""

    def __init__(
        self,
        metadata: LedgerMetadata,
        first: int,
        last: int,
        *,
        single: bool,
        digest_key: bytes = b"",
        limits: ReadLimits | None = None,
    ) -> None:
        self.metadata = metadata
        self.limits = limits or ReadLimits()
        invariant(self.limits.page_entries_max >= 1, "a page holds at least one entry")
        self.first = first
        self.last = last  # the readable end for a single entry, else the last to read
        self.single = single
        self.failovers = 0  # replicas given up (missing, corrupt, failed or slow)
        self.phase = ReadPhase.RANGE
        self.result: ReadDone | ReadFailed | None = None
        self._key = digest_key
        self._ids = 0
        self._ranges: dict[int, Share] = {}
        self._tried: dict[int, set[str]] = {}  # residue -> bookies asked for its entries
        self._range_deadline: int | None = None
        self._suspects: set[str] = set()
        self._found: dict[int, FramedRecord] = {}
        self._entry: _EntryRead | None = None
        self._position = first
        self._entries: list[tuple[int, bytes]] = []
        self._size = 0

    @classmethod
    def page(
        cls,
        metadata: LedgerMetadata,
        first: int,
        last: int,
        *,
        digest_key: bytes = b"",
        limits: ReadLimits | None = None,
    ) -> ReadOp:
        """Entries ``first``..``last`` (already cut at the readable end; empty when
        ``first > last``), bounded by count and bytes: ``ReadDone.next_entry_id`` is
        where the next page starts."""
        return cls(metadata, first, last, single=False, digest_key=digest_key, limits=limits)

    @classmethod
    def entry(
        cls,
        metadata: LedgerMetadata,
        entry_id: int,
        end: int,
        *,
        digest_key: bytes = b"",
        limits: ReadLimits | None = None,
    ) -> ReadOp:
        """Entry ``entry_id`` of a ledger readable up to ``end``."""
        return cls(metadata, entry_id, end, single=True, digest_key=digest_key, limits=limits)

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    @property
    def finished(self) -> bool:
        return self.phase is ReadPhase.DONE

    def next_deadline(self) -> int | None:
        if self.phase is ReadPhase.RANGE:
            return self._range_deadline
        if self.phase is ReadPhase.ENTRIES and self._entry is not None:
            return self._entry.deadline
        return None

    # ------------------------------------------------------------------ events

    def start(self, now: int) -> list[ReadEffect]:
        invariant(self._ids == 0 and not self.finished, "a ReadOp starts once")
        if self.single:
            if self.first > self.last:
                return self._finish(
                    ReadFailed(
                        EntryNotFound,
                        f"entry {self.first} of ledger {self.ledger_id} is past the readable "
                        f"end {self.last}",
                    )
                )
            self.phase = ReadPhase.ENTRIES
            return self._ask_replicas(self.first, now)
        if self.first > self.last:
            return self._finish(ReadDone((), None))
        self.last = page_last(self.metadata, self.first, self.last, self.limits.page_entries_max)
        return self._ask_ranges(cover_shares(self.metadata, self.first), now)

    def _ask_ranges(self, shares: Iterable[Share], now: int) -> list[ReadEffect]:
        """A range read per share (``read_cover``); the range phase's deadline starts
        again (the outstanding ones are as late as the new ones may be)."""
        effects: list[ReadEffect] = []
        for share in shares:
            rid = self._next_id()
            self._ranges[rid] = share
            for residue in share.residues:
                self._tried.setdefault(residue, set()).add(share.bookie)
            effects.append(
                ReadRange(
                    rid,
                    share.bookie,
                    self.ledger_id,
                    self.first,
                    self.last,
                    entries_max=self.last - self.first + 1,
                    bytes_max=self.limits.page_bytes_max,
                    stride=share.stride,
                    residues=share.residues if share.stride else (),
                )
            )
        self._range_deadline = now + self.limits.speculative_read_ms
        return effects

    def _ask_again(self, given_up: Iterable[Share], now: int) -> list[ReadEffect]:
        """The residues of range reads given up (failed, too slow), asked again as ranges
        from bookies not tried for them; none left: the entries are taken (the missing
        ones read entry by entry)."""
        residues = [residue for share in given_up for residue in share.residues]
        again = reask(self.metadata, self.first, residues, self._tried, self._suspects)
        self.failovers += len(again)
        effects = self._ask_ranges(again, now)
        if self._ranges:
            return effects
        return effects + self._take_entries(now)

    def handle(self, event: ReadEvent) -> list[ReadEffect]:
        if self.finished:
            return []
        if isinstance(event, Tick):
            return self._on_tick(event.now)
        if isinstance(event, RangeAnswered | RequestFailed) and event.request_id in self._ranges:
            return self._on_range_answer(event)
        entry = self._entry
        if entry is None or event.request_id not in entry.asked:
            return []  # a late answer to a request already given up
        if isinstance(event, EntryAnswered):
            return self._on_entry_answer(entry, event)
        if isinstance(event, RequestFailed):
            bookie = entry.asked.pop(event.request_id)
            entry.errors.append(f"{bookie}: {event.code}")
            self.failovers += 1
            return self._after_miss(entry, event.now)
        return []

    def _on_tick(self, now: int) -> list[ReadEffect]:
        if self.phase is ReadPhase.RANGE:
            deadline = self._range_deadline
            if deadline is None or now < deadline:
                return []
            late = dict(self._ranges)
            self._suspects.update(share.bookie for share in late.values())
            self._ranges.clear()
            return [CancelRequests(tuple(late)), *self._ask_again(late.values(), now)]
        entry = self._entry
        if entry is None or entry.deadline is None or now < entry.deadline:
            return []
        self.failovers += 1  # speculative: the next replica too
        return self._ask_next(entry, now)

    def _on_range_answer(self, event: RangeAnswered | RequestFailed) -> list[ReadEffect]:
        share = self._ranges.pop(event.request_id)
        if isinstance(event, RequestFailed):
            self._suspects.add(share.bookie)
            return self._ask_again([share], event.now)
        # record_usable, inline: a page holds up to a thousand records.
        found, first, last, key = self._found, self.first, self.last, self._key
        ledger_id, digest_type = self.metadata.ledger_id, self.metadata.digest_type
        for record in event.records:
            entry_id = record.entry_id
            if (
                first <= entry_id <= last
                and entry_id not in found
                and record.ledger_id == ledger_id
                and record.digest_type == digest_type
                and record_ok(record, key)
            ):
                found[entry_id] = record
        if self._ranges:
            return []
        return self._take_entries(event.now)

    def _on_entry_answer(self, entry: _EntryRead, event: EntryAnswered) -> list[ReadEffect]:
        bookie = entry.asked.pop(event.request_id)
        if record_usable(event.record, self.metadata, entry.entry_id, self._key):
            effects: list[ReadEffect] = []
            if entry.asked:
                effects.append(CancelRequests(tuple(entry.asked)))
            self._entry = None
            return effects + self._accept(event.record, event.now)
        entry.errors.append(f"{bookie}: digest mismatch")
        self.failovers += 1
        return [ReplicaCorrupt(bookie, self.ledger_id, entry.entry_id)] + self._after_miss(
            entry, event.now
        )

    # ------------------------------------------------------------------ the entries

    def _take_entries(self, now: int) -> list[ReadEffect]:
        """Take the entries the range reads returned, in order, up to the first missing
        one (read by failover) or the end of the page."""
        self.phase = ReadPhase.ENTRIES
        self._range_deadline = None
        # One loop, no call per entry: a page holds up to a thousand. A single read takes
        # its one entry (its ``last`` is the readable end).
        found, entries = self._found, self._entries
        last = self.first if self.single else self.last
        page_bytes_max = self.limits.page_bytes_max
        position, size = self._position, self._size
        while position <= last:
            record = found.pop(position, None)
            if record is None:
                self._position, self._size = position, size
                self.failovers += 1
                return self._ask_replicas(position, now)
            payload = record.payload
            length = len(payload)
            if entries and size + length > page_bytes_max:
                break  # the page ends before it; the first entry always comes whole
            entries.append((position, payload if isinstance(payload, bytes) else bytes(payload)))
            size += length
            position += 1
        self._position, self._size = position, size
        return self._finish(ReadDone(tuple(entries), position))

    def _accept(self, record: FramedRecord, now: int) -> list[ReadEffect]:
        """A failover read returned a good copy of the entry at the current position: it
        is taken as a range answer's entries are (a page then goes on)."""
        self._found[self._position] = record
        return self._take_entries(now)

    def _ask_replicas(self, entry_id: int, now: int) -> list[ReadEffect]:
        order = read_sequence(self.metadata, entry_id, avoid=self._suspects)
        entry = self._entry = _EntryRead(entry_id, list(order))
        return self._ask_next(entry, now)

    def _ask_next(self, entry: _EntryRead, now: int) -> list[ReadEffect]:
        bookie = entry.order.pop(0)
        rid = self._next_id()
        entry.asked[rid] = bookie
        entry.deadline = now + self.limits.speculative_read_ms if entry.order else None
        return [ReadEntry(rid, bookie, self.ledger_id, entry.entry_id)]

    def _after_miss(self, entry: _EntryRead, now: int) -> list[ReadEffect]:
        """A replica failed or was corrupt: the next one at once; none left and none out:
        no replica serves the entry."""
        if entry.order:
            return self._ask_next(entry, now)
        if entry.asked:
            return []
        return self._finish(
            ReadFailed(
                BookieUnavailable,
                f"entry {entry.entry_id} of ledger {self.ledger_id} could not be read from any "
                f"replica ({'; '.join(entry.errors)})",
            )
        )

    def _finish(self, result: ReadDone | ReadFailed) -> list[ReadEffect]:
        self.phase = ReadPhase.DONE
        self.result = result
        self._entry = None
        return [result]

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids
