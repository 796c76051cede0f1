"""Ensemble placement (services/protocol/placement.py): random among writable bookies,
never the same bookie twice, every write quorum on distinct racks when the cluster has
racks enough, spread over hosts when it can, NotEnoughBookies otherwise."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.errors import NotEnoughBookies
from services.protocol.placement import (
    DEFAULT_RACK,
    Placement,
    Racks,
    choose_ensemble,
    choose_replacements,
    host_of,
    move_for,
    rack_count,
    rack_of,
    short_quorums,
)

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
        choose_ensemble(["a:1", "b:1"], 3, 2, random.Random(1))
    with pytest.raises(NotEnoughBookies):
        choose_ensemble(["a:1", "a:1", "b:1"], 3, 2, random.Random(1))  # duplicates count once


@DETERMINISTIC
@given(st.integers(1, 6), st.integers(1, 3), st.integers(1, 7), st.integers(0, 2**32))
def test_ensemble_is_distinct_and_spread_over_hosts(
    hosts: int, per_host: int, size: int, seed: int
) -> None:
    """An ensemble never holds a bookie twice and uses as many distinct hosts as it can."""
    pool = bookies(hosts, per_host)
    if size > len(pool):
        with pytest.raises(NotEnoughBookies):
            choose_ensemble(pool, size, size, random.Random(seed))
        return
    ensemble = choose_ensemble(pool, size, size, random.Random(seed)).bookies
    assert len(ensemble) == size == len(set(ensemble))
    assert set(ensemble) <= set(pool)
    assert len({host_of(b) for b in ensemble}) == min(size, hosts)


def test_placement_is_random_but_seeded() -> None:
    """Placement is random among writable bookies; the same seed gives the same choice."""
    pool = bookies(8, 1)
    assert choose_ensemble(pool, 3, 2, random.Random(7)) == choose_ensemble(
        pool, 3, 2, random.Random(7)
    )
    picks = Counter(
        b for s in range(400) for b in choose_ensemble(pool, 3, 2, random.Random(s)).bookies
    )
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
    ensemble = choose_ensemble(pool, size, size, rng).bookies
    failed = set(data.draw(st.lists(st.sampled_from(ensemble), min_size=1, unique=True)))
    spare = [b for b in pool if b not in ensemble]
    if len(spare) < len(failed):
        with pytest.raises(NotEnoughBookies):
            choose_replacements(ensemble, failed, pool, size, rng)
        return
    new = choose_replacements(ensemble, failed, pool, size, rng).bookies
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
        new = choose_replacements(ensemble, {"h3:1"}, writable, 2, random.Random(seed)).bookies
        assert new == ("h1:1", "h2:1", "h4:1")


def test_replacement_honours_exclusions_and_fails_cleanly() -> None:
    """No replacement available -> NotEnoughBookies (the writer then waits, bounded)."""
    ensemble = ("a:1", "b:1")
    with pytest.raises(NotEnoughBookies):
        choose_replacements(
            ensemble, {"a:1"}, ["a:1", "b:1", "c:1"], 2, random.Random(0), exclude={"c:1"}
        )
    assert choose_replacements(ensemble, set(), [], 2, random.Random(0)).bookies == ensemble


def racked(counts: dict[str, int]) -> dict[str, str | None]:
    """Bookies ``<rack><n>:3181`` (one host each), ``counts[rack]`` of each rack; the
    rack ``""`` stands for bookies registered without one."""
    return {f"{r or 'x'}{n}:3181": r or None for r, c in counts.items() for n in range(c)}


def quorum_racks(ensemble: tuple[str, ...], write_quorum: int, racks: Racks) -> list[set[str]]:
    size = len(ensemble)
    return [
        {rack_of(ensemble[(s + i) % size], racks) for i in range(write_quorum)} for s in range(size)
    ]


def test_a_bookie_without_a_rack_is_on_the_default_rack() -> None:
    """docs/operations.md Racks: a bookie registered without --rack is on the default rack,
    so a cluster without racks is one rack and the policy asks nothing of it."""
    racks = racked({"": 3})
    assert {rack_of(b, racks) for b in racks} == {DEFAULT_RACK}
    assert rack_of("unknown:1", racks) == DEFAULT_RACK
    assert rack_count(racks, racks) == 1
    placed = choose_ensemble(list(racks), 3, 2, random.Random(1), racks)
    assert placed.spread and len(set(placed.bookies)) == 3


def test_without_racks_placement_is_the_rack_unaware_choice() -> None:
    """Passing no racks changes nothing: the same seed gives the same ensemble and the same
    replacement as the rack-unaware choice (the simulator's seeds stay meaningful)."""
    pool = bookies(5, 1)
    one_rack = {b: None for b in pool}
    for seed in range(20):
        plain = choose_ensemble(pool, 3, 2, random.Random(seed))
        assert plain == choose_ensemble(pool, 3, 2, random.Random(seed), one_rack)
        again = choose_replacements(plain.bookies, plain.bookies[:1], pool, 2, random.Random(seed))
        assert again.spread


@DETERMINISTIC
@given(
    st.dictionaries(st.sampled_from("abcdef"), st.integers(1, 4), min_size=1),
    st.integers(1, 7),
    st.integers(1, 4),
    st.integers(0, 2**32),
)
def test_new_ensemble_spreads_each_write_quorum_over_racks(
    counts: dict[str, int], size: int, write_quorum: int, seed: int
) -> None:
    """docs/operations.md Racks: every write quorum of a new ensemble spans min(Qw, R)
    racks whenever the search finds such an ensemble, which it does at least whenever Qw
    divides E and the racks have bookies enough (each at most once per write quorum);
    otherwise the choice falls back to the rack-unaware one and says so."""
    racks = racked(counts)
    write_quorum = min(write_quorum, size)
    if size > len(racks):
        with pytest.raises(NotEnoughBookies):
            choose_ensemble(list(racks), size, write_quorum, random.Random(seed), racks)
        return
    placed = choose_ensemble(list(racks), size, write_quorum, random.Random(seed), racks)
    assert len(set(placed.bookies)) == size and set(placed.bookies) <= set(racks)
    want = min(write_quorum, len(counts))
    meets = all(len(q) >= want for q in quorum_racks(placed.bookies, write_quorum, racks))
    assert placed.spread == meets
    assert placed.spread == (not short_quorums(placed.bookies, write_quorum, racks, len(counts)))
    share = size // write_quorum
    if size % write_quorum == 0 and sum(min(c, share) for c in counts.values()) >= size:
        assert placed.spread


def test_three_racks_hold_every_write_quorum_of_three_with_two() -> None:
    """The rack-loss layout (E=3, Qw=2 over three racks of two bookies): every ensemble
    is on three racks, so a whole rack lost takes at most one replica of an entry."""
    racks = racked({"a": 2, "b": 2, "c": 2})
    for seed in range(100):
        placed = choose_ensemble(list(racks), 3, 2, random.Random(seed), racks)
        assert placed.spread
        assert {rack_of(b, racks) for b in placed.bookies} == {"a", "b", "c"}


def test_too_few_racks_fall_back_and_say_so() -> None:
    """docs/operations.md Racks: E=3, Qw=2 on two racks cannot put every write quorum on two
    racks (three positions around a ring, two racks): the rack-unaware choice, flagged."""
    racks = racked({"a": 3, "b": 3})
    placed = choose_ensemble(list(racks), 3, 2, random.Random(3), racks)
    assert not placed.spread and len(set(placed.bookies)) == 3
    # E=4 fits: a b a b.
    placed = choose_ensemble(list(racks), 4, 2, random.Random(3), racks)
    assert placed.spread
    assert all(len(q) == 2 for q in quorum_racks(placed.bookies, 2, racks))


def test_search_needs_backtracking_and_finds_it() -> None:
    """A greedy choice can paint itself into a corner (E=4, Qw=2 over racks of 2, 1, 1:
    b c a _ leaves only a rack used next door); the search backtracks to a a-b-a-c ring."""
    racks = racked({"a": 2, "b": 1, "c": 1})
    for seed in range(50):
        placed = choose_ensemble(list(racks), 4, 2, random.Random(seed), racks)
        assert placed.spread, placed


@DETERMINISTIC
@given(
    st.dictionaries(st.sampled_from("abcde"), st.integers(1, 3), min_size=2),
    st.integers(2, 5),
    st.integers(2, 3),
    st.integers(0, 2**32),
    st.data(),
)
def test_replacement_avoids_the_racks_of_its_write_quorums(
    counts: dict[str, int], size: int, write_quorum: int, seed: int, data: st.DataObject
) -> None:
    """docs/operations.md Racks: a replacement never leaves a write quorum it joins short of
    racks when some candidate would not; the ensemble is flagged when it ends short."""
    racks = racked(counts)
    write_quorum = min(write_quorum, size)
    if size >= len(racks):
        return
    rng = random.Random(seed)
    ensemble = choose_ensemble(list(racks), size, write_quorum, rng, racks).bookies
    failed = data.draw(st.sampled_from(ensemble))
    index = ensemble.index(failed)
    placed = choose_replacements(ensemble, [failed], list(racks), write_quorum, rng, racks)
    new = placed.bookies
    assert new[:index] + new[index + 1 :] == ensemble[:index] + ensemble[index + 1 :]
    assert new[index] not in ensemble
    racks_there = rack_count(racks, racks)

    def short_with(bookie: str) -> int:
        trial = (*ensemble[:index], bookie, *ensemble[index + 1 :])
        return len(short_quorums(trial, write_quorum, racks, racks_there))

    spare = [b for b in racks if b not in ensemble]
    assert short_with(new[index]) == min(short_with(b) for b in spare)
    assert placed.spread == (short_with(new[index]) == 0)


def test_replacement_takes_the_missing_rack() -> None:
    """A bookie of rack c lost from an a-b-c ensemble is replaced by the other bookie of
    rack c, whatever the seed, while rack c has one."""
    racks = racked({"a": 2, "b": 2, "c": 2})
    ensemble = ("a0:3181", "b0:3181", "c0:3181")
    for seed in range(30):
        rng = random.Random(seed)
        placed = choose_replacements(ensemble, ["c0:3181"], list(racks), 2, rng, racks)
        assert placed == Placement(("a0:3181", "b0:3181", "c1:3181"), True)
    without_c = {b: r for b, r in racks.items() if r != "c"}
    placed = choose_replacements(ensemble, ["c0:3181"], list(without_c), 2, random.Random(0), racks)
    assert not placed.spread and placed.bookies[2] in without_c


def test_a_move_restores_the_spread_once_a_rack_returns() -> None:
    """docs/operations.md Racks: an a-b-a ensemble (E=3, Qw=2) has a write quorum on one
    rack; with two racks no move helps, with rack c back one bookie of rack a moves."""
    racks = racked({"a": 2, "b": 2, "c": 2})
    ensemble = ["a0:3181", "b0:3181", "a1:3181"]
    two = {b: r for b, r in racks.items() if r != "c"}
    assert short_quorums(ensemble, 2, two, 2) == [2]
    assert move_for(ensemble, 2, list(two), two, 2) is None
    index = move_for(ensemble, 2, list(racks), racks, 3)
    assert index in (0, 2)
    assert move_for(["a0:3181", "b0:3181", "c0:3181"], 2, list(racks), racks, 3) is None
