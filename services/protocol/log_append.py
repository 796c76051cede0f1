"""One append to a log by its writer, as a pure operation (docs/protocol.md, "Ledgers to
logs"; docs/style.md §1): ``LogAppendOp`` takes events and returns effects; the
gateway's runner (gateway/logs/writer.py) and the log simulator
(tests/simulation/log_gateway.py) carry the effects out and feed the answers back. Time
is an input (``now_ms``, wall-clock milliseconds in the gateway), as the idempotency
window (``dedup.DedupWindow``) needs it.

The algorithm:

1. With an Idempotency-Key, claim it in the window: a hit is answered from there
   (``deduplicated``); a key in flight waits for that append to end (``WaitForKey``)
   and is answered by its success or claims the key after its failure; a key whose
   earlier attempt's outcome was left unknown settles that attempt first
   (``AwaitClosed``): in the log -> answered with its positions; not in it -> appended;
   still unknown (not closed in time, or the ledger gone) -> 409 ``ledger_fenced``.
2. Hand the records to the current ledger's write handle (``AddEntries``): the runner
   stamps them and encodes them (``AddEntries.encode``) right as it hands them over,
   so that stamps follow the order the handle gives ids in (see "Stamps" below), and
   tells the stamp back (``EntriesAdded``, ``AddFailed``).
3. An add that fails with an outcome that may be unknown (``UNKNOWN_OUTCOME``: fenced,
   closed under it, time-out, no bookies) is SETTLED before it is answered: wait
   (bounded by the runner's settle time-out) until the ledger is CLOSED, by its own
   handle or by whoever recovered it; the closed ledger says which entries are in the
   log: all of the append's -> it succeeded (its positions); not all -> it is not in
   the log (a batch cut short never shows to readers: ``log_records.visible``); not
   closed in time -> the outcome stays unknown, the add's own error is the answer and
   the window keeps the key as ``Unsettled``. Not in the log: re-read the log
   (``ReadRole``): another writer holds the role -> ``not_writer`` (the runner's
   error); else, when the failed ledger is still the current one (the ledger was fenced
   by a replication worker or closed after a time-out), roll to a new ledger
   (``RollLedger``), and append again, on at most ``attempts_max`` ledgers in all.
4. The key is settled in the window with the outcome and released (``ReleaseKey``)
   before the answer (``AppendDone``, ``AppendFailed``); a runner that stops the
   operation early (a cancelled request) calls ``abandon``, which releases it too.

The write handle gives entries ids in the order they are handed to it; which handle
gets them when, and in what order among a caller's appends, is the runner's (the
``AppendOrder`` rule, gateway/logs/writer.py).

Stamps: every entry carries its append's time (``log_records``), and a read from a
time (gateway/logs/time_search.py) needs the stamps never to go backwards in log
order. The op does not stamp: an append may wait (its turn, a roll) between its start
and its add, and a retry on a new ledger lands after appends started later. The runner
stamps each attempt's entries with ``Stamps.next`` synchronously before handing them
to the write handle, so stamps rise with entry ids; a new writer starts its ``Stamps``
at the time of the log's last entry, so a gateway with a slower clock does not stamp
below its predecessor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.errors import (
    IdempotencyKeyReused,
    LedgerClosed,
    LedgerFenced,
    NotEnoughBookies,
    NotWriter,
    QuireError,
    QuorumTimeout,
    invariant,
    present,
)
from services.protocol import log_records
from services.protocol.dedup import Appended, DedupWindow, InFlight, Unsettled, unknown_outcome
from services.protocol.limits import APPEND_ATTEMPTS_MAX
from services.protocol.logs import Position

# Errors after which an add's outcome must be settled (see the module docstring).
UNKNOWN_OUTCOME = (LedgerFenced, LedgerClosed, QuorumTimeout, NotEnoughBookies)

# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class KeyReleased:
    """The append in flight with the same key ended: its positions, or None (failed)."""

    appended: Appended | None


@dataclass(frozen=True, slots=True)
class LedgerEnded:
    """The ledger is CLOSED with this last entry (-1: closed empty)."""

    last_entry_id: int


@dataclass(frozen=True, slots=True)
class LedgerStillOpen:
    """The ledger did not close within the settle time-out."""


@dataclass(frozen=True, slots=True)
class LedgerGone:
    """The ledger no longer exists (truncated away, or deleted with its log): whatever
    it held can no longer be told."""


@dataclass(frozen=True, slots=True)
class EntriesAdded:
    """The entries, stamped ``time_ms``, are entries ``first_entry_id``..``last_entry_id``
    of ledger ``ledger_id``."""

    ledger_id: int
    first_entry_id: int
    last_entry_id: int
    time_ms: int


@dataclass(frozen=True, slots=True)
class AddFailed:
    """The write handle of ``ledger_id`` failed the add of the entries stamped
    ``time_ms`` with ``error`` (its ``entries`` set when the entries were given ids)."""

    ledger_id: int
    error: QuireError
    time_ms: int


@dataclass(frozen=True, slots=True)
class RoleHeld:
    """The log re-read: this gateway still writes it, appending to ``ledger_id``."""

    ledger_id: int


@dataclass(frozen=True, slots=True)
class RollDone:
    """The roll asked for (or one already under way) put a new ledger in the list."""


@dataclass(frozen=True, slots=True)
class StepFailed:
    """An effect failed for good: the role is lost (``not_writer``), a roll failed, …;
    ``error`` is the answer."""

    error: QuireError


Event = (
    KeyReleased | LedgerEnded | LedgerStillOpen | LedgerGone | EntriesAdded | AddFailed
    | RoleHeld | RollDone | StepFailed
)  # fmt: skip

# ---------------------------------------------------------------- effects


@dataclass(frozen=True, slots=True)
class WaitForKey:
    """Wait until the append in flight with ``key`` ends (``KeyReleased``)."""

    key: str


@dataclass(frozen=True, slots=True)
class AwaitClosed:
    """Wait, up to the settle time-out, until ledger ``ledger_id`` is CLOSED
    (``LedgerEnded``, ``LedgerStillOpen`` or ``LedgerGone``)."""

    ledger_id: int


@dataclass(frozen=True, slots=True)
class AddEntries:
    """While this gateway holds the role, stamp the records (``Stamps.next``), encode
    them (``encode``) and hand the entries to the write handle of the log's current
    ledger (``EntriesAdded`` or ``AddFailed``, with the stamp; ``StepFailed`` when the
    role is lost)."""

    payloads: tuple[bytes, ...]
    key: str | None
    digest: bytes | None

    def encode(self, time_ms: int) -> tuple[bytes, ...]:
        """The entries of the append, stamped ``time_ms``."""
        return log_records.encode(self.payloads, time_ms, self.key, self.digest)


class Stamps:
    """The time stamps one log writer gives its appends' entries: the wall clock, but
    never below the last stamp given, nor below ``floor_ms`` (the time of the log's
    last entry when the writer took the role). Stamps thus never go backwards in log
    order when the runner stamps each add right before handing it to the write handle
    (see the module docstring)."""

    __slots__ = ("last_ms",)

    def __init__(self, floor_ms: int = 0) -> None:
        self.last_ms = floor_ms

    def next(self, now_ms: int) -> int:
        """The stamp of an add handed over at ``now_ms``."""
        if now_ms > self.last_ms:
            self.last_ms = now_ms
        return self.last_ms


@dataclass(frozen=True, slots=True)
class ReadRole:
    """Re-read the log: ``RoleHeld`` with the current ledger, or ``StepFailed``
    (``not_writer``) when another writer holds the role or the log is gone."""


@dataclass(frozen=True, slots=True)
class RollLedger:
    """Roll the log to a new ledger (``RollDone`` or ``StepFailed``)."""

    reason: str


@dataclass(frozen=True, slots=True)
class ReleaseKey:
    """The append of ``key`` ended (its key settled in the window): wake the appends
    waiting on it (``KeyReleased``)."""

    key: str
    appended: Appended | None


@dataclass(frozen=True, slots=True)
class AppendDone:
    """The answer: the append's positions. ``deduplicated``: answered from the window
    (nothing appended this time). ``settled``: its add failed, but the CLOSED ledger
    holds it."""

    first: Position
    last: Position
    deduplicated: bool = False
    settled: bool = False


@dataclass(frozen=True, slots=True)
class AppendFailed:
    """The answer: ``error``. ``outcome_unknown``: the entries may still turn up in the
    log (their ledger did not close in time)."""

    error: QuireError
    outcome_unknown: bool = False


Effect = (
    WaitForKey | AwaitClosed | AddEntries | ReadRole | RollLedger | ReleaseKey | AppendDone
    | AppendFailed
)  # fmt: skip


class LogAppendOp:
    """Append ``payloads`` with Idempotency-Key ``key`` (or None) to log ``log_name``,
    whose writer keeps ``window`` (see the module docstring)."""

    def __init__(
        self,
        window: DedupWindow,
        log_name: str,
        payloads: Sequence[bytes],
        key: str | None,
        attempts_max: int = APPEND_ATTEMPTS_MAX,
    ) -> None:
        invariant(attempts_max >= 1, "an append gets at least one ledger")
        self.window = window
        self.log_name = log_name
        self.payloads = tuple(payloads)
        self.key = key
        self.attempts_max = attempts_max
        self.digest = log_records.records_digest(payloads) if key is not None else None
        self.done = False
        self.attempts = 0
        self._started = False
        self._claimed = False  # the key is ours to settle
        self._earlier: Unsettled | None = None  # being settled before appending
        self._failed: AddFailed | None = None  # the add being settled

    def start(self, now_ms: int) -> list[Effect]:
        invariant(not self._started and not self.done, "an append starts once")
        self._started = True
        if self.key is None:
            return self._add(now_ms)
        return self._claim(now_ms)

    def handle(self, event: Event, now_ms: int) -> list[Effect]:
        """The answer to the last effect carried out, at ``now_ms``."""
        invariant(not self.done, "an event after the append ended")
        if isinstance(event, KeyReleased):
            if event.appended is not None:
                return self._done(event.appended.first, event.appended.last, dedup=True)
            return self._claim(now_ms)  # the first attempt failed: claim the key
        if isinstance(event, EntriesAdded):
            first = Position(event.ledger_id, event.first_entry_id)
            last = Position(event.ledger_id, event.last_entry_id)
            return self._appended(first, last, event.time_ms, now_ms)
        if isinstance(event, AddFailed):
            if not isinstance(event.error, UNKNOWN_OUTCOME):
                return self._fail(event.error, now_ms)
            self._failed = event
            if event.error.entries is not None:
                return [AwaitClosed(event.ledger_id)]
            return [ReadRole()]
        if isinstance(event, LedgerEnded | LedgerStillOpen | LedgerGone):
            if self._earlier is not None:
                return self._on_earlier_closed(event, now_ms)
            return self._on_failed_closed(event, now_ms)
        if isinstance(event, RoleHeld):
            failed = present(self._failed, "the role re-read while settling no add")
            if event.ledger_id == failed.ledger_id:
                return [RollLedger("ledger_lost")]
            return self._add(now_ms)  # another append rolled already
        if isinstance(event, RollDone):
            return self._add(now_ms)
        return self._fail(event.error, now_ms)

    def abandon(self, now_ms: int) -> list[Effect]:
        """The runner stops the append before its end (its request was cancelled): the
        key is released as failed, so that a retry may append."""
        if self.done:
            return []
        self.done = True
        return self._settle(None, now_ms)

    # ------------------------------------------------------------ the key

    def _claim(self, now_ms: int) -> list[Effect]:
        key, digest = present(self.key, "claiming no key"), present(self.digest, "a digest")
        try:
            known = self.window.claim(key, digest, now_ms)
        except IdempotencyKeyReused as exc:  # the key came with other records
            self.done = True
            return [AppendFailed(exc)]
        if isinstance(known, InFlight):
            return [WaitForKey(key)]
        if isinstance(known, Appended):
            return self._done(known.first, known.last, dedup=True)
        self._claimed = True
        if known is not None:
            self._earlier = known
            return [AwaitClosed(known.ledger_id)]
        return self._add(now_ms)

    def _on_earlier_closed(
        self, event: LedgerEnded | LedgerStillOpen | LedgerGone, now_ms: int
    ) -> list[Effect]:
        """A retry of an append whose outcome was left unknown: answered with the earlier
        attempt's positions when it is in the log (remembered), appended when it is not,
        else the outcome is still unknown (the key kept), for good when the ledger is
        gone."""
        earlier = present(self._earlier, "settling no earlier attempt")
        self._earlier = None
        key = present(self.key, "an earlier attempt without a key")
        if not isinstance(event, LedgerEnded):
            self.done = True
            error = unknown_outcome(key, earlier.ledger_id, gone=isinstance(event, LedgerGone))
            return [*self._settle(None, now_ms, earlier), AppendFailed(error, True)]
        if earlier.last_entry_id > event.last_entry_id:
            return self._add(now_ms)
        first = Position(earlier.ledger_id, earlier.first_entry_id)
        last = Position(earlier.ledger_id, earlier.last_entry_id)
        appended = Appended(first, last, earlier.digest, earlier.at_ms)
        self.done = True
        return [*self._settle(appended, now_ms), AppendDone(first, last, True, settled=True)]

    def _settle(
        self, appended: Appended | None, now_ms: int, unknown: Unsettled | None = None
    ) -> list[Effect]:
        if not self._claimed:
            return []
        key = present(self.key, "a claim without a key")
        self._claimed = False
        self.window.settle(key, appended, now_ms, unknown)
        return [ReleaseKey(key, appended)]

    # ------------------------------------------------------------ the add

    def _add(self, now_ms: int) -> list[Effect]:
        if self.attempts >= self.attempts_max:
            error = NotWriter(
                f"log {self.log_name}: the append failed on {self.attempts_max} ledgers in "
                "a row; nothing of it is in the log"
            )
            return self._fail(error, now_ms)
        self.attempts += 1
        self._failed = None
        return [AddEntries(self.payloads, self.key, self.digest)]

    def _on_failed_closed(
        self, event: LedgerEnded | LedgerStillOpen | LedgerGone, now_ms: int
    ) -> list[Effect]:
        failed = present(self._failed, "a ledger closed while settling no add")
        first_id, last_id = present(failed.error.entries, "settling an add without ids")
        if not isinstance(event, LedgerEnded):  # not closed in time, or gone: unknown
            unknown = Unsettled(failed.ledger_id, first_id, last_id, self.digest or b"", now_ms)
            self.done = True
            return [*self._settle(None, now_ms, unknown), AppendFailed(failed.error, True)]
        if last_id <= event.last_entry_id:
            first = Position(failed.ledger_id, first_id)
            last = Position(failed.ledger_id, last_id)
            return self._appended(first, last, failed.time_ms, now_ms, settled=True)
        return [ReadRole()]  # not in the log: still the writer?

    def _appended(
        self, first: Position, last: Position, stamp_ms: int, now_ms: int, settled: bool = False
    ) -> list[Effect]:
        """The append is entries ``first``..``last``, stamped ``stamp_ms``."""
        self.done = True
        appended = Appended(first, last, self.digest or b"", stamp_ms)
        return [*self._settle(appended, now_ms), AppendDone(first, last, settled=settled)]

    def _done(self, first: Position, last: Position, dedup: bool) -> list[Effect]:
        self.done = True
        return [AppendDone(first, last, deduplicated=dedup)]

    def _fail(self, error: QuireError, now_ms: int) -> list[Effect]:
        self.done = True
        return [*self._settle(None, now_ms), AppendFailed(error)]
