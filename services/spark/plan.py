"""Planning a Quire batch read: from ledger metadata and a LAC snapshot to partitions
(bounded entry ranges). Pure: the caller passes a function that says what each ledger
looks like now (``LedgerView``); nothing here reads data or talks to the gateway.

A consistent snapshot: each ledger is read up to the end seen at planning (the last
entry of a CLOSED ledger, the LAC of an open one), whatever is appended afterwards.
A log is read the way the gateway reads it (gateway/logs/reads.py): its ledgers in
list order, a CLOSED ledger up to its last entry, and an open ledger up to its LAC,
where the read stops (a ledger after an open one may not be read before it is
closed, or the order would break). ``start``/``end`` positions cut the ranges: the
read starts at ``start`` and stops before ``end``.

Each partition carries its ledger's snapshot end so that a log partition decides
alone which records are visible: an entry shows only when its whole append is
readable (``log_records.visible(entry_id, record, end)``), which depends on the entry
and the end only, so a partition boundary may fall inside a batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.protocol.logs import Position
from services.spark.client import INVALID_OPTION, QuireSparkError


@dataclass(frozen=True, slots=True)
class LedgerView:
    """What a ledger looks like when the job plans."""

    ledger_id: int
    closed: bool
    end: int  # the last readable entry id (-1: none): last entry if CLOSED, else the LAC
    length: int  # payload bytes (the ledger's "length"; an estimate while open)


@dataclass(frozen=True, slots=True)
class Partition:
    """Entries ``first..last`` of one ledger (both inclusive, ``first <= last``); ``end``
    is the ledger's snapshot end; ``is_log``: the entries are log records (envelopes)."""

    ledger_id: int
    first: int
    last: int
    end: int
    is_log: bool


def entries_per_partition(view: LedgerView, target_entries: int, target_bytes: int) -> int:
    """How many entries of this ledger make a partition: at most ``target_entries``, and
    about ``target_bytes`` of payload by the ledger's average entry size."""
    count = view.end + 1
    if count <= 0 or view.length <= 0:
        return target_entries
    average = math.ceil(view.length / count)
    return max(1, min(target_entries, target_bytes // average))


def split(view: LedgerView, first: int, last: int, per: int, is_log: bool) -> list[Partition]:
    """``first..last`` of a ledger cut into ranges of ``per`` entries (none if empty)."""
    return [
        Partition(view.ledger_id, at, min(last, at + per - 1), view.end, is_log)
        for at in range(first, last + 1, per)
    ]


def plan_ledgers(
    ledger_ids: Sequence[int],
    view_of: Callable[[int], LedgerView],
    target_entries: int,
    target_bytes: int,
) -> list[Partition]:
    """Every readable entry of each ledger, the ledgers in the given order."""
    out: list[Partition] = []
    for ledger_id in ledger_ids:
        view = view_of(ledger_id)
        per = entries_per_partition(view, target_entries, target_bytes)
        out += split(view, 0, view.end, per, False)
    return out


def plan_log(
    name: str,
    ledger_ids: Sequence[int],
    view_of: Callable[[int], LedgerView | None],
    target_entries: int,
    target_bytes: int,
    start: Position | None = None,
    end: Position | None = None,
) -> list[Partition]:
    """The log's readable records from ``start`` (its first record when None) to
    ``end`` (excluded; the snapshot's end when None). ``view_of`` answers None for a
    ledger that is gone (truncated meanwhile): the read stops there, as the gateway's
    does. Positions outside the log are ``QuireSparkError`` (``invalid_option``)."""
    _check_in_log(name, ledger_ids, start, "start")
    _check_in_log(name, ledger_ids, end, "end")
    if start is not None and end is not None:
        if ledger_ids.index(end.ledger_id) < ledger_ids.index(start.ledger_id) or (
            end.ledger_id == start.ledger_id and end.entry_id < start.entry_id
        ):
            raise QuireSparkError(INVALID_OPTION, f"option 'end' {end} is before 'start' {start}")
    index = ledger_ids.index(start.ledger_id) if start is not None else 0
    first = start.entry_id if start is not None else 0
    out: list[Partition] = []
    while index < len(ledger_ids):
        ledger_id = ledger_ids[index]
        view = view_of(ledger_id)
        if view is None:
            break
        _check_not_past(view, start, "start")
        _check_not_past(view, end, "end")
        last = view.end
        stop_here = not view.closed
        if end is not None and end.ledger_id == ledger_id:
            last = min(last, end.entry_id - 1)
            stop_here = True
        per = entries_per_partition(view, target_entries, target_bytes)
        out += split(view, first, last, per, True)
        if stop_here:
            break
        index += 1
        first = 0
    return out


def _check_in_log(
    name: str, ledger_ids: Sequence[int], position: Position | None, option: str
) -> None:
    if position is None or position.ledger_id in ledger_ids:
        return
    why = "it is empty" if not ledger_ids else "truncated, or never in it"
    raise QuireSparkError(
        INVALID_OPTION, f"option {option!r}: position {position} is not in log {name} ({why})"
    )


def _check_not_past(view: LedgerView, position: Position | None, option: str) -> None:
    """A position past the end of a closed ledger is outside the log (its end + 1, just
    past the last entry, is valid: "after this ledger")."""
    if position is None or position.ledger_id != view.ledger_id or not view.closed:
        return
    if position.entry_id > view.end + 1:
        raise QuireSparkError(
            INVALID_OPTION,
            f"option {option!r}: position {position} is past the end of ledger "
            f"{view.ledger_id} (last entry {view.end})",
        )
