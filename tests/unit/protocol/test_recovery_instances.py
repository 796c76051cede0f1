"""Recovery across runs (issue 7 item 1, docs/protocol.md invariants): the last fragment
records which instance of each bookie it was written to, and a bookie whose fence answer
names another instance (reformatted BEFORE this recovery's fence, or between two recovery
attempts) is a replaced instance: fenced, but its "missing" never counts toward absence.
The scenario of the issue, E=Qw=3, Qa=2: entry 7 acknowledged on A and B; A is
reformatted and restarts; the recovery fences A and C while B is slow."""

from __future__ import annotations

import random

from services.errors import NotEnoughBookies
from services.protocol.ensemble import plan_ensemble_change
from services.protocol.messages import (
    Effect,
    FenceFailed,
    ReadEntries,
    RecoveryDone,
    RecoveryFailed,
    WritableBookies,
    WriteMetadata,
)
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.recovery import LedgerRecovery, RecoveryPhase
from services.protocol.writeback import WriteBacks
from tests.unit.protocol.test_recovery_forward import (
    A,
    B,
    Bookie,
    C,
    Driver,
    length_at,
    record,
)

FIRST = {A: "a-1", B: "b-1", C: "c-1"}  # the instances the ledger was written to


def ledger(instances: dict[str, str] | None = FIRST) -> LedgerMetadata:
    return LedgerMetadata.new(1, [A, B, C], 3, 2, instances=instances)


def reformatted_before_the_fence(
    md: LedgerMetadata, *, b_held: bool = True
) -> tuple[Driver, list[Effect]]:
    """Entries 0..6 on every bookie, entry 7 acknowledged on A and B (LAC 6); A was then
    reformatted and restarted empty as instance a-2, before the recovery starts. B's
    requests are held (slow) when ``b_held``. Returns the driver and the first effects."""
    bookies = {b: Bookie(instance=FIRST[b], lac=6) for b in (A, B, C)}
    for entry_id in range(8):
        for b in (A, B) if entry_id == 7 else (A, B, C):
            bookies[b].entries[entry_id] = record(entry_id, length_at(entry_id))
    bookies[A] = Bookie(instance="a-2")  # quire bookie format + restart
    bookies[B].held = b_held
    driver = Driver(LedgerRecovery(md, 1), bookies)
    return driver, driver.recovery.start(0)


def closes(driver: Driver) -> list[WriteMetadata]:
    return [
        x
        for x in driver.log
        if isinstance(x, WriteMetadata) and x.metadata.state is LedgerState.CLOSED
    ]


def test_a_bookie_reformatted_before_the_fence_does_not_close_the_ledger_short() -> None:
    """Issue 7 item 1 across runs: A answers the fence as a-2 but the fragment recorded
    a-1, so its "missing" for entry 7 is no evidence; C's alone does not prove entry 7
    absent, and the recovery waits for B instead of closing at 6 (before the fix: closed
    at 6 while B holds the acknowledged entry 7). Once B answers, entry 7 is found there
    and the ledger closes at 7 with its exact length."""
    driver, fences = reformatted_before_the_fence(ledger().in_recovery())
    driver.run(fences)
    recovery = driver.recovery
    assert recovery.phase is RecoveryPhase.READING and recovery.floor == 6
    forward = recovery._forward
    assert forward is not None and forward.replaced == {A}
    assert any(7 in x.entry_ids for x in driver.log if isinstance(x, ReadEntries))
    assert driver.results == [] and closes(driver) == []
    driver.release(B)
    (done,) = driver.results
    assert isinstance(done, RecoveryDone) and done.metadata.state is LedgerState.CLOSED
    assert (done.metadata.last_entry_id, done.metadata.length) == (7, length_at(7))


def test_from_open_too_the_replaced_instance_is_fenced_but_knows_nothing() -> None:
    """Same scenario starting from OPEN (the recovery's own IN_RECOVERY CAS first): A (a-2)
    is fenced and counts for stopping the old writer, C answers; entry 7 stays undecided
    until B answers, then the ledger closes at 7."""
    driver, effects = reformatted_before_the_fence(ledger())
    assert [type(x) for x in effects] == [WriteMetadata]  # the IN_RECOVERY CAS goes first
    driver.run(effects)
    assert driver.recovery.fence_complete and driver.results == []
    assert driver.recovery.fenced_at_completion == {A, C}
    driver.release(B)
    (done,) = driver.results
    assert isinstance(done, RecoveryDone) and done.metadata.last_entry_id == 7


def test_a_replaced_instance_and_a_failed_fence_fail_the_recovery_retriably() -> None:
    """Issue 7 item 1: when B's fence fails, entry 7 is neither found nor provably absent
    (A is a new instance, C alone is not Qw - Qa + 1): the recovery fails retriably and
    never writes CLOSED; liveness is lost, the acknowledged entry is not."""
    driver, fences = reformatted_before_the_fence(ledger().in_recovery())
    driver.run([x for x in fences if x.bookie != B])
    assert driver.results == []
    driver.run(driver.recovery.handle(FenceFailed(B)))
    (failed,) = driver.results
    assert isinstance(failed, RecoveryFailed) and failed.error is NotEnoughBookies
    assert failed.error.retriable and "a new instance" in failed.message
    assert closes(driver) == []


