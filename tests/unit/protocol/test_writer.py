"""The write handle (services/protocol/writer.py) against the rules of docs/protocol.md:
"Ledgers" (ids, write quorums, in-order acks, LAC, digests), "Failure while writing"
(ensemble change by CAS, conflicts, no replacement), "Closing as writer", and the
writer's side of fencing."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import replace

import pytest

from services.errors import (
    InvalidArgument,
    LedgerClosed,
    LedgerFenced,
    LedgerNotFound,
    MetadataUnavailable,
    NotEnoughBookies,
    PayloadTooLarge,
    QuorumTimeout,
    Unavailable,
)
from services.limits import STORED_ENTRY_SIZE_MAX_BYTES
from services.protocol.ensemble import CloseOutcome, close_outcome, plan_ensemble_change
from services.protocol.limits import WriterLimits
from services.protocol.messages import (
    AckAdds,
    AddRequested,
    BookieAddsDone,
    BookieFailed,
    CloseDone,
    CloseFailed,
    CloseRequested,
    Effect,
    FailAdds,
    MetadataConflicted,
    MetadataFailed,
    MetadataRead,
    MetadataWritten,
    ReadMetadata,
    ReadWritableBookies,
    RejectReason,
    SendAdds,
    SendLac,
    Tick,
    WritableBookies,
    WriteMetadata,
)
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.writer import HandleState, WriteHandle
from services.wire.digest import record_ok

POOL = [f"b{i}:3181" for i in range(1, 7)]


def make(e: int = 3, w: int = 2, a: int = 2, *, limits: WriterLimits | None = None) -> WriteHandle:
    md = LedgerMetadata.new(1, POOL[:e], w, a, created_at=1)
    return WriteHandle(md, 0, rng=random.Random(1), limits=limits)


def of(effects: Iterable[Effect], cls: type) -> list:
    return [x for x in effects if isinstance(x, cls)]


def sent(effects: Iterable[Effect]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for x in of(effects, SendAdds):
        out.setdefault(x.bookie, []).extend(r.entry_id for r in x.records)
    return out


def add(h: WriteHandle, rid: str, *payloads: bytes, now: int = 0) -> list[Effect]:
    return h.handle(AddRequested(rid, tuple(payloads), now))


def store(h: WriteHandle, bookie: str, *entry_ids: int) -> list[Effect]:
    return h.handle(BookieAddsDone(bookie, tuple(entry_ids)))


def ack_everything(h: WriteHandle, effects: Iterable[Effect]) -> list[Effect]:
    out: list[Effect] = []
    for x in of(effects, SendAdds):
        out += store(h, x.bookie, *(r.entry_id for r in x.records))
    return out


# ---------------------------------------------------------------------- adds and acks


def test_entry_ids_in_order_from_0_each_sent_to_its_write_quorum_in_one_batch_per_bookie() -> None:
    """docs/protocol.md Ledgers: ids in order from 0; entry e goes to B[(e+i) % E], i < Qw;
    entries bound for one bookie are batched into one request."""
    h = make(e=3, w=2, a=2)
    effects = add(h, "r1", b"a", b"bb", b"ccc", b"dddd")
    assert len(of(effects, SendAdds)) == 3  # one request per bookie
    assert sent(effects) == {"b1:3181": [0, 2, 3], "b2:3181": [0, 1, 3], "b3:3181": [1, 2]}
    assert h.next_entry_id == 4


def test_each_record_carries_ids_lac_cumulative_length_and_a_valid_digest() -> None:
    """docs/protocol.md Ledgers: each entry carries ledger id, entry id, the writer's LAC at send
    time, its payload and a digest over all of them (and the cumulative length)."""
    h = make()
    first = add(h, "r1", b"hello", b"world!")
    records = {r.entry_id: r for x in of(first, SendAdds) for r in x.records}
    assert [(r.lac, r.length, r.recovery) for _, r in sorted(records.items())] == [
        (-1, 5, False),
        (-1, 11, False),
    ]
    assert all(
        record_ok(r) and r.digest_type == "crc32c" and r.ledger_id == 1 for r in records.values()
    )
    ack_everything(h, first)
    later = add(h, "r2", b"!")
    (record,) = {r.entry_id: r for x in of(later, SendAdds) for r in x.records}.values()
    assert (record.entry_id, record.lac, record.length) == (2, 1, 12)


def test_hmac_records_are_sealed_with_the_ledger_key() -> None:
    """docs/protocol.md Ledgers: the digest may be HMAC-SHA256 keyed from the ledger password."""
    md = LedgerMetadata.new(1, POOL[:3], 2, 2, digest_type="hmac-sha256")
    h = WriteHandle(md, 0, rng=random.Random(1), digest_key=b"k" * 32)
    record = of(add(h, "r", b"x"), SendAdds)[0].records[0]
    assert record_ok(record, b"k" * 32) and not record_ok(record, b"other")


def test_entry_is_acknowledged_after_qa_acks_of_its_write_quorum() -> None:
    """docs/protocol.md Ledgers: acknowledged when Qa bookies of its write quorum acked it."""
    h = make(e=3, w=3, a=2)
    add(h, "r1", b"x")
    assert store(h, "b1:3181", 0) == []
    effects = store(h, "b3:3181", 0)
    assert effects == [AckAdds("r1", 0, 0, 0)]
    assert h.lac == 0 and h.length == 1


def test_ack_from_a_bookie_outside_the_write_quorum_does_not_count() -> None:
    """docs/protocol.md Ledgers: only bookies of the entry's write quorum count towards Qa."""
    h = make(e=3, w=2, a=2)
    add(h, "r1", b"x")  # entry 0 -> b1, b2
    assert store(h, "b3:3181", 0) == []
    assert store(h, "b1:3181", 0) == []
    assert store(h, "b1:3181", 0) == []  # the same bookie twice is one ack
    assert of(store(h, "b2:3181", 0), AckAdds)


