"""Ensemble placement: which bookies store a ledger, and who replaces a failed one.

A bookie id is its advertised ``host:port``; its host is the part before the
last ``:``. A bookie may register a rack (``--rack``); one that registers none
is on the default rack (``DEFAULT_RACK``), as in BookKeeper, so a cluster
without racks is a cluster of one rack.

The rack policy (docs/operations.md "Racks"): every write quorum of an ensemble
(Qw consecutive bookies, ``quorum.write_quorums``) spans ``min(Qw, R)`` distinct
racks, R being the number of racks the cluster has. With racks enough, the
bookies storing any one entry are on distinct racks, so losing a whole rack
loses at most one replica of each entry. With one rack the policy asks nothing.

Placement is random (a seeded ``random.Random`` passed in) among the writable
bookies:

- a new ensemble first chooses a sequence of racks that meets the policy: a
  depth-first search over the positions, each trying the racks with bookies left
  (in a random order, the fullest first) that keep every write quorum through the
  position able to reach its racks, at most ``PLACEMENT_SEARCH_STEPS_MAX`` steps;
  then fills each position with a bookie of its rack, a host the ensemble does
  not use yet first;
- a replacement takes, for each failed bookie in turn, the candidate that leaves
  the fewest write quorums it joins short of racks, then the fewest bookies of
  its rack in them, then a host the ensemble does not use.

When the policy cannot be met (too few racks, or too few bookies on them), the
new ensemble falls back to the rack-unaware choice (spread over hosts only) and
the answer says so (``Placement.spread`` false); the caller logs a warning.
A replacement is never a bookie already in the ensemble (nor one the caller
excludes). When there are not enough candidates the answer is
``NotEnoughBookies`` and nothing is chosen.

``move_for`` is the auditor's and the replicator's question about an ensemble
that does not meet the policy: which one bookie to move to another rack to
leave fewer write quorums short (None when no move helps, e.g. while a rack is
gone).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from services.errors import InvalidArgument, NotEnoughBookies
from services.protocol import quorum
from services.protocol.limits import PLACEMENT_SEARCH_STEPS_MAX

DEFAULT_RACK = "/default-rack"

Racks = Mapping[str, str | None]
"""Bookie id -> the rack it registered (None, or absent: the default rack)."""

NO_RACKS: Racks = {}


@dataclass(frozen=True, slots=True)
class Placement:
    """The bookies chosen, and whether the ensemble meets the rack policy."""

    bookies: tuple[str, ...]
    spread: bool


def host_of(bookie_id: str) -> str:
    """The host part of a ``host:port`` bookie id (the whole id when it has no port)."""
    host, sep, _port = bookie_id.rpartition(":")
    return host if sep else bookie_id


def rack_of(bookie_id: str, racks: Racks) -> str:
    """The bookie's rack: the registered one, else the default rack."""
    return racks.get(bookie_id) or DEFAULT_RACK


def rack_count(bookies: Iterable[str], racks: Racks) -> int:
    """How many distinct racks ``bookies`` are on."""
    return len({rack_of(b, racks) for b in bookies})


def racks_wanted(write_quorum: int, racks_there: int) -> int:
    """How many distinct racks each write quorum must span: ``min(Qw, R)``."""
    return max(1, min(write_quorum, racks_there))


def _windows(ensemble_size: int, write_quorum: int, index: int) -> list[tuple[int, ...]]:
    """The write quorums (as index tuples) that hold ``index``."""
    return [w for w in quorum.write_quorums(ensemble_size, write_quorum) if index in w]


def short_quorums(
    ensemble: Sequence[str], write_quorum: int, racks: Racks, racks_there: int
) -> list[int]:
    """The first indexes of the write quorums of ``ensemble`` that span fewer racks than
    the policy wants (``racks_there`` racks in the cluster); empty when it meets it."""
    return _short([rack_of(b, racks) for b in ensemble], write_quorum, racks_there)


