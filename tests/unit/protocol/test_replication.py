"""The pure re-replication decisions: spans, write-set shares, repairs, swaps."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.errors import NotEnoughBookies
from services.protocol import quorum, replication
from services.protocol.metadata import LedgerMetadata


def _ledger() -> LedgerMetadata:
    md = LedgerMetadata.new(7, ["a:1", "b:1", "c:1"], 2, 2)
    md = md.with_ensemble(10, ["a:1", "d:1", "c:1"])
    return md


@given(
    first=st.integers(0, 50),
    size=st.integers(-1, 60),
    ensemble=st.integers(1, 6),
    data=st.data(),
)
def test_count_on_matches_the_write_sets(first: int, size: int, ensemble: int, data) -> None:  # type: ignore[no-untyped-def]
    """count_on and entries_on agree with quorum.write_set for every entry."""
    wq = data.draw(st.integers(1, ensemble))
    index = data.draw(st.integers(0, ensemble - 1))
    last = first + size - 1
    expected = [e for e in range(first, last + 1) if index in quorum.write_set(e, ensemble, wq)]
    assert list(replication.entries_on(first, last, index, ensemble, wq)) == expected
    assert replication.count_on(first, last, index, ensemble, wq) == len(expected)


def test_spans_of_open_and_closed_ledgers() -> None:
    """The last fragment of an open ledger is open-ended; closing bounds every span."""
    md = _ledger()
    assert [(s.first, s.last) for s in replication.spans(md)] == [(0, 9), (10, None)]
    closed = md.closed(5, 100)
    spans = replication.spans(closed)
    assert [(s.first, s.last) for s in spans] == [(0, 5), (10, 5)]
    assert spans[1].empty and not spans[0].empty


def test_repairs_name_each_fragment_and_flag_the_open_last_one() -> None:
    """A bookie in two fragments needs two repairs; only the open last one is flagged."""
    md = _ledger()
    repairs = replication.repairs(md, {"a:1"})
    assert [(r.first, r.last, r.bookie_index, r.is_open_last) for r in repairs] == [
        (0, 9, 0, False),
        (10, None, 0, True),
    ]
    assert replication.missing_bookies(md, {"b:1", "c:1", "d:1"}) == {"a:1"}


def test_formatted_bookies_are_those_registered_as_another_instance() -> None:
    """A bookie registered as another instance than a fragment recorded was formatted
    since and lost its share of it; unregistered bookies and unrecorded instances tell
    nothing; ``fragment_index`` looks at one fragment (-1: the last)."""
    md = LedgerMetadata.new(3, ["a", "b", "c"], 2, 2, instances={"a": "a1", "b": "b1", "c": "c1"})
    md = md.with_ensemble(10, ["a", "b", "d"], {"d": "d1"})
    now = {"a": "a1", "b": "b1", "c": "c2", "d": "d1"}
    assert replication.formatted(md, now.get) == {"c"}
    assert replication.formatted(md, now.get, -1) == set()
    assert replication.formatted(md, now.get, 0) == {"c"}
    assert replication.formatted(md, {"d": "d2", "a": "a1"}.get, -1) == {"d"}
    unrecorded = LedgerMetadata.new(4, ["a", "b"], 2, 2)
    assert replication.formatted(unrecorded, {"a": "a2"}.get) == set()
    assert replication.formatted(md, {}.get) == set()


def test_replace_bookie_and_still_applies() -> None:
    """The swap keeps the index; a swap planned on changed metadata no longer applies."""
    md = _ledger().closed(12, 100)
    repair = replication.repairs(md, {"c:1"})[0]
    swapped = replication.replace_bookie(md, repair.first, "c:1", "e:1")
    assert swapped is not None
    assert swapped.fragments[0].bookies == ("a:1", "b:1", "e:1")
    assert swapped.fragments[1].bookies == ("a:1", "d:1", "c:1")
    assert not replication.still_applies(swapped, repair)
    assert replication.replace_bookie(swapped, repair.first, "c:1", "f:1") is None
    assert replication.replace_bookie(md, repair.first, "c:1", "a:1") is None


def test_missing_entries_against_stored_runs() -> None:
    """Entries outside every stored run are missing."""
    assert replication.missing_entries(range(10), [(0, 2), (5, 7)]) == [3, 4, 8, 9]
    assert replication.missing_entries([], [(0, 2)]) == []


def test_choose_target_avoids_the_fragment_and_exclusions() -> None:
    """The target is writable, outside the fragment and not excluded."""
    rng = random.Random(1)
    target = replication.choose_target(
        ("a:1", "b:1", "c:1"), "c:1", ["a:1", "d:1", "e:1"], 2, rng, exclude={"e:1"}
    )
    assert target == "d:1"
    with pytest.raises(NotEnoughBookies):
        replication.choose_target(("a:1", "b:1", "c:1"), "c:1", ["a:1", "b:1"], 2, rng)


def test_choose_target_takes_a_rack_its_write_quorums_lack() -> None:
    """docs/operations.md Racks: a replacement goes to a rack the other bookies of its
    write quorums do not use, whatever the seed, when a writable bookie is there."""
    racks = {"a:1": "r1", "b:1": "r2", "c:1": "r3", "d:1": "r1", "e:1": "r3"}
    for seed in range(20):
        target = replication.choose_target(
            ("a:1", "b:1", "c:1"), "c:1", ["d:1", "e:1"], 2, random.Random(seed), racks
        )
        assert target == "e:1"


def test_placement_moves_name_one_bookie_per_misplaced_settled_fragment() -> None:
    """docs/operations.md Racks: a CLOSED ledger whose fragment has a write quorum on one
    rack gets one move, of a bookie of that rack, once a bookie of a third rack is
    writable; none while no move helps, and none for a fragment naming an unregistered
    bookie (that one is under-replicated first), nor for an open ledger's last
    fragment (its writer's)."""
    racks: dict[str, str | None] = {"a:1": "r1", "b:1": "r2", "c:1": "r1", "d:1": "r3"}
    md = LedgerMetadata.new(3, ["a:1", "b:1", "c:1"], 2, 2).closed(9, 100)
    assert [s.first for s in replication.misplaced_spans(md, racks, racks)] == [0]
    moves = replication.placement_moves(md, racks, racks, ["d:1"])
    assert [(m.first, m.bookie in ("a:1", "c:1"), m.move) for m in moves] == [(0, True, True)]
    two = {b: r for b, r in racks.items() if r != "r3"}
    assert replication.placement_moves(md, two, two, []) == []
    assert replication.misplaced_spans(md, racks, ["a:1", "b:1"]) == []
    open_md = LedgerMetadata.new(4, ["a:1", "b:1", "c:1"], 2, 2)
    assert [s.first for s in replication.misplaced_spans(open_md, racks, racks)] == [0]
    assert replication.placement_moves(open_md, racks, racks, ["d:1"]) == []  # the writer's


def test_sealed_mac_key_round_trip_and_hidden_from_api() -> None:
    """The sealed key unseals with the same secret only, and the API never shows it."""
    from services.wire.digest import mac_key, seal_mac_key, unseal_mac_key

    key = mac_key(b"pw")
    sealed = seal_mac_key(key, "secret", 9)
    assert unseal_mac_key(sealed, "secret", 9) == key
    assert unseal_mac_key(sealed, "other", 9) != key
    md = LedgerMetadata.new(9, ["a:1"], 1, 1, digest_type="hmac-sha256", mac_key_sealed=sealed)
    assert LedgerMetadata.from_json(md.to_json()).mac_key_sealed == sealed
    assert sealed not in str(md.to_api()) and "mac_key" not in md.to_api()
