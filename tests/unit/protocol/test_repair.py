"""RepairOp driven by hand (docs/protocol.md, "Auto-recovery"): the effects it asks for and
the decisions it makes on the answers, with no I/O and a fixed clock."""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass, field

from services.errors import NotEnoughBookies
from services.protocol.limits import REPAIR_TARGETS_TRIED_MAX
from services.protocol.metadata import LedgerMetadata
from services.protocol.repair import (
    AskStored,
    ClearMark,
    Copied,
    CopyShare,
    Effect,
    Failed,
    Finished,
    MarkCleared,
    MarkRead,
    MetadataRead,
    NoLedger,
    Outcome,
    Planned,
    Probe,
    Probed,
    ReadMark,
    ReadMetadata,
    Recover,
    Recovered,
    Repaired,
    RepairOp,
    StoredRead,
    Swap,
    SwapConflict,
    Swapped,
    TargetFailed,
)

GRACE_MS = 10_000


@dataclass
class View:
    """A registry by hand: who is registered (with instances), writable, missing since."""

    registered: dict[str, str] = field(default_factory=dict)  # bookie -> instance
    writable_bookies: list[str] = field(default_factory=list)
    since: dict[str, int] = field(default_factory=dict)
    enabled: bool = True
    backs: list[str] = field(default_factory=list)
    rack_of: dict[str, str] = field(default_factory=dict)  # bookie -> its rack, if any

    @property
    def writable(self) -> Collection[str]:
        return self.writable_bookies

    @property
    def racks(self) -> dict[str, str | None]:
        return {b: self.rack_of.get(b) for b in self.registered}

    def usable(self, bookie: str) -> bool:
        return bookie in self.registered

    def leaving(self, bookie: str) -> bool:
        return False

    def instance_of(self, bookie: str) -> str | None:
        return self.registered.get(bookie)

    def missing_since(self, bookie: str) -> int:
        return self.since[bookie]

    def back(self, bookie: str) -> None:
        self.backs.append(bookie)


def _closed() -> LedgerMetadata:
    """E=3 Qw=2 over a, b, c, closed at entry 5."""
    md = LedgerMetadata.new(
        7, ["a", "b", "c"], 2, 2, instances={"a": "a#1", "b": "b#1", "c": "c#1"}
    )
    return md.closed(5, 60)


def _open() -> LedgerMetadata:
    return LedgerMetadata.new(
        7, ["a", "b", "c"], 2, 2, instances={"a": "a#1", "b": "b#1", "c": "c#1"}
    )


def _view(*registered: str, writable: Collection[str] | None = None) -> View:
    names = list(registered)
    return View({b: f"{b}#1" for b in names}, list(writable if writable is not None else names))


def _op(view: View) -> RepairOp:
    return RepairOp(7, view, random.Random(1), GRACE_MS)


def _action(effects: list[Effect]) -> Effect:
    """The one effect that needs an answer (or the end), after any reports."""
    actions = [e for e in effects if not isinstance(e, Planned | Repaired)]
    assert len(actions) == 1, effects
    return actions[0]


def _plan(op: RepairOp, missing: set[str], md: LedgerMetadata, version: int = 3) -> list[Effect]:
    assert isinstance(_action(op.start(0)), ReadMark)
    assert isinstance(_action(op.handle(MarkRead(frozenset(missing), 1), 0)), ReadMetadata)
    return op.handle(MetadataRead(md, version), 0)


