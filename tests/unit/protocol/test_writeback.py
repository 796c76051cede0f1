"""Recovery write-backs (services/protocol/writeback.py): bounded in flight."""

from __future__ import annotations

from services.protocol.messages import SendAdds
from services.protocol.metadata import LedgerMetadata
from services.protocol.writeback import WriteBacks
from services.wire.framing import FramedRecord

MD = LedgerMetadata.new(1, ["a:1", "b:1", "c:1"], 2, 2)


def test_at_most_in_flight_max_entries_are_written_back_at_once() -> None:
    """docs/style.md §5: at most in_flight_max entries have a write-back outstanding; the
    others wait in entry-id order and go out as answers come back; every entry is
    eventually sent to its whole write set, with the recovery flag."""
    wbs = WriteBacks(MD, attempts_max=3, in_flight_max=2)
    for entry_id in range(5):
        wbs.add(FramedRecord(1, entry_id, -1, b"x"))
    sent = wbs.send()
    assert sorted({r.entry_id for s in sent for r in s.records}) == [0, 1]
    assert wbs.in_flight() == 2
    assert wbs.send() == []  # no room: nothing more
    seen: set[tuple[str, int]] = {(s.bookie, r.entry_id) for s in sent for r in s.records}
    while wbs.pending():
        for bookie, entry_id in sorted(seen):
            wbs.stored(bookie, entry_id)
        for bookie in {b for b, _ in seen}:
            wbs.answered(bookie)
        more = wbs.send()
        assert wbs.in_flight() <= 2
        seen |= {(s.bookie, r.entry_id) for s in more for r in flagged(s)}
    assert seen == {(b, e) for e in range(5) for b in MD.write_set_bookies(e)}


def test_one_request_per_bookie_at_a_time_the_rest_batched() -> None:
    """Entries found while a bookie's request is out wait for its answer and then go
    in ONE request (simulator seed 35049: a request per entry queued up on a slow
    bookie until they timed out one after the other)."""
    wbs = WriteBacks(MD, attempts_max=3, in_flight_max=64)
    wbs.add(FramedRecord(1, 0, -1, b"x"))
    first = wbs.send()
    busy = {s.bookie for s in first}
    for entry_id in range(1, 6):
        wbs.add(FramedRecord(1, entry_id, -1, b"x"))
        assert all(s.bookie not in busy for s in wbs.send())
    for bookie in busy:
        wbs.answered(bookie)
    batched = {s.bookie: [r.entry_id for r in s.records] for s in wbs.send()}
    for bookie in busy:
        wanted = [e for e in range(1, 6) if bookie in MD.write_set_bookies(e)]
        assert batched.get(bookie, []) == wanted
    assert len(wbs.send()) == 0


def flagged(send: SendAdds) -> list[FramedRecord]:
    records = send.records
    assert all(r.recovery for r in records)
    return list(records)