def test_acks_to_the_client_are_always_in_entry_id_order() -> None:
    """docs/protocol.md Ledgers: an entry is acknowledged only when every lower entry is; acks
    to the client are in entry-id order, always."""
    h = make(e=3, w=2, a=1)
    add(h, "r0", b"a")  # entry 0 -> b1, b2
    add(h, "r1", b"b")  # entry 1 -> b2, b3
    add(h, "r2", b"c")  # entry 2 -> b3, b1
    assert store(h, "b3:3181", 1, 2) == []  # 1 and 2 are replicated, 0 is not
    effects = store(h, "b1:3181", 0)
    assert effects == [AckAdds("r0", 0, 0, 2), AckAdds("r1", 1, 1, 2), AckAdds("r2", 2, 2, 2)]


def test_a_batch_is_acknowledged_as_a_whole() -> None:
    """docs/api.md: a batch is acknowledged as a whole, in order, after the ack quorum of every
    entry; last_add_confirmed is then >= its last entry."""
    h = make(e=3, w=2, a=2)
    add(h, "batch", b"a", b"b", b"c")
    assert store(h, "b1:3181", 0, 2) == []
    assert store(h, "b2:3181", 0, 1) == []  # entry 0 is done, 1 and 2 are not
    assert store(h, "b3:3181", 1) == []  # entry 1 is done too: still no answer
    assert h.lac == 1
    assert store(h, "b3:3181", 2) == [AckAdds("batch", 0, 2, 2)]


def test_idle_writer_sends_an_explicit_lac_update() -> None:
    """ISSUE 3 / docs/protocol.md: when the writer goes idle it tells the bookies its LAC so that
    tailing readers see the last entry without waiting for the next add."""
    limits = WriterLimits(explicit_lac_delay_ms=20)
    h = make(limits=limits)
    ack_everything(h, add(h, "r", b"x", now=100))
    assert h.next_deadline() == 120
    assert h.handle(Tick(110)) == []
    assert h.handle(Tick(120)) == [SendLac(1, tuple(POOL[:3]), 0)]
    assert h.handle(Tick(500)) == [] and h.next_deadline() is None  # told once


def test_bounds_on_adds_in_flight_and_payloads() -> None:
    """docs/style.md §5: adds in flight are bounded; an over-large entry or batch, or an empty
    batch, is refused."""
    h = make(limits=WriterLimits(adds_in_flight_max=3))
    assert of(add(h, "r1", b"a", b"b"), SendAdds)
    (fail,) = add(h, "r2", b"c", b"d")
    assert isinstance(fail, FailAdds) and fail.error is Unavailable
    assert of(add(h, "r3", b"c"), SendAdds)  # exactly at the bound is fine
    assert of(add(h, "r4", b""), FailAdds)[0].error is Unavailable
    h = make()
    assert add(h, "e")[0].error is InvalidArgument
    assert add(h, "big", b"x" * (STORED_ENTRY_SIZE_MAX_BYTES + 1))[0].error is PayloadTooLarge
    assert of(add(h, "max", b"x" * STORED_ENTRY_SIZE_MAX_BYTES), SendAdds)


# ---------------------------------------------------------------------- ensemble change


def change_to(h: WriteHandle, writable: list[str]) -> WriteMetadata:
    (write,) = of(h.handle(WritableBookies(tuple(writable))), WriteMetadata)
    return write


def test_failed_bookie_is_replaced_by_cas_new_fragment_at_first_unacknowledged_entry() -> None:
    """docs/protocol.md Failure while writing: a bookie failing an add is replaced: a new
    fragment starting at the first entry not yet acknowledged to the client, with a bookie
    not already in the ensemble, written by CAS; pending entries are re-sent to it."""
    h = make(e=3, w=2, a=2)
    ack_everything(h, add(h, "r0", b"a", b"b"))  # entries 0, 1 acknowledged
    add(h, "r1", b"c", b"d")  # entry 2 -> b3, b1; entry 3 -> b1, b2
    store(h, "b3:3181", 2)
    effects = h.handle(BookieAddsDone("b1:3181", (), (2, 3), RejectReason.UNAVAILABLE))
    assert effects == [ReadWritableBookies()]
    write = change_to(h, POOL)
    assert write.expected_version == 0
    fragments = write.metadata.fragments
    assert [f.first_entry_id for f in fragments] == [0, 2]
    new_bookie = fragments[1].bookies[0]
    assert new_bookie not in POOL[:3] and fragments[1].bookies[1:] == tuple(POOL[1:3])
    effects = h.handle(MetadataWritten(write.metadata, 1))
    assert sent(effects) == {new_bookie: [2, 3]}  # only the new bookie gets them
    assert SendLac(1, (new_bookie,), 1) in effects  # it learns the LAC too
    assert h.version == 1 and h.ensemble_changes == 1
    assert store(h, new_bookie, 2, 3) == []
    assert store(h, "b2:3181", 3) == [AckAdds("r1", 2, 3, 3)]


def test_read_only_bookie_is_replaced_too() -> None:
    """docs/protocol.md Failure while writing: a read-only bookie fails adds and is replaced."""
    h = make()
    add(h, "r", b"x")
    effects = h.handle(BookieAddsDone("b2:3181", (), (0,), RejectReason.READONLY))
    assert effects == [ReadWritableBookies()]
    assert "b2:3181" not in change_to(h, POOL).metadata.ensemble


def test_acks_are_held_during_the_change_and_replaced_bookie_acks_are_discarded() -> None:
    """docs/protocol.md Failure while writing: while the change is in progress nothing is
    acknowledged (the new fragment must start at the first unacknowledged entry); acks of
    the replaced bookie do not count for entries of the new fragment."""
    h = make(e=3, w=3, a=2)
    add(h, "r", b"x")  # entry 0 -> b1, b2, b3
    store(h, "b1:3181", 0)
    h.handle(BookieFailed("b1:3181"))
    assert store(h, "b2:3181", 0) == []  # b1 + b2 would be Qa, but a change is in progress
    write = change_to(h, POOL)
    effects = h.handle(MetadataWritten(write.metadata, 1))
    assert not of(effects, AckAdds)  # b1's ack is gone: only b2 counts
    new_bookie = write.metadata.ensemble[0]
    assert of(store(h, new_bookie, 0), AckAdds) == [AckAdds("r", 0, 0, 0)]


def test_adds_keep_queuing_during_a_change_and_are_sent_to_the_new_bookie() -> None:
    """docs/protocol.md Failure while writing: while the change is in progress adds keep
    queuing (bounded); once it lands they go to the new write quorums."""
    h = make(e=3, w=2, a=2)
    add(h, "r0", b"a")
    h.handle(BookieFailed("b1:3181"))
    effects = add(h, "r1", b"b", b"c")  # 1 -> b2, b3; 2 -> b3, b1 (failed: not sent)
    assert sent(effects) == {"b2:3181": [1], "b3:3181": [1, 2]}
    write = change_to(h, POOL)
    new_bookie = write.metadata.ensemble[0]
    assert sent(h.handle(MetadataWritten(write.metadata, 1))) == {new_bookie: [0, 2]}


def test_cas_conflict_with_ledger_no_longer_open_fails_pending_adds_with_ledger_fenced() -> None:
    """docs/protocol.md Failure while writing: on CAS conflict re-read; if the ledger is no
    longer OPEN every pending add fails (ledger_fenced: outcome unknown), and so does
    every later add."""
    h = make()
    add(h, "r0", b"a")
    h.handle(BookieFailed("b1:3181"))
    write = change_to(h, POOL)
    fresh = h.metadata.in_recovery()
    effects = h.handle(MetadataConflicted(fresh, 1))
    (fail,) = of(effects, FailAdds)
    assert fail.request_id == "r0" and fail.error is LedgerFenced
    assert "unknown" in fail.message
    assert write.metadata.state is LedgerState.OPEN
    assert h.state is HandleState.FENCED
    assert add(h, "r1", b"b")[0].error is LedgerFenced


def test_cas_conflict_with_ledger_still_open_retries_on_the_fresh_metadata() -> None:
    """docs/protocol.md Failure while writing: on CAS conflict, if the ledger is still OPEN,
    retry the replacement on the fresh metadata (its new version)."""
    h = make(e=3, w=2, a=2)
    add(h, "r0", b"a")
    h.handle(BookieFailed("b1:3181"))
    change_to(h, POOL)
    fresh = replace(h.metadata, custom={"touched": "yes"})  # someone else changed it
    effects = h.handle(MetadataConflicted(fresh, 5))
    (retry,) = of(effects, WriteMetadata)
    assert retry.expected_version == 5
    assert retry.metadata.custom == {"touched": "yes"}
    assert "b1:3181" not in retry.metadata.ensemble


def test_no_replacement_adds_wait_bounded_then_fail_and_nothing_acknowledged_is_lost() -> None:
    """docs/protocol.md Failure while writing: when no replacement bookie exists, adds wait
    (bounded) and then fail; the ledger is closed at its last acknowledged entry, so
    nothing acknowledged is ever lost."""
    limits = WriterLimits(add_timeout_ms=1000, ensemble_change_retry_ms=100)
    h = make(e=3, w=2, a=2, limits=limits)
    ack_everything(h, add(h, "r0", b"aa", now=0))
    add(h, "r1", b"b", now=10)
    h.handle(BookieFailed("b2:3181"))
    assert h.handle(WritableBookies(tuple(POOL[:3]))) == []  # nobody to replace it with
    assert h.handle(Tick(200)) == [ReadWritableBookies()]  # it keeps looking
    assert h.handle(WritableBookies(tuple(POOL[:3]))) == []
    effects = h.handle(Tick(1010))
    (fail,) = of(effects, FailAdds)
    assert fail.request_id == "r1" and fail.error is NotEnoughBookies
    (close,) = of(effects, WriteMetadata)
    assert close.metadata.state is LedgerState.CLOSED
    assert (close.metadata.last_entry_id, close.metadata.length) == (0, 2)
    assert add(h, "r2", b"c")[0].error is LedgerClosed
    h.handle(MetadataWritten(close.metadata, 1))
    assert h.state is HandleState.CLOSED


def test_adds_without_an_ack_quorum_in_time_fail_with_quorum_timeout() -> None:
    """docs/api.md 504 quorum_timeout: no ack quorum in time; outcome unknown."""
    h = make(limits=WriterLimits(add_timeout_ms=500))
    add(h, "r0", b"a", now=0)
    assert h.next_deadline() == 500
    assert h.handle(Tick(499)) == []
    effects = h.handle(Tick(500))
    (fail,) = of(effects, FailAdds)
    assert fail.error is QuorumTimeout and "unknown" in fail.message
    assert of(effects, WriteMetadata)[0].metadata.last_entry_id == -1


# ---------------------------------------------------------------------- fencing


def test_fenced_bookie_rejection_fails_all_pending_and_later_adds_with_ledger_fenced() -> None:
    """docs/protocol.md fencing step 3: the old writer's next add fails with ledger_fenced (an
    unknown outcome), and it acknowledges nothing more."""
    h = make(e=3, w=2, a=2)
    add(h, "r0", b"a")
    add(h, "r1", b"b")
    store(h, "b1:3181", 0)
    effects = h.handle(BookieAddsDone("b2:3181", (), (0, 1), RejectReason.FENCED))
    assert [(f.request_id, f.error) for f in of(effects, FailAdds)] == [
        ("r0", LedgerFenced),
        ("r1", LedgerFenced),
    ]
    assert store(h, "b2:3181", 0) == []  # a late ack changes nothing
    assert add(h, "r2", b"c")[0].error is LedgerFenced
    assert h.lac == -1


def test_close_of_a_fenced_handle_reports_the_recovery() -> None:
    """docs/protocol.md Closing as writer: IN_RECOVERY -> error; CLOSED at our last entry ->
    success."""
    h = make()
    add(h, "r0", b"a")
    h.handle(BookieFailed("b1:3181", RejectReason.FENCED))
    (write,) = of(h.handle(CloseRequested("c1", 5)), WriteMetadata)
    effects = h.handle(MetadataConflicted(h.metadata.in_recovery(), 1))
    assert [(x.request_id, x.error) for x in of(effects, CloseFailed)] == [("c1", LedgerFenced)]
    assert write.metadata.last_entry_id == -1
    closed = h.metadata.closed(-1, 0)
    h2 = make()
    h2.handle(BookieFailed("b1:3181", RejectReason.FENCED))
    h2.handle(CloseRequested("c", 0))
    assert h2.handle(MetadataConflicted(closed, 2)) == [CloseDone("c", closed, 2)]


# ---------------------------------------------------------------------- close


def test_close_waits_for_pending_adds_then_cas_closed_at_last_acknowledged_entry() -> None:
    """docs/protocol.md Closing as writer: CAS OPEN -> CLOSED with last entry = the last entry
    acknowledged to the client (and the exact length); no adds are accepted meanwhile."""
    h = make(e=3, w=2, a=2)
    ack_everything(h, add(h, "r0", b"ab"))
    pending = add(h, "r1", b"cde")
    assert h.handle(CloseRequested("c", 1)) == []  # entry 1 still pending
    assert add(h, "r2", b"x")[0].error is LedgerClosed
    effects = ack_everything(h, pending)
    (write,) = of(effects, WriteMetadata)
    assert (write.metadata.state, write.metadata.last_entry_id) == (LedgerState.CLOSED, 1)
    assert write.metadata.length == 5 and write.expected_version == 0
    done = h.handle(MetadataWritten(write.metadata, 1))
    assert done == [CloseDone("c", write.metadata, 1)]
    assert h.handle(CloseRequested("again", 9)) == [CloseDone("again", write.metadata, 1)]
    assert add(h, "r3", b"x")[0].error is LedgerClosed


@pytest.mark.parametrize(
    ("fresh_state", "fresh_last", "outcome"),
    [
        (LedgerState.OPEN, None, CloseOutcome.RETRY),
        (LedgerState.IN_RECOVERY, None, CloseOutcome.FENCED),
        (LedgerState.CLOSED, 0, CloseOutcome.DONE),
        (LedgerState.CLOSED, 3, CloseOutcome.CLOSED_ELSEWHERE),
    ],
)
def test_close_cas_conflict_outcomes(
    fresh_state: LedgerState, fresh_last: int | None, outcome: CloseOutcome
) -> None:
    """docs/protocol.md Closing as writer: on conflict re-read; still OPEN -> retry;
    IN_RECOVERY -> error; CLOSED with the same last entry -> success; CLOSED with another
    last entry -> error."""
    h = make()
    ack_everything(h, add(h, "r0", b"a"))
    (first,) = of(h.handle(CloseRequested("c", 1)), WriteMetadata)
    fresh = replace(h.metadata, state=fresh_state, last_entry_id=fresh_last)
    assert close_outcome(fresh, 0) is outcome
    effects = h.handle(MetadataConflicted(fresh, 7))
    if outcome is CloseOutcome.RETRY:
        (again,) = of(effects, WriteMetadata)
        assert again.expected_version == 7
        assert (again.metadata.state, again.metadata.last_entry_id) == (LedgerState.CLOSED, 0)
        assert again.metadata.custom == fresh.custom == first.metadata.custom
    elif outcome is CloseOutcome.DONE:
        assert effects == [CloseDone("c", fresh, 7)] and h.state is HandleState.CLOSED
    else:
        (failed,) = effects
        assert isinstance(failed, CloseFailed) and failed.error is LedgerFenced
        assert h.state is HandleState.FENCED


def test_metadata_store_failure_is_an_unknown_outcome_resolved_by_reading() -> None:
    """A CAS whose outcome is unknown (store unreachable) is resolved by re-reading after
    a delay: finding our own write counts as success."""
    h = make(limits=WriterLimits(metadata_retry_ms=50))
    (write,) = of(h.handle(CloseRequested("c", 100)), WriteMetadata)
    assert h.handle(MetadataFailed("metadata_unavailable")) == []
    assert h.next_deadline() == 150
    assert h.handle(Tick(150)) == [ReadMetadata(1)]
    assert h.handle(MetadataRead(write.metadata, 1)) == [CloseDone("c", write.metadata, 1)]


def test_metadata_store_failures_are_bounded() -> None:
    """docs/style.md §5: retries are bounded; a close that cannot reach the store fails."""
    h = make(limits=WriterLimits(metadata_failures_max=1, metadata_retry_ms=1))
    h.handle(CloseRequested("c", 0))
    h.handle(MetadataFailed("metadata_unavailable"))
    assert h.handle(Tick(1)) == [ReadMetadata(1)]  # after the back-off, the re-read
    effects = h.handle(MetadataFailed("metadata_unavailable"))
    assert [(x.request_id, x.error) for x in effects] == [("c", MetadataUnavailable)]


def test_deleted_ledger_fails_adds_with_ledger_not_found() -> None:
    """A ledger deleted under its writer: adds and close fail with ledger_not_found."""
    h = make()
    add(h, "r0", b"a")
    h.handle(BookieFailed("b1:3181"))
    change_to(h, POOL)
    effects = h.handle(MetadataFailed("ledger_not_found"))
    assert [(x.request_id, x.error) for x in effects] == [("r0", LedgerNotFound)]
    assert add(h, "r1", b"b")[0].error is LedgerNotFound
    assert h.handle(CloseRequested("c", 0))[0].error is LedgerNotFound