def test_a_closed_ledger_is_copied_swapped_and_its_mark_cleared() -> None:
    """A bookie gone from a CLOSED ledger: its share (entries whose write set holds it) is
    copied to a writable bookie outside the fragment, never read from the missing one,
    swapped in by CAS at the version read, recording the target's instance; the next
    round finds nothing and clears the mark at the version it read."""
    view = _view("a", "b", "d")  # c is gone
    op = _op(view)
    md = _closed()
    effects = _plan(op, {"c"}, md)
    assert Planned(1) in effects
    copy = _action(effects)
    assert isinstance(copy, CopyShare)
    assert copy.target == "d"
    assert copy.wanted == (1, 2, 4, 5)  # index 2 holds e when (2 - e) mod 3 < 2
    assert "c" in copy.unusable
    assert isinstance(_action(op.handle(Copied(), 0)), ReadMetadata)
    swap = _action(op.handle(MetadataRead(md, 4), 0))
    assert isinstance(swap, Swap)
    assert swap.version == 4
    assert swap.after.fragments[0].bookies == ("a", "b", "d")
    assert swap.after.fragments[0].instances == ("a#1", "b#1", "d#1")
    effects = op.handle(Swapped(), 0)
    assert Repaired(swap.repair, "d", 4, in_place=False) in effects
    assert isinstance(_action(effects), ReadMark)  # the next round
    op.handle(MarkRead(frozenset({"c"}), 1), 0)
    clear = _action(op.handle(MetadataRead(swap.after, 5), 0))
    assert clear == ClearMark(1, frozenset({"c"}), 5)  # while the metadata is at 5
    assert _action(op.handle(MarkCleared(True), 0)) == Finished(Outcome.DONE)
    assert op.done


def test_a_registered_bookie_is_filled_in_place_with_only_what_it_lacks() -> None:
    """A bookie the mark names that is registered as the instance the fragment recorded
    is asked what it stores; only the entries of its share it lacks are copied to it
    (never read from it), and the metadata is not written."""
    view = _view("a", "b", "c")
    op = _op(view)
    assert isinstance(_action(_plan(op, {"c"}, _closed())), AskStored)
    fill = _action(op.handle(StoredRead(((1, 2),), corrupt=False), 0))
    assert isinstance(fill, CopyShare)
    assert (fill.target, fill.wanted) == ("c", (4, 5))
    assert "c" in fill.unusable
    effects = op.handle(Copied(), 0)
    assert any(isinstance(e, Repaired) and e.in_place and e.entries == 2 for e in effects)
    assert isinstance(_action(effects), ReadMark)
    # The next round skips it (still that instance): nothing left, the mark is cleared.
    op.handle(MarkRead(frozenset({"c"}), 1), 0)
    assert isinstance(_action(op.handle(MetadataRead(_closed(), 3), 0)), ClearMark)


def test_a_formatted_bookie_is_replaced_not_filled() -> None:
    """A bookie registered as another instance than the fragment recorded lost its share:
    it is not asked, it is replaced."""
    view = _view("a", "b", "c", "d")
    view.registered["c"] = "c#2"
    op = _op(view)
    copy = _action(_plan(op, {"c"}, _closed()))
    assert isinstance(copy, CopyShare)
    assert copy.target == "d"


def test_a_formatted_bookie_no_other_can_replace_is_given_its_share_as_the_new_instance() -> None:
    """When every writable bookie is in the fragment, a formatted one is the only place its
    share can go: the whole share is copied to it (never read from it), then its new
    instance is recorded by CAS while the repair applies, as a replacement by itself; the
    next round skips it and clears the mark. Not writable (read-only), it is not."""
    view = _view("a", "b", "c")
    view.registered["c"] = "c#2"
    op = _op(view)
    md = _closed()
    copy = _action(_plan(op, {"c"}, md))
    assert isinstance(copy, CopyShare)
    assert (copy.target, copy.wanted) == ("c", (1, 2, 4, 5))
    assert "c" in copy.unusable
    assert isinstance(_action(op.handle(Copied(), 0)), ReadMetadata)
    swap = _action(op.handle(MetadataRead(md, 4), 0))
    assert isinstance(swap, Swap)
    assert (swap.target, swap.version) == ("c", 4)
    assert swap.after.fragments[0].bookies == ("a", "b", "c")
    assert swap.after.fragments[0].instances == ("a#1", "b#1", "c#2")
    effects = op.handle(Swapped(), 0)
    assert Repaired(swap.repair, "c", 4, in_place=True) in effects
    op.handle(MarkRead(frozenset({"c"}), 1), 0)
    assert isinstance(_action(op.handle(MetadataRead(swap.after, 5), 0)), ClearMark)

    view = _view("a", "b", "c", writable=["a", "b"])
    view.registered["c"] = "c#2"
    failed = _action(_plan(_op(view), {"c"}, md))
    assert isinstance(failed, Failed)
    assert failed.error is NotEnoughBookies


