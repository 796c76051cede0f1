"""Ledger recovery (closing as a reader) as a state machine: BookKeeper's LedgerRecoveryOp.

Any gateway may run it, several at once; they converge through the CAS on the
metadata. ``start()`` returns the first effects, ``handle(event)`` the next.

1. CLOSED: done, unchanged. OPEN: CAS the state to IN_RECOVERY, after which
   the writer can no longer change the ensemble (IN_RECOVERY already: go on).
2. Fence every bookie of the last fragment. A bookie persists the fence flag
   before it answers, and from then on refuses normal adds. The answer names
   the bookie's instance: only answers of that instance count later (a bookie
   reformatted since is a new, unfenced one). Fencing is
   complete once, for EVERY write set of the ensemble, ``Qw - Qa + 1`` of its
   bookies answered (``quorum.fencing_complete``); we do not wait for the
   others (the runner times a hanging bookie out). If every bookie answered or
   failed without that coverage, the recovery fails (retriable). A bookie whose
   fence answer names another instance than the last fragment recorded is a
   "replaced instance" (``fencing.FenceAnswers``: fenced, but it proves no absence).
3. Every entry up to the floor,
   ``max(highest LAC returned, first id of the last fragment - 1)``, was acknowledged to a
   client and is on an ack quorum. Read forward from ``floor + 1``
   (``readforward.ReadForward``, which says which answers count). An entry found is
   written back to its whole write set with the recovery flag and counts once Qa bookies
   stored it (``writeback``: a bookie failing write-backs is replaced in a new fragment
   that stays local until step 5). The first entry missing from ``Qw - Qa + 1`` fenced
   bookies of its write set cannot have been acknowledged: the last entry is the one
   before. An entry neither found nor provably absent fails the recovery (retriable).
4. The length is the last entry's ``length`` field; when nothing is found beyond the floor,
   the length at ``floor`` that the fence answers gave (a bookie's length at its LAC or at
   its last entry), and only when none did, entry ``floor`` itself is read (from any bookie
   of its write set): that entry may sit in a fragment whose bookies are all gone.
5. CAS the state to CLOSED at that last entry and length, with the new
   fragments of step 4 if any (one atomic change). On conflict re-read:
   CLOSED -> done with that metadata (a concurrent recovery or the writer
   won, and everybody converges on it); IN_RECOVERY -> CAS again on it.

Both metadata steps follow ``cas.MetadataCas`` (the writer's rules too):
bounded attempts, and after a store failure (outcome unknown) a back-off of
``metadata_retry_ms`` before re-reading. The whole recovery is bounded by
``recovery_timeout_ms``, counted from ``start(now)`` on the ``Tick`` events the
runner feeds by ``next_deadline()``; past it the recovery fails (quorum_timeout,
retriable: running it again continues from where the metadata is).

Reads use the metadata as it was fenced; write-backs add the recovery's new fragments.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from services.errors import (
    LedgerNotFound,
    MetadataUnavailable,
    NotEnoughBookies,
    QuireError,
    QuorumTimeout,
    invariant,
    present,
)
from services.protocol.cas import CasFailed, CasFresh, CasWritten, MetadataCas
from services.protocol.fencing import FenceAnswers
from services.protocol.limits import CasLimits, RecoveryLimits
from services.protocol.messages import (
    BookieAddsDone,
    BookieFailed,
    Effect,
    EntryRead,
    Event,
    FenceDone,
    FenceFailed,
    MetadataConflicted,
    MetadataFailed,
    MetadataRead,
    MetadataWritten,
    ReadWritableBookies,
    RecoveryDone,
    RecoveryFailed,
    SendFence,
    Tick,
    WritableBookies,
)
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.readforward import ReadForward
from services.protocol.writeback import WriteBacks


class RecoveryPhase(StrEnum):
    MARKING = "marking"  # CAS to IN_RECOVERY in flight
    FENCING = "fencing"
    READING = "reading"  # reading forward and writing back
    CLOSING = "closing"  # CAS to CLOSED in flight
    DONE = "done"
    FAILED = "failed"


class LedgerRecovery:
    """Fence, find the last entry, write back, close: see the module docstring."""

    def __init__(
        self,
        metadata: LedgerMetadata,
        version: int,
        *,
        digest_key: bytes = b"",
        limits: RecoveryLimits | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.metadata = metadata
        self.version = version
        self.limits = limits or RecoveryLimits()
        self.phase = RecoveryPhase.MARKING
        self.fence_complete = False
        self.fenced_at_completion: frozenset[str] = frozenset()
        self.floor = -1
        self._key = digest_key
        self._rng = rng or random.Random(metadata.ledger_id)
        self._started = False
        self._now = 0
        self._deadline = 0
        self._cas = MetadataCas(
            metadata.ledger_id,
            CasLimits(
                failures_max=self.limits.metadata_attempts_max,
                retry_ms=self.limits.metadata_retry_ms,
            ),
        )
        self._fences = FenceAnswers(metadata)
        self._forward: ReadForward | None = None  # once fenced
        self._fenced = metadata  # the metadata as fenced: every read uses it
        self._writebacks = self._new_writebacks(metadata)
        self._changing = False  # waiting for WritableBookies
        self._close_length = 0
        self._handlers: dict[type, Callable[[Any], list[Effect]]] = {
            MetadataWritten: self._on_metadata,
            MetadataConflicted: self._on_metadata,
            MetadataRead: self._on_metadata,
            MetadataFailed: self._on_metadata,
            Tick: self._on_tick,
            FenceDone: self._on_fence_done,
            FenceFailed: self._on_fence_failed,
            EntryRead: self._on_entry_read,
            BookieAddsDone: self._on_adds_done,
            BookieFailed: self._on_bookie_failed,
            WritableBookies: self._on_writable,
        }

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    def _new_writebacks(self, metadata: LedgerMetadata) -> WriteBacks:
        limits = self.limits
        return WriteBacks(
            metadata,
            limits.recovery_write_attempts_max,
            limits.recovery_write_backs_in_flight_max,
        )

    @property
    def last_entry_id(self) -> int | None:
        """The last entry, once reading forward found it."""
        return self._forward.last_entry_id if self._forward is not None else None

    @property
    def finished(self) -> bool:
        return self.phase in (RecoveryPhase.DONE, RecoveryPhase.FAILED)

    def start(self, now: int) -> list[Effect]:
        """The first effects; ``now`` (ms) starts the ``recovery_timeout_ms`` clock."""
        invariant(not self._started, "a recovery starts once")
        self._started = True
        self._now = now
        self._deadline = now + self.limits.recovery_timeout_ms
        state = self.metadata.state
        if state is LedgerState.CLOSED:
            return self._done(self.metadata, self.version, closed_here=False)
        if state is LedgerState.OPEN:
            return self._begin_metadata_step(self.metadata.in_recovery(), self.version)
        return self._start_fencing()

    def next_deadline(self) -> int | None:
        """The time (ms) by which the runner must feed ``Tick``, or None."""
        if not self._started or self.finished:
            return None
        times = [self._deadline, self._cas.next_deadline()]
        if self.phase is RecoveryPhase.READING and self._forward is not None:
            times.append(self._forward.next_deadline())
        return min(t for t in times if t is not None)

    def handle(self, event: Event) -> list[Effect]:
        invariant(self._started, "a recovery takes events only after start()")
        if self.finished:
            return []
        now = getattr(event, "now", None)
        if now is not None:
            self._now = max(self._now, now)
        handler = present(
            self._handlers.get(type(event)), f"a recovery does not take {type(event).__name__}"
        )
        return handler(event)

    # ------------------------------------------------------------------ endings

    def _done(self, metadata: LedgerMetadata, version: int, *, closed_here: bool) -> list[Effect]:
        self.phase = RecoveryPhase.DONE
        self.metadata, self.version = metadata, version
        return [RecoveryDone(metadata, version, closed_here)]

    def _fail(self, error: type[QuireError], message: str) -> list[Effect]:
        self.phase = RecoveryPhase.FAILED
        return [RecoveryFailed(error, f"recovery of ledger {self.ledger_id}: {message}")]

    # ------------------------------------------------------------------ metadata

    def _begin_metadata_step(self, target: LedgerMetadata, version: int) -> list[Effect]:
        self._cas.begin(self.limits.metadata_attempts_max)
        return self._write_metadata(target, version)

    def _write_metadata(self, target: LedgerMetadata, version: int) -> list[Effect]:
        write = self._cas.write(target, version, self._writebacks.spread)
        if write is None:
            return self._fail(MetadataUnavailable, "the metadata kept changing under the CAS")
        return [write]

    def _on_metadata(
        self, event: MetadataWritten | MetadataConflicted | MetadataRead | MetadataFailed
    ) -> list[Effect]:
        if self.phase not in (RecoveryPhase.MARKING, RecoveryPhase.CLOSING):
            return []
        result = self._cas.take(event, self._now)
        if isinstance(result, CasWritten):
            if self.phase is RecoveryPhase.MARKING:
                self.metadata, self.version = result.metadata, result.version
                return self._start_fencing()
            return self._done(result.metadata, result.version, closed_here=True)
        if isinstance(result, CasFresh):
            return self._on_fresh_metadata(result.metadata, result.version)
        if isinstance(result, CasFailed):
            if result.error is LedgerNotFound:
                return self._fail(LedgerNotFound, "the ledger was deleted")
            return self._fail(result.error, result.message)
        return []

    def _on_fresh_metadata(self, fresh: LedgerMetadata, version: int) -> list[Effect]:
        if fresh.state is LedgerState.CLOSED:
            return self._done(fresh, version, closed_here=False)
        self.metadata, self.version = fresh, version
        if self.phase is RecoveryPhase.MARKING and fresh.state is LedgerState.IN_RECOVERY:
            return self._start_fencing()  # ours landed, or another recovery's did
        if self.phase is RecoveryPhase.CLOSING and fresh.state is LedgerState.OPEN:
            return self._fail(QuireError, "the ledger went back from IN_RECOVERY to OPEN")
        # The CAS lost to another change: try again on the fresh metadata.
        if self.phase is RecoveryPhase.MARKING:
            return self._write_metadata(fresh.in_recovery(), version)
        return self._write_close()

    def _on_tick(self, event: Tick) -> list[Effect]:
        if self._now >= self._deadline:
            self._cas.cancel()
            return self._fail(
                QuorumTimeout,
                f"did not finish in {self.limits.recovery_timeout_ms} ms; it can be run again",
            )
        effects: list[Effect] = list(self._cas.tick(self._now))
        if self.phase is RecoveryPhase.READING and self._forward is not None:
            effects += self._forward.tick(self._now)
        return effects

    # ------------------------------------------------------------------ fencing

    def _start_fencing(self) -> list[Effect]:
        self.phase = RecoveryPhase.FENCING
        self._fences = FenceAnswers(self.metadata)  # as fenced (an ensemble change may
        # have landed before the IN_RECOVERY CAS): its ensemble and instances decide
        return [SendFence(self.ledger_id, bookie) for bookie in self.metadata.ensemble]

    def _on_fence_done(self, event: FenceDone) -> list[Effect]:
        if event.bookie not in self.metadata.ensemble or self.phase is RecoveryPhase.MARKING:
            return []
        if not self._fences.answered(event):
            return []  # a repeated answer: the first instance to answer is the fenced one
        if self.phase is RecoveryPhase.READING and self._forward is not None:
            # A late answer: the bookie is fenced, the reads still undecided may use it.
            self._forward.now = max(self._forward.now, self._now)
            replaced = event.bookie in self._fences.replaced
            forward = self._forward
            return list(forward.add_fenced(event.bookie, event.instance_id, replaced=replaced))
        if self.phase is not RecoveryPhase.FENCING:
            return []
        if self._fences.covered():
            return self._start_reading()
        return self._fencing_settled()

    def _on_fence_failed(self, event: FenceFailed) -> list[Effect]:
        if event.bookie not in self.metadata.ensemble:
            return []
        if self.phase is RecoveryPhase.READING and self._forward is not None:
            self._forward.fences_awaited.discard(event.bookie)
            return self._decide_and_ask([])  # an entry waiting for it may fail now
        if self.phase is not RecoveryPhase.FENCING:
            return []
        self._fences.failed(event.bookie)
        return self._fencing_settled()

    def _fencing_settled(self) -> list[Effect]:
        """Fail when every bookie answered or failed and the coverage is still not met."""
        failure = self._fences.failure()
        return [] if failure is None else self._fail(NotEnoughBookies, failure)

    # ------------------------------------------------------------------ reading forward

    def _start_reading(self) -> list[Effect]:
        self.phase = RecoveryPhase.READING
        self._fenced = self.metadata
        self._writebacks = self._new_writebacks(self.metadata)
        self.fence_complete = True
        self.fenced_at_completion = frozenset(self._fences.lacs)
        max_lac = max(self._fences.lacs.values())
        self.floor = max(max_lac, self.metadata.last_fragment.first_entry_id - 1)
        self._forward = ReadForward(
            self._fenced,
            self._fences.instances,
            self.floor,
            key=self._key,
            batch_max=self.limits.recovery_read_batch_max,
            attempts_max=self.limits.recovery_read_attempts_max,
            speculative_ms=self.limits.speculative_read_ms,
            lengths=self._fences.lengths,
            now=self._now,
            replaced=self._fences.replaced,
        )
        self._forward.fences_awaited = self._fences.awaited()
        return list(self._forward.start())

    def _on_entry_read(self, event: EntryRead) -> list[Effect]:
        forward = self._forward
        if self.phase is not RecoveryPhase.READING or forward is None:
            return []
        forward.now = max(forward.now, self._now)
        probe = event.entry_id == self.floor and forward.probe is not None
        retry = forward.answer(event)
        if retry is None:
            return []
        if probe:
            return self._maybe_close()
        return self._decide_and_ask(list(retry))

    def _decide_and_ask(self, retry: list[Effect]) -> list[Effect]:
        """Decide the entries that can be, write back those found, ask what is needed."""
        forward = present(self._forward, "deciding before reading forward")
        found, failure = forward.decide()
        if failure is not None:
            return self._fail(NotEnoughBookies, failure)
        for record in found:
            self._writebacks.add(record)
        effects: list[Effect] = retry
        effects += list(self._writebacks.send()) if found else []
        effects += forward.fill_window()
        return effects + self._progress()

    # ------------------------------------------------------------------ writing back

    def _on_adds_done(self, event: BookieAddsDone) -> list[Effect]:
        if self.phase is not RecoveryPhase.READING:
            return []
        self._writebacks.answered(event.bookie)
        for entry_id in event.stored:
            self._writebacks.stored(event.bookie, entry_id)
        more: list[Effect] = []
        if event.rejected:
            more += self._writebacks.failed_on(event.bookie)  # re-sends, and sends more
        else:
            more += self._writebacks.send()  # the entries waiting for room
        return more + self._progress()

    def _on_bookie_failed(self, event: BookieFailed) -> list[Effect]:
        if self.phase is not RecoveryPhase.READING:
            return []
        retry: list[Effect] = list(self._writebacks.failed_on(event.bookie))
        return retry + self._progress()

    def _progress(self) -> list[Effect]:
        """Replace failed bookies when a write-back is stuck; close once everything is in."""
        if self.phase is not RecoveryPhase.READING or self._changing:
            return []
        if self._writebacks.blocked():
            self._changing = True
            return [ReadWritableBookies()]
        return self._maybe_close()

    def _on_writable(self, event: WritableBookies) -> list[Effect]:
        if self.phase is not RecoveryPhase.READING or not self._changing:
            return []
        self._changing = False
        writebacks = self._writebacks
        if not writebacks.blocked():
            return self._progress()
        if writebacks.changes >= self.limits.ensemble_change_attempts_max:
            return self._fail(NotEnoughBookies, "write-backs kept failing on new bookies")
        try:
            writebacks.change_ensemble(
                event.bookies, self._rng, event.instance_map(), event.rack_map()
            )
        except NotEnoughBookies as exc:
            return self._fail(
                NotEnoughBookies,
                f"write-backs failed on {sorted(writebacks.failed)} and none can be replaced: "
                f"{exc.message}",
            )
        return list(writebacks.send()) + self._progress()

    # ------------------------------------------------------------------ closing

    def _maybe_close(self) -> list[Effect]:
        last = self.last_entry_id
        if self.phase is not RecoveryPhase.READING or last is None:
            return []
        if self._writebacks.pending():
            return []
        forward = present(self._forward, "closing before reading forward")
        length, failure = forward.end_length()
        if failure is not None:
            return self._fail(NotEnoughBookies, failure)
        if length is None:
            return []  # the floor entry is still being read
        self._close_length = length
        self.phase = RecoveryPhase.CLOSING
        self._cas.begin(self.limits.metadata_attempts_max)
        return self._write_close()

    def _write_close(self) -> list[Effect]:
        """CAS to CLOSED on the metadata we know, with this recovery's new fragments."""
        last = present(self.last_entry_id, "closing without a last entry")
        merged = self._writebacks.merged_into(self.metadata, self._fenced)
        if merged is None:
            return self._fail(
                MetadataUnavailable, "the fenced fragment changed under the recovery; run it again"
            )
        target = merged.closed(last, self._close_length)
        return self._write_metadata(target, self.version)