def test_plan_ensemble_change_is_pure() -> None:
    """Ensemble-change planning: new fragment from the first unacknowledged entry; the
    replacement is not in the ensemble; NotEnoughBookies when there is none."""
    md = LedgerMetadata.new(1, POOL[:3], 2, 2)
    new, spread = plan_ensemble_change(md, {"b2:3181"}, POOL, 9, random.Random(3))
    assert spread  # no racks: the policy asks nothing
    assert [f.first_entry_id for f in new.fragments] == [0, 10]
    assert new.ensemble[0] == "b1:3181" and new.ensemble[2] == "b3:3181"
    assert new.ensemble[1] in POOL[3:]
    with pytest.raises(NotEnoughBookies):
        plan_ensemble_change(md, {"b2:3181"}, POOL[:3], 9, random.Random(3))


def test_sends_to_one_bookie_are_split_at_the_batch_bounds() -> None:
    """docs/style.md §5: one request per bookie, split when it would pass
    send_batch_entries_max entries or send_batch_bytes_max payload bytes."""
    h = make(e=1, w=1, a=1, limits=WriterLimits(send_batch_entries_max=3))
    effects = of(add(h, "r", *[b"x"] * 7), SendAdds)
    assert [len(x.records) for x in effects] == [3, 3, 1]
    h = make(e=1, w=1, a=1, limits=WriterLimits(send_batch_bytes_max=10))
    effects = of(add(h, "r", b"a" * 6, b"b" * 4, b"c" * 1, b"d" * 20), SendAdds)
    assert [[len(r.payload) for r in x.records] for x in effects] == [[6, 4], [1], [20]]


# ---------------------------------------------------------------------- issue 7


def test_no_replacement_acknowledges_what_has_its_quorum_before_failing_the_rest() -> None:
    """Issue 7 item 5 (docs/protocol.md Failure while writing): b3 fails with no spare to
    replace it. Entry 0 (write set b1, b2) is stored on both while the change waits, so
    it has its ack quorum without the failed bookie: at the time-out it is acknowledged
    (in entry order) and only entries 1 and 2, which need b3, fail with
    not_enough_bookies (an unknown outcome, and the message says so); the ledger closes
    at entry 0."""
    limits = WriterLimits(add_timeout_ms=1000, ensemble_change_retry_ms=100)
    h = make(e=3, w=2, a=2, limits=limits)
    add(h, "r0", b"aa", now=0)  # entry 0 -> b1, b2
    add(h, "r1", b"b", now=0)  # entry 1 -> b2, b3
    add(h, "r2", b"c", now=0)  # entry 2 -> b3, b1
    assert h.handle(BookieAddsDone("b3:3181", (), (1, 2), RejectReason.UNAVAILABLE)) == [
        ReadWritableBookies()
    ]
    assert h.handle(WritableBookies(tuple(POOL[:3]))) == []  # nobody to replace b3
    assert store(h, "b1:3181", 0, 2) == []  # held back: a change is in progress
    assert store(h, "b2:3181", 0, 1) == []
    effects = h.handle(Tick(1000))
    assert of(effects, AckAdds) == [AckAdds("r0", 0, 0, 0)]
    assert effects.index(of(effects, AckAdds)[0]) < effects.index(of(effects, FailAdds)[0])
    fails = of(effects, FailAdds)
    assert [(f.request_id, f.error) for f in fails] == [
        ("r1", NotEnoughBookies),
        ("r2", NotEnoughBookies),
    ]
    assert "unknown" in fails[0].message and "recovery" in fails[0].message
    (close,) = of(effects, WriteMetadata)
    assert close.metadata.state is LedgerState.CLOSED
    assert (close.metadata.last_entry_id, close.metadata.length) == (0, 2)
    assert h.lac == 0