def test_a_bookie_the_mark_names_is_a_target_when_no_other_is_free() -> None:
    """A bookie the mark names that is registered and writable again (back, here swapped
    out of the fragment already) is chosen as a target only when no other bookie is
    free: in a small cluster it may be the only one left outside the fragment."""
    md = _closed()
    copy = _action(_plan(_op(_view("a", "b", "d")), {"c", "d"}, md))
    assert isinstance(copy, CopyShare)
    assert copy.target == "d"
    for seed in range(8):
        op = RepairOp(7, _view("a", "b", "d", "e"), random.Random(seed), GRACE_MS)
        copy = _action(_plan(op, {"c", "d"}, md))
        assert isinstance(copy, CopyShare)
        assert copy.target == "e"


def test_a_swap_that_loses_its_cas_rereads_and_replans_when_the_span_changed() -> None:
    """A CAS conflict re-reads the metadata and tries again on it; when the repair no
    longer applies there (the fragment's bookie changed) the round ends and the next one
    plans afresh, never overwriting the concurrent change."""
    view = _view("a", "b", "d", "e")
    op = _op(view)
    md = _closed()
    assert isinstance(_action(_plan(op, {"c"}, md)), CopyShare)
    op.handle(Copied(), 0)
    swap = _action(op.handle(MetadataRead(md, 3), 0))
    assert isinstance(swap, Swap)
    assert isinstance(_action(op.handle(SwapConflict(), 0)), ReadMetadata)
    changed = md.replace_bookie(0, "c", "e", "e#1")  # somebody else replaced c
    assert isinstance(_action(op.handle(MetadataRead(changed, 4), 0)), ReadMark)
    assert op.rounds == 2


def test_an_open_last_fragment_waits_its_grace_then_is_recovered() -> None:
    """An OPEN ledger's last fragment naming a bookie that does not answer is left alone
    until the grace has run from when that bookie was first seen missing (not from the
    mark); then, still affected, the ledger is recovered and the next round copies it as a
    CLOSED one."""
    view = _view("a", "b", "d")
    view.since["c"] = 1_000
    op = _op(view)
    md = _open()
    effects = _plan(op, {"c"}, md)
    assert _action(effects) == Finished(Outcome.POSTPONED, 1_000 + GRACE_MS)

    view.registered["c"] = "c#1"  # registered again (say a killed bookie's session lives)
    op = _op(view)
    assert _action(_plan(op, {"c"}, md)) == Probe(("c",))
    read = _action(op.handle(Probed(frozenset()), 1_000 + GRACE_MS))  # silent
    assert isinstance(read, ReadMetadata)
    recover = _action(op.handle(MetadataRead(md, 3), 1_000 + GRACE_MS))
    assert recover == Recover(md, 3, ("c",))
    assert isinstance(_action(op.handle(Recovered(), 1_000 + GRACE_MS)), ReadMark)


def test_an_open_last_fragment_whose_bookie_answers_is_left_to_the_writer() -> None:
    """A bookie of the open last fragment that answers the probe is not repaired: the
    mark is cleared and its grace restarts at its next absence."""
    view = _view("a", "b", "c")
    op = _op(view)
    assert _action(_plan(op, {"c"}, _open())) == Probe(("c",))
    assert isinstance(_action(op.handle(Probed(frozenset({"c"})), 0)), ClearMark)
    assert view.backs == ["c"]


