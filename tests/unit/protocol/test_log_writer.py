"""AcquireWriter and RollLog as pure operations (services/protocol/log_writer.py):
every path, driven event by event."""

from __future__ import annotations

from random import Random

import pytest

from services.errors import (
    InvalidArgument,
    InvariantViolation,
    LogNotFound,
    MetadataConflict,
    MetadataUnavailable,
    NotWriter,
)
from services.protocol import log_writer as lw
from services.protocol.limits import (
    LOG_WRITER_ATTEMPTS_MAX,
    LOG_WRITER_BACKOFF_FIRST_MS,
    LOG_WRITER_BACKOFF_MAX_MS,
)
from services.protocol.logs import LOG_LEDGERS_MAX, LogMetadata, WriterRole

ME = "me:1"
CREATE = lw.CreateLedger(3, 2, 2)


def acquire(attempts_max: int = LOG_WRITER_ATTEMPTS_MAX) -> lw.AcquireWriter:
    op = lw.AcquireWriter("log", ME, Random(1), attempts_max)
    assert op.start() == [lw.ReadLog("log")]
    return op


def test_acquire_on_an_empty_log_fences_nothing() -> None:
    """Empty list: no fence; create a ledger; CAS it in with epoch 1; Acquired."""
    op = acquire()
    assert op.handle(lw.LogRead(LogMetadata("log"), 0)) == [CREATE]
    (write,) = op.handle(lw.LedgerCreated(7))
    assert isinstance(write, lw.WriteLog) and write.version == 0
    assert write.log.ledgers == (7,) and write.log.writer == WriterRole(ME, 1)
    (done,) = op.handle(lw.LogWritten(1))
    assert done == lw.Acquired(write.log, 1, 7, 1) and op.done
    with pytest.raises(InvariantViolation):
        op.handle(lw.LogWritten(2))


def test_acquire_fences_the_last_two_ledgers_first() -> None:
    """A list of three: recover the last two, then create, then CAS at the next epoch."""
    op = acquire()
    log = LogMetadata("log", ledgers=(1, 2, 3), writer=WriterRole("old:1", 4), epoch=4)
    effects = op.handle(lw.LogRead(log, 9))
    assert effects == [lw.RecoverLedgers((2, 3))] and lw.fenced_ledgers(effects) == (2, 3)
    assert op.handle(lw.LedgersRecovered()) == [CREATE]
    (write,) = op.handle(lw.LedgerCreated(8))
    assert isinstance(write, lw.WriteLog) and write.version == 9
    assert write.log.ledgers == (1, 2, 3, 8) and write.log.writer == WriterRole(ME, 5)
    (done,) = op.handle(lw.LogWritten(10))
    assert isinstance(done, lw.Acquired) and done.epoch == 5 and done.ledger_id == 8


def test_acquire_conflict_backs_off_reuses_its_ledger_and_is_bounded() -> None:
    """A CAS conflict waits (back-off), re-reads and fences the new last two, reusing the
    ledger it created; after attempts_max conflicts: metadata_conflict, and the
    created ledger is deleted."""
    op = acquire(attempts_max=3)
    op.handle(lw.LogRead(LogMetadata("log", ledgers=(1,)), 0))
    op.handle(lw.LedgersRecovered())
    op.handle(lw.LedgerCreated(5))
    (wait,) = op.handle(lw.LogConflict())
    assert (
        isinstance(wait, lw.Wait)
        and LOG_WRITER_BACKOFF_FIRST_MS // 2 <= wait.ms <= LOG_WRITER_BACKOFF_MAX_MS
    )
    assert op.handle(lw.Waited()) == [lw.ReadLog("log")]
    moved = LogMetadata("log", ledgers=(1, 2), writer=WriterRole("x:1", 1), epoch=1)
    assert op.handle(lw.LogRead(moved, 1)) == [lw.RecoverLedgers((1, 2))]
    (write,) = op.handle(lw.LedgersRecovered())  # no second CreateLedger
    assert isinstance(write, lw.WriteLog) and write.log.ledgers == (1, 2, 5)
    assert write.log.writer == WriterRole(ME, 2)
    assert isinstance(op.handle(lw.LogConflict())[0], lw.Wait)
    effects = op.handle(lw.LogConflict())
    assert effects[0] == lw.DeleteLedger(5)
    assert isinstance(effects[1], lw.Failed) and effects[1].error is MetadataConflict
    assert op.done