def test_a_replaced_instance_answering_its_fence_late_still_counts_for_nothing() -> None:
    """The late-fence path: B and C are fenced first (coverage), B's reads hang; entry 7
    is missing on C. A answers its fence only then, as a-2: it joins as a replaced
    instance, so its "missing" does not complete the absence proof with C's; the
    recovery waits for B's reads, which find entry 7."""
    driver, fences = reformatted_before_the_fence(ledger().in_recovery(), b_held=False)
    bookies = driver.bookies
    bookies[B].hang_reads = True
    driver.run([x for x in fences if x.bookie != A])
    assert driver.recovery.phase is RecoveryPhase.READING
    driver.run([x for x in fences if x.bookie == A], until_ms=10_000)
    forward = driver.recovery._forward
    assert forward is not None and A in forward.replaced and A in forward.fenced_bookies
    assert driver.results == [] and closes(driver) == []
    bookies[B].hang_reads = False
    driver.release(B)
    (done,) = driver.results
    assert isinstance(done, RecoveryDone) and done.metadata.last_entry_id == 7


def test_a_replaced_instance_still_gives_what_it_holds() -> None:
    """A record whose digest verifies is the entry, whoever holds it: A (a-2) holds
    entry 7 (written back to it by an earlier recovery attempt after its reformat) and
    B's fence failed; entry 7 is found on A, entry 8 is then undecidable (A's and C's
    "missing" do not make two knowing bookies) and the recovery fails retriably after
    having found 7 (it closes at 7 on a later run once B is back)."""
    driver, fences = reformatted_before_the_fence(ledger().in_recovery())
    driver.bookies[A].entries[7] = record(7, length_at(7))
    driver.run([x for x in fences if x.bookie != B])
    driver.run(driver.recovery.handle(FenceFailed(B)))
    (failed,) = driver.results
    assert isinstance(failed, RecoveryFailed) and "entry 8" in failed.message
    assert closes(driver) == []


def test_unknown_recorded_instances_behave_as_before() -> None:
    """Metadata written before instances were recorded: the fence answers are not
    compared with anything (no replaced bookie), and a recovery with every bookie
    answering closes at the last entry on Qa bookies."""
    md = ledger(instances=None).in_recovery()
    bookies = {b: Bookie(instance=f"{b}-9", lac=6) for b in (A, B, C)}
    for entry_id in range(8):
        for b in (A, B):
            bookies[b].entries[entry_id] = record(entry_id, length_at(entry_id))
    driver = Driver(LedgerRecovery(md, 1), bookies)
    driver.run(driver.recovery.start(0))
    (done,) = driver.results
    assert isinstance(done, RecoveryDone) and done.metadata.last_entry_id == 7
    forward = driver.recovery._forward
    assert forward is not None and forward.replaced == set()


def test_the_same_recorded_instance_counts_as_before() -> None:
    """No reformat: every bookie answers as the instance the fragment recorded, and
    "missing" from A and C proves entry 8 absent (the check weakens nothing)."""
    md = ledger().in_recovery()
    bookies = {b: Bookie(instance=FIRST[b], lac=6) for b in (A, B, C)}
    for entry_id in range(8):
        for b in (A, C):
            bookies[b].entries[entry_id] = record(entry_id, length_at(entry_id))
    bookies[B].held = True
    driver = Driver(LedgerRecovery(md, 1), bookies)
    driver.run(driver.recovery.start(0))
    (done,) = driver.results
    assert isinstance(done, RecoveryDone) and done.metadata.last_entry_id == 7


# ---------------------------------------------------------------------- recording


def test_an_ensemble_change_records_new_bookies_and_keeps_the_kept_ones() -> None:
    """A new fragment records each replacement's registered instance (from the
    WritableBookies event) and carries the recorded instance of every kept bookie (the
    instance that may have acknowledged entries carried into the new fragment), never
    the registry's newer one."""
    md = ledger()
    event = WritableBookies(("d:1", B, C), ("d-1", "b-2", "c-1"))
    changed, _spread = plan_ensemble_change(
        md, {A}, event.bookies, 4, random.Random(1), event.instance_map()
    )
    last = changed.last_fragment
    assert (last.first_entry_id, last.bookies) == (5, ("d:1", B, C))
    assert last.instances == ("d-1", "b-1", "c-1")
    assert changed.fragments[0].instances == ("a-1", "b-1", "c-1")
    unknown, _spread = plan_ensemble_change(md, {A}, ("d:1",), 4, random.Random(1))
    assert unknown.last_fragment.instances == (None, "b-1", "c-1")


def test_a_recovery_replacing_a_write_back_bookie_records_its_instance() -> None:
    """Recovery's own ensemble change (write-backs failing on a bookie) takes the
    instances from its WritableBookies event too."""
    writebacks = WriteBacks(ledger().in_recovery(), 1, 8)
    writebacks.add(record(7, length_at(7)))
    writebacks.send()
    writebacks.failed_on(A)
    event = WritableBookies(("d:1",), ("d-7",))
    writebacks.change_ensemble(event.bookies, random.Random(1), event.instance_map())
    assert writebacks.metadata.last_fragment.instances == ("d-7", "b-1", "c-1")
