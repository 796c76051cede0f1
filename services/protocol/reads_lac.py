"""The LAC of a ledger as a reader learns it, as a state machine: a LAC read, or a LAC
long poll, from the bookies of the last fragment (events in, effects out:
``reads_messages``).

A reader that is not the writer asks every bookie of the last fragment and takes
the highest LAC reported (any bookie's LAC is a lower bound of the writer's; the
writer piggybacks it on every entry and sends it explicitly when idle).

LAC read. Every bookie is asked. Once ``speculative_read_ms`` passed and some
bookie answered a LAC, the silent ones are not waited for (their requests are
cancelled); with no LAC answered by then, every bookie is waited for (each
request has its own time-out in the runner). No LAC at all is
``BookieUnavailable`` — unless every bookie said it has no such ledger: a
ledger nothing was written to yet has LAC -1 (``LacDone.known_nowhere``: a deleted
ledger answers the same, and only its metadata tells them apart).

LAC long poll (``after`` and ``wait_ms > 0``). Every bookie is asked to wait up
to ``wait_ms`` for its LAC (or its last entry) to pass ``after``. The first LAC
above ``after`` is the answer. A bookie's poll also ends when it stores an entry
past ``after`` whose piggybacked LAC is not past it yet (the LAC that covers it
comes with the next add or the writer's explicit update, a few ms later): such a
bookie is asked again after ``lac_repoll_delay_ms`` while more than that is left,
so the poll answers when the LAC passes ``after``, not merely when an entry
arrives (with E == Qw every bookie answers that way). A bookie that fails sits
the poll out. Bookies silent ``speculative_read_ms`` past the end of the wait are
given up. When the wait ends without a LAC above ``after``, the answer is the
highest LAC seen; with none seen at all, a plain LAC read decides.

The LAC a reader reports never goes backwards. A bookie that just joined the
last fragment (an ensemble change, a replacement) may report a lower LAC than
the bookies it replaced did, so the highest answer of one read can be lower
than an earlier read's. ``SeenLacs`` keeps, per ledger, the highest LAC the
reader has seen (bounded: the least recently used ledger is forgotten first),
and a ``LacOp`` given it as ``known`` never answers less: a LAC read answers
the maximum of ``known`` and the bookies' answers, and a long poll whose
``after`` is already below ``known`` answers at once. (A LAC once reported is
safe to keep: every entry up to it was acknowledged, and a recovery closes
the ledger at or past it.) With no bookie answering at all a LAC read still
fails: ``known`` is a floor for answers, not a stand-in for them.
"""

from __future__ import annotations

from collections import OrderedDict
from enum import StrEnum

from services.errors import BookieUnavailable, invariant, present
from services.protocol.limits import LAC_MEMORY_LEDGERS_MAX, LacLimits
from services.protocol.messages import Tick
from services.protocol.metadata import LedgerMetadata
from services.protocol.reads import lac_bookies, lac_from_answers
from services.protocol.reads_messages import (
    CancelRequests,
    LacAnswered,
    LacDone,
    ReadEffect,
    ReadEvent,
    ReadFailed,
    ReadLac,
    RequestFailed,
)


class SeenLacs:
    """The highest LAC a reader has seen per ledger, for at most ``ledgers_max`` ledgers
    (the least recently used is forgotten first; a forgotten ledger starts again from
    what its bookies report)."""

    def __init__(self, ledgers_max: int = LAC_MEMORY_LEDGERS_MAX) -> None:
        invariant(ledgers_max >= 1, "SeenLacs keeps at least one ledger")
        self.ledgers_max = ledgers_max
        self._lacs: OrderedDict[int, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._lacs)

    def get(self, ledger_id: int) -> int:
        """The highest LAC seen for the ledger, -1 if none."""
        lac = self._lacs.get(ledger_id)
        if lac is None:
            return -1
        self._lacs.move_to_end(ledger_id)
        return lac

    def observe(self, ledger_id: int, lac: int) -> int:
        """Remember ``lac`` if it is the highest seen; the highest seen (never less than
        ``lac``)."""
        best = max(lac, self._lacs.pop(ledger_id, -1))
        self._lacs[ledger_id] = best
        if len(self._lacs) > self.ledgers_max:
            self._lacs.popitem(last=False)
        return best

    def forget(self, ledger_id: int) -> None:
        """Drop a ledger (deleted)."""
        self._lacs.pop(ledger_id, None)


class LacPhase(StrEnum):
    POLL = "poll"  # the long poll
    READ = "read"  # a plain LAC read
    DONE = "done"