def test_no_target_fails_the_repair_and_failed_targets_are_bounded() -> None:
    """With no writable bookie outside the fragment the repair fails (NotEnoughBookies: the
    worker backs off); a target that fails is excluded and another chosen, at most
    REPAIR_TARGETS_TRIED_MAX times."""
    op = _op(_view("a", "b"))
    failed = _action(_plan(op, {"c"}, _closed()))
    assert isinstance(failed, Failed)
    assert failed.error is NotEnoughBookies

    spares = [f"s{i}" for i in range(REPAIR_TARGETS_TRIED_MAX + 2)]
    op = _op(_view("a", "b", *spares))
    effect = _action(_plan(op, {"c"}, _closed()))
    tried = []
    for _ in range(REPAIR_TARGETS_TRIED_MAX):
        assert isinstance(effect, CopyShare)
        assert effect.target not in tried
        tried.append(effect.target)
        effect = _action(op.handle(TargetFailed("refused"), 0))
    assert isinstance(effect, Failed)
    assert effect.error is NotEnoughBookies


def test_a_registered_bookie_the_mark_names_is_read_last_not_never() -> None:
    """Two registered bookies named by the mark (each lacking some entries, as with Qa=1)
    may each hold the only copy of an entry the other lacks: a fill reads from the other
    one last rather than never; an unregistered missing bookie is never read."""
    view = _view("a", "b", "c")
    op = _op(view)
    md = LedgerMetadata.new(7, ["a", "b", "c", "d"], 2, 1, instances={})
    md = md.closed(7, 80)
    assert isinstance(_action(_plan(op, {"b", "c"}, md)), AskStored)
    fill = _action(op.handle(StoredRead((), corrupt=False), 0))
    assert isinstance(fill, CopyShare)
    assert fill.target == "b"
    assert "c" in fill.last_resort and "c" not in fill.unusable
    assert {"b", "d"} <= fill.unusable  # itself, and d (not registered)


def test_a_mark_is_cleared_only_while_the_metadata_planned_on_is_current() -> None:
    """The open last fragment's bookie c answers (left to the writer): nothing left, so
    the mark is cleared, but only while the metadata is at the version planned on (a read
    may lag, and a close or an ensemble change may land meanwhile). One did: it settled
    that fragment with c in it, lacking entries, so the clear fails, the next round plans
    on the new metadata and repairs c; a deleted ledger's mark is cleared as it is."""
    view = _view("a", "b", "c", "d")
    op = _op(view)
    assert _action(_plan(op, {"c"}, _open(), version=3)) == Probe(("c",))
    clear = _action(op.handle(Probed(frozenset({"c"})), 0))
    assert clear == ClearMark(1, frozenset({"c"}), 3)
    assert isinstance(_action(op.handle(MarkCleared(False), 0)), ReadMark)
    op.handle(MarkRead(frozenset({"c"}), 1), 0)
    changed = _open().with_ensemble(5, ["a", "b", "d"], {"d": "d#1"})
    assert _action(op.handle(MetadataRead(changed, 4), 0)) == AskStored("c")

    op = _op(view)
    op.start(0)
    op.handle(MarkRead(frozenset({"c"}), 1), 0)
    assert _action(op.handle(NoLedger(), 0)) == ClearMark(1, frozenset(), None)


def test_the_open_fragments_fate_is_decided_on_a_plan_made_after_the_other_repairs() -> None:
    """An OPEN ledger whose settled fragment and open last fragment both name c: the
    settled one is copied first; by then c may be back, so the grace is not judged on
    the plan made before the copy: the next round plans (and probes c) again."""
    view = _view("a", "b", "d", "e")
    view.since["c"] = 0
    op = _op(view)
    md = _open().with_ensemble(5, ["a", "c", "d"], {"d": "d#1"})
    copy = _action(_plan(op, {"c"}, md))
    assert isinstance(copy, CopyShare)
    assert copy.repair.first == 0
    op.handle(Copied(), GRACE_MS)
    swap = _action(op.handle(MetadataRead(md, 4), GRACE_MS))
    assert isinstance(swap, Swap)
    view.registered["c"] = "c#1"  # back meanwhile
    assert isinstance(_action(op.handle(Swapped(), GRACE_MS)), ReadMark)
    op.handle(MarkRead(frozenset({"c"}), 1), GRACE_MS)
    assert _action(op.handle(MetadataRead(swap.after, 5), GRACE_MS)) == Probe(("c",))


def test_a_placement_move_copies_to_the_missing_rack_then_swaps() -> None:
    """docs/operations.md Racks: a mark asking for a placement move, on a CLOSED a-b-c
    ledger (E=3, Qw=2) with a and c on one rack: the share of a or c is copied to d, on
    the rack the ensemble lacks, read from the fragment's bookies (the moving one
    included: it is a good replica), and only then swapped out; the next round finds the
    spread met and clears the mark."""
    view = _view("a", "b", "c", "d")
    view.rack_of.update({"a": "r1", "b": "r2", "c": "r1", "d": "r3"})
    op = _op(view)
    md = _closed()
    assert isinstance(_action(op.start(0)), ReadMark)
    assert isinstance(_action(op.handle(MarkRead(frozenset(), 1, misplaced=True), 0)), ReadMetadata)
    effects = op.handle(MetadataRead(md, 3), 0)
    assert Planned(1) in effects
    copy = _action(effects)
    assert isinstance(copy, CopyShare)
    moving = copy.repair.bookie
    assert moving in ("a", "c") and copy.repair.move and copy.target == "d"
    assert not copy.unusable and not copy.last_resort  # every replica may be read
    assert isinstance(_action(op.handle(Copied(), 0)), ReadMetadata)
    swap = _action(op.handle(MetadataRead(md, 4), 0))
    assert isinstance(swap, Swap)
    assert "d" in swap.after.fragments[0].bookies and moving not in swap.after.fragments[0].bookies
    assert isinstance(_action(op.handle(Swapped(), 0)), ReadMark)
    op.handle(MarkRead(frozenset(), 1, misplaced=True), 0)
    assert _action(op.handle(MetadataRead(swap.after, 5), 0)) == ClearMark(1, frozenset(), 5)


def test_no_placement_move_while_no_rack_can_fix_it() -> None:
    """docs/operations.md Racks: with two racks E=3, Qw=2 cannot be spread, so a mark
    asking for a move finds none to make and is cleared, nothing copied."""
    view = _view("a", "b", "c", "d")
    view.rack_of.update({"a": "r1", "b": "r2", "c": "r1", "d": "r2"})
    op = _op(view)
    assert isinstance(_action(op.start(0)), ReadMark)
    op.handle(MarkRead(frozenset(), 1, misplaced=True), 0)
    assert isinstance(_action(op.handle(MetadataRead(_closed(), 3), 0)), ClearMark)


def test_an_open_last_fragment_whose_bookie_was_formatted_is_recovered_not_probed() -> None:
    """A bookie of the open last fragment registered as another instance than recorded
    answers, but lost its share, and the writer (whose adds the new instance takes)
    cannot tell: it is not probed and left to the writer, but waited for and the ledger
    recovered, as for a missing bookie."""
    view = _view("a", "b", "c", "d")
    view.registered["c"] = "c#2"
    view.since["c"] = 5_000
    op = _op(view)
    md = _open()
    assert _action(_plan(op, {"c"}, md)) == Finished(Outcome.POSTPONED, 5_000 + GRACE_MS)
    op = _op(view)
    assert isinstance(_action(op.start(5_000 + GRACE_MS)), ReadMark)
    op.handle(MarkRead(frozenset({"c"}), 1), 5_000 + GRACE_MS)
    effects = op.handle(MetadataRead(md, 3), 5_000 + GRACE_MS)
    assert isinstance(_action(effects), ReadMetadata)
    recover = _action(op.handle(MetadataRead(md, 3), 5_000 + GRACE_MS))
    assert recover == Recover(md, 3, ("c",))
