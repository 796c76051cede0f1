"""A reader's LAC (services/protocol/reads_lac.py ``LacOp``) driven by hand, events in and
effects out: the LAC read takes the highest answer from the bookies that answered by
the speculative deadline; the long poll answers when the LAC passes ``after``, re-polls
a bookie that answered early, and answers the best LAC known when the time is up; a
LAC the reader saw before (``known``, kept in ``SeenLacs``) is a floor for every answer."""

from __future__ import annotations

from services.errors import BookieUnavailable
from services.protocol.limits import LacLimits
from services.protocol.messages import Tick
from services.protocol.metadata import LedgerMetadata
from services.protocol.reads_lac import LacOp, SeenLacs
from services.protocol.reads_messages import (
    CancelRequests,
    LacAnswered,
    LacDone,
    ReadEffect,
    ReadFailed,
    ReadLac,
    RequestFailed,
)

BOOKIES = ("b1:3181", "b2:3181", "b3:3181")
SPECULATIVE_MS = 100
REPOLL_MS = 20
LIMITS = LacLimits(speculative_read_ms=SPECULATIVE_MS, lac_repoll_delay_ms=REPOLL_MS)


def ledger() -> LedgerMetadata:
    """Entries 0..9 on an older fragment: only the last fragment's bookies are asked."""
    return LedgerMetadata.new(1, ["old1", "old2", "old3"], 2, 2).with_ensemble(10, BOOKIES)


def polls(effects: list[ReadEffect]) -> dict[str, ReadLac]:
    return {e.bookie: e for e in effects if isinstance(e, ReadLac)}


def test_lac_read_takes_the_highest_answer_of_the_last_fragment() -> None:
    """Every bookie of the last fragment is asked (no long poll); the answer is the
    highest LAC any of them reports."""
    op = LacOp(ledger(), limits=LIMITS)
    asked = polls(op.start(now=0))
    assert list(asked) == list(BOOKIES)
    assert all(e.after is None and e.wait_ms == 0 for e in asked.values())
    assert op.handle(LacAnswered(asked[BOOKIES[0]].request_id, 12, now=1)) == []
    assert op.handle(LacAnswered(asked[BOOKIES[1]].request_id, 14, now=2)) == []
    assert op.handle(RequestFailed(asked[BOOKIES[2]].request_id, "bookie_unavailable", 3)) == [
        LacDone(14)
    ]


def test_lac_read_does_not_wait_for_silent_bookies_past_the_deadline() -> None:
    """With a LAC answered by ``speculative_read_ms``, the silent bookies are cancelled;
    with none answered by then, every bookie is waited for."""
    op = LacOp(ledger(), limits=LIMITS)
    asked = polls(op.start(now=0))
    op.handle(LacAnswered(asked[BOOKIES[1]].request_id, 7, now=5))
    assert op.next_deadline() == SPECULATIVE_MS
    assert op.handle(Tick(SPECULATIVE_MS - 1)) == []
    silent = (asked[BOOKIES[0]].request_id, asked[BOOKIES[2]].request_id)
    assert op.handle(Tick(SPECULATIVE_MS)) == [CancelRequests(silent), LacDone(7)]

    op = LacOp(ledger(), limits=LIMITS)
    asked = polls(op.start(now=0))
    assert op.handle(Tick(SPECULATIVE_MS)) == []
    assert op.next_deadline() is None
    op.handle(RequestFailed(asked[BOOKIES[0]].request_id, "bookie_unavailable", now=900))
    op.handle(LacAnswered(asked[BOOKIES[1]].request_id, 3, now=950))
    assert op.handle(LacAnswered(asked[BOOKIES[2]].request_id, 4, now=990)) == [LacDone(4)]


def test_lac_read_with_no_answer_is_unavailable_unless_no_bookie_has_the_ledger() -> None:
    """No LAC from any bookie is bookie_unavailable; every bookie saying ledger_not_found
    (nothing written yet, or deleted: the metadata tells) is LAC -1, known nowhere."""
    for code, expected in (
        ("bookie_unavailable", None),
        ("ledger_not_found", LacDone(-1, known_nowhere=True)),
    ):
        op = LacOp(ledger(), limits=LIMITS)
        effects: list[ReadEffect] = []
        for ask in polls(op.start(now=0)).values():
            effects = op.handle(RequestFailed(ask.request_id, code, now=1))
        if expected is None:
            assert isinstance(effects[0], ReadFailed)
            assert effects[0].error is BookieUnavailable
        else:
            assert effects == [expected]


