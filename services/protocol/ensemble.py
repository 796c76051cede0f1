"""Ensemble changes and the writer's close: the metadata decisions of a write handle.

Ensemble change (docs/protocol.md, "Failure while writing"): when bookies of the
current ensemble fail an add, the writer replaces them. The new fragment
starts at the first entry not yet acknowledged to the client (``lac + 1``;
acknowledgements are held back while the change is in progress, so this
stays true until the CAS lands), each failed bookie is replaced at its own
index by a writable bookie not in the ensemble, and the result is written by
CAS. On a CAS conflict the writer re-reads: if the ledger is no longer OPEN
every pending add fails (ledger_fenced); otherwise it plans again on the
fresh metadata.

Close as writer (docs/protocol.md, "Closing as writer"): CAS OPEN -> CLOSED with
last entry = the last entry acknowledged to the client. On conflict the
fresh metadata decides, see ``close_outcome``.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping
from enum import StrEnum

from services.protocol import placement
from services.protocol.metadata import LedgerMetadata, LedgerState


def plan_ensemble_change(
    metadata: LedgerMetadata,
    failed: Collection[str],
    writable: Iterable[str],
    lac: int,
    rng: random.Random,
    instances: Mapping[str, str | None] | None = None,
) -> LedgerMetadata:
    """The metadata with every failed bookie of the last ensemble replaced, in a
    fragment starting at ``lac + 1`` (``NotEnoughBookies`` when impossible). The new
    fragment records the replacements' instances from ``instances`` (their registered
    ones) and keeps the recorded instances of the bookies it keeps."""
    ensemble = metadata.ensemble
    new_ensemble = placement.choose_replacements(
        ensemble, [b for b in ensemble if b in failed], writable, rng, exclude=failed
    )
    return metadata.with_ensemble(lac + 1, new_ensemble, instances)


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
