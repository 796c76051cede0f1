"""Ledger recovery (services/protocol/recovery.py) against docs/protocol.md "Fencing and
recovery" (closing as a reader), steps 1-5, driven by a small synchronous fake of the
bookies and the metadata store."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import pytest

from services.errors import LedgerNotFound, MetadataUnavailable, NotEnoughBookies, QuorumTimeout
from services.protocol.limits import RecoveryLimits
from services.protocol.messages import (
    BookieAddsDone,
    Effect,
    EntryRead,
    FenceDone,
    FenceFailed,
    MetadataConflicted,
    MetadataFailed,
    MetadataRead,
    MetadataWritten,
    ReadEntries,
    ReadMetadata,
    ReadOutcome,
    ReadWritableBookies,
    RecoveryDone,
    RecoveryFailed,
    RejectReason,
    SendAdds,
    SendFence,
    Tick,
    WritableBookies,
    WriteMetadata,
)
from services.protocol.metadata import Fragment, LedgerMetadata, LedgerState
from services.protocol.recovery import LedgerRecovery, RecoveryPhase
from services.wire.digest import seal
from services.wire.framing import FramedRecord

POOL = [f"b{i}:3181" for i in range(1, 7)]


def record(entry_id: int, lac: int, length: int, payload: bytes | None = None) -> FramedRecord:
    payload = payload if payload is not None else b"e%d" % entry_id
    return seal(FramedRecord(1, entry_id, lac, payload, digest_type="crc32c", length=length))


@dataclass
class Cluster:
    """Bookies as dicts, a versioned metadata cell, and switches for failures."""

    metadata: LedgerMetadata
    version: int = 0
    entries: dict[str, dict[int, FramedRecord]] = field(default_factory=dict)
    lacs: dict[str, int] = field(default_factory=dict)
    fenced: set[str] = field(default_factory=set)
    hanging: set[str] = field(default_factory=set)  # never answer
    broken: set[str] = field(default_factory=set)  # answer with errors
    pool: list[str] = field(default_factory=lambda: POOL[:3])  # registered bookies
    log: list[Effect] = field(default_factory=list)

    def put(self, bookie: str, rec: FramedRecord) -> None:
        self.entries.setdefault(bookie, {})[rec.entry_id] = rec

    def write(self, entries: list[tuple[int, int, tuple[str, ...]]]) -> None:
        """Store entry (id, lac) with cumulative lengths on the given bookies."""
        length = 0
        for entry_id, lac, bookies in entries:
            length += len(b"e%d" % entry_id)
            for bookie in bookies:
                self.put(bookie, record(entry_id, lac, length))
                self.lacs[bookie] = max(self.lacs.get(bookie, -1), lac)

    def answer(self, effect: Effect) -> list:
        events: list = []
        if isinstance(effect, WriteMetadata):
            if effect.expected_version == self.version:
                self.metadata, self.version = effect.metadata, self.version + 1
                events.append(MetadataWritten(effect.metadata, self.version))
            else:
                events.append(MetadataConflicted(self.metadata, self.version))
        elif isinstance(effect, ReadMetadata):
            events.append(MetadataRead(self.metadata, self.version))
        elif isinstance(effect, ReadWritableBookies):
            alive = [b for b in self.pool if b not in self.broken and b not in self.hanging]
            events.append(WritableBookies(tuple(alive)))
        elif isinstance(effect, SendFence):
            if effect.bookie in self.hanging:
                pass
            elif effect.bookie in self.broken:
                events.append(FenceFailed(effect.bookie))
            else:
                self.fenced.add(effect.bookie)
                last = max(self.entries.get(effect.bookie, {}), default=-1)
                events.append(FenceDone(effect.bookie, self.lacs.get(effect.bookie, -1), last))
        elif isinstance(effect, ReadEntries):
            for entry_id in effect.entry_ids:
                if effect.bookie in self.hanging:
                    continue
                if effect.bookie in self.broken:
                    events.append(EntryRead(effect.bookie, entry_id, ReadOutcome.ERROR))
                    continue
                rec = self.entries.get(effect.bookie, {}).get(entry_id)
                outcome = ReadOutcome.FOUND if rec else ReadOutcome.MISSING
                events.append(EntryRead(effect.bookie, entry_id, outcome, rec))
        elif isinstance(effect, SendAdds):
            ids = tuple(r.entry_id for r in effect.records)
            if effect.bookie in self.hanging:
                pass
            elif effect.bookie in self.broken:
                events.append(BookieAddsDone(effect.bookie, (), ids, RejectReason.UNAVAILABLE))
            else:
                assert all(r.recovery for r in effect.records)
                for r in effect.records:
                    self.put(effect.bookie, r)
                events.append(BookieAddsDone(effect.bookie, ids))
        return events

    def run(self, recovery: LedgerRecovery, effects: Iterable[Effect] | None = None) -> list:
        """Carry out effects (FIFO) until quiet; return the final results."""
        queue = list(recovery.start(0) if effects is None else effects)
        results = []
        while queue:
            effect = queue.pop(0)
            self.log.append(effect)
            if isinstance(effect, RecoveryDone | RecoveryFailed):
                results.append(effect)
                continue
            for event in self.answer(effect):
                queue.extend(recovery.handle(event))
        return results


def ledger(e: int = 3, w: int = 2, a: int = 2) -> LedgerMetadata:
    return LedgerMetadata.new(1, POOL[:e], w, a)


def ws(md: LedgerMetadata, entry_id: int) -> tuple[str, ...]:
    return md.write_set_bookies(entry_id)


def of(effects: Iterable[Effect], cls: type) -> list:
    return [x for x in effects if isinstance(x, cls)]


def test_recovering_a_closed_ledger_changes_nothing() -> None:
    """docs/api.md recover: on a CLOSED ledger it returns it unchanged."""
    md = ledger().closed(4, 10)
    r = LedgerRecovery(md, 3)
    assert r.start(0) == [RecoveryDone(md, 3, False)]
    assert r.handle(FenceDone("b1:3181", 0)) == []


def test_step1_open_ledger_is_first_marked_in_recovery_by_cas() -> None:
    """docs/protocol.md recovery step 1: CAS state -> IN_RECOVERY before anything else; then
    step 2: fence every bookie of the last fragment."""
    md = ledger().with_ensemble(5, ("b4:3181", "b2:3181", "b3:3181"))
    r = LedgerRecovery(md, 0)
    (write,) = r.start(0)
    assert isinstance(write, WriteMetadata) and write.expected_version == 0
    assert write.metadata.state is LedgerState.IN_RECOVERY
    effects = r.handle(MetadataWritten(write.metadata, 1))
    assert effects == [SendFence(1, b) for b in ("b4:3181", "b2:3181", "b3:3181")]
    r2 = LedgerRecovery(md.in_recovery(), 1)  # already IN_RECOVERY: continue
    assert r2.start(0) == effects


def test_step3_fencing_completes_with_coverage_without_waiting_for_a_hanging_bookie() -> None:
    """docs/protocol.md recovery step 3: fenced once Qw - Qa + 1 bookies of EVERY write quorum
    answered; a hanging bookie does not block it."""
    md = ledger(e=3, w=2, a=2)  # threshold 1: any two bookies cover the three quorums
    cluster = Cluster(md, hanging={"b3:3181"})
    (done,) = cluster.run(LedgerRecovery(md, 0))
    assert isinstance(done, RecoveryDone) and done.metadata.state is LedgerState.CLOSED
    assert done.metadata.last_entry_id == -1 and done.closed_here


def test_step3_fails_retriably_when_every_bookie_answered_without_coverage() -> None:
    """docs/protocol.md recovery step 3: no coverage once all answered -> fail, retriable, and
    nothing changed beyond IN_RECOVERY."""
    md = ledger(e=3, w=3, a=1)  # threshold 3: every bookie must answer
    cluster = Cluster(md, broken={"b2:3181"})
    (failed,) = cluster.run(LedgerRecovery(md, 0))
    assert isinstance(failed, RecoveryFailed) and failed.error is NotEnoughBookies
    assert failed.error.retriable
    assert cluster.metadata.state is LedgerState.IN_RECOVERY


def test_step4_reads_forward_from_highest_lac_writes_back_and_stops_at_absent_entry() -> None:
    """docs/protocol.md recovery step 4: start from the highest LAC returned; each entry found
    is written back to its whole write quorum with the recovery flag; stop at the first
    entry missing from Qw - Qa + 1 bookies. Step 5: CLOSED at the last entry recovered,
    with the length from that entry."""
    md = ledger(e=3, w=2, a=2)
    cluster = Cluster(md)
    # 0..3 acknowledged (LAC 3 piggybacked on 4); 4 and 5 reached only one bookie each.
    cluster.write([(i, i - 1, ws(md, i)) for i in range(4)])
    cluster.write([(i, i - 1, ws(md, i)) for i in range(4)] + [(4, 3, ws(md, 4)[:1])])
    cluster.put(ws(md, 5)[1], record(5, 3, 999))  # 5 is on one bookie; 4 decides the end
    cluster.lacs = {b: 3 for b in POOL[:3]}
    r = LedgerRecovery(md, 0)
    (done,) = cluster.run(r)
    assert r.floor == 3
    assert done.metadata.last_entry_id == 5
    assert done.metadata.length == 999  # the length field of the last entry
    writebacks = [x for x in cluster.log if isinstance(x, SendAdds)]
    assert {rec.entry_id for x in writebacks for rec in x.records} == {4, 5}
    for entry_id in (4, 5):
        holders = {b for b in POOL[:3] if entry_id in cluster.entries.get(b, {})}
        assert holders == set(ws(md, entry_id))  # written back to the whole write quorum


def test_step4_absent_entry_needs_qw_minus_qa_plus_1_missing_answers() -> None:
    """docs/protocol.md recovery step 4: with Qw=3, Qa=2 an entry on one bookie of three is
    found (only one missing answer is not enough to call it absent... it is found)."""
    md = ledger(e=3, w=3, a=2)
    cluster = Cluster(md)
    cluster.write([(0, -1, ("b2:3181",))])
    (done,) = cluster.run(LedgerRecovery(md, 0))
    assert done.metadata.last_entry_id == 0
    assert {b for b in POOL[:3] if 0 in cluster.entries.get(b, {})} == set(POOL[:3])


def test_nothing_beyond_lac_length_comes_from_the_lac_entry_itself() -> None:
    """Recovery step 4/5: when nothing is found beyond the LAC, the LAC entry is read to
    learn the ledger's exact length."""
    md = ledger(e=3, w=2, a=2)
    cluster = Cluster(md)
    cluster.write([(i, i - 1, ws(md, i)) for i in range(3)])
    cluster.lacs = {b: 2 for b in POOL[:3]}
    (done,) = cluster.run(LedgerRecovery(md, 0))
    assert (done.metadata.last_entry_id, done.metadata.length) == (2, 6)
    assert not [x for x in cluster.log if isinstance(x, SendAdds)]  # nothing to write back


