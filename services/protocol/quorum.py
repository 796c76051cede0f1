"""Quorum arithmetic of a ledger ensemble (docs/protocol.md, "Ledgers" and "Fencing and recovery").

Entries are striped round robin over an ensemble of E bookies: entry ``e`` is
stored on the Qw bookies at indexes ``(e + i) % E`` for ``i`` in ``0..Qw-1``
(its write set), and acknowledged once Qa of them stored it (an ack quorum).
There are exactly E write sets, one per starting index.

Two numbers follow from that and carry the safety argument of recovery:

- ``Qw - Qa + 1`` bookies of a write set is the smallest number that meets
  every ack quorum of it (``Qa + (Qw - Qa + 1) > Qw``). When that many
  bookies of EVERY write set are fenced, no entry can gather Qa acks from
  unfenced bookies any more (fencing is complete).
- an entry missing from ``Qw - Qa + 1`` fenced bookies of its write set
  cannot have been acknowledged, and never will be: it is absent.

Every function here is pure and takes plain integers, so the property tests
can enumerate every ``E >= Qw >= Qa >= 1``.
"""

from __future__ import annotations

from collections.abc import Iterable

from services.errors import InvalidArgument


def check_sizes(ensemble_size: int, write_quorum: int, ack_quorum: int) -> None:
    """Raise ``InvalidArgument`` unless ``E >= Qw >= Qa >= 1``."""
    sizes = (ensemble_size, write_quorum, ack_quorum)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in sizes):
        raise InvalidArgument(f"ensemble and quorum sizes must be integers, got {sizes}")
    if not ensemble_size >= write_quorum >= ack_quorum >= 1:
        raise InvalidArgument(
            "ensemble_size >= write_quorum >= ack_quorum >= 1 must hold, got "
            f"ensemble_size={ensemble_size} write_quorum={write_quorum} ack_quorum={ack_quorum}"
        )


def write_set(entry_id: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """Indexes into the ensemble that store ``entry_id`` (striped round robin)."""
    return [(entry_id + i) % ensemble_size for i in range(write_quorum)]


def write_quorums(ensemble_size: int, write_quorum: int) -> list[tuple[int, ...]]:
    """The E write sets of an ensemble, one per starting index.

    They are E distinct sets when ``Qw < E``; when ``Qw == E`` they are E
    rotations of the one set (no striping)."""
    return [tuple(write_set(start, ensemble_size, write_quorum)) for start in range(ensemble_size)]


def fence_threshold(write_quorum: int, ack_quorum: int) -> int:
    """How many bookies of a write set must be fenced (or say "missing"): ``Qw - Qa + 1``."""
    return write_quorum - ack_quorum + 1


def ack_quorum_reached(ack_quorum: int, acked_count: int) -> bool:
    """An entry is replicated enough to acknowledge once Qa bookies of its write set stored it."""
    return acked_count >= ack_quorum


def ack_quorum_possible(write_quorum: int, ack_quorum: int, failed_count: int) -> bool:
    """Whether Qa acks can still come when ``failed_count`` bookies of the write set failed."""
    return write_quorum - failed_count >= ack_quorum


def fencing_complete(
    ensemble_size: int, write_quorum: int, ack_quorum: int, answered_indexes: Iterable[int]
) -> bool:
    """True once, for EVERY write set of the ensemble, at least ``Qw - Qa + 1`` of its
    bookies answered the fence (docs/protocol.md, fencing step 3)."""
    answered = set(answered_indexes)
    need = fence_threshold(write_quorum, ack_quorum)
    return all(
        sum(1 for index in quorum if index in answered) >= need
        for quorum in write_quorums(ensemble_size, write_quorum)
    )


def entry_absent(write_quorum: int, ack_quorum: int, missing_count: int) -> bool:
    """An entry missing from ``Qw - Qa + 1`` fenced bookies of its write set was never
    acknowledged and never will be (docs/protocol.md, recovery step 4)."""
    return missing_count >= fence_threshold(write_quorum, ack_quorum)