def test_acquire_if_vacant_gives_up_to_a_live_writer_without_fencing() -> None:
    """With ``vacant``: a log another live gateway writes fails with not_writer naming it,
    before anything is fenced; a vacant log is taken as usual; when a conflict shows a
    live writer took it meanwhile, the take-over gives up and deletes its ledger."""
    live = {"other:1"}

    def vacant(log: LogMetadata) -> bool:
        return log.writer is None or log.writer.gateway not in live

    taken = LogMetadata("log", ledgers=(1, 2), writer=WriterRole("other:1", 3), epoch=3)
    op = lw.AcquireWriter("log", ME, Random(1), vacant=vacant)
    op.start()
    (failed,) = op.handle(lw.LogRead(taken, 4))
    assert isinstance(failed, lw.Failed) and failed.error is NotWriter
    assert "other:1" in failed.message and op.done

    dead = LogMetadata("log", ledgers=(1, 2), writer=WriterRole("dead:1", 3), epoch=3)
    op = lw.AcquireWriter("log", ME, Random(1), vacant=vacant)
    op.start()
    assert op.handle(lw.LogRead(dead, 4)) == [lw.RecoverLedgers((1, 2))]
    assert op.handle(lw.LedgersRecovered()) == [CREATE]
    op.handle(lw.LedgerCreated(9))
    assert isinstance(op.handle(lw.LogConflict())[0], lw.Wait)
    assert op.handle(lw.Waited()) == [lw.ReadLog("log")]
    moved = LogMetadata("log", ledgers=(1, 2, 5), writer=WriterRole("other:1", 4), epoch=4)
    effects = op.handle(lw.LogRead(moved, 5))
    assert effects[0] == lw.DeleteLedger(9)
    assert isinstance(effects[1], lw.Failed) and effects[1].error is NotWriter


def test_backoff_doubles_and_is_capped() -> None:
    rng = Random(3)
    for attempt in range(1, 20):
        ceiling = min(LOG_WRITER_BACKOFF_MAX_MS, LOG_WRITER_BACKOFF_FIRST_MS << attempt)
        assert ceiling // 2 <= lw.backoff_ms(attempt, rng) <= ceiling


def _to_unknown(op: lw.AcquireWriter) -> LogMetadata:
    op.handle(lw.LogRead(LogMetadata("log", ledgers=(1,)), 0))
    op.handle(lw.LedgersRecovered())
    (write,) = op.handle(lw.LedgerCreated(5))
    assert isinstance(write, lw.WriteLog)
    assert op.handle(lw.LogWriteUnknown()) == [lw.ReadLog("log")]
    return write.log


def test_acquire_unknown_cas_that_landed_is_acquired() -> None:
    """The CAS answer was lost; the re-read shows our ledger and our role: Acquired."""
    op = acquire()
    intended = _to_unknown(op)
    (done,) = op.handle(lw.LogRead(intended, 4))
    assert done == lw.Acquired(intended, 4, 5, 1)


def test_acquire_unknown_cas_landed_but_role_taken_keeps_the_ledger() -> None:
    """Our ledger is listed but another writer took the role since: not_writer, and the
    ledger is NOT deleted (the log lists it)."""
    op = acquire()
    intended = _to_unknown(op)
    taken = intended.with_new_writer("other:1", 6)
    effects = op.handle(lw.LogRead(taken, 5))
    assert len(effects) == 1 and isinstance(effects[0], lw.Failed)
    assert effects[0].error is NotWriter


def test_acquire_unknown_cas_that_did_not_land_retries() -> None:
    """The re-read does not list our ledger: an attempt like a conflict (back-off)."""
    op = acquire()
    _to_unknown(op)
    (wait,) = op.handle(lw.LogRead(LogMetadata("log", ledgers=(1,)), 0))
    assert isinstance(wait, lw.Wait)


def test_acquire_read_failing_while_checking_keeps_the_ledger() -> None:
    """A read that fails while checking an unknown CAS: the error, ledger kept (it may
    be listed); a failure before any CAS deletes it."""
    op = acquire()
    _to_unknown(op)
    effects = op.handle(lw.StepFailed(MetadataUnavailable, "zk"))
    assert effects == [lw.Failed(MetadataUnavailable, "zk")]
    op = acquire()
    op.handle(lw.LogRead(LogMetadata("log"), 0))
    op.handle(lw.LedgerCreated(5))
    effects = op.handle(lw.StepFailed(MetadataUnavailable, "zk"))
    assert effects == [lw.DeleteLedger(5), lw.Failed(MetadataUnavailable, "zk")]


