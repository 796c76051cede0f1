"""One compare-and-set of a ledger's metadata, with its retry rules (a sub-machine).

The write handle (ensemble change, close) and the recovery (mark IN_RECOVERY,
close) change the metadata the same way, so both use this one machine:

1. Write the target at the version it was planned on (``WriteMetadata``).
2. ``MetadataWritten`` -> ``CasWritten``: done.
3. ``MetadataConflicted`` (the znode changed; the runner re-read it) ->
   ``CasFresh``: the fresh metadata goes back to the owner, which decides: done
   (someone else made the change, or ours landed), give up, or rebuild its
   target on the fresh metadata and ``write`` again. One operation issues at
   most ``attempts_max`` writes; past that ``write`` returns None and the
   owner says what that means (wait, or fail).
4. ``MetadataFailed`` (the store did not answer: the write's outcome is
   unknown) -> wait ``retry_ms`` (a deadline: the owner feeds ``Tick``), then
   re-read (``ReadMetadata``); the ``MetadataRead`` answer comes back as
   ``CasFresh``, exactly like a conflict, and the owner sees whether its write
   landed. More than ``failures_max`` failures in a row -> ``CasFailed``
   (metadata_unavailable); ``ledger_not_found`` -> ``CasFailed`` at once.

At most one write (or the read that settles it) is in flight. The machine does
no I/O and reads no clock: times arrive as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.errors import LedgerNotFound, MetadataUnavailable, QuireError, invariant
from services.protocol.limits import CasLimits
from services.protocol.messages import (
    MetadataConflicted,
    MetadataFailed,
    MetadataRead,
    MetadataWritten,
    ReadMetadata,
    WriteMetadata,
)
from services.protocol.metadata import LedgerMetadata


@dataclass(frozen=True, slots=True)
class CasWritten:
    metadata: LedgerMetadata
    version: int


@dataclass(frozen=True, slots=True)
class CasFresh:
    """The znode's current value after a lost (or unknown) write: the owner decides."""

    metadata: LedgerMetadata
    version: int


@dataclass(frozen=True, slots=True)
class CasFailed:
    error: type[QuireError]
    message: str


CasResult = CasWritten | CasFresh | CasFailed
CasEvent = MetadataWritten | MetadataConflicted | MetadataRead | MetadataFailed


class MetadataCas:
    def __init__(self, ledger_id: int, limits: CasLimits) -> None:
        self.ledger_id = ledger_id
        self.limits = limits
        self.attempts = 0  # writes issued by the current operation
        self._attempts_max = 0
        self._failures = 0
        self._in_flight = False
        self._read_at: int | None = None

    @property
    def busy(self) -> bool:
        """A write, its settling read, or the back-off before that read, is outstanding."""
        return self._in_flight

    def begin(self, attempts_max: int) -> None:
        """Start a new operation of at most ``attempts_max`` writes."""
        invariant(not self._in_flight, "a metadata operation began while one is in flight")
        invariant(attempts_max >= 1, "a metadata operation needs at least one attempt")
        self.attempts = 0
        self._attempts_max = attempts_max
        self._failures = 0

    def write(
        self, target: LedgerMetadata, version: int, spread: bool = True
    ) -> WriteMetadata | None:
        """The next write of the operation, or None once ``attempts_max`` were issued
        (``spread``: see ``WriteMetadata``)."""
        invariant(not self._in_flight, "a metadata write while one is in flight")
        if self.attempts >= self._attempts_max:
            return None
        self.attempts += 1
        self._in_flight = True
        return WriteMetadata(target, version, spread)

    def cancel(self) -> None:
        """Forget the outstanding write: its answer will be ignored."""
        self._in_flight = False
        self._read_at = None

    def take(self, event: CasEvent, now: int) -> CasResult | None:
        """The result of a metadata event, or None (waiting to re-read, or not ours)."""
        if not self._in_flight or self._read_at is not None:
            return None
        if isinstance(event, MetadataWritten):
            self._in_flight = False
            self._failures = 0
            return CasWritten(event.metadata, event.version)
        if isinstance(event, MetadataConflicted | MetadataRead):
            self._in_flight = False
            self._failures = 0
            return CasFresh(event.metadata, event.version)
        if event.code == LedgerNotFound.code:
            self._in_flight = False
            return CasFailed(LedgerNotFound, f"ledger {self.ledger_id} was deleted")
        self._failures += 1
        if self._failures > self.limits.failures_max:
            self._in_flight = False
            return CasFailed(
                MetadataUnavailable,
                f"ledger {self.ledger_id}: cannot reach the metadata store ({event.message})",
            )
        self._read_at = now + self.limits.retry_ms  # the outcome is unknown: look, later
        return None

    def next_deadline(self) -> int | None:
        return self._read_at

    def tick(self, now: int) -> list[ReadMetadata]:
        if self._read_at is None or self._read_at > now:
            return []
        self._read_at = None
        return [ReadMetadata(self.ledger_id)]
