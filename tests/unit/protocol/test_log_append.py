"""``LogAppendOp`` (services/protocol/log_append.py; docs/protocol.md "Ledgers to logs",
docs/api.md "Logs"): the key claimed in the window, the entries handed to the write
handle, an add whose outcome may be unknown settled (in the CLOSED ledger -> its
positions; not -> not_writer, or a roll and another attempt; not closed in time -> the
add's error, the key kept unsettled), the key released at the end; time passed in."""

from __future__ import annotations

from services.errors import (
    IdempotencyKeyReused,
    InvalidArgument,
    LedgerFenced,
    NotWriter,
    QuireError,
    QuorumTimeout,
)
from services.protocol import log_append as la
from services.protocol import log_records as lr
from services.protocol.dedup import Appended, DedupWindow, Unsettled
from services.protocol.logs import Position

PAYLOADS = (b"a", b"b")
DIGEST = lr.records_digest(PAYLOADS)
STAMP_MS = 5  # the stamp the runner gave an add (``Stamps``)


def window() -> DedupWindow:
    return DedupWindow(window_ms=60_000, keys_max=100)


def fenced(first: int, last: int) -> QuireError:
    error = LedgerFenced("fenced")
    error.entries = (first, last)
    return error


def added(
    op: la.LogAppendOp, lid: int, first: int, now_ms: int = 10, stamp_ms: int = STAMP_MS
) -> list[la.Effect]:
    last = first + len(op.payloads) - 1
    return op.handle(la.EntriesAdded(lid, first, last, stamp_ms), now_ms)


def test_an_append_without_a_key_hands_its_records_over_and_answers_its_positions() -> None:
    """The op does not stamp: ``AddEntries`` carries what to encode, and the runner
    encodes it with the stamp it gives at hand-over (``AddEntries.encode``); the answer
    is the positions the write handle gave them."""
    op = la.LogAppendOp(window(), "log", PAYLOADS, None)
    effects = op.start(1_234)
    assert effects == [la.AddEntries(PAYLOADS, None, None)]
    assert effects[0].encode(2_000) == lr.encode(PAYLOADS, 2_000)
    assert added(op, 7, 3) == [la.AppendDone(Position(7, 3), Position(7, 4))]
    assert op.done


def test_an_add_with_a_key_encodes_its_key_and_digest() -> None:
    """``AddEntries.encode`` of a keyed append puts the key and the records' digest in the
    head, every entry stamped with the time given."""
    [add] = la.LogAppendOp(window(), "log", PAYLOADS, "k").start(1)
    assert isinstance(add, la.AddEntries)
    entries = add.encode(77)
    assert entries == lr.encode(PAYLOADS, 77, "k", DIGEST)
    assert [lr.decode(e).time_ms for e in entries] == [77, 77]


def test_stamps_never_go_backwards() -> None:
    """``Stamps.next`` follows the clock but never goes below the last stamp given nor
    the floor it started at (the time of the log's last entry at a hand-over)."""
    stamps = la.Stamps(floor_ms=1_000)
    assert stamps.next(900) == 1_000  # a slower clock than the previous writer's
    assert stamps.next(1_500) == 1_500
    assert stamps.next(1_200) == 1_500  # the clock stepped back
    assert stamps.next(1_501) == 1_501
    assert la.Stamps().next(3) == 3


def test_a_key_is_claimed_then_a_retry_is_a_hit_and_other_records_are_refused() -> None:
    """The first append with a key appends and remembers it (released with its
    positions); the same key and records is answered from the window without an add;
    the same key with other records is 409 idempotency_key_reused."""
    w = window()
    op = la.LogAppendOp(w, "log", PAYLOADS, "k")
    assert op.start(100) == [la.AddEntries(PAYLOADS, "k", DIGEST)]
    found = Appended(Position(7, 0), Position(7, 1), DIGEST, 110)  # the add's stamp
    assert added(op, 7, 0, now_ms=120, stamp_ms=110) == [
        la.ReleaseKey("k", found),
        la.AppendDone(found.first, found.last),
    ]
    retry = la.LogAppendOp(w, "log", PAYLOADS, "k")
    assert retry.start(200) == [la.AppendDone(found.first, found.last, deduplicated=True)]
    other = la.LogAppendOp(w, "log", (b"c",), "k")
    [failed] = other.start(300)
    assert isinstance(failed, la.AppendFailed)
    assert isinstance(failed.error, IdempotencyKeyReused)


def test_a_key_expires_with_the_clock_passed_in() -> None:
    """Past the window, the same key appends again."""
    w = DedupWindow(window_ms=1_000, keys_max=100)
    op = la.LogAppendOp(w, "log", PAYLOADS, "k")
    op.start(0)
    added(op, 7, 0, now_ms=0, stamp_ms=0)
    assert isinstance(la.LogAppendOp(w, "log", PAYLOADS, "k").start(1_000)[0], la.AppendDone)
    assert la.LogAppendOp(w, "log", PAYLOADS, "k").start(1_001) == [
        la.AddEntries(PAYLOADS, "k", DIGEST)
    ]


