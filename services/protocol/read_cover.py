"""Which bookie a page's range reads ask for which entries, and whom to ask again.

Entry ``e`` of a fragment is stored by the bookies at ensemble indexes
``(e + k) mod E`` for ``k < Qw`` (``quorum.write_set``): which bookies store it
depends only on its *residue* ``e mod E``. A page is read with one range read per
"cover" bookie (indexes 0, Qw, 2·Qw, … of the fragment's ensemble, which together
store every residue), and each cover bookie is asked only for the residues it is
the first cover to store: every entry then comes once, not once per cover bookie
that stores it (E=3, Qw=2: two thirds of the entries instead of four thirds of
them, decoded and checked at the gateway and read from disk at the bookies).
The bookie filters by ``entry_id mod stride in residues`` (docs/api.md "Bookie"); all
residues of a stride mean no filter (``Share.stride`` 0, as a bookie without the
filter would answer anyway).

When a cover bookie fails or is too slow, its residues are asked again, as ranges,
from the next bookie of each residue's write set not asked for it yet (``reask``):
a down bookie costs the page one more range read per residue group, not one read
per entry. A residue no bookie is left for is read entry by entry (``ReadOp``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from services.errors import invariant
from services.protocol import quorum
from services.protocol.metadata import LedgerMetadata


@dataclass(frozen=True, slots=True)
class Share:
    """One range read of a page: the bookie and the residues (``entry_id mod E``) it is
    asked for."""

    bookie: str
    residues: tuple[int, ...]
    ensemble_size: int

    @property
    def stride(self) -> int:
        """What the bookie filters by: 0 (no filter) when the share is every residue."""
        return 0 if len(self.residues) >= self.ensemble_size else self.ensemble_size


def _residue_bookies(metadata: LedgerMetadata, entry_id: int, residue: int) -> tuple[str, ...]:
    """The bookies storing the entries of ``residue`` in the fragment holding
    ``entry_id``, in write-set order."""
    bookies = metadata.fragment_for(entry_id).bookies
    return tuple(
        bookies[i] for i in quorum.write_set(residue, metadata.ensemble_size, metadata.write_quorum)
    )


def cover_shares(metadata: LedgerMetadata, entry_id: int) -> tuple[Share, ...]:
    """The range reads of a page starting at ``entry_id``: the fragment's cover bookies
    (indexes 0, Qw, 2·Qw, …), each with the residues no cover before it stores."""
    size, bookies = metadata.ensemble_size, metadata.fragment_for(entry_id).bookies
    covers = [bookies[i] for i in range(0, size, metadata.write_quorum)]
    shares: dict[str, list[int]] = {bookie: [] for bookie in covers}
    for residue in range(size):
        holders = _residue_bookies(metadata, entry_id, residue)
        first = next((b for b in covers if b in holders), None)
        invariant(first is not None, f"residue {residue} has a cover bookie")
        shares[first].append(residue)  # type: ignore[index]
    return tuple(Share(b, tuple(shares[b]), size) for b in covers if shares[b])


def reask(
    metadata: LedgerMetadata,
    entry_id: int,
    residues: Collection[int],
    tried: Mapping[int, Collection[str]],
    suspects: Collection[str],
) -> tuple[Share, ...]:
    """Range reads asking again for ``residues`` of the page at ``entry_id``: each from
    the first bookie of its write set not ``tried`` for it, bookies not ``suspects``
    first; residues sharing a bookie in one read. Residues with no bookie left are not
    in any share."""
    groups: dict[str, list[int]] = {}
    for residue in sorted(residues):
        holders = _residue_bookies(metadata, entry_id, residue)
        left = [b for b in holders if b not in tried.get(residue, ())]
        left.sort(key=lambda b: b in suspects)  # stable: write-set order otherwise
        if left:
            groups.setdefault(left[0], []).append(residue)
    size = metadata.ensemble_size
    return tuple(Share(b, tuple(rs), size) for b, rs in groups.items())
