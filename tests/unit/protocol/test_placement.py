"""Ensemble placement (services/protocol/placement.py): random among writable bookies,
never the same bookie twice, spread over hosts when it can, NotEnoughBookies otherwise."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.errors import NotEnoughBookies
from services.protocol.placement import choose_ensemble, choose_replacements, host_of

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None)


def bookies(hosts: int, per_host: int) -> list[str]:
    return [f"10.0.0.{h}:{3181 + p}" for h in range(hosts) for p in range(per_host)]


def test_host_is_the_part_before_the_port() -> None:
    """Placement spreads over hosts; a bookie id is host:port."""
    assert host_of("10.0.0.1:3181") == "10.0.0.1"
    assert host_of("bookie-a:3181") == "bookie-a"
    assert host_of("bare") == "bare"


def test_creation_needs_e_writable_bookies() -> None:
    """docs/protocol.md Ledgers: creation requires at least E writable bookies, else a clear
    error (and nothing is chosen)."""
    with pytest.raises(NotEnoughBookies, match="needs 3 writable bookies; 2 available"):
        choose_ensemble(["a:1", "b:1"], 3, random.Random(1))
    with pytest.raises(NotEnoughBookies):
        choose_ensemble(["a:1", "a:1", "b:1"], 3, random.Random(1))  # duplicates count once


@DETERMINISTIC
@given(st.integers(1, 6), st.integers(1, 3), st.integers(1, 7), st.integers(0, 2**32))
def test_ensemble_is_distinct_and_spread_over_hosts(
    hosts: int, per_host: int, size: int, seed: int
) -> None:
    """An ensemble never holds a bookie twice and uses as many distinct hosts as it can."""
    pool = bookies(hosts, per_host)
    if size > len(pool):
        with pytest.raises(NotEnoughBookies):
            choose_ensemble(pool, size, random.Random(seed))
        return
    ensemble = choose_ensemble(pool, size, random.Random(seed))
    assert len(ensemble) == size == len(set(ensemble))
    assert set(ensemble) <= set(pool)
    assert len({host_of(b) for b in ensemble}) == min(size, hosts)


def test_placement_is_random_but_seeded() -> None:
    """Placement is random among writable bookies; the same seed gives the same choice."""
    pool = bookies(8, 1)
    assert choose_ensemble(pool, 3, random.Random(7)) == choose_ensemble(pool, 3, random.Random(7))
    picks = Counter(b for s in range(400) for b in choose_ensemble(pool, 3, random.Random(s)))
    assert set(picks) == set(pool)  # every bookie gets chosen sometimes
    assert min(picks.values()) > 400 * 3 / 8 / 2  # and roughly evenly


@DETERMINISTIC
@given(st.integers(2, 6), st.integers(1, 3), st.integers(0, 2**32), st.data())
def test_replacement_is_a_writable_bookie_not_in_the_ensemble(
    hosts: int, per_host: int, seed: int, data: st.DataObject
) -> None:
    """docs/protocol.md Failure while writing: the failed bookie is replaced, at its own index,
    by a bookie not already in the ensemble; the others keep their places."""
    pool = bookies(hosts, per_host)
    size = data.draw(st.integers(1, len(pool)))
    rng = random.Random(seed)
    ensemble = choose_ensemble(pool, size, rng)
    failed = set(data.draw(st.lists(st.sampled_from(ensemble), min_size=1, unique=True)))
    spare = [b for b in pool if b not in ensemble]
    if len(spare) < len(failed):
        with pytest.raises(NotEnoughBookies):
            choose_replacements(ensemble, failed, pool, rng)
        return
    new = choose_replacements(ensemble, failed, pool, rng)
    assert len(new) == len(ensemble) == len(set(new))
    for old, now in zip(ensemble, new, strict=True):
        if old in failed:
            assert now not in ensemble and now in pool
        else:
            assert now == old


def test_replacement_prefers_a_new_host() -> None:
    """A replacement spreads over hosts: a host the kept bookies do not use comes first."""
    ensemble = ("h1:1", "h2:1", "h3:1")
    writable = ["h1:2", "h2:2", "h4:1", "h1:1", "h2:1", "h3:1"]
    for seed in range(50):
        new = choose_replacements(ensemble, {"h3:1"}, writable, random.Random(seed))
        assert new == ("h1:1", "h2:1", "h4:1")


def test_replacement_honours_exclusions_and_fails_cleanly() -> None:
    """No replacement available -> NotEnoughBookies (the writer then waits, bounded)."""
    ensemble = ("a:1", "b:1")
    with pytest.raises(NotEnoughBookies):
        choose_replacements(ensemble, {"a:1"}, ["a:1", "b:1", "c:1"], random.Random(0), {"c:1"})
    assert choose_replacements(ensemble, set(), [], random.Random(0)) == ensemble