def test_long_poll_re_polls_a_bookie_that_answered_before_the_lac_passed() -> None:
    """A bookie whose poll ended on a new entry (its LAC still <= after) is asked again
    after ``lac_repoll_delay_ms`` with the wait that is left; the first LAC above
    ``after`` answers the poll and the other polls are cancelled."""
    op = LacOp(ledger(), after=4, wait_ms=1_000, limits=LIMITS)
    asked = polls(op.start(now=0))
    assert {e.after for e in asked.values()} == {4} and asked[BOOKIES[0]].wait_ms == 1_000
    assert op.handle(LacAnswered(asked[BOOKIES[0]].request_id, 4, now=50)) == []
    assert op.next_deadline() == 50 + REPOLL_MS
    assert op.handle(Tick(50 + REPOLL_MS - 1)) == []
    again = polls(op.handle(Tick(50 + REPOLL_MS)))
    assert list(again) == [BOOKIES[0]]
    assert again[BOOKIES[0]].wait_ms == 1_000 - 50 - REPOLL_MS
    effects = op.handle(LacAnswered(again[BOOKIES[0]].request_id, 5, now=80))
    others = (asked[BOOKIES[1]].request_id, asked[BOOKIES[2]].request_id)
    assert effects == [CancelRequests(others), LacDone(5)]


def test_long_poll_answers_the_best_lac_known_when_the_time_is_up() -> None:
    """Nothing past ``after`` within the wait: no re-poll when less than the delay is
    left, a bookie that hangs is given up ``speculative_read_ms`` after the wait, and the
    answer is the highest LAC seen."""
    op = LacOp(ledger(), after=4, wait_ms=1_000, limits=LIMITS)
    asked = polls(op.start(now=0))
    assert op.handle(LacAnswered(asked[BOOKIES[0]].request_id, 4, now=1_000)) == []
    assert op.handle(RequestFailed(asked[BOOKIES[1]].request_id, "bookie_unavailable", 1_001)) == []
    assert op.next_deadline() == 1_001 + SPECULATIVE_MS  # no re-poll: the wait is over
    hanging = asked[BOOKIES[2]].request_id
    assert op.handle(Tick(1_001 + SPECULATIVE_MS)) == [CancelRequests((hanging,)), LacDone(4)]


def test_long_poll_with_no_lac_seen_falls_back_to_a_lac_read() -> None:
    """A long poll no bookie answered ends in a plain LAC read, which decides."""
    op = LacOp(ledger(), after=-1, wait_ms=200, limits=LIMITS)
    for ask in polls(op.start(now=0)).values():
        effects = op.handle(RequestFailed(ask.request_id, "bookie_unavailable", now=10))
    asked = polls(effects)
    assert list(asked) == list(BOOKIES) and all(e.after is None for e in asked.values())
    assert op.handle(LacAnswered(asked[BOOKIES[0]].request_id, -1, now=20)) == []
    assert op.handle(Tick(10 + SPECULATIVE_MS))[-1] == LacDone(-1)


def test_a_known_lac_is_a_floor_for_the_lac_read_and_the_long_poll() -> None:
    """A reader that saw LAC 9 before: bookies now answering 4 and 6 (one just joined)
    give 9, not 6; a long poll for after=7 answers 9 at once without asking anyone; one
    for after=9 polls, and when the wait ends with lower answers only it answers 9."""
    op = LacOp(ledger(), known=9, limits=LIMITS)
    asked = polls(op.start(now=0))
    op.handle(LacAnswered(asked[BOOKIES[0]].request_id, 4, now=1))
    op.handle(LacAnswered(asked[BOOKIES[1]].request_id, 6, now=2))
    assert op.handle(RequestFailed(asked[BOOKIES[2]].request_id, "ledger_not_found", 3)) == [
        LacDone(9)
    ]
    op = LacOp(ledger(), after=7, wait_ms=1_000, known=9, limits=LIMITS)
    assert op.start(now=0) == [LacDone(9)] and op.finished
    op = LacOp(ledger(), after=9, wait_ms=100, known=9, limits=LIMITS)
    asked = polls(op.start(now=0))
    assert len(asked) == 3
    for ask in asked.values():  # every bookie answers a lower LAC as the wait ends
        effects = op.handle(LacAnswered(ask.request_id, 5, now=100))
    assert effects == [LacDone(9)]


def test_a_known_lac_does_not_stand_in_for_a_bookie_answer() -> None:
    """With no bookie answering at all, a LAC read still fails (bookie_unavailable)
    whatever the reader saw before: the floor bounds answers, it does not invent one."""
    op = LacOp(ledger(), known=9, limits=LIMITS)
    effects: list[ReadEffect] = []
    for ask in polls(op.start(now=0)).values():
        effects = op.handle(RequestFailed(ask.request_id, "bookie_unavailable", now=1))
    assert isinstance(effects[0], ReadFailed) and effects[0].error is BookieUnavailable


def test_seen_lacs_keeps_the_maximum_bounded_least_recently_used_first() -> None:
    """observe keeps the highest LAC per ledger; past ``ledgers_max`` the least recently
    used ledger is forgotten (get counts as a use); forget drops a ledger."""
    seen = SeenLacs(ledgers_max=2)
    assert seen.get(1) == -1
    assert seen.observe(1, 5) == 5
    assert seen.observe(1, 3) == 5 and seen.get(1) == 5
    seen.observe(2, 8)
    assert seen.get(1) == 5  # ledger 1 is now the most recently used
    seen.observe(3, 1)
    assert len(seen) == 2
    assert seen.get(2) == -1 and seen.get(1) == 5 and seen.get(3) == 1
    seen.forget(1)
    assert seen.get(1) == -1 and len(seen) == 1
