"""What a bookie's answers become: the results of ``BookieClient``'s calls."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from services.limits import ID_MAX
from services.wire import framing


@dataclass(frozen=True, slots=True)
class BookieAddResult:
    """What a bookie did with one add request: entries stored, and the ones it refused
    as ``(ledger_id, entry_id, error_code)``: ``ledger_fenced``, ``entry_exists`` or
    ``invalid_argument`` (a bad digest); and the instance of the bookie that answered
    (None if it did not say): a writer counts an add only from the instance its
    fragment recorded (services/protocol/writer.py)."""

    stored: int
    rejected: list[tuple[int, int, str]] = field(default_factory=list)
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class RangeResult:
    """Entries of a range read, ascending, the last entry id the bookie stores for the
    ledger (-1 if none), and the instance of the bookie that answered (None if it did
    not say)."""

    records: list[framing.FramedRecord]
    last_entry_id: int
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class EntryResult:
    """One entry read, and the instance of the bookie that answered."""

    record: framing.FramedRecord
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LacInfo:
    """A bookie's answer about a ledger (LAC read, LAC update, fence): its LAC, last
    entry stored, fenced flag, the ledger's length at the last entry stored
    (``length``) and at the LAC (``lac_length``; -1 when unknown or not stored there),
    and the answering bookie's instance id (a reformatted bookie is a new instance;
    None if the bookie did not say)."""

    ledger_id: int
    lac: int
    last_entry_id: int
    fenced: bool
    length: int = -1
    lac_length: int = -1
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class StoredInfo:
    """Which entries of a ledger a bookie stores (``BookieClient.stored``): the maximal
    runs ``(first, last)`` of consecutive entry ids, ascending; how many entries; the
    last one (-1: none); the fenced flag; how many entries it digest-checked and the
    ids that failed. ``known`` is False when the bookie knows nothing of the ledger;
    ``truncated`` when the bookie cut ``ranges`` (or ``corrupt``): then ``holds`` sees
    only the listed runs, while ``entries`` and ``last_entry_id`` still count all."""

    ledger_id: int
    known: bool
    ranges: tuple[tuple[int, int], ...]
    entries: int
    last_entry_id: int
    fenced: bool
    checked: int = 0
    corrupt: tuple[int, ...] = ()
    truncated: bool = False

    def holds(self, entry_id: int) -> bool:
        """Whether ``entry_id`` is in one of the listed runs."""
        k = bisect_right(self.ranges, (entry_id, ID_MAX)) - 1
        return k >= 0 and self.ranges[k][0] <= entry_id <= self.ranges[k][1]
