"""Which bookie a page's range reads ask for which entries (services/protocol/read_cover):
for every ensemble shape, every residue is asked once, from a bookie that stores it;
asked again, it goes to a bookie not tried for it, suspects last."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.protocol.metadata import LedgerMetadata
from services.protocol.read_cover import cover_shares, reask

POOL = [f"b{i}:3181" for i in range(64)]


@st.composite
def shapes(draw: st.DrawFn) -> LedgerMetadata:
    e = draw(st.integers(1, 12))
    w = draw(st.integers(1, e))
    a = draw(st.integers(1, w))
    return LedgerMetadata.new(1, POOL[:e], w, a)


@given(shapes(), st.integers(0, 10_000))
def test_every_residue_is_asked_once_from_a_bookie_storing_it(
    md: LedgerMetadata, entry: int
) -> None:
    shares = cover_shares(md, entry)
    residues = [r for share in shares for r in share.residues]
    assert sorted(residues) == list(range(md.ensemble_size))
    for share in shares:
        for r in share.residues:
            assert share.bookie in md.write_set_bookies(r)
        assert share.stride == (0 if len(share.residues) == md.ensemble_size else md.ensemble_size)
    assert len(shares) <= -(-md.ensemble_size // md.write_quorum)  # at most the cover bookies


def test_e3_qw2_reads_two_thirds_not_four_thirds() -> None:
    """The common shape: b0 is asked for residues 0 and 2, b2 for residue 1."""
    md = LedgerMetadata.new(1, POOL[:3], 2, 2)
    assert [(s.bookie, s.residues, s.stride) for s in cover_shares(md, 0)] == [
        ("b0:3181", (0, 2), 3), ("b2:3181", (1,), 3)
    ]  # fmt: skip
    solo = LedgerMetadata.new(1, POOL[:3], 3, 2)  # Qw == E: one bookie, no filter
    assert [(s.bookie, s.stride) for s in cover_shares(solo, 0)] == [("b0:3181", 0)]


@given(shapes(), st.data())
def test_asking_again_goes_to_an_untried_holder_suspects_last(
    md: LedgerMetadata, data: st.DataObject
) -> None:
    residues = data.draw(st.sets(st.integers(0, md.ensemble_size - 1), min_size=1))
    tried = {r: set(data.draw(st.sets(st.sampled_from(md.write_set_bookies(r))))) for r in residues}
    suspects = set(data.draw(st.sets(st.sampled_from(md.ensemble))))
    again = reask(md, 0, residues, tried, suspects)
    asked = {r: s.bookie for s in again for r in s.residues}
    for r in residues:
        left = [b for b in md.write_set_bookies(r) if b not in tried[r]]
        if not left:
            assert r not in asked
            continue
        assert asked[r] in left
        if any(b not in suspects for b in left):
            assert asked[r] not in suspects
    assert len(again) == len({s.bookie for s in again})  # one read per bookie