def test_a_retry_waits_for_the_key_in_flight() -> None:
    """A retry while the first append is in flight waits for it: its success answers the
    retry (deduplicated); its failure lets the retry claim the key and append."""
    w = window()
    first = la.LogAppendOp(w, "log", PAYLOADS, "k")
    first.start(0)
    retry = la.LogAppendOp(w, "log", PAYLOADS, "k")
    assert retry.start(5) == [la.WaitForKey("k")]
    [release, _] = added(first, 7, 0)
    assert isinstance(release, la.ReleaseKey) and release.appended is not None
    assert retry.handle(la.KeyReleased(release.appended), 11) == [
        la.AppendDone(Position(7, 0), Position(7, 1), deduplicated=True)
    ]

    failing = la.LogAppendOp(w, "log", PAYLOADS, "j")
    failing.start(0)
    waiter = la.LogAppendOp(w, "log", PAYLOADS, "j")
    assert waiter.start(1) == [la.WaitForKey("j")]
    effects = failing.handle(la.AddFailed(7, InvalidArgument("no"), STAMP_MS), 2)
    assert effects[0] == la.ReleaseKey("j", None)
    assert waiter.handle(la.KeyReleased(None), 3) == [la.AddEntries(PAYLOADS, "j", DIGEST)]


def test_an_add_that_fails_for_sure_is_answered_with_its_error() -> None:
    """An error that leaves no doubt (not fenced, closed, timed out or short of bookies)
    is the answer at once; the key is released so that a retry appends."""
    w = window()
    op = la.LogAppendOp(w, "log", PAYLOADS, "k")
    op.start(0)
    error = InvalidArgument("no")
    assert op.handle(la.AddFailed(7, error, STAMP_MS), 1) == [
        la.ReleaseKey("k", None),
        la.AppendFailed(error),
    ]
    assert isinstance(la.LogAppendOp(w, "log", PAYLOADS, "k").start(2)[0], la.AddEntries)


def test_a_failed_add_found_in_the_closed_ledger_succeeded() -> None:
    """Fenced after its entries got ids 3-4: once the ledger is CLOSED at 4 or later the
    append is in the log, answered with those positions (remembered under its key)."""
    w = window()
    op = la.LogAppendOp(w, "log", PAYLOADS, "k")
    op.start(0)
    assert op.handle(la.AddFailed(7, fenced(3, 4), STAMP_MS), 1) == [la.AwaitClosed(7)]
    found = Appended(Position(7, 3), Position(7, 4), DIGEST, STAMP_MS)  # the add's stamp
    assert op.handle(la.LedgerEnded(4), 2) == [
        la.ReleaseKey("k", found),
        la.AppendDone(found.first, found.last, settled=True),
    ]
    assert la.LogAppendOp(w, "log", PAYLOADS, "k").start(3)[0] == la.AppendDone(
        found.first, found.last, deduplicated=True
    )


def test_not_in_the_log_and_another_writer_is_not_writer() -> None:
    """Closed before the append's last entry: not in the log; the role re-read says
    another writer holds it: the answer is the runner's not_writer, the key released."""
    w = window()
    op = la.LogAppendOp(w, "log", PAYLOADS, "k")
    op.start(0)
    op.handle(la.AddFailed(7, fenced(3, 4), STAMP_MS), 1)
    assert op.handle(la.LedgerEnded(3), 2) == [la.ReadRole()]
    lost = NotWriter("another writer")
    assert op.handle(la.StepFailed(lost), 3) == [
        la.ReleaseKey("k", None),
        la.AppendFailed(lost),
    ]
    assert w.claim("k", DIGEST, 4) is None  # nothing remembered: a retry appends


def test_not_in_the_log_and_still_the_writer_rolls_and_appends_again() -> None:
    """Still the writer on the failed ledger: roll ("ledger_lost") and hand the same
    entries to the new ledger; when another append rolled already, append at once."""
    op = la.LogAppendOp(window(), "log", PAYLOADS, None)
    [add] = op.start(0)
    assert op.handle(la.AddFailed(7, QuorumTimeout("slow"), STAMP_MS), 1) == [
        la.ReadRole()
    ]  # no ids
    assert op.handle(la.RoleHeld(7), 2) == [la.RollLedger("ledger_lost")]
    assert op.handle(la.RollDone(), 3) == [add]
    op.handle(la.AddFailed(8, fenced(0, 1), STAMP_MS), 4)
    op.handle(la.LedgerEnded(-1), 5)
    assert op.handle(la.RoleHeld(9), 6) == [add]  # rolled by someone else: no roll
    assert added(op, 9, 0) == [la.AppendDone(Position(9, 0), Position(9, 1))]