class LacOp:
    """One LAC read (``after is None`` or ``wait_ms <= 0``) or LAC long poll."""

    def __init__(
        self,
        metadata: LedgerMetadata,
        *,
        after: int | None = None,
        wait_ms: int = 0,
        known: int = -1,
        limits: LacLimits | None = None,
    ) -> None:
        self.metadata = metadata
        self.known = known  # the highest LAC this reader saw before: never answer less
        self.after = after
        self.wait_ms = wait_ms
        self.limits = limits or LacLimits()
        self.phase = LacPhase.READ
        self.result: LacDone | ReadFailed | None = None
        self._ids = 0
        self._asked: dict[int, str] = {}  # request id -> bookie, of the current phase
        # LAC read
        self._lacs: list[int] = []
        self._not_found = 0
        self._read_deadline: int | None = None
        # long poll
        self._best = -1
        self._poll_deadline = 0
        self._grace_at = 0
        self._repolls: dict[str, int] = {}  # bookie -> when to ask it again

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    @property
    def finished(self) -> bool:
        return self.phase is LacPhase.DONE

    def next_deadline(self) -> int | None:
        if self.phase is LacPhase.READ:
            return self._read_deadline
        if self.phase is LacPhase.POLL:
            return min([self._grace_at, *self._repolls.values()])
        return None

    # ------------------------------------------------------------------ events

    def start(self, now: int) -> list[ReadEffect]:
        invariant(self._ids == 0 and not self.finished, "a LacOp starts once")
        if self.after is None or self.wait_ms <= 0:
            return self._start_read(now)
        if self.known > self.after:
            return self._finish(LacDone(self.known))  # already past ``after``: no need to wait
        self.phase = LacPhase.POLL
        self._poll_deadline = now + self.wait_ms
        self._grace_at = self._poll_deadline + self.limits.speculative_read_ms
        return [self._poll(bookie, now) for bookie in lac_bookies(self.metadata)]

    def handle(self, event: ReadEvent) -> list[ReadEffect]:
        if self.finished:
            return []
        if isinstance(event, Tick):
            if self.phase is LacPhase.POLL:
                return self._poll_tick(event.now)
            return self._read_tick(event.now)
        if not isinstance(event, LacAnswered | RequestFailed):
            return []
        bookie = self._asked.pop(event.request_id, None)
        if bookie is None:
            return []  # a late answer to a request already given up
        if self.phase is LacPhase.POLL:
            return self._poll_answer(bookie, event)
        if isinstance(event, LacAnswered):
            self._lacs.append(event.lac)
        elif event.code == "ledger_not_found":
            self._not_found += 1
        return [] if self._asked else self._read_result()

    # ------------------------------------------------------------------ LAC read

    def _start_read(self, now: int) -> list[ReadEffect]:
        self.phase = LacPhase.READ
        self._read_deadline = now + self.limits.speculative_read_ms
        effects: list[ReadEffect] = []
        for bookie in lac_bookies(self.metadata):
            rid = self._next_id()
            self._asked[rid] = bookie
            effects.append(ReadLac(rid, bookie, self.ledger_id))
        return effects

    def _read_tick(self, now: int) -> list[ReadEffect]:
        if self._read_deadline is None or now < self._read_deadline:
            return []
        self._read_deadline = None
        if not self._lacs:
            return []  # nobody answered a LAC yet: wait for every bookie
        return [CancelRequests(tuple(self._asked)), *self._read_result()]

    def _read_result(self) -> list[ReadEffect]:
        if not self._lacs and self._not_found < len(lac_bookies(self.metadata)):
            return self._finish(
                ReadFailed(
                    BookieUnavailable,
                    f"no bookie of ledger {self.ledger_id}'s last fragment answered its LAC",
                )
            )
        # No LAC and no failure: every bookie said it has no such ledger.
        nowhere = not self._lacs
        return self._finish(
            LacDone(max(self.known, lac_from_answers(self._lacs)), known_nowhere=nowhere)
        )

    # ------------------------------------------------------------------ long poll

    def _poll(self, bookie: str, now: int) -> ReadLac:
        rid = self._next_id()
        self._asked[rid] = bookie
        return ReadLac(rid, bookie, self.ledger_id, self.after, max(0, self._poll_deadline - now))

    def _poll_answer(self, bookie: str, event: LacAnswered | RequestFailed) -> list[ReadEffect]:
        after, now = present(self.after, "a long poll has an 'after'"), event.now
        if isinstance(event, LacAnswered):  # a failed bookie sits this poll out
            self._best = max(self._best, event.lac)
            delay = self.limits.lac_repoll_delay_ms
            if event.lac <= after and self._poll_deadline - now > delay:
                self._repolls[bookie] = now + delay
            if self._best > after:
                return self._end_poll(now)
        self._grace_at = max(self._poll_deadline, now) + self.limits.speculative_read_ms
        if not self._asked and not self._repolls:
            return self._end_poll(now)
        return []

    def _poll_tick(self, now: int) -> list[ReadEffect]:
        if now >= self._grace_at:
            return self._end_poll(now)  # a bookie that hangs is not waited for
        due = [b for b, at in self._repolls.items() if at <= now]
        for bookie in due:
            del self._repolls[bookie]
        return [self._poll(bookie, now) for bookie in due]

    def _end_poll(self, now: int) -> list[ReadEffect]:
        effects: list[ReadEffect] = [CancelRequests(tuple(self._asked))] if self._asked else []
        self._asked.clear()
        self._repolls.clear()
        if self._best < 0:
            return effects + self._start_read(now)
        return effects + self._finish(LacDone(max(self.known, self._best)))

    def _finish(self, result: LacDone | ReadFailed) -> list[ReadEffect]:
        self.phase = LacPhase.DONE
        self.result = result
        self._read_deadline = None
        return [result]

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids
