"""The write handle against a reformatted bookie (issue 35 item 3, docs/protocol.md
"Fencing"): an add answered by another instance of a bookie than the one the last
fragment recorded is a failed bookie for that add (services/protocol/writer.py,
"Replaced instance")."""

from __future__ import annotations

import random

from services.errors import LedgerFenced
from services.protocol.messages import (
    AckAdds,
    AddRequested,
    BookieAddsDone,
    Effect,
    FailAdds,
    MetadataConflicted,
    MetadataWritten,
    ReadWritableBookies,
    RejectReason,
    SendAdds,
    WritableBookies,
    WriteMetadata,
)
from services.protocol.metadata import LedgerMetadata
from services.protocol.writer import HandleState, WriteHandle

POOL = [f"b{i}:3181" for i in range(1, 5)]
FIRST = {b: f"{b}#1" for b in POOL}


def make(instances: dict[str, str] | None = None) -> WriteHandle:
    md = LedgerMetadata.new(1, POOL[:3], 2, 2, created_at=1, instances=instances)
    return WriteHandle(md, 0, rng=random.Random(1))


def of(effects: list[Effect], cls: type) -> list:
    return [x for x in effects if isinstance(x, cls)]


def add(h: WriteHandle, rid: str, *payloads: bytes) -> list[Effect]:
    return h.handle(AddRequested(rid, tuple(payloads), 0))


def stored(bookie: str, instance: str | None, *entry_ids: int) -> BookieAddsDone:
    return BookieAddsDone(bookie, tuple(entry_ids), instance_id=instance)


def test_an_add_stored_by_another_instance_is_not_counted_and_fails_that_bookie() -> None:
    """An answer from another instance than the fragment recorded counts for nothing,
    even when it says stored: the entry is not acknowledged with it, and the bookie is
    replaced by an ensemble change (the writer asks for the writable bookies)."""
    h = make(FIRST)
    add(h, "r0", b"a")  # entry 0 -> b1, b2
    assert h.handle(stored("b1:3181", "b1:3181#1", 0)) == []
    effects = h.handle(stored("b2:3181", "b2:3181#2", 0))  # b2 was reformatted
    assert of(effects, AckAdds) == []
    assert effects == [ReadWritableBookies()]
    assert h.changing_ensemble and h.lac == -1


def test_an_answer_naming_no_instance_is_not_the_recorded_instance() -> None:
    """An answer that names no instance cannot show it comes from the recorded one: it
    fails the bookie too (as a fence answer without an instance is a replaced one)."""
    h = make(FIRST)
    add(h, "r0", b"a")
    h.handle(stored("b1:3181", "b1:3181#1", 0))
    effects = h.handle(stored("b2:3181", None, 0))
    assert of(effects, AckAdds) == [] and effects == [ReadWritableBookies()]


def test_the_recorded_instance_is_counted_and_unknown_recorded_ones_are_not_compared() -> None:
    """The recorded instance's answers count as always; a fragment that recorded no
    instance (metadata older than instances) compares nothing."""
    h = make(FIRST)
    add(h, "r0", b"a")
    h.handle(stored("b1:3181", "b1:3181#1", 0))
    (ack,) = of(h.handle(stored("b2:3181", "b2:3181#1", 0)), AckAdds)
    assert ack.last_entry_id == 0
    old = make(None)
    add(old, "r0", b"a")
    old.handle(stored("b1:3181", "b1:3181#7", 0))
    (ack,) = of(old.handle(stored("b2:3181", None, 0)), AckAdds)
    assert ack.last_entry_id == 0


def test_a_reformatted_bookie_of_a_closed_ledger_leaves_the_old_writer_fenced() -> None:
    """The review's scenario: a recovery closed the ledger at 0 (the handle does not know);
    entry 1's write set is b2 (reformatted since: a new, unfenced instance) and b3 (down
    during the fence, never fenced). Both store it; the writer acknowledges nothing, its
    ensemble change loses the CAS to the CLOSED ledger and the add fails ledger_fenced."""
    h = make(FIRST)
    add(h, "r0", b"a")
    h.handle(stored("b1:3181", "b1:3181#1", 0))
    h.handle(stored("b2:3181", "b2:3181#1", 0))
    effects = add(h, "r1", b"b")  # entry 1 -> b2, b3
    assert sorted(x.bookie for x in of(effects, SendAdds)) == ["b2:3181", "b3:3181"]
    assert of(h.handle(stored("b3:3181", "b3:3181#1", 1)), AckAdds) == []
    effects = h.handle(stored("b2:3181", "b2:3181#2", 1))
    assert effects == [ReadWritableBookies()]
    (write,) = of(h.handle(WritableBookies(tuple(POOL), tuple(FIRST.values()))), WriteMetadata)
    assert "b2:3181" not in write.metadata.last_fragment.bookies
    closed = h.metadata.closed(0, 1)
    (fail,) = of(h.handle(MetadataConflicted(closed, 3)), FailAdds)
    assert fail.request_id == "r1" and fail.error is LedgerFenced
    assert h.state is HandleState.FENCED and h.lac == 0


def test_after_the_change_the_replacement_gets_the_entry_and_it_is_acknowledged() -> None:
    """While the ledger is OPEN the change lands: the pending entry goes to the
    replacement (recorded under its registered instance) and is acknowledged with it."""
    h = make(FIRST)
    add(h, "r0", b"a")  # entry 0 -> b1, b2
    h.handle(stored("b1:3181", "b1:3181#1", 0))
    h.handle(stored("b2:3181", "b2:3181#2", 0))
    (write,) = of(h.handle(WritableBookies(tuple(POOL), tuple(FIRST.values()))), WriteMetadata)
    last = write.metadata.last_fragment
    assert last.bookies[1] == "b4:3181" and last.instance_of("b4:3181") == "b4:3181#1"
    (send,) = of(h.handle(MetadataWritten(write.metadata, 1)), SendAdds)
    assert send.bookie == "b4:3181" and [r.entry_id for r in send.records] == [0]
    (ack,) = of(h.handle(stored("b4:3181", "b4:3181#1", 0)), AckAdds)
    assert ack.last_entry_id == 0


def test_a_fence_refusal_from_a_new_instance_still_fences_the_handle() -> None:
    """A refusal as fenced is a recovery at work whichever instance says it."""
    h = make(FIRST)
    add(h, "r0", b"a")
    event = BookieAddsDone(
        "b2:3181", (), (0,), RejectReason.FENCED, (RejectReason.FENCED,), "b2:3181#2"
    )
    (fail,) = of(h.handle(event), FailAdds)
    assert fail.error is LedgerFenced and h.state is HandleState.FENCED