def test_lac_below_the_last_fragment_reads_the_earlier_fragment() -> None:
    """An entry below the last fragment's first id lives in an earlier fragment: every
    entry before the last fragment was acknowledged, and its length is read from its own
    fragment's write quorum."""
    md = ledger(e=3, w=2, a=2)
    cluster = Cluster(md)
    cluster.write([(i, -1, ws(md, i)) for i in range(3)])  # bookies know no LAC
    md2 = md.with_ensemble(3, ("b4:3181", "b2:3181", "b3:3181"))
    cluster.metadata = md2
    cluster.entries.pop("b1:3181")  # the replaced bookie is gone for good
    r = LedgerRecovery(md2, 0)
    (done,) = cluster.run(r)
    assert r.floor == 2
    assert (done.metadata.last_entry_id, done.metadata.length) == (2, 6)


def test_reads_go_only_to_fenced_bookies() -> None:
    """Recovery step 4: a 'missing' answer counts only from a fenced bookie (it will never
    take the old writer's add later), so reads go to fenced bookies of the write quorum."""
    md = ledger(e=3, w=2, a=2)
    cluster = Cluster(md, hanging={"b3:3181"})
    cluster.run(LedgerRecovery(md, 0))
    reads = [x for x in cluster.log if isinstance(x, ReadEntries)]
    assert reads and all(x.bookie in cluster.fenced for x in reads)


def test_a_replica_with_a_bad_digest_is_never_used_nor_evidence_of_absence() -> None:
    """docs/protocol.md Ledgers: readers verify the digest; a mismatch is never returned (nor
    written back). In recovery it is not counted towards absence either: the bookie does
    hold a copy, so a corrupt answer is a read error, retried; a good copy wins."""
    md = ledger(e=3, w=2, a=2)  # threshold 1: one 'missing' answer would end the ledger
    good = record(0, -1, 2)
    corrupt = good._replace(payload=b"XX")
    r = LedgerRecovery(md.in_recovery(), 1)
    for effect in r.start(0):
        r.handle(FenceDone(effect.bookie, -1))
    first = ws(md, 0)[0]
    retry = r.handle(EntryRead(first, 0, ReadOutcome.FOUND, corrupt))
    assert retry == [ReadEntries(1, first, (0,))]
    assert r.last_entry_id is None  # not absent
    effects = r.handle(EntryRead(first, 0, ReadOutcome.FOUND, good))
    written = {rec for x in of(effects, SendAdds) for rec in x.records}
    assert written == {good._replace(recovery=True)}


def test_replicas_corrupt_everywhere_fail_the_recovery_instead_of_dropping_the_entry() -> None:
    """Persistence first: when every fenced replica of an entry is corrupt the recovery
    fails (retriable) rather than closing the ledger before that entry."""
    md = ledger(e=3, w=2, a=2)
    cluster = Cluster(md)
    corrupt = record(0, -1, 2)._replace(payload=b"XX")
    for bookie in ws(md, 0):
        cluster.put(bookie, corrupt)
    (failed,) = cluster.run(LedgerRecovery(md, 0))
    assert isinstance(failed, RecoveryFailed) and failed.error is NotEnoughBookies
    assert cluster.metadata.state is LedgerState.IN_RECOVERY


def test_read_errors_are_retried_a_bounded_number_of_times_then_the_recovery_fails() -> None:
    """Recovery step 4: an entry neither found nor provably absent -> retry the read a
    bounded number of times, then fail (retriable; the ledger stays IN_RECOVERY)."""
    md = ledger(e=3, w=3, a=2)  # threshold 2: needs two 'missing' answers
    cluster = Cluster(md, broken=set())
    r = LedgerRecovery(md, 0, limits=RecoveryLimits(recovery_read_attempts_max=2))
    effects = r.start(0)
    effects = r.handle(MetadataWritten(effects[0].metadata, 1))
    for bookie in POOL[:2]:  # b3 hangs: coverage needs 2 of the one write quorum
        effects = r.handle(FenceDone(bookie, -1))
    assert r.phase is RecoveryPhase.READING
    assert r.handle(EntryRead("b1:3181", 0, ReadOutcome.MISSING)) == []
    assert r.handle(EntryRead("b2:3181", 0, ReadOutcome.ERROR)) == [ReadEntries(1, "b2:3181", (0,))]
    # Out of attempts, but b3 may still answer its fence and then be asked: wait for it.
    assert r.handle(EntryRead("b2:3181", 0, ReadOutcome.ERROR)) == []
    (failed,) = r.handle(FenceFailed("b3:3181"))
    assert isinstance(failed, RecoveryFailed) and failed.error is NotEnoughBookies
    assert r.phase is RecoveryPhase.FAILED
    assert cluster.metadata.state is LedgerState.OPEN  # this test never ran the CAS


def test_write_back_without_ack_quorum_and_no_replacement_fails_the_recovery() -> None:
    """Recovery step 4: an entry found counts once Qa bookies acked the write-back; a
    bookie failing it is retried recovery_write_attempts_max times, then replaced; when
    no writable bookie can replace it, the recovery fails (retriable)."""
    md = ledger(e=3, w=3, a=3)
    cluster = Cluster(md)
    cluster.write([(0, -1, ("b1:3181",))])
    r = LedgerRecovery(md, 0)
    effects = r.start(0)
    effects = r.handle(MetadataWritten(effects[0].metadata, 1))
    r.handle(FenceDone("b1:3181", -1))  # threshold 1: coverage from one bookie
    assert r.phase is RecoveryPhase.READING
    effects = r.handle(EntryRead("b1:3181", 0, ReadOutcome.FOUND, record(0, -1, 2)))
    assert {x.bookie for x in of(effects, SendAdds)} == set(POOL[:3])
    r.handle(BookieAddsDone("b1:3181", (0,)))
    failure = BookieAddsDone("b2:3181", (), (0,), RejectReason.UNAVAILABLE)
    (retry,) = r.handle(failure)  # a failed write-back is retried (bounded) ...
    assert isinstance(retry, SendAdds) and retry.bookie == "b2:3181"
    (retry,) = r.handle(failure)
    assert r.handle(failure) == [ReadWritableBookies()]  # ... then the bookie is replaced
    (failed,) = r.handle(WritableBookies(tuple(POOL[:3])))
    assert isinstance(failed, RecoveryFailed) and failed.error is NotEnoughBookies


def test_a_bookie_failing_write_backs_is_replaced_in_a_fragment_written_with_the_close() -> None:
    """Recovery step 4 with a dead bookie in the last ensemble: it is replaced (a bookie
    not in the ensemble, a new fragment from the first entry not yet written back) and
    the entries are written to the new bookie; the new fragment reaches the metadata only
    in the CAS that closes the ledger (never an intermediate ensemble change)."""
    md = ledger(e=3, w=2, a=2)
    cluster = Cluster(md, broken={"b2:3181"}, pool=POOL[:4])
    cluster.write([(i, i - 1, ws(md, i)) for i in range(3)])  # 0..2 acknowledged
    cluster.lacs = {b: 2 for b in POOL[:3]}
    cluster.put("b1:3181", record(3, 2, 99))  # entry 3 -> (b1, b2), only on b1
    (done,) = cluster.run(LedgerRecovery(md, 0))
    assert isinstance(done, RecoveryDone) and done.closed_here
    closed = done.metadata
    assert (closed.state, closed.last_entry_id, closed.length) == (LedgerState.CLOSED, 3, 99)
    assert closed.fragments[0] == md.fragments[0]
    assert closed.fragments[1].first_entry_id == 3
    assert closed.fragments[1].bookies == ("b1:3181", "b4:3181", "b3:3181")
    assert 3 in cluster.entries["b4:3181"]  # the replacement holds the entry
    writes = [x for x in cluster.log if isinstance(x, WriteMetadata)]
    assert [w.metadata.state for w in writes] == [LedgerState.IN_RECOVERY, LedgerState.CLOSED]


def test_close_keeps_a_replicator_change_of_an_earlier_fragment() -> None:
    """Recovery step 5 on conflict with the ledger still IN_RECOVERY: CAS again on the
    fresh metadata, keeping its earlier fragments (a replicator may have swapped a
    bookie there) and the recovery's own fragments after the fenced one."""
    md = ledger(e=3, w=2, a=2).with_ensemble(5, ("b4:3181", "b2:3181", "b3:3181")).in_recovery()
    r = LedgerRecovery(md, 1)
    for effect in r.start(0):
        r.handle(FenceDone(effect.bookie, 4))
    # floor = 4 (LAC 4, last fragment at 5): the probe reads entry 4 for the length; entry
    # 5 (write set b3, b4) is missing from a fenced bookie, so 4 is the last entry.
    effects = r.handle(EntryRead("b2:3181", 4, ReadOutcome.FOUND, record(4, 3, 20)))
    effects += r.handle(EntryRead("b4:3181", 5, ReadOutcome.MISSING))
    (close,) = of(effects, WriteMetadata)
    assert close.metadata.fragments == md.fragments
    assert (close.metadata.last_entry_id, close.metadata.length) == (4, 20)
    swapped = (Fragment(0, ("b5:3181", "b2:3181", "b3:3181")), md.fragments[1])
    (again,) = r.handle(MetadataConflicted(replace(md, fragments=swapped), 2))
    assert again.expected_version == 2 and again.metadata.fragments == swapped
    moved = (md.fragments[0], Fragment(5, ("b4:3181", "b6:3181", "b3:3181")))
    r2 = LedgerRecovery(md, 1)
    for effect in r2.start(0):
        r2.handle(FenceDone(effect.bookie, 4))
    r2.handle(EntryRead("b2:3181", 4, ReadOutcome.FOUND, record(4, 3, 20)))
    r2.handle(EntryRead("b4:3181", 5, ReadOutcome.MISSING))
    (failed,) = r2.handle(MetadataConflicted(replace(md, fragments=moved), 2))
    assert isinstance(failed, RecoveryFailed)  # the fenced fragment changed: start again


def test_step5_close_conflicts_converge_on_the_winner() -> None:
    """docs/protocol.md recovery step 5: several concurrent recoveries converge on the same last
    entry: the loser of the CAS re-reads, sees CLOSED and adopts that metadata."""
    md = ledger(e=3, w=2, a=2)
    cluster = Cluster(md)
    cluster.write([(i, i - 1, ws(md, i)) for i in range(3)])
    first = LedgerRecovery(md, 0)
    second = LedgerRecovery(md, 0)
    (done1,) = cluster.run(first)
    (done2,) = cluster.run(second)
    assert done1.closed_here and not done2.closed_here
    assert done2.metadata == done1.metadata and done2.metadata.last_entry_id == 2


