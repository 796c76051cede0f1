"""Re-replication, the pure part (docs/protocol.md, "Auto-recovery"): no I/O here.

Which fragments of a ledger name a bookie that is gone, which entries that bookie
had to hold (its share of each entry's write set), who replaces it, and the
metadata after the swap. The auditor, the replication workers and the simulator
all decide with these functions. Which fragments break the rack policy
(``placement.py``) and which bookie of each to move to another rack are decided
here too (``misplaced_spans``, ``placement_moves``): a move is a repair of a
bookie that is not missing, copied to a bookie on another rack and swapped in.

A fragment's span is ``[first, last]``: ``last`` is the entry before the next
fragment starts, or the ledger's last entry once it is CLOSED; the last fragment
of a ledger that is not CLOSED is open-ended (``last`` is None) and may still grow,
so only the ledger's writer, or a recovery that fences it, may settle it.
Bookie index ``i`` of an ensemble of E stores entry ``e`` when ``i`` is in the
write set of ``e``: ``(i - e) mod E < Qw``.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass

from services.errors import invariant
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.placement import (
    NO_RACKS,
    Racks,
    choose_replacements,
    move_for,
    rack_count,
    short_quorums,
)


@dataclass(frozen=True, slots=True)
class Span:
    """Fragment ``index`` holds entries ``first..last`` (``last`` None: open-ended)."""

    index: int
    first: int
    last: int | None
    bookies: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return self.last is not None and self.last < self.first


@dataclass(frozen=True, slots=True)
class Repair:
    """``bookie`` (index ``bookie_index`` of the fragment at ``first``) must be replaced."""

    first: int
    last: int | None
    bookie: str
    bookie_index: int
    is_open_last: bool  # the open-ended last fragment of a ledger that is not CLOSED
    # ``bookie`` is not missing: it moves to a bookie on another rack (``placement_moves``)
    move: bool = False


def formatted(
    metadata: LedgerMetadata,
    instance_of: Callable[[str], str | None],
    fragment_index: int | None = None,
) -> set[str]:
    """The bookies of the ledger's fragments (of fragment ``fragment_index`` only, when
    given) registered now as another instance than the fragment recorded: formatted
    since it was written, so they lost their share of it. A bookie not registered, or
    a fragment written before instances were recorded, tells nothing."""
    fragments = metadata.fragments
    if fragment_index is not None:
        fragments = (fragments[fragment_index],)
    out: set[str] = set()
    for fragment in fragments:
        for bookie, recorded in zip(fragment.bookies, fragment.instances, strict=True):
            current = instance_of(bookie)
            if recorded is not None and current is not None and current != recorded:
                out.add(bookie)
    return out


def spans(metadata: LedgerMetadata) -> list[Span]:
    """Every fragment's span, in order."""
    out: list[Span] = []
    closed = metadata.state is LedgerState.CLOSED
    end = metadata.last_entry_id if closed else None
    fragments = metadata.fragments
    for i, fragment in enumerate(fragments):
        last: int | None
        if i + 1 < len(fragments):
            bound = fragments[i + 1].first_entry_id - 1
            last = bound if end is None else min(bound, end)
        else:
            last = end
        out.append(Span(i, fragment.first_entry_id, last, fragment.bookies))
    return out


def holds(entry_id: int, bookie_index: int, ensemble_size: int, write_quorum: int) -> bool:
    """Whether bookie index ``bookie_index`` is in the write set of ``entry_id``."""
    return (bookie_index - entry_id) % ensemble_size < write_quorum


def entries_on(
    first: int, last: int, bookie_index: int, ensemble_size: int, write_quorum: int
) -> Iterator[int]:
    """The entry ids in ``[first, last]`` that bookie index ``bookie_index`` stores."""
    for entry_id in range(first, last + 1):
        if holds(entry_id, bookie_index, ensemble_size, write_quorum):
            yield entry_id


def count_on(
    first: int, last: int, bookie_index: int, ensemble_size: int, write_quorum: int
) -> int:
    """``len(list(entries_on(...)))`` without the loop."""
    if last < first:
        return 0
    total = last - first + 1
    full, rest = divmod(total, ensemble_size)
    count = full * write_quorum
    for k in range(rest):
        if holds(first + full * ensemble_size + k, bookie_index, ensemble_size, write_quorum):
            count += 1
    return count


def missing_bookies(metadata: LedgerMetadata, available: Collection[str]) -> set[str]:
    """Bookies some fragment names that are not in ``available``."""
    return {b for span in spans(metadata) for b in span.bookies if b not in available}