def test_acquire_on_a_missing_or_deleted_log() -> None:
    """No log: log_not_found; deleted between attempts: our ledger deleted too."""
    op = acquire()
    assert op.handle(lw.LogRead(None, -1)) == [lw.Failed(LogNotFound, "no log 'log'")]
    op = acquire()
    op.handle(lw.LogRead(LogMetadata("log"), 0))
    op.handle(lw.LedgerCreated(5))
    effects = op.handle(lw.LogRead(None, -1))  # the CAS found the znode gone
    assert effects[0] == lw.DeleteLedger(5) and effects[1].error is LogNotFound  # type: ignore[union-attr]


def test_acquire_a_full_log_is_refused() -> None:
    """A log at LOG_LEDGERS_MAX ledgers: invalid_argument, the created ledger deleted."""
    op = acquire()
    full = LogMetadata("log", ledgers=tuple(range(LOG_LEDGERS_MAX)))
    op.handle(lw.LogRead(full, 0))
    effects = op.handle(lw.LedgersRecovered())
    assert effects == [CREATE]
    effects = op.handle(lw.LedgerCreated(LOG_LEDGERS_MAX + 1))
    assert effects[0] == lw.DeleteLedger(LOG_LEDGERS_MAX + 1)
    assert isinstance(effects[1], lw.Failed) and effects[1].error is InvalidArgument


# ------------------------------------------------------------------ RollLog

HELD = LogMetadata("log", ledgers=(1, 2), writer=WriterRole(ME, 3), epoch=3)


def roll(log: LogMetadata = HELD, attempts_max: int = LOG_WRITER_ATTEMPTS_MAX) -> lw.RollLog:
    return lw.RollLog(log, 7, ME, 3, Random(2), attempts_max)


def test_roll_creates_and_cas_the_new_ledger_last() -> None:
    op = roll()
    assert op.start() == [CREATE]
    (write,) = op.handle(lw.LedgerCreated(9))
    assert isinstance(write, lw.WriteLog) and write.version == 7
    assert write.log.ledgers == (1, 2, 9) and write.log.writer == HELD.writer
    (done,) = op.handle(lw.LogWritten(8))
    assert done == lw.Rolled(write.log, 8, 9)


def test_roll_without_the_role_fails_at_once() -> None:
    op = lw.RollLog(HELD, 7, "other:1", 3, Random(2))
    (failed,) = op.start()
    assert isinstance(failed, lw.Failed) and failed.error is NotWriter


def test_roll_after_a_truncation_conflict_retries_on_the_fresh_list() -> None:
    """A conflict re-reads the log; a truncation (role still ours) is retried with the
    same ledger on the new list."""
    op = roll()
    op.start()
    op.handle(lw.LedgerCreated(9))
    assert op.handle(lw.LogConflict()) == [lw.ReadLog("log")]
    truncated = HELD.without_ledgers((1,))
    (write,) = op.handle(lw.LogRead(truncated, 8))
    assert isinstance(write, lw.WriteLog) and write.version == 8
    assert write.log.ledgers == (2, 9)


def test_roll_that_lost_the_role_fails_and_deletes_its_ledger() -> None:
    op = roll()
    op.start()
    op.handle(lw.LedgerCreated(9))
    op.handle(lw.LogConflict())
    taken = HELD.with_new_writer("other:1", 10)
    effects = op.handle(lw.LogRead(taken, 8))
    assert effects[0] == lw.DeleteLedger(9)
    assert isinstance(effects[1], lw.Failed) and effects[1].error is NotWriter


def test_roll_on_a_deleted_log() -> None:
    op = roll()
    op.start()
    op.handle(lw.LedgerCreated(9))
    effects = op.handle(lw.LogRead(None, -1))
    assert effects[0] == lw.DeleteLedger(9) and effects[1].error is LogNotFound  # type: ignore[union-attr]