def test_an_append_gives_up_after_attempts_max_ledgers() -> None:
    """Not in the log on ``attempts_max`` ledgers in a row (each rolled away from, as
    the gateway does): not_writer, nothing of it in the log."""
    op = la.LogAppendOp(window(), "log", PAYLOADS, None, attempts_max=2)
    op.start(0)
    for lid in (7, 8):
        op.handle(la.AddFailed(lid, fenced(0, 1), STAMP_MS), 1)
        op.handle(la.LedgerEnded(-1), 2)
        assert op.handle(la.RoleHeld(lid), 3) == [la.RollLedger("ledger_lost")]
        effects = op.handle(la.RollDone(), 4)
    [failed] = effects
    assert isinstance(failed, la.AppendFailed) and isinstance(failed.error, NotWriter)
    assert "2 ledgers in a row" in failed.error.message and op.done


def test_a_ledger_not_closed_in_time_leaves_the_key_unsettled() -> None:
    """Not closed within the settle time-out: the add's own error is the answer, the
    outcome unknown, and the window keeps the key with the ledger and entries."""
    w = window()
    op = la.LogAppendOp(w, "log", PAYLOADS, "k")
    op.start(0)
    error = fenced(3, 4)
    op.handle(la.AddFailed(7, error, STAMP_MS), 1)
    assert op.handle(la.LedgerStillOpen(), 50) == [
        la.ReleaseKey("k", None),
        la.AppendFailed(error, outcome_unknown=True),
    ]
    assert w.claim("k", DIGEST, 60) == Unsettled(7, 3, 4, DIGEST, 50)


def _unsettled(w: DedupWindow) -> la.LogAppendOp:
    """A retry of an append left unsettled in ledger 7, entries 3-4; started."""
    op = la.LogAppendOp(w, "log", PAYLOADS, "k")
    op.start(0)
    op.handle(la.AddFailed(7, fenced(3, 4), STAMP_MS), 1)
    op.handle(la.LedgerStillOpen(), 2)
    retry = la.LogAppendOp(w, "log", PAYLOADS, "k")
    assert retry.start(10) == [la.AwaitClosed(7)]  # settle the earlier attempt first
    return retry


def test_an_unsettled_key_found_in_the_log_answers_its_retry() -> None:
    """The earlier attempt's ledger closed holding it: the retry is answered with its
    positions and appends nothing; the key is remembered as appended."""
    w = window()
    retry = _unsettled(w)
    found = Appended(Position(7, 3), Position(7, 4), DIGEST, 2)
    assert retry.handle(la.LedgerEnded(9), 11) == [
        la.ReleaseKey("k", found),
        la.AppendDone(found.first, found.last, deduplicated=True, settled=True),
    ]
    assert w.claim("k", DIGEST, 12) == found


def test_an_unsettled_key_not_in_the_log_is_appended_by_its_retry() -> None:
    """The earlier attempt's ledger closed before it: the retry appends, and its
    success replaces the unsettled key."""
    w = window()
    retry = _unsettled(w)
    assert retry.handle(la.LedgerEnded(3), 11) == [la.AddEntries(PAYLOADS, "k", DIGEST)]
    added(retry, 8, 0, now_ms=12, stamp_ms=11)
    assert w.claim("k", DIGEST, 13) == Appended(Position(8, 0), Position(8, 1), DIGEST, 11)


def test_an_unsettled_key_still_unknown_or_gone_is_refused_and_kept() -> None:
    """Still not closed: 409 ledger_fenced "retry later"; the ledger gone: 409 "can no
    longer be settled"; either way nothing is appended and the key stays unsettled."""
    w = window()
    retry = _unsettled(w)
    [release, failed] = retry.handle(la.LedgerStillOpen(), 11)
    assert release == la.ReleaseKey("k", None)
    assert isinstance(failed, la.AppendFailed) and isinstance(failed.error, LedgerFenced)
    assert "retry later" in failed.error.message and failed.outcome_unknown
    again = la.LogAppendOp(w, "log", PAYLOADS, "k")
    assert again.start(20) == [la.AwaitClosed(7)]
    [_, gone] = again.handle(la.LedgerGone(), 21)
    assert isinstance(gone, la.AppendFailed) and "no longer be settled" in gone.error.message
    assert isinstance(w.claim("k", DIGEST, 22), Unsettled)


def test_an_abandoned_append_releases_its_key() -> None:
    """A runner that stops an append early (its request cancelled) gets the key
    released as failed: the waiters wake, a retry appends."""
    w = window()
    op = la.LogAppendOp(w, "log", PAYLOADS, "k")
    op.start(0)
    assert op.abandon(5) == [la.ReleaseKey("k", None)]
    assert op.abandon(6) == []
    assert w.claim("k", DIGEST, 7) is None