def repairs(metadata: LedgerMetadata, missing: Collection[str]) -> list[Repair]:
    """One repair per (fragment, missing bookie), in fragment order. Empty fragments of
    a CLOSED ledger are included: no entry to copy, but the bookie must leave them."""
    out: list[Repair] = []
    all_spans = spans(metadata)
    for span in all_spans:
        open_last = span.last is None
        for index, bookie in enumerate(span.bookies):
            if bookie in missing:
                out.append(Repair(span.first, span.last, bookie, index, open_last))
    return out


def missing_entries(wanted: Iterable[int], stored_ranges: Sequence[tuple[int, int]]) -> list[int]:
    """The ids of ``wanted`` that no range of ``stored_ranges`` (sorted, disjoint) covers."""
    firsts = [r[0] for r in stored_ranges]
    out: list[int] = []
    for entry_id in wanted:
        i = bisect.bisect_right(firsts, entry_id) - 1
        if i < 0 or stored_ranges[i][1] < entry_id:
            out.append(entry_id)
    return out


def choose_target(
    fragment_bookies: Sequence[str],
    bookie: str,
    writable: Iterable[str],
    write_quorum: int,
    rng: random.Random,
    racks: Racks = NO_RACKS,
    exclude: Collection[str] = (),
) -> str:
    """A writable bookie, not in the fragment, not excluded, to replace ``bookie``: on a
    rack the rest of its write quorums do not use, and a host the rest of the fragment
    does not use, when one is free (``placement.choose_replacements``;
    ``NotEnoughBookies`` when there is none)."""
    replaced = choose_replacements(
        fragment_bookies, [bookie], writable, write_quorum, rng, racks, exclude
    )
    return replaced.bookies[list(fragment_bookies).index(bookie)]


def misplaced_spans(
    metadata: LedgerMetadata, racks: Racks, registered: Collection[str]
) -> list[Span]:
    """The non-empty fragments whose write quorums span fewer racks than the rack policy
    wants, given the racks of the ``registered`` bookies (``racks`` maps each to its rack
    or None). A fragment naming a bookie that is not registered is left out: it is
    under-replicated, and judged once repaired."""
    racks_there = rack_count(registered, racks)
    out: list[Span] = []
    for span in spans(metadata):
        if span.empty or any(b not in registered for b in span.bookies):
            continue
        if short_quorums(span.bookies, metadata.write_quorum, racks, racks_there):
            out.append(span)
    return out


def placement_moves(
    metadata: LedgerMetadata,
    racks: Racks,
    registered: Collection[str],
    writable: Iterable[str],
    exclude: Collection[str] = (),
) -> list[Repair]:
    """One move per misplaced settled fragment (not the open-ended last fragment, the
    writer's) that a writable bookie on another rack can improve: the bookie
    ``placement.move_for`` names, as a ``Repair`` with ``move`` set."""
    racks_there = rack_count(registered, racks)
    writable = list(writable)
    out: list[Repair] = []
    for span in misplaced_spans(metadata, racks, registered):
        if span.last is None:
            continue
        index = move_for(span.bookies, metadata.write_quorum, writable, racks, racks_there, exclude)
        if index is not None:
            out.append(Repair(span.first, span.last, span.bookies[index], index, False, True))
    return out


def replace_bookie(
    metadata: LedgerMetadata, first_entry_id: int, old: str, new: str
) -> LedgerMetadata | None:
    """The metadata with ``old`` replaced by ``new`` in the fragment at
    ``first_entry_id``; None when that swap no longer applies (the fragment is gone,
    ``old`` left it, or ``new`` is in it already): re-plan from this metadata."""
    for fragment in metadata.fragments:
        if fragment.first_entry_id == first_entry_id:
            if old not in fragment.bookies or new in fragment.bookies:
                return None
            return metadata.replace_bookie(first_entry_id, old, new)
    return None


def still_applies(metadata: LedgerMetadata, repair: Repair) -> bool:
    """Whether ``repair`` still describes ``metadata`` (same fragment, same span, same
    bookie): a copy planned on older metadata must not be swapped in otherwise."""
    for span in spans(metadata):
        if span.first == repair.first:
            return (
                span.last == repair.last
                and repair.bookie_index < len(span.bookies)
                and span.bookies[repair.bookie_index] == repair.bookie
            )
    return False


def last_entry_known(metadata: LedgerMetadata) -> int | None:
    """The last entry id when CLOSED, else None."""
    if metadata.state is LedgerState.CLOSED:
        invariant(metadata.last_entry_id is not None, "a CLOSED ledger has a last entry")
        return metadata.last_entry_id
    return None


def last_fragment_affected(metadata: LedgerMetadata, missing: Collection[str]) -> bool:
    """The ledger is not CLOSED and its last fragment names a missing bookie."""
    return metadata.state is not LedgerState.CLOSED and any(
        b in missing for b in metadata.last_fragment.bookies
    )