def test_roll_unknown_cas_landed_or_not() -> None:
    """A lost CAS answer: the re-read listing our ledger is Rolled; not listing it (role
    still ours) writes again."""
    op = roll()
    op.start()
    (write,) = op.handle(lw.LedgerCreated(9))
    assert op.handle(lw.LogWriteUnknown()) == [lw.ReadLog("log")]
    assert isinstance(write, lw.WriteLog)
    (done,) = op.handle(lw.LogRead(write.log, 8))
    assert done == lw.Rolled(write.log, 8, 9)
    op = roll()
    op.start()
    op.handle(lw.LedgerCreated(9))
    op.handle(lw.LogWriteUnknown())
    (again,) = op.handle(lw.LogRead(HELD, 7))
    assert isinstance(again, lw.WriteLog) and again.log.ledgers == (1, 2, 9)


def test_roll_conflicts_are_bounded() -> None:
    op = roll(attempts_max=2)
    op.start()
    op.handle(lw.LedgerCreated(9))
    assert op.handle(lw.LogConflict()) == [lw.ReadLog("log")]
    op.handle(lw.LogRead(HELD, 8))
    effects = op.handle(lw.LogConflict())
    assert effects[0] == lw.DeleteLedger(9)
    assert isinstance(effects[1], lw.Failed) and effects[1].error is MetadataConflict


def test_roll_closes_what_earlier_rolls_left_before_listing_another() -> None:
    """A new writer fences only the last two ledgers, so a roll first closes the ledgers
    this writer left behind (maybe OPEN); once they are, it creates its ledger, and after
    ``Rolled`` nothing is left to close. The test-only switch skips the close."""
    op = lw.RollLog(HELD, 7, ME, 3, Random(2), behind=[1, 2])
    assert op.start() == [lw.RecoverLedgers((1, 2))]
    assert op.handle(lw.LedgersRecovered()) == [CREATE]
    op.handle(lw.LedgerCreated(9))
    op.handle(lw.LogWritten(8))
    assert op.behind == []
    broken = lw.RollLog(HELD, 7, ME, 3, Random(2), behind=[1, 2], close_behind=False)
    assert broken.start() == [CREATE]


def test_a_failed_roll_leaves_what_it_could_not_close_and_its_ledger_behind() -> None:
    """A close that fails fails the roll and keeps the ledgers to close next time; a
    roll that fails after creating its ledger (its CAS maybe landed) leaves that ledger
    behind too."""
    op = lw.RollLog(HELD, 7, ME, 3, Random(2), behind=[2])
    op.start()
    (failed,) = op.handle(lw.StepFailed(MetadataConflict, "zk"))
    assert isinstance(failed, lw.Failed) and op.behind == [2]
    op = roll(attempts_max=1)
    op.start()
    op.handle(lw.LedgerCreated(9))
    op.handle(lw.LogConflict())
    assert op.behind == [9]


def test_attach_fences_the_last_two_and_lists_the_ledgers_in_one_cas() -> None:
    """AttachLedgers reads the log, fences its last two ledgers, then writes the list with
    the ledgers appended in order, the role free at the next epoch and the commit id
    recorded; it creates no ledger and never deletes the caller's."""
    log = LogMetadata("l", ledgers=(1, 2, 3), writer=WriterRole("g:1", 4), epoch=4)
    op = lw.AttachLedgers("l", "g:2", [10, 11], ("q", 5), Random(1))
    assert op.start() == [lw.ReadLog("l")]
    assert op.handle(lw.LogRead(log, 9)) == [lw.RecoverLedgers((2, 3))]
    (write,) = op.handle(lw.LedgersRecovered())
    assert isinstance(write, lw.WriteLog) and write.version == 9
    assert write.log.ledgers == (1, 2, 3, 10, 11)
    assert write.log.writer is None and write.log.epoch == 5
    assert write.log.committed("q") == 5
    (done,) = op.handle(lw.LogWritten(10))
    assert done == lw.Attached(write.log, 10, True)


def test_attach_with_a_recorded_commit_changes_nothing_and_a_conflict_deletes_nothing() -> None:
    """A commit id already at (or past) the sequence answers committed=False without a
    write; running out of attempts fails without deleting the caller's ledgers."""
    log = LogMetadata("l", ledgers=(1,)).with_attached([5], ("q", 7))
    op = lw.AttachLedgers("l", "g", [9], ("q", 7), Random(1))
    op.start()
    assert op.handle(lw.LogRead(log, 3)) == [lw.Attached(log, 3, False)]
    op = lw.AttachLedgers("l", "g", [9], None, Random(1), attempts_max=1)
    op.start()
    op.handle(lw.LogRead(log, 3))
    op.handle(lw.LedgersRecovered())
    effects = op.handle(lw.LogConflict())
    assert [type(e) for e in effects] == [lw.Failed]