def test_step5_in_recovery_conflict_retries_the_close_cas() -> None:
    """Recovery step 5: on conflict with the ledger still IN_RECOVERY, CAS again on the
    fresh version."""
    md = ledger().in_recovery()
    r = LedgerRecovery(md, 4)
    for effect in r.start(0):
        r.handle(FenceDone(effect.bookie, -1))
    effects = r.handle(EntryRead("b1:3181", 0, ReadOutcome.MISSING))
    effects += r.handle(EntryRead("b2:3181", 0, ReadOutcome.MISSING))
    (close,) = of(effects, WriteMetadata)
    assert close.expected_version == 4
    fresh = replace(md, custom={"x": 1})
    (again,) = r.handle(MetadataConflicted(fresh, 6))
    assert again.expected_version == 6 and again.metadata.custom == {"x": 1}
    assert again.metadata.last_entry_id == -1


def test_marking_conflicts() -> None:
    """Recovery step 1 on conflict: IN_RECOVERY already -> continue; CLOSED -> done;
    OPEN (the writer changed the ensemble) -> CAS again on the fresh metadata."""
    md = ledger()
    r = LedgerRecovery(md, 0)
    r.start(0)
    moved = md.with_ensemble(2, ("b4:3181", "b2:3181", "b3:3181"))
    (again,) = r.handle(MetadataConflicted(moved, 1))
    assert again.expected_version == 1 and again.metadata.ensemble[0] == "b4:3181"
    fences = r.handle(MetadataConflicted(moved.in_recovery(), 2))
    assert [x.bookie for x in fences] == list(moved.ensemble)
    r2 = LedgerRecovery(md, 0)
    r2.start(0)
    closed = md.closed(3, 9)
    assert r2.handle(MetadataConflicted(closed, 1)) == [RecoveryDone(closed, 1, False)]


def test_metadata_store_failures_are_resolved_by_reading_and_bounded() -> None:
    """A CAS with an unknown outcome is resolved by re-reading after the back-off (a
    deadline the runner reaches with Tick); failures in a row are bounded."""
    md = ledger()
    limits = RecoveryLimits(metadata_attempts_max=2, metadata_retry_ms=50)
    r = LedgerRecovery(md, 0, limits=limits)
    (write,) = r.start(0)
    assert r.handle(MetadataFailed("metadata_unavailable", now=10)) == []
    assert r.next_deadline() == 60
    assert r.handle(Tick(59)) == []
    assert r.handle(Tick(60)) == [ReadMetadata(1)]
    fences = r.handle(MetadataRead(write.metadata, 1))  # our write had landed
    assert of(fences, SendFence)
    r2 = LedgerRecovery(md, 0, limits=limits)
    r2.start(0)
    for now in (10, 100):
        assert r2.handle(MetadataFailed("metadata_unavailable", now=now)) == []
        assert r2.handle(Tick(now + 50)) == [ReadMetadata(1)]
    (failed,) = r2.handle(MetadataFailed("metadata_unavailable", now=200))
    assert failed.error is MetadataUnavailable
    r3 = LedgerRecovery(md, 0)
    r3.start(0)
    assert r3.handle(MetadataFailed("ledger_not_found"))[0].error is LedgerNotFound


def test_the_recovery_times_out_on_tick_at_recovery_timeout_ms() -> None:
    """The whole recovery is bounded by recovery_timeout_ms from start(now), reached by a
    Tick (no runner timer of its own): a hanging fence fails it as quorum_timeout."""
    md = ledger()
    r = LedgerRecovery(md.in_recovery(), 1, limits=RecoveryLimits(recovery_timeout_ms=5_000))
    fences = r.start(1_000)
    assert of(fences, SendFence)  # and nobody answers
    assert r.next_deadline() == 6_000
    assert r.handle(Tick(5_999)) == []
    (failed,) = r.handle(Tick(6_000))
    assert failed.error is QuorumTimeout and failed.error.retriable
    assert r.finished and r.next_deadline() is None


@pytest.mark.parametrize(("e", "w", "a"), [(1, 1, 1), (2, 2, 1), (3, 3, 2), (5, 3, 2), (4, 2, 1)])
def test_recovery_keeps_every_acknowledged_entry(e: int, w: int, a: int) -> None:
    """docs/protocol.md Persistence: every entry with Qa copies (an acknowledged one) is <= the
    last entry after recovery, with the exact length."""
    md = ledger(e, w, a)
    cluster = Cluster(md)
    acked = [(i, i - 1, ws(md, i)[:a]) for i in range(7)]
    cluster.write(acked)
    cluster.lacs = {}
    (done,) = cluster.run(LedgerRecovery(md, 0))
    assert done.metadata.last_entry_id == 6
    assert done.metadata.length == sum(len(b"e%d" % i) for i in range(7))
