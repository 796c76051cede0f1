"""Taking a log's writer role and rolling its ledger, as pure operations (docs/protocol.md,
"Ledgers to logs").

Each operation takes events and returns effects (docs/style.md §1); the gateway's runner
(``gateway/logs/writer.py``) and the simulator (``tests/simulation/logs.py``) carry the
effects out and feed the answers back.

AcquireWriter. 1) Read the log. 2) Fence and recover the last TWO ledgers of the list
(the previous writer may still be adding to the second-to-last while its roll put the
last one in the list). 3) Create a ledger (once: a later attempt reuses it). 4) CAS
the list with that ledger appended and the role at the next epoch. On a CAS conflict
start again at 1 after a back-off, at most ``attempts_max`` times. The role is not
held, and no append may be served, before 4 succeeded (``Acquired``).

RollLog. 0) Close (``RecoverLedgers``) what earlier rolls of this writer left behind,
maybe still OPEN: the ledger the last roll rolled away from (its close may hang), and
one a failed roll may have listed (its CAS's answer lost). A new writer fences only the
last TWO ledgers, so one left OPEN behind them would stay OPEN for ever and readers,
who stop at an OPEN ledger, would never reach the records after it (found by the log
simulator, race seeds 38 and 76). 1) Create a ledger. 2) CAS it into the list, if the
role is still ours (a conflict re-reads the log: another writer means the role is
lost; any other change, a truncation, is retried on the fresh list). 3) ``Rolled``:
the runner sends new appends to the new ledger and only then closes the old one, so
appends keep flowing during the roll. Safe because a new writer fences the last two
ledgers.

Unknown outcomes. A CAS whose answer was lost (``LogWriteUnknown``) may have landed:
the operation re-reads the log and looks for its ledger. A ledger of ours is deleted
(``DeleteLedger``) only when the log is known not to list it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from random import Random

from services.errors import (
    InvalidArgument,
    LogNotFound,
    MetadataConflict,
    NotWriter,
    QuireError,
    invariant,
    present,
)
from services.protocol.limits import (
    LOG_WRITER_ATTEMPTS_MAX,
    LOG_WRITER_BACKOFF_FIRST_MS,
    LOG_WRITER_BACKOFF_MAX_MS,
)
from services.protocol.logs import LogMetadata

# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class LogRead:
    log: LogMetadata | None  # None: the log does not exist
    version: int


@dataclass(frozen=True, slots=True)
class LedgersRecovered:
    """Every ledger of ``RecoverLedgers`` is CLOSED (recovered, or it already was)."""


@dataclass(frozen=True, slots=True)
class LedgerCreated:
    ledger_id: int


@dataclass(frozen=True, slots=True)
class LogWritten:
    version: int


@dataclass(frozen=True, slots=True)
class LogConflict:
    """The CAS lost: the log's version moved."""


@dataclass(frozen=True, slots=True)
class LogWriteUnknown:
    """The CAS's answer was lost (ZooKeeper unavailable): it may have landed."""


@dataclass(frozen=True, slots=True)
class Waited:
    pass


@dataclass(frozen=True, slots=True)
class StepFailed:
    """An effect failed for good (the error to answer with)."""

    error: type[QuireError]
    message: str


Event = (
    LogRead
    | LedgersRecovered
    | LedgerCreated
    | LogWritten
    | LogConflict
    | LogWriteUnknown
    | Waited
    | StepFailed
)

# ---------------------------------------------------------------- effects


@dataclass(frozen=True, slots=True)
class ReadLog:
    name: str


@dataclass(frozen=True, slots=True)
class RecoverLedgers:
    """Fence and recover (close) each OPEN ledger of ``ledger_ids``."""

    ledger_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CreateLedger:
    ensemble_size: int
    write_quorum: int
    ack_quorum: int


@dataclass(frozen=True, slots=True)
class WriteLog:
    log: LogMetadata
    version: int


@dataclass(frozen=True, slots=True)
class Wait:
    ms: int


@dataclass(frozen=True, slots=True)
class DeleteLedger:
    """Delete a ledger this operation created and the log does not list (best effort)."""

    ledger_id: int


