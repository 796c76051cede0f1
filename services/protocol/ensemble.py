"""Ensemble changes and the writer's close: the metadata decisions of a write handle.

Ensemble change (docs/protocol.md, "Failure while writing"): when bookies of the
current ensemble fail an add, the writer replaces them. The new fragment
starts at the first entry not yet acknowledged to the client (``lac + 1``;
acknowledgements are held back while the change is in progress, so this
stays true until the CAS lands), each failed bookie is replaced at its own
index by a writable bookie not in the ensemble, and the result is written by
CAS. On a CAS conflict the writer re-reads: if the ledger is no longer OPEN
every pending add fails (ledger_fenced); otherwise it plans again on the
fresh metadata. ``plan_ensemble_change`` is the plan (the recovery's write-backs
use it too); ``EnsembleChange`` is the write handle's sub-machine that runs it.

Close as writer (docs/protocol.md, "Closing as writer"): CAS OPEN -> CLOSED with
last entry = the last entry acknowledged to the client. On conflict the
fresh metadata decides, see ``close_outcome``.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from enum import StrEnum

from services.errors import NotEnoughBookies, invariant
from services.protocol import placement
from services.protocol.cas import MetadataCas
from services.protocol.messages import (
    Effect,
    ReadWritableBookies,
    WritableBookies,
    WriteMetadata,
)
from services.protocol.metadata import LedgerMetadata, LedgerState


def plan_ensemble_change(
    metadata: LedgerMetadata,
    failed: Collection[str],
    writable: Iterable[str],
    lac: int,
    rng: random.Random,
    instances: Mapping[str, str | None] | None = None,
    racks: placement.Racks = placement.NO_RACKS,
) -> tuple[LedgerMetadata, bool]:
    """The metadata with every failed bookie of the last ensemble replaced, in a
    fragment starting at ``lac + 1`` (``NotEnoughBookies`` when impossible), and
    whether the new ensemble meets the rack policy (``placement.Placement.spread``).
    The new fragment records the replacements' instances from ``instances`` (their
    registered ones) and keeps the recorded instances of the bookies it keeps."""
    ensemble = metadata.ensemble
    placed = placement.choose_replacements(
        ensemble,
        [b for b in ensemble if b in failed],
        writable,
        metadata.write_quorum,
        rng,
        racks,
        exclude=failed,
    )
    return metadata.with_ensemble(lac + 1, placed.bookies, instances), placed.spread


_NONE_FAILED: frozenset[str] = frozenset()


class EnsembleChange:
    """The replacement of a write handle's failed bookies: a sub-machine the handle
    (``writer.WriteHandle``) owns, sharing the handle's ``cas.MetadataCas`` (one metadata
    write in flight at a time, a change's or a close's).

    It keeps what a change needs: the bookies of the current ensemble that failed an add
    (``failed``), the writable bookies last read with their registered instances, and
    the change in progress. The first failure starts a change, which asks for the
    writable bookies; ``plan`` then builds the new fragment at ``lac + 1`` on the
    handle's metadata and writes it through the CAS, at most ``attempts_max`` writes
    in one operation. With no replacement writable, or once the attempts are used, the
    change waits ``retry_ms``, asks for the writable bookies again (``tick``) and
    starts a new operation.

    The handle keeps the rest: its state and metadata, the pending adds (it holds
    acknowledgements back while ``in_progress`` and re-sends pending entries when it
    adopts new metadata), what each CAS result means, and when a change is no longer
    needed (``end``).
    """

    def __init__(
        self, cas: MetadataCas, rng: random.Random, *, retry_ms: int, attempts_max: int
    ) -> None:
        # Bookies of the current ensemble that failed an add. A frozenset, so that every
        # handle shares one empty one: an empty set costs 216 bytes in each of the many
        # idle write handles a gateway may hold.
        self.failed: frozenset[str] = _NONE_FAILED
        self._cas = cas
        self._rng = rng
        self._retry_ms = retry_ms
        self._attempts_max = attempts_max
        self._writable: tuple[str, ...] = ()
        self._instances: dict[str, str | None] = {}  # the writable bookies' instances
        self._racks: dict[str, str] = {}  # the registered bookies' racks
        self._active = False
        self._waiting = False  # for writable bookies, until ``_retry_at``
        self._cas_begun = False  # its metadata operation (bounded attempts) has started
        self._written = False  # a CAS of it was sent: it may land, whatever we heard back
        self._retry_at = 0

    @property
    def in_progress(self) -> bool:
        return self._active

    @property
    def written(self) -> bool:
        """A CAS of the change in progress was sent: it may land, whatever came back."""
        return self._written

    @property
    def waiting_for_bookies(self) -> bool:
        """In progress without a write: no replacement was writable, or the CAS kept
        losing."""
        return self._waiting

    def bookie_failed(self, bookie: str, now: int) -> list[Effect]:
        """Count ``bookie`` of the current ensemble as failed. The first failure starts a
        change, which asks for the writable bookies; a later one is planned together
        with the change in progress (or right after it)."""
        self.failed = self.failed | {bookie}
        if self._active:
            return []
        self._active = True
        self._retry_at = now + self._retry_ms
        return [ReadWritableBookies()]

    def take_writable(self, event: WritableBookies) -> None:
        self._writable = tuple(event.bookies)
        self._instances = event.instance_map()
        self._racks = event.rack_map()

    def replaces_any(self, ensemble: Sequence[str]) -> bool:
        """Whether a bookie of ``ensemble`` failed (else there is nothing to replace)."""
        return any(b in self.failed for b in ensemble)

    def forget_replaced(self, ensemble: Sequence[str]) -> None:
        """Forget the failed bookies that ``ensemble`` (new metadata) no longer holds."""
        self.failed &= set(ensemble)

    def plan(
        self, metadata: LedgerMetadata, version: int, lac: int, now: int
    ) -> WriteMetadata | None:
        """The CAS write of the new fragment at ``lac + 1``, planned on ``metadata`` at
        ``version``; None when it must wait for writable bookies instead (none can
        replace a failed one, or this operation used its attempts)."""
        invariant(self._active, "an ensemble change planned while none is in progress")
        try:
            target, spread = plan_ensemble_change(
                metadata, self.failed, self._writable, lac, self._rng, self._instances, self._racks
            )
        except NotEnoughBookies:
            self.wait(now)
            return None
        if not self._cas_begun:
            self._cas_begun = True
            self._cas.begin(self._attempts_max)
        write = self._cas.write(target, version, spread)
        if write is None:  # it kept losing the CAS: wait a retry period, then start again
            self.wait(now)
            return None
        self._written = True
        self._waiting = False
        return write

    def wait(self, now: int) -> None:
        """Wait ``retry_ms`` for writable bookies, then start a new metadata operation."""
        invariant(self._active, "waiting for bookies without an ensemble change")
        self._waiting = True
        self._cas_begun = False
        self._retry_at = now + self._retry_ms

    def next_deadline(self) -> int | None:
        """When ``tick`` asks for the writable bookies again, or None."""
        return self._retry_at if self._waiting and not self._cas.busy else None

    def tick(self, now: int) -> list[Effect]:
        if not self._waiting or self._cas.busy or self._retry_at > now:
            return []
        self._retry_at = now + self._retry_ms
        return [ReadWritableBookies()]

    def end(self) -> None:
        """No change is in progress (done, or no longer needed); the failed bookies stay
        failed until new metadata replaces them."""
        self._active = self._waiting = self._cas_begun = self._written = False


class CloseOutcome(StrEnum):
    """What a writer's close does after its CAS lost, given the fresh metadata."""

    RETRY = "retry"  # still OPEN (e.g. a replicator changed a fragment): CAS again
    FENCED = "fenced"  # IN_RECOVERY: a recovery is closing it; error (ledger_fenced)
    DONE = "done"  # CLOSED at the last entry we acknowledged: success
    CLOSED_ELSEWHERE = "closed_elsewhere"  # CLOSED at another last entry: error


def close_outcome(fresh: LedgerMetadata, lac: int) -> CloseOutcome:
    """docs/protocol.md "Closing as writer": on conflict re-read; still OPEN -> retry;
    IN_RECOVERY -> error; CLOSED with the same last entry -> success; CLOSED with
    another last entry -> error."""
    if fresh.state is LedgerState.OPEN:
        return CloseOutcome.RETRY
    if fresh.state is LedgerState.IN_RECOVERY:
        return CloseOutcome.FENCED
    if fresh.last_entry_id == lac:
        return CloseOutcome.DONE
    return CloseOutcome.CLOSED_ELSEWHERE