def test_time_out_during_a_change_cas_acknowledges_nothing_more() -> None:
    """Issue 7 item 5, with the change's CAS still in flight at the time-out: nothing more
    is acknowledged (acks are held during an ensemble change, as in BookKeeper), so the
    fragment the change writes never starts at or below an acknowledged entry (found by
    the simulator, seed 68800); both adds fail with quorum_timeout (an unknown outcome),
    and once the change lands the ledger closes at the LAC before them, with the new
    fragment."""
    limits = WriterLimits(add_timeout_ms=1000)
    h = make(e=3, w=3, a=2, limits=limits)
    add(h, "r0", b"a", now=0)  # every entry -> b1, b2, b3
    add(h, "r1", b"b", now=0)
    store(h, "b1:3181", 1)
    h.handle(BookieAddsDone("b1:3181", (), (0,), RejectReason.UNAVAILABLE))
    write = change_to(h, POOL)  # the CAS is in flight
    assert write.metadata.fragments[-1].first_entry_id == 0
    store(h, "b2:3181", 0, 1)
    store(h, "b3:3181", 0)
    effects = h.handle(Tick(1000))
    assert not of(effects, AckAdds)
    fails = [(f.request_id, f.error) for f in of(effects, FailAdds)]
    assert fails == [("r0", QuorumTimeout), ("r1", QuorumTimeout)]
    assert not of(effects, WriteMetadata)  # one metadata write at a time
    (close,) = of(h.handle(MetadataWritten(write.metadata, 1)), WriteMetadata)
    assert close.metadata.last_entry_id == -1
    assert "b1:3181" not in close.metadata.ensemble  # the fragment from entry 0 replaced
    assert h.lac == -1


@pytest.mark.parametrize("reason", [RejectReason.CORRUPT, RejectReason.ENTRY_EXISTS])
def test_a_record_refused_as_corrupt_or_different_fails_that_bookie_for_this_ledger(
    reason: RejectReason,
) -> None:
    """Issue 7 item 8: a mixed answer (entry 0 stored, entry 1 refused as CORRUPT or
    ENTRY_EXISTS) counts entry 0, never entry 1, and replaces the bookie by an ensemble
    change; the ledger is not fenced and keeps taking adds."""
    h = make(e=3, w=3, a=2)
    add(h, "r0", b"a")
    add(h, "r1", b"b")
    store(h, "b2:3181", 0, 1)
    effects = h.handle(BookieAddsDone("b1:3181", (0,), (1,), reason, reasons=(reason,)))
    assert effects == [AckAdds("r0", 0, 0, 0), ReadWritableBookies()]  # b1 + b2 stored 0
    assert h.state is HandleState.OPEN
    write = change_to(h, POOL)
    assert "b1:3181" not in write.metadata.ensemble
    effects = h.handle(MetadataWritten(write.metadata, 1))
    new_bookie = write.metadata.ensemble[0]
    assert sent(effects) == {new_bookie: [1]}
    assert of(store(h, new_bookie, 1), AckAdds) == [AckAdds("r1", 1, 1, 1)]
    assert of(add(h, "r2", b"c"), SendAdds)


def test_entry_exists_withdraws_an_earlier_ack_of_that_bookie() -> None:
    """Issue 7 item 8: a bookie that says it stores other bytes for an entry never counts
    as storing it, even if an earlier answer said it stored it: entry 1 (acked earlier by
    b1 and b2, waiting for entry 0) is not acknowledged when b1 then answers entry_exists
    for it, although the same answer completes entry 0."""
    h = make(e=3, w=3, a=2)
    add(h, "r0", b"a")
    add(h, "r1", b"b")
    store(h, "b1:3181", 1)
    store(h, "b2:3181", 0, 1)
    exists = RejectReason.ENTRY_EXISTS
    effects = h.handle(BookieAddsDone("b1:3181", (0,), (1,), exists, reasons=(exists,)))
    assert effects == [AckAdds("r0", 0, 0, 0), ReadWritableBookies()]
    assert h.lac == 0


def test_a_fenced_record_in_a_mixed_answer_fences_the_handle() -> None:
    """Issue 7 item 8: one record refused as fenced among others refused for other
    reasons means a recovery started: every pending add fails with ledger_fenced."""
    h = make(e=3, w=2, a=2)
    add(h, "r0", b"a", b"b")
    reasons = (RejectReason.CORRUPT, RejectReason.FENCED)
    effects = h.handle(BookieAddsDone("b2:3181", (), (0, 1), RejectReason.FENCED, reasons))
    assert [(f.request_id, f.error) for f in of(effects, FailAdds)] == [("r0", LedgerFenced)]
    assert h.state is HandleState.FENCED


def test_a_re_sent_entry_carries_the_bytes_of_its_first_send() -> None:
    """Issue 7 item 8 (no entry_exists from our own re-sends): after an ensemble change an
    entry goes to the new bookie as the very record first sent (the LAC at its first
    send, the same digest), although the LAC has moved since."""
    h = make(e=3, w=2, a=2)
    first = add(h, "r0", b"a", b"b", b"c")  # entry 2 -> b3, b1
    (original,) = [r for x in of(first, SendAdds) if x.bookie == "b3:3181" for r in x.records
                   if r.entry_id == 2]  # fmt: skip
    store(h, "b1:3181", 0)
    store(h, "b2:3181", 0, 1)
    store(h, "b3:3181", 1)
    assert h.lac == 1
    h.handle(BookieAddsDone("b1:3181", (), (2,), RejectReason.UNAVAILABLE))
    write = change_to(h, POOL)
    effects = h.handle(MetadataWritten(write.metadata, 1))
    (resent,) = of(effects, SendAdds)
    assert resent.records == (original,) and original.lac == -1