@dataclass(frozen=True, slots=True)
class Acquired:
    log: LogMetadata
    version: int
    ledger_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Rolled:
    log: LogMetadata
    version: int
    ledger_id: int


@dataclass(frozen=True, slots=True)
class Attached:
    log: LogMetadata
    version: int
    committed: bool  # False: the commit id had this sequence already; nothing changed


@dataclass(frozen=True, slots=True)
class Failed:
    error: type[QuireError]
    message: str

    def exception(self) -> QuireError:
        return self.error(self.message)


Effect = (
    ReadLog | RecoverLedgers | CreateLedger | WriteLog | Wait | DeleteLedger | Acquired
    | Rolled | Attached | Failed
)  # fmt: skip


def backoff_ms(attempt: int, rng: Random) -> int:
    """Back-off before attempt ``attempt`` (1-based): doubling, capped, with jitter so
    duelling writers drift apart."""
    ceiling = min(LOG_WRITER_BACKOFF_MAX_MS, LOG_WRITER_BACKOFF_FIRST_MS << min(attempt, 10))
    return rng.randint(ceiling // 2, ceiling)


class _Operation:
    """What both operations share: one created ledger, bounded attempts, the end."""

    def __init__(self, name: str, gateway: str, rng: Random, attempts_max: int) -> None:
        self.name = name
        self.gateway = gateway
        self.rng = rng
        self.attempts_max = attempts_max
        self.attempts = 0
        self.ledger_id: int | None = None
        self.done = False
        self._checking = False  # re-reading after a CAS whose outcome is unknown

    def _fail(self, error: type[QuireError], message: str, listed: bool) -> list[Effect]:
        """The end, failed; our ledger is deleted unless the log may list it."""
        self.done = True
        effects: list[Effect] = [Failed(error, message)]
        if self.ledger_id is not None and not listed:
            effects.insert(0, DeleteLedger(self.ledger_id))
        return effects

    def _conflict(self) -> list[Effect]:
        self.attempts += 1
        if self.attempts >= self.attempts_max:
            return self._fail(
                MetadataConflict,
                f"log {self.name}: the list kept changing ({self.attempts} attempts)",
                listed=False,
            )
        return [Wait(backoff_ms(self.attempts, self.rng))]

    def _unknown_step(self, event: StepFailed) -> list[Effect]:
        # A read failing while we check whether a CAS landed: the ledger may be listed.
        return self._fail(event.error, event.message, listed=self._checking)


class AcquireWriter(_Operation):
    """Take the writer role of log ``name`` for ``gateway`` (see the module docstring).
    With ``vacant``, only while ``vacant(log)`` holds for the log as read at each attempt
    (a gateway taking a log with no live writer, gateway/logs/owners.py): else it fails
    with ``NotWriter`` naming the writer, and nothing was fenced."""

    def __init__(
        self,
        name: str,
        gateway: str,
        rng: Random,
        attempts_max: int = LOG_WRITER_ATTEMPTS_MAX,
        vacant: Callable[[LogMetadata], bool] | None = None,
    ) -> None:
        super().__init__(name, gateway, rng, attempts_max)
        self.vacant = vacant
        self.log: LogMetadata | None = None
        self.version = -1
        self.fenced: tuple[int, ...] = ()

    def start(self) -> list[Effect]:
        return [ReadLog(self.name)]

    def handle(self, event: Event) -> list[Effect]:
        invariant(not self.done, "an event after the operation ended")
        if isinstance(event, LogRead):
            return self._on_read(event)
        if isinstance(event, LedgersRecovered):
            return self._create_or_write()
        if isinstance(event, LedgerCreated):
            self.ledger_id = event.ledger_id
            return self._create_or_write()
        if isinstance(event, LogWritten):
            return self._acquired(event.version)
        if isinstance(event, LogConflict):
            return self._conflict()
        if isinstance(event, LogWriteUnknown):
            self._checking = True
            return [ReadLog(self.name)]
        if isinstance(event, Waited):
            return [ReadLog(self.name)]
        return self._unknown_step(event)

    def _on_read(self, event: LogRead) -> list[Effect]:
        log = event.log
        if log is None:
            return self._fail(LogNotFound, f"no log {self.name!r}", listed=False)
        # Our ledger listed: a CAS of ours landed, maybe after a re-read had not seen it
        # (a write whose answer was lost may land late), so not only while checking.
        if self.ledger_id is not None and self.ledger_id in log.ledgers:
            self._checking = False
            intended = self.log.writer if self.log is not None else None
            if intended is not None and log.writer == intended:
                self.log, self.version = log, event.version
                return self._acquired(event.version)
            return self._fail(
                NotWriter, f"log {self.name}: another writer took the role", listed=True
            )
        if self._checking:
            self._checking = False
            return self._conflict()  # the CAS did not land: an attempt like a conflict
        if self.vacant is not None and not self.vacant(log):
            holder = present(log.writer, "a log with no writer is vacant")
            return self._fail(
                NotWriter,
                f"log {self.name} is written by gateway {holder.gateway} (epoch {holder.epoch})",
                listed=False,
            )
        self.log, self.version = log, event.version
        self.fenced = log.to_fence()
        if self.fenced:
            return [RecoverLedgers(self.fenced)]
        return self._create_or_write()

    def _create_or_write(self) -> list[Effect]:
        log = present(self.log, "writing a log not read")
        if self.ledger_id is None:
            return [CreateLedger(log.ensemble_size, log.write_quorum, log.ack_quorum)]
        try:
            new = log.with_new_writer(self.gateway, self.ledger_id)
        except InvalidArgument as exc:
            return self._fail(InvalidArgument, exc.message, listed=False)
        self.log = new
        return [WriteLog(new, self.version)]

    def _acquired(self, version: int) -> list[Effect]:
        log = present(self.log, "acquired without a log")
        writer = present(log.writer, "acquired without a writer")
        self.done = True
        return [Acquired(log, version, present_id(self.ledger_id), writer.epoch)]


class AttachLedgers(AcquireWriter):
    """Append ``ledger_ids`` (CLOSED ledgers written elsewhere) to log ``name`` in ONE CAS,
    taking the writer role the way ``AcquireWriter`` does (the last two ledgers fenced
    first) and leaving it free (``LogMetadata.with_attached``). With ``commit`` (id,
    sequence) a sequence the log already recorded for that id (or a later one) changes
    nothing: ``Attached(committed=False)``. The ledgers are the caller's: never deleted
    here."""

    def __init__(
        self,
        name: str,
        gateway: str,
        ledger_ids: Sequence[int],
        commit: tuple[str, int] | None,
        rng: Random,
        attempts_max: int = LOG_WRITER_ATTEMPTS_MAX,
    ) -> None:
        super().__init__(name, gateway, rng, attempts_max)
        invariant(bool(ledger_ids), "attaching no ledger")
        self.attach = tuple(ledger_ids)
        self.commit = commit
        self.ledger_id = self.attach[0]  # what "our CAS landed" looks for in the list

    def _on_read(self, event: LogRead) -> list[Effect]:
        log = event.log
        if log is not None and self.ledger_id in log.ledgers:  # our CAS landed
            self._checking = False
            self.log, self.version = log, event.version
            return self._landed(log, event.version)
        if log is not None and self.commit is not None:
            done = log.committed(self.commit[0])
            if done is not None and done >= self.commit[1]:
                self.done = True
                return [Attached(log, event.version, False)]
        return super()._on_read(event)

    def _create_or_write(self) -> list[Effect]:
        log = present(self.log, "writing a log not read")
        try:
            new = log.with_attached(self.attach, self.commit)
        except InvalidArgument as exc:
            return self._fail(InvalidArgument, exc.message, listed=False)
        self.log = new
        return [WriteLog(new, self.version)]

    def _landed(self, log: LogMetadata, version: int) -> list[Effect]:
        self.done = True
        return [Attached(log, version, True)]

    def _acquired(self, version: int) -> list[Effect]:
        return self._landed(present(self.log, "attached without a log"), version)

    def _fail(self, error: type[QuireError], message: str, listed: bool) -> list[Effect]:
        self.done = True
        return [Failed(error, message)]  # the ledgers are the caller's to delete


class RollLog(_Operation):
    """Roll the log held by ``gateway`` at ``epoch`` to a new ledger, once the ledgers in
    ``behind`` (listed by this writer and left behind, maybe not CLOSED) are closed. At
    the end, ``behind`` holds what the next roll must close first: nothing after
    ``Rolled`` (the runner adds the ledger it rolled away from), the ledgers not known
    CLOSED and the ledger this roll created (maybe listed) after ``Failed``.

    ``close_behind=False`` is a test-only switch that brings back a known bug (listing a
    third ledger while an earlier one is still OPEN: race seed 38 of the log
    simulator); tests/simulation/test_log_simulation.py shows the simulator catches it."""

    def __init__(
        self,
        log: LogMetadata,
        version: int,
        gateway: str,
        epoch: int,
        rng: Random,
        attempts_max: int = LOG_WRITER_ATTEMPTS_MAX,
        behind: Sequence[int] = (),
        close_behind: bool = True,
    ) -> None:
        super().__init__(log.name, gateway, rng, attempts_max)
        self.log = log
        self.version = version
        self.epoch = epoch
        self.behind = list(behind)
        self.close_behind = close_behind

    def start(self) -> list[Effect]:
        if not self.log.held_by(self.gateway, self.epoch):
            return self._fail(NotWriter, self._lost(), listed=False)
        if self.behind and self.close_behind:
            return [RecoverLedgers(tuple(self.behind))]
        return self._create()

    def _create(self) -> list[Effect]:
        return [CreateLedger(self.log.ensemble_size, self.log.write_quorum, self.log.ack_quorum)]

    def _fail(self, error: type[QuireError], message: str, listed: bool) -> list[Effect]:
        if self.ledger_id is not None:
            self.behind.append(self.ledger_id)  # maybe listed: closed before the next roll
        return super()._fail(error, message, listed)

    def handle(self, event: Event) -> list[Effect]:
        invariant(not self.done, "an event after the operation ended")
        if isinstance(event, LedgerCreated):
            self.ledger_id = event.ledger_id
            return self._write()
        if isinstance(event, LogWritten):
            self.done = True
            self.behind = []
            return [Rolled(self.log, event.version, present_id(self.ledger_id))]
        if isinstance(event, LogConflict):
            effects = self._conflict()
            return effects if self.done else [ReadLog(self.name)]
        if isinstance(event, LogWriteUnknown):
            self._checking = True
            return [ReadLog(self.name)]
        if isinstance(event, LogRead):
            return self._on_read(event)
        if isinstance(event, Waited):
            return [ReadLog(self.name)]
        if isinstance(event, LedgersRecovered):
            self.behind = []
            return self._create()
        return self._unknown_step(event)

    def _on_read(self, event: LogRead) -> list[Effect]:
        log, ledger_id = event.log, present_id(self.ledger_id)
        if log is None:
            return self._fail(LogNotFound, f"log {self.name!r} was deleted", listed=False)
        if ledger_id in log.ledgers:  # our CAS landed after all
            self._checking = False
            self.log, self.version, self.done = log, event.version, True
            self.behind = []
            return [Rolled(log, event.version, ledger_id)]
        if not log.held_by(self.gateway, self.epoch):
            return self._fail(NotWriter, self._lost(log), listed=False)
        self._checking = False
        self.log, self.version = log, event.version
        return self._write()

    def _write(self) -> list[Effect]:
        try:
            new = self.log.with_roll(self.gateway, self.epoch, present_id(self.ledger_id))
        except InvalidArgument as exc:
            return self._fail(InvalidArgument, exc.message, listed=False)
        self.log = new
        return [WriteLog(new, self.version)]

    def _lost(self, log: LogMetadata | None = None) -> str:
        log = log or self.log
        holder = f"{log.writer.gateway} at epoch {log.writer.epoch}" if log.writer else "nobody"
        return f"this gateway is no longer the writer of log {self.name} (now: {holder})"


def present_id(ledger_id: int | None) -> int:
    return present(ledger_id, "no ledger created yet")


def fenced_ledgers(effects: Sequence[Effect]) -> tuple[int, ...]:
    """The ledgers a ``RecoverLedgers`` among ``effects`` names (for tests and logs)."""
    return next((e.ledger_ids for e in effects if isinstance(e, RecoverLedgers)), ())
