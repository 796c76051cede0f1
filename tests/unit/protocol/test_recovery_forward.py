"""Recovery's read-forward (services/protocol/readforward.py via recovery.py) against
issue 7 items 1, 6 and 7: a bookie that lost its state never counts as "missing"
(docs/protocol.md invariants), the ledger's length comes from the fence answers when the
floor entry cannot be read, and a hanging fenced bookie costs one speculative delay,
with reads batched per bookie."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.errors import NotEnoughBookies
from services.protocol.limits import RecoveryLimits
from services.protocol.messages import (
    BookieAddsDone,
    Effect,
    EntryRead,
    FenceDone,
    FenceFailed,
    MetadataWritten,
    ReadEntries,
    ReadOutcome,
    RecoveryDone,
    RecoveryFailed,
    SendAdds,
    SendFence,
    Tick,
    WriteMetadata,
)
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.recovery import LedgerRecovery, RecoveryPhase
from services.wire.digest import seal
from services.wire.framing import FramedRecord

A, B, C = "a:1", "b:1", "c:1"


def record(entry_id: int, length: int) -> FramedRecord:
    payload = b"e%d" % entry_id
    return seal(
        FramedRecord(1, entry_id, entry_id - 1, payload, digest_type="crc32c", length=length)
    )


def length_at(entry_id: int) -> int:
    return sum(len(b"e%d" % i) for i in range(entry_id + 1))


@dataclass
class Bookie:
    instance: str
    entries: dict[int, FramedRecord] = field(default_factory=dict)
    lac: int = -1
    held: bool = False  # requests are kept unanswered in ``waiting``
    hang_reads: bool = False  # reads are kept unanswered (fences are answered)
    broken: bool = False  # every read fails
    waiting: list[Effect] = field(default_factory=list)

    def fence_answer(self, bookie: str) -> FenceDone:
        last = max(self.entries, default=-1)
        lac_length = self.entries[self.lac].length if self.lac in self.entries else -1
        length = self.entries[last].length if last >= 0 else 0
        return FenceDone(bookie, self.lac, last, self.instance, length, lac_length)


@dataclass
class Driver:
    """Carries out a recovery's effects against in-memory bookies, with a clock that
    moves only when nothing else can happen (then to the machine's next deadline)."""

    recovery: LedgerRecovery
    bookies: dict[str, Bookie]
    now: int = 0
    log: list[Effect] = field(default_factory=list)
    results: list[Effect] = field(default_factory=list)

    def answer(self, effect: Effect) -> list:
        if isinstance(effect, WriteMetadata):
            return [MetadataWritten(effect.metadata, 2)]
        bookie_id = getattr(effect, "bookie", None)
        bookie = self.bookies.get(bookie_id) if bookie_id else None
        if bookie is None:
            return []
        if bookie.held:
            bookie.waiting.append(effect)
            return []
        if isinstance(effect, SendFence):
            return [bookie.fence_answer(effect.bookie)]
        if isinstance(effect, ReadEntries):
            if bookie.hang_reads:
                bookie.waiting.append(effect)
                return []
            out = []
            for entry_id in effect.entry_ids:
                rec = bookie.entries.get(entry_id)
                if bookie.broken:
                    outcome = ReadOutcome.ERROR
                else:
                    outcome = ReadOutcome.FOUND if rec else ReadOutcome.MISSING
                out.append(
                    EntryRead(effect.bookie, entry_id, outcome, rec, bookie.instance, self.now)
                )
            return out
        if isinstance(effect, SendAdds):
            for r in effect.records:
                bookie.entries[r.entry_id] = r
            return [BookieAddsDone(effect.bookie, tuple(r.entry_id for r in effect.records))]
        return []

    def run(self, effects: list[Effect], *, until_ms: int = 0) -> None:
        """Carry out ``effects`` and what follows; feed Tick at each deadline up to
        ``until_ms`` while nothing else happens."""
        queue = list(effects)
        while True:
            while queue:
                effect = queue.pop(0)
                self.log.append(effect)
                if isinstance(effect, RecoveryDone | RecoveryFailed):
                    self.results.append(effect)
                    continue
                for event in self.answer(effect):
                    queue.extend(self.recovery.handle(event))
            deadline = self.recovery.next_deadline()
            if deadline is None or deadline > until_ms:
                return
            self.now = max(self.now, deadline)
            queue.extend(self.recovery.handle(Tick(self.now)))

    def release(self, bookie_id: str) -> None:
        """The held bookie answers what it was asked, and from now on."""
        bookie = self.bookies[bookie_id]
        bookie.held = False
        waiting, bookie.waiting = bookie.waiting, []
        events = [e for effect in waiting for e in self.answer(effect)]
        for event in events:
            self.run(self.recovery.handle(event))


def reads_of(log: list[Effect], bookie: str) -> list[ReadEntries]:
    return [x for x in log if isinstance(x, ReadEntries) and x.bookie == bookie]


def the_issue_scenario() -> tuple[Driver, list[Effect]]:
    """Issue 7 item 1: E=Qw=3, Qa=2; entries 0..6 on every bookie, entry 7 acknowledged
    on A and B (LAC 6). The recovery fences A and C while B is slow; A is then
    reformatted and restarts empty under a new instance."""
    md = LedgerMetadata.new(1, [A, B, C], 3, 2).in_recovery()
    bookies = {b: Bookie(instance=f"{b}-1", lac=6) for b in (A, B, C)}
    for entry_id in range(8):
        for b in (A, B) if entry_id == 7 else (A, B, C):
            bookies[b].entries[entry_id] = record(entry_id, length_at(entry_id))
    bookies[B].held = True
    driver = Driver(LedgerRecovery(md, 1), bookies)
    effects = driver.recovery.start(0)
    assert {x.bookie for x in effects if isinstance(x, SendFence)} == {A, B, C}
    fence_effects = [x for x in effects if x.bookie != A]
    driver.run([x for x in effects if x.bookie == A])  # A answers its fence first
    bookies[A] = Bookie(instance=f"{A}-2")  # reformatted: a new, empty instance
    return driver, fence_effects


def test_a_bookie_reformatted_after_the_fence_never_counts_as_missing() -> None:
    """docs/protocol.md invariant (issue 7 item 1): after A lost its state, A's "no such
    entry" is unknown, not missing; with C alone missing entry 7 is not provably absent,
    so the recovery does not close at 6 (it waits for B's fence); once B answers, entry
    7 is found on B and the ledger closes at 7 with its exact length."""
    driver, fences = the_issue_scenario()
    driver.run(fences)
    recovery = driver.recovery
    assert recovery.phase is RecoveryPhase.READING and recovery.floor == 6
    assert driver.results == []  # before the fix: closed at 6, entry 7 lost
    assert A in recovery._forward.lost  # type: ignore[union-attr]
    driver.release(B)
    (done,) = driver.results
    assert isinstance(done, RecoveryDone) and done.metadata.state is LedgerState.CLOSED
    assert (done.metadata.last_entry_id, done.metadata.length) == (7, length_at(7))


def test_a_reformatted_bookie_and_no_other_evidence_fail_the_recovery_retriably() -> None:
    """Issue 7 item 1: when B's fence fails too, entry 7 is neither found nor provably
    absent: the recovery fails (retriable) and the ledger stays IN_RECOVERY rather than
    closing below an acknowledged entry."""
    driver, fences = the_issue_scenario()
    driver.run([x for x in fences if x.bookie == C])
    assert driver.results == []
    driver.run(driver.recovery.handle(FenceFailed(B)))
    (failed,) = driver.results
    assert isinstance(failed, RecoveryFailed) and failed.error is NotEnoughBookies
    assert failed.error.retriable
    assert not any(isinstance(x, WriteMetadata) and x.metadata.state is LedgerState.CLOSED
                   for x in driver.log)  # fmt: skip


def test_an_answer_of_the_fenced_instance_still_counts_as_missing() -> None:
    """The instance check does not weaken absence: the same instance that answered the
    fence saying "missing" is evidence, so without a reformat the ledger closes at the
    last entry on Qa bookies (7), entry 8 being absent from A and C."""
    md = LedgerMetadata.new(1, [A, B, C], 3, 2).in_recovery()
    bookies = {b: Bookie(instance=f"{b}-1", lac=6) for b in (A, B, C)}
    for entry_id in range(8):
        for b in (A, C):
            bookies[b].entries[entry_id] = record(entry_id, length_at(entry_id))
    bookies[B].held = True
    driver = Driver(LedgerRecovery(md, 1), bookies)
    driver.run(driver.recovery.start(0))
    (done,) = driver.results
    assert isinstance(done, RecoveryDone) and done.metadata.last_entry_id == 7


def test_the_length_comes_from_the_fence_answers_when_the_floor_entry_is_unreadable() -> None:
    """Issue 7 item 6: nothing past the floor (LAC 3) and every bookie of entry 3's write
    set fails its reads after the fence; absence of entry 4 is proven on the last
    fragment (threshold 1), and the length is the one the fence answers gave at the LAC:
    the floor entry is not read at all."""
    md = LedgerMetadata.new(1, [A, B, C], 2, 2).in_recovery()
    bookies = {b: Bookie(instance=f"{b}-1", lac=3) for b in (A, B, C)}
    for entry_id in range(4):
        for b in md.write_set_bookies(entry_id):
            bookies[b].entries[entry_id] = record(entry_id, length_at(entry_id))
    floor_set = md.write_set_bookies(3)
    recovery = LedgerRecovery(md, 1)
    driver = Driver(recovery, bookies)
    effects = recovery.start(0)
    fences = [driver.answer(x)[0] for x in effects]
    for b in floor_set:
        bookies[b].broken = True  # gone after answering the fence
    for fence in fences:
        driver.run(recovery.handle(fence))
    (done,) = driver.results
    assert isinstance(done, RecoveryDone)
    assert (done.metadata.last_entry_id, done.metadata.length) == (3, length_at(3))
    assert not [x for x in driver.log if isinstance(x, ReadEntries) and 3 in x.entry_ids]


def test_without_a_length_from_the_fence_the_floor_entry_is_still_read() -> None:
    """Issue 7 item 6, the fallback: a fence answer without lengths (an older bookie)
    leaves the floor entry's read as the way to learn the length."""
    md = LedgerMetadata.new(1, [A, B, C], 2, 2).in_recovery()
    recovery = LedgerRecovery(md, 1)
    effects = recovery.start(0)
    out: list[Effect] = []
    for x in effects:
        out += recovery.handle(FenceDone(x.bookie, 3, 3))
    probes = [x for x in out if isinstance(x, ReadEntries) and x.entry_ids == (3,)]
    assert {x.bookie for x in probes} == set(md.write_set_bookies(3))


def test_a_hanging_fenced_bookie_costs_one_speculative_delay_and_reads_are_batched() -> None:
    """Issue 7 item 7: C answers its fence and then hangs. 50 entries past the floor
    are read in windows, each one ReadEntries per bookie; an entry waiting on C is asked
    of the next bookie after speculative_read_ms, and C, silent that long, is asked last
    from then on: the whole recovery takes one speculative delay, not a time-out per
    entry."""
    spec_ms = 500
    md = LedgerMetadata.new(1, [A, B, C], 3, 2).in_recovery()
    bookies = {b: Bookie(instance=f"{b}-1") for b in (A, B, C)}
    for entry_id in range(50):
        for b in (A, B, C):
            bookies[b].entries[entry_id] = record(entry_id, length_at(entry_id))
    limits = RecoveryLimits(speculative_read_ms=spec_ms, recovery_read_batch_max=16)
    bookies[C].hang_reads = True  # answers its fence, then hangs
    recovery = LedgerRecovery(md, 1, limits=limits)
    driver = Driver(recovery, bookies)
    driver.run(recovery.start(0), until_ms=60_000)
    assert C in recovery._forward.fenced_bookies  # type: ignore[union-attr]
    (done,) = driver.results
    assert isinstance(done, RecoveryDone)
    assert (done.metadata.last_entry_id, done.metadata.length) == (49, length_at(49))
    assert driver.now <= spec_ms  # one speculative delay in all
    # Batched: a request per bookie per half window (several ids), never one per entry.
    for bookie in (A, B, C):
        requests = reads_of(driver.log, bookie)
        ids = sum(len(x.entry_ids) for x in requests)
        assert len(requests) * 3 <= ids, (bookie, len(requests), ids)
    assert C in recovery._forward.slow  # type: ignore[union-attr]  # asked last from now on


def test_write_backs_a_hanging_bookie_never_answers_do_not_hold_the_others() -> None:
    """Issue 7 item 7, the write side of read-forward: C is fenced and then hangs (reads
    and adds). 100 entries past the floor are written back; an entry on Qa bookies no
    longer takes room among the write-backs in flight, so the recovery closes without
    C ever answering (before: stuck once 64 write-backs waited for C)."""
    md = LedgerMetadata.new(1, [A, B, C], 3, 2).in_recovery()
    bookies = {b: Bookie(instance=f"{b}-1") for b in (A, B, C)}
    for entry_id in range(100):
        for b in (A, B):
            bookies[b].entries[entry_id] = record(entry_id, length_at(entry_id))
    recovery = LedgerRecovery(md, 1, limits=RecoveryLimits(speculative_read_ms=100))
    driver = Driver(recovery, bookies)
    fences = sorted(recovery.start(0), key=lambda x: x.bookie != C)  # C answers first
    for x in fences:
        driver.run(recovery.handle(driver.answer(x)[0]), until_ms=60_000)
        bookies[C].held = True
    assert C in recovery._forward.fenced_bookies  # type: ignore[union-attr]
    (done,) = driver.results
    assert isinstance(done, RecoveryDone) and done.metadata.last_entry_id == 99