def test_an_ensemble_change_records_the_replacements_registered_instance() -> None:
    """Issue 7 item 1: the new fragment of a writer's ensemble change records which
    instance of the replacement it is written to (from the WritableBookies event), and
    keeps the instances recorded for the bookies it keeps."""
    instances = {b: f"{b}#1" for b in POOL}
    md = LedgerMetadata.new(1, POOL[:3], 2, 2, created_at=1, instances=instances)
    h = WriteHandle(md, 0, rng=random.Random(1))
    add(h, "r0", b"a")  # entry 0 -> b1, b2
    effects = h.handle(BookieAddsDone("b1:3181", (), (0,), RejectReason.UNAVAILABLE))
    assert effects == [ReadWritableBookies()]
    event = WritableBookies(tuple(POOL), tuple(f"{b}#2" for b in POOL))  # as registered now
    (write,) = of(h.handle(event), WriteMetadata)
    last = write.metadata.last_fragment
    new_bookie = last.bookies[0]
    assert new_bookie not in POOL[:3]
    assert last.instances == (f"{new_bookie}#2", "b2:3181#1", "b3:3181#1")


# ---------------------------------------------------------------------- parking


def test_an_idle_handle_parks_only_once_nothing_is_in_flight_and_its_lac_went_out() -> None:
    """writer.py "Parking": a handle parks only when OPEN with nothing pending, no
    ensemble change, no metadata write and no close asked, and once the bookies were told
    its LAC; a new ledger's handle parks at once."""
    limits = WriterLimits(explicit_lac_delay_ms=20)
    h = make(limits=limits)
    parked = h.park()
    assert parked is not None and (parked.lac, parked.length, parked.next_entry_id) == (-1, 0, 0)
    first = add(h, "r", b"x", now=100)
    assert h.park() is None  # an add in flight
    ack_everything(h, first)
    assert h.park() is None  # its LAC not told yet
    assert h.handle(Tick(120)) == [SendLac(1, tuple(POOL[:3]), 0)]
    parked = h.park()
    assert parked is not None and (parked.lac, parked.length) == (0, 1)
    assert parked.metadata is h.metadata and parked.ledger_id == 1

    failing = make(limits=limits)
    ack_everything(failing, add(failing, "r", b"x"))
    failing.handle(Tick(1_000))
    failing.handle(BookieFailed("b1:3181", RejectReason.UNAVAILABLE))
    assert failing.changing_ensemble and failing.park() is None  # a change in progress

    closing = make()
    closing.handle(CloseRequested("c", 0))
    assert closing.park() is None  # closing, its CAS in flight
    fenced = make()
    fenced.handle(BookieFailed("b1:3181", RejectReason.FENCED))
    assert fenced.state is HandleState.FENCED and fenced.park() is None


def test_a_resumed_handle_carries_on_where_the_parked_one_stopped() -> None:
    """writer.py "Parking": the handle resumed from a parked one gives the next add the
    next entry id, its record the LAC and the cumulative length, closes at the LAC with
    the exact length, and a fence still fails its adds ``ledger_fenced``."""
    limits = WriterLimits(explicit_lac_delay_ms=20)
    h = make(limits=limits)
    ack_everything(h, add(h, "r1", b"hello", b"world!", now=100))
    h.handle(Tick(200))
    parked = h.park()
    assert parked is not None

    resumed = WriteHandle.resume(parked, rng=random.Random(1), now=300)
    assert (resumed.lac, resumed.length, resumed.next_entry_id) == (1, 11, 2)
    assert resumed.state is HandleState.OPEN and resumed.next_deadline() is None
    later = add(resumed, "r2", b"!", now=300)
    (record,) = {r.entry_id: r for x in of(later, SendAdds) for r in x.records}.values()
    assert (record.entry_id, record.lac, record.length) == (2, 1, 12) and record_ok(record)
    ack_everything(resumed, later)
    (write,) = of(resumed.handle(CloseRequested("c", 300)), WriteMetadata)
    assert (write.metadata.last_entry_id, write.metadata.length) == (2, 12)
    assert write.metadata.state is LedgerState.CLOSED

    fenced = WriteHandle.resume(parked, rng=random.Random(1), now=300)
    pending = add(fenced, "r3", b"?", now=300)
    assert of(pending, SendAdds)
    (fail,) = fenced.handle(BookieAddsDone("b3:3181", (), (2,), RejectReason.FENCED))
    assert isinstance(fail, FailAdds) and fail.error is LedgerFenced
