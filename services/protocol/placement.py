"""Ensemble placement: which bookies store a ledger, and who replaces a failed one.

A bookie id is its advertised ``host:port``; its host is the part before the
last ``:``. Placement is random (a seeded ``random.Random`` passed in) among
the writable bookies and spreads an ensemble over as many distinct hosts as
it can: it takes one bookie per host first, in random order, and only then
a second bookie of an already used host. A replacement is never a bookie
already in the ensemble (nor one the caller excludes), and prefers a host the
rest of the ensemble does not use. When there are not enough candidates the
answer is ``NotEnoughBookies`` and nothing is chosen.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Sequence

from services.errors import InvalidArgument, NotEnoughBookies


def host_of(bookie_id: str) -> str:
    """The host part of a ``host:port`` bookie id (the whole id when it has no port)."""
    host, sep, _port = bookie_id.rpartition(":")
    return host if sep else bookie_id


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


def choose_ensemble(
    writable: Iterable[str], ensemble_size: int, rng: random.Random
) -> tuple[str, ...]:
    """E distinct bookies chosen at random from ``writable``, spread over hosts."""
    if ensemble_size < 1:
        raise InvalidArgument(f"ensemble_size must be >= 1, got {ensemble_size}")
    candidates = sorted(set(writable))
    if len(candidates) < ensemble_size:
        raise NotEnoughBookies(
            f"an ensemble of {ensemble_size} needs {ensemble_size} writable bookies; "
            f"{len(candidates)} available"
        )
    rng.shuffle(candidates)
    return tuple(_spread(candidates, ensemble_size, set()))


def choose_replacements(
    ensemble: Sequence[str],
    failed: Collection[str],
    writable: Iterable[str],
    rng: random.Random,
    exclude: Collection[str] = (),
) -> tuple[str, ...]:
    """The ensemble with every ``failed`` bookie replaced, each at its own index.

    Replacements are writable, not in the ensemble, not in ``exclude``, distinct,
    and prefer hosts the kept bookies do not use."""
    failed_set = set(failed) & set(ensemble)
    if not failed_set:
        return tuple(ensemble)
    kept_hosts = {host_of(b) for b in ensemble if b not in failed_set}
    banned = set(ensemble) | set(exclude)
    candidates = sorted(b for b in set(writable) if b not in banned)
    if len(candidates) < len(failed_set):
        raise NotEnoughBookies(
            f"replacing {len(failed_set)} bookie(s) of ensemble {list(ensemble)} needs as many "
            f"writable bookies outside it; {len(candidates)} available"
        )
    rng.shuffle(candidates)
    replacements = iter(_spread(candidates, len(failed_set), kept_hosts))
    return tuple(next(replacements) if b in failed_set else b for b in ensemble)