def _short(on: Sequence[str], write_quorum: int, racks_there: int) -> list[int]:
    """``short_quorums`` of an ensemble given as the rack of each position."""
    size = len(on)
    want = racks_wanted(write_quorum, racks_there)
    if want <= 1 or size == 0:
        return []
    sets = quorum.write_quorums(size, min(write_quorum, size))
    return [start for start, members in enumerate(sets) if len({on[i] for i in members}) < want]


def _spread(candidates: list[str], count: int, used_hosts: set[str]) -> list[str]:
    """``count`` of the (already shuffled) candidates, hosts not in ``used_hosts`` first."""
    chosen: list[str] = []
    hosts = set(used_hosts)
    rest: list[str] = []
    for bookie in candidates:
        if len(chosen) == count:
            break
        host = host_of(bookie)
        if host in hosts:
            rest.append(bookie)
        else:
            hosts.add(host)
            chosen.append(bookie)
    for bookie in rest:
        if len(chosen) == count:
            break
        chosen.append(bookie)
    return chosen


def _rack_sequence(
    capacity: dict[str, int], size: int, write_quorum: int, want: int, rng: random.Random
) -> list[str] | None:
    """Racks for positions ``0..size-1`` such that every write quorum spans ``want``
    racks, using each rack at most its ``capacity``; None when the search finds none
    within ``PLACEMENT_SEARCH_STEPS_MAX`` steps."""
    if want >= write_quorum:
        # A rack appears at most once in every write quorum, so at most size // Qw
        # times around the ensemble: a cheap proof that many layouts are impossible.
        if sum(min(c, size // write_quorum) for c in capacity.values()) < size:
            return None
    sequence: list[str] = []
    left = dict(capacity)
    steps = 0

    def fits(index: int) -> bool:
        for window in _windows(size, write_quorum, index):
            placed = [sequence[i] for i in window if i <= index]
            if len(set(placed)) + write_quorum - len(placed) < want:
                return False
        return True

    def place(index: int) -> bool:
        nonlocal steps
        if index == size:
            return True
        order = [r for r in left if left[r] > 0]
        rng.shuffle(order)
        order.sort(key=lambda r: -left[r])
        for rack in order:
            steps += 1
            if steps > PLACEMENT_SEARCH_STEPS_MAX:
                return False
            sequence.append(rack)
            left[rack] -= 1
            if fits(index) and place(index + 1):
                return True
            sequence.pop()
            left[rack] += 1
        return False

    return sequence if place(0) else None


def choose_ensemble(
    writable: Iterable[str],
    ensemble_size: int,
    write_quorum: int,
    rng: random.Random,
    racks: Racks = NO_RACKS,
) -> Placement:
    """E distinct bookies chosen at random from ``writable``, every write quorum on
    ``min(Qw, R)`` racks when it can be done (else rack-unaware, ``spread`` false),
    spread over hosts."""
    if ensemble_size < 1:
        raise InvalidArgument(f"ensemble_size must be >= 1, got {ensemble_size}")
    candidates = sorted(set(writable))
    if len(candidates) < ensemble_size:
        raise NotEnoughBookies(
            f"an ensemble of {ensemble_size} needs {ensemble_size} writable bookies; "
            f"{len(candidates)} available"
        )
    rng.shuffle(candidates)
    racks_there = rack_count(candidates, racks)
    want = racks_wanted(min(write_quorum, ensemble_size), racks_there)
    if want <= 1:
        return Placement(tuple(_spread(candidates, ensemble_size, set())), True)
    members: dict[str, list[str]] = {}
    for bookie in candidates:
        members.setdefault(rack_of(bookie, racks), []).append(bookie)
    capacity = {rack: len(bookies) for rack, bookies in members.items()}
    sequence = _rack_sequence(capacity, ensemble_size, write_quorum, want, rng)
    if sequence is None:
        return Placement(tuple(_spread(candidates, ensemble_size, set())), False)
    chosen: list[str] = []
    hosts: set[str] = set()
    for rack in sequence:
        pool = members[rack]
        bookie = next((b for b in pool if host_of(b) not in hosts), pool[0])
        pool.remove(bookie)
        hosts.add(host_of(bookie))
        chosen.append(bookie)
    return Placement(tuple(chosen), True)


def _cost(
    ensemble: Sequence[str | None], index: int, rack: str, write_quorum: int, want: int,
    racks: Racks,
) -> tuple[int, int]:  # fmt: skip
    """What placing a bookie of ``rack`` at ``index`` costs: the write quorums it joins
    that stay short of racks (each position still open may yet bring one), and the
    bookies of ``rack`` already in them."""
    short = same = 0
    for window in _windows(len(ensemble), write_quorum, index):
        others = [ensemble[i] for i in window if i != index]
        known = [rack_of(b, racks) for b in others if b is not None]
        if len(set(known) | {rack}) + len(others) - len(known) < want:
            short += 1
        same += known.count(rack)
    return short, same


def choose_replacements(
    ensemble: Sequence[str],
    failed: Collection[str],
    writable: Iterable[str],
    write_quorum: int,
    rng: random.Random,
    racks: Racks = NO_RACKS,
    exclude: Collection[str] = (),
) -> Placement:
    """The ensemble with every ``failed`` bookie replaced, each at its own index.

    Replacements are writable, not in the ensemble, not in ``exclude``, distinct; each
    leaves the fewest write quorums it joins short of racks, then shares its rack with
    the fewest of their bookies, then takes a host the ensemble does not use."""
    failed_set = set(failed) & set(ensemble)
    kept = [b for b in ensemble if b not in failed_set]
    banned = set(ensemble) | set(exclude)
    candidates = sorted(b for b in set(writable) if b not in banned)
    qw = min(write_quorum, len(ensemble))
    if not failed_set:
        racks_there = rack_count([*candidates, *kept], racks)
        return Placement(tuple(ensemble), not short_quorums(ensemble, qw, racks, racks_there))
    if len(candidates) < len(failed_set):
        raise NotEnoughBookies(
            f"replacing {len(failed_set)} bookie(s) of ensemble {list(ensemble)} needs as many "
            f"writable bookies outside it; {len(candidates)} available"
        )
    rng.shuffle(candidates)
    racks_there = rack_count([*candidates, *kept], racks)
    want = racks_wanted(qw, racks_there)
    hosts = {host_of(b) for b in kept}
    if want <= 1:
        replacements = iter(_spread(candidates, len(failed_set), hosts))
        chosen = tuple(next(replacements) if b in failed_set else b for b in ensemble)
        return Placement(chosen, True)
    new: list[str | None] = [None if b in failed_set else b for b in ensemble]
    for index, bookie in enumerate(ensemble):
        if bookie not in failed_set:
            continue
        best = min(
            candidates,
            key=lambda b: (
                *_cost(new, index, rack_of(b, racks), qw, want, racks),
                host_of(b) in hosts,
            ),
        )
        candidates.remove(best)
        hosts.add(host_of(best))
        new[index] = best
    placed = tuple(b for b in new if b is not None)
    return Placement(placed, not short_quorums(placed, qw, racks, racks_there))


def move_for(
    ensemble: Sequence[str],
    write_quorum: int,
    writable: Iterable[str],
    racks: Racks,
    racks_there: int,
    exclude: Collection[str] = (),
) -> int | None:
    """The index of the bookie to move to another rack so that fewer write quorums of
    ``ensemble`` are short of racks, moving to a writable bookie outside the ensemble
    and ``exclude``; None when the ensemble meets the policy or no move helps."""
    qw = min(write_quorum, len(ensemble))
    short_now = len(short_quorums(ensemble, qw, racks, racks_there))
    if short_now == 0:
        return None
    banned = set(ensemble) | set(exclude)
    free_racks = sorted({rack_of(b, racks) for b in writable if b not in banned})
    best: tuple[int, int] | None = None
    for index in range(len(ensemble)):
        for rack in free_racks:
            moved = [rack if i == index else rack_of(b, racks) for i, b in enumerate(ensemble)]
            short = len(_short(moved, qw, racks_there))
            if short < short_now and (best is None or short < best[0]):
                best = (short, index)
    return None if best is None else best[1]


def rack_counts(racks: Racks) -> dict[str, int]:
    """Bookies per rack, for the status answers."""
    return dict(sorted(Counter(rack_of(b, racks) for b in racks).items()))
