"""Ledger recovery (closing as a reader) as a state machine: BookKeeper's LedgerRecoveryOp.

Any gateway may run it, several at once; they converge through the CAS on the
metadata. ``start()`` returns the first effects, ``handle(event)`` the next.

1. CLOSED: done, unchanged. OPEN: CAS the state to IN_RECOVERY, after which
   the writer can no longer change the ensemble (IN_RECOVERY already: go on).
2. Fence every bookie of the last fragment. A bookie persists the fence flag
   before it answers, and from then on refuses normal adds. Fencing is
   complete once, for EVERY write set of the ensemble, ``Qw - Qa + 1`` of its
   bookies answered (``quorum.fencing_complete``); we do not wait for the
   others (the runner times a hanging bookie out). If every bookie answered or
   failed without that coverage, the recovery fails (retriable).
3. Every entry up to ``floor = max(highest LAC returned, first id of the last
   fragment - 1)`` was acknowledged to a client and is on an ack quorum.
   Read forward from ``floor + 1`` in bounded windows
   (``recovery_read_batch_max``), each entry from the FENCED bookies of its
   write set only: a fenced bookie's "missing" is final, it will never take
   the old writer's add afterwards. A replica whose digest does not verify is
   never used; it counts as a read error, NOT as missing: the bookie holds
   some copy, so counting it towards absence could drop an acknowledged
   entry (with Qw - Qa + 1 = 1 a single corrupt answer would). An entry
   found on any of them is written back to its
   whole write set with the recovery flag and counts once Qa bookies stored
   it (``writeback``: a bookie failing write-backs is replaced in a new
   fragment that stays local until step 5). The first entry missing from
   ``Qw - Qa + 1`` fenced bookies of its
   write set cannot have been acknowledged: the last entry is the one before.
   An entry neither found nor provably absent (read errors, after
   ``recovery_read_attempts_max`` tries per bookie) fails the recovery
   (retriable; nothing changed beyond IN_RECOVERY).
4. The length is the last entry's ``length`` field; when nothing is found
   beyond the floor, entry ``floor`` itself is read (from any bookie of its
   write set) to learn it.
5. CAS the state to CLOSED at that last entry and length, with the new
   fragments of step 4 if any (one atomic change). On conflict re-read:
   CLOSED -> done with that metadata (a concurrent recovery or the writer
   won, and everybody converges on it); IN_RECOVERY -> CAS again on it.

Reads always use the metadata as it was fenced; write-backs use it plus the
recovery's own new fragments.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from services.errors import (
    LedgerNotFound,
    MetadataUnavailable,
    NotEnoughBookies,
    QuireError,
    invariant,
)
from services.protocol import quorum
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
    ReadEntries,
    ReadMetadata,
    ReadOutcome,
    ReadWritableBookies,
    RecoveryDone,
    RecoveryFailed,
    SendFence,
    WritableBookies,
    WriteMetadata,
)
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.reads import record_usable
from services.protocol.writeback import WriteBacks
from services.wire.framing import Record


@dataclass(frozen=True)
class RecoveryLimits:
    """Every bound of a recovery (STYLE.md §5)."""

    recovery_read_batch_max: int = 16  # entries being read ahead at once
    recovery_read_attempts_max: int = 3  # reads of one entry from one bookie
    recovery_write_attempts_max: int = 3  # failed write-backs before a bookie is replaced
    metadata_attempts_max: int = 10  # CAS conflicts or store failures per step
    ensemble_change_attempts_max: int = 5  # replacements of write-back bookies


class RecoveryPhase(StrEnum):
    MARKING = "marking"  # CAS to IN_RECOVERY in flight
    FENCING = "fencing"
    READING = "reading"  # reading forward and writing back
    CLOSING = "closing"  # CAS to CLOSED in flight
    DONE = "done"
    FAILED = "failed"


@dataclass(slots=True)
class _Reads:
    """Answers about one entry: outstanding bookies, who said missing, a good record."""

    asked: set[str]
    missing: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)
    record: Record | None = None


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
        self.last_entry_id: int | None = None  # the last entry, once found
        self._key = digest_key
        self._rng = rng or random.Random(metadata.ledger_id)
        self._started = False
        self._meta_attempts = 0
        self._fence_lacs: dict[str, int] = {}
        self._fence_failures: set[str] = set()
        self._reads: dict[int, _Reads] = {}
        self._cursor = 0  # the lowest entry not decided yet
        self._next_read = 0  # the lowest entry not asked for yet
        self._last_record: Record | None = None
        self._fenced = metadata  # the metadata as fenced: every read uses it
        self._writebacks = WriteBacks(metadata, self.limits.recovery_write_attempts_max)
        self._changing = False  # waiting for WritableBookies
        self._probe: _Reads | None = None
        self._close_length = 0
        self._handlers: dict[type, Callable[[object], list[Effect]]] = {
            MetadataWritten: self._on_metadata_written,
            MetadataConflicted: self._on_fresh_metadata,
            MetadataRead: self._on_fresh_metadata,
            MetadataFailed: self._on_metadata_failed,
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

    @property
    def finished(self) -> bool:
        return self.phase in (RecoveryPhase.DONE, RecoveryPhase.FAILED)

    def start(self) -> list[Effect]:
        invariant(not self._started, "a recovery starts once")
        self._started = True
        state = self.metadata.state
        if state is LedgerState.CLOSED:
            return self._done(self.metadata, self.version, closed_here=False)
        if state is LedgerState.OPEN:
            self._meta_attempts = 1
            return [WriteMetadata(self.metadata.in_recovery(), self.version)]
        return self._start_fencing()

    def handle(self, event: Event) -> list[Effect]:
        invariant(self._started, "a recovery takes events only after start()")
        if self.finished:
            return []
        handler = self._handlers.get(type(event))
        invariant(handler is not None, f"a recovery does not take {type(event).__name__}")
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

    def _on_metadata_written(self, event: MetadataWritten) -> list[Effect]:
        if self.phase is RecoveryPhase.MARKING:
            self.metadata, self.version = event.metadata, event.version
            return self._start_fencing()
        if self.phase is RecoveryPhase.CLOSING:
            return self._done(event.metadata, event.version, closed_here=True)
        return []

    def _on_fresh_metadata(self, event: MetadataConflicted | MetadataRead) -> list[Effect]:
        fresh, version = event.metadata, event.version
        if self.phase not in (RecoveryPhase.MARKING, RecoveryPhase.CLOSING):
            return []
        if fresh.state is LedgerState.CLOSED:
            return self._done(fresh, version, closed_here=False)
        self.metadata, self.version = fresh, version
        if self.phase is RecoveryPhase.MARKING and fresh.state is LedgerState.IN_RECOVERY:
            return self._start_fencing()  # ours landed, or another recovery's did
        if self.phase is RecoveryPhase.CLOSING and fresh.state is LedgerState.OPEN:
            return self._fail(QuireError, "the ledger went back from IN_RECOVERY to OPEN")
        self._meta_attempts += 1  # the CAS lost to another change: try again on the fresh one
        if self._meta_attempts > self.limits.metadata_attempts_max:
            return self._fail(MetadataUnavailable, "the metadata kept changing under the CAS")
        if self.phase is RecoveryPhase.MARKING:
            return [WriteMetadata(fresh.in_recovery(), version)]
        return self._write_close()

    def _on_metadata_failed(self, event: MetadataFailed) -> list[Effect]:
        if self.phase not in (RecoveryPhase.MARKING, RecoveryPhase.CLOSING):
            return []
        if event.code == LedgerNotFound.code:
            return self._fail(LedgerNotFound, "the ledger was deleted")
        self._meta_attempts += 1
        if self._meta_attempts > self.limits.metadata_attempts_max:
            return self._fail(MetadataUnavailable, f"metadata store failing: {event.message}")
        return [ReadMetadata(self.ledger_id)]  # the write's outcome is unknown: look

    # ------------------------------------------------------------------ fencing

    def _start_fencing(self) -> list[Effect]:
        self.phase = RecoveryPhase.FENCING
        self._meta_attempts = 0
        return [SendFence(self.ledger_id, bookie) for bookie in self.metadata.ensemble]

    def _covered(self) -> bool:
        md = self.metadata
        answered = [i for i, b in enumerate(md.ensemble) if b in self._fence_lacs]
        return quorum.fencing_complete(md.ensemble_size, md.write_quorum, md.ack_quorum, answered)

    def _on_fence_done(self, event: FenceDone) -> list[Effect]:
        if event.bookie not in self.metadata.ensemble or self.phase is RecoveryPhase.MARKING:
            return []
        self._fence_lacs[event.bookie] = event.lac
        self._fence_failures.discard(event.bookie)
        if self.phase is not RecoveryPhase.FENCING:
            return []  # a late answer: the bookie is fenced, later reads may use it
        if self._covered():
            return self._start_reading()
        return self._fencing_settled()

    def _on_fence_failed(self, event: FenceFailed) -> list[Effect]:
        if self.phase is not RecoveryPhase.FENCING or event.bookie not in self.metadata.ensemble:
            return []
        if event.bookie not in self._fence_lacs:
            self._fence_failures.add(event.bookie)
        return self._fencing_settled()

    def _fencing_settled(self) -> list[Effect]:
        """Fail when every bookie answered or failed and the coverage is still not met."""
        md = self.metadata
        if len(self._fence_failures) + len(self._fence_lacs) < md.ensemble_size:
            return []
        return self._fail(
            NotEnoughBookies,
            f"only {sorted(self._fence_lacs)} of {list(md.ensemble)} answered the fence; "
            f"every write set needs {quorum.fence_threshold(md.write_quorum, md.ack_quorum)}",
        )

    # ------------------------------------------------------------------ reading forward

    def _start_reading(self) -> list[Effect]:
        self.phase = RecoveryPhase.READING
        self._fenced = self.metadata
        self._writebacks = WriteBacks(self.metadata, self.limits.recovery_write_attempts_max)
        self.fence_complete = True
        self.fenced_at_completion = frozenset(self._fence_lacs)
        max_lac = max(self._fence_lacs.values())
        self.floor = max(max_lac, self.metadata.last_fragment.first_entry_id - 1)
        self._cursor = self._next_read = self.floor + 1
        effects: list[Effect] = []
        if self.floor >= 0:
            bookies = self._fenced.write_set_bookies(self.floor)
            self._probe = _Reads(asked=set(bookies))
            effects += [ReadEntries(self.ledger_id, b, (self.floor,)) for b in bookies]
        return effects + self._fill_window()

    def _fill_window(self) -> list[Effect]:
        asks: dict[str, list[int]] = {}
        while self.last_entry_id is None and len(self._reads) < self.limits.recovery_read_batch_max:
            entry_id = self._next_read
            self._next_read += 1
            candidates = self._fenced.write_set_bookies(entry_id)
            fenced = [b for b in candidates if b in self._fence_lacs]
            self._reads[entry_id] = _Reads(asked=set(fenced))
            for bookie in fenced:
                asks.setdefault(bookie, []).append(entry_id)
        return [ReadEntries(self.ledger_id, b, tuple(ids)) for b, ids in asks.items()]

    def _on_entry_read(self, event: EntryRead) -> list[Effect]:
        if self.phase is not RecoveryPhase.READING:
            return []
        if event.entry_id == self.floor and self._probe is not None:
            return self._on_probe_read(event, self._probe)
        reads = self._reads.get(event.entry_id)
        if reads is None or event.bookie not in reads.asked:
            return []
        retry = self._take_answer(reads, event)
        if retry:
            return retry
        return self._decide()

    def _take_answer(self, reads: _Reads, event: EntryRead) -> list[Effect]:
        """Record one answer; a read ERROR is retried (bounded) and returned as effects."""
        reads.asked.discard(event.bookie)
        if event.outcome is ReadOutcome.MISSING:
            reads.missing.add(event.bookie)
            return []
        if event.outcome is ReadOutcome.FOUND:
            if record_usable(event.record, self._fenced, event.entry_id, self._key):
                if reads.record is None:
                    reads.record = event.record
                return []
            # A replica whose digest does not verify is never used, and it is no evidence
            # of absence either (the bookie does hold some copy): treated as a read error.
        count = reads.errors.get(event.bookie, 0) + 1
        reads.errors[event.bookie] = count
        if count < self.limits.recovery_read_attempts_max:
            reads.asked.add(event.bookie)
            return [ReadEntries(self.ledger_id, event.bookie, (event.entry_id,))]
        return []

    def _on_probe_read(self, event: EntryRead, probe: _Reads) -> list[Effect]:
        if event.bookie not in probe.asked or probe.record is not None:
            return []
        retry = self._take_answer(probe, event)
        return retry or self._maybe_close()

    def _decide(self) -> list[Effect]:
        """Decide entries in id order: found -> write back; absent -> the end."""
        md = self._fenced
        found: list[int] = []
        while self.last_entry_id is None and self._cursor in self._reads:
            entry_id = self._cursor
            reads = self._reads[entry_id]
            if reads.record is not None:
                del self._reads[entry_id]
                self._writebacks.add(reads.record)
                found.append(entry_id)
                self._last_record = reads.record
                self._cursor += 1
            elif quorum.entry_absent(md.write_quorum, md.ack_quorum, len(reads.missing)):
                self.last_entry_id = entry_id - 1
                self._reads.clear()
            elif not reads.asked:
                return self._fail(
                    NotEnoughBookies,
                    f"entry {entry_id} is neither found nor provably absent: missing from "
                    f"{sorted(reads.missing)}, errors from {sorted(reads.errors)}; absence needs "
                    f"{quorum.fence_threshold(md.write_quorum, md.ack_quorum)} fenced bookies",
                )
            else:
                break
        effects: list[Effect] = list(self._writebacks.send(found)) if found else []
        if self.last_entry_id is None:
            effects += self._fill_window()
        return effects + self._progress()

    # ------------------------------------------------------------------ writing back

    def _on_adds_done(self, event: BookieAddsDone) -> list[Effect]:
        if self.phase is not RecoveryPhase.READING:
            return []
        for entry_id in event.stored:
            self._writebacks.stored(event.bookie, entry_id)
        retry: list[Effect] = []
        if event.rejected:
            retry += self._writebacks.failed_on(event.bookie)
        return retry + self._progress()

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
            writebacks.change_ensemble(event.bookies, self._rng)
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
        if last > self.floor:
            invariant(self._last_record is not None, "no record of the last entry")
            self._close_length = self._last_record.length
        elif last < 0:
            self._close_length = 0
        else:
            probe = self._probe
            invariant(probe is not None, "no probe of the floor entry")
            if probe.record is None:
                if probe.asked:
                    return []
                return self._fail(
                    NotEnoughBookies,
                    f"cannot read entry {last} (the last one) from any bookie of its write set "
                    "to learn the ledger's length",
                )
            self._close_length = probe.record.length
        self.phase = RecoveryPhase.CLOSING
        return self._write_close()

    def _write_close(self) -> list[Effect]:
        """CAS to CLOSED on the metadata we know, with this recovery's new fragments."""
        invariant(self.last_entry_id is not None, "closing without a last entry")
        merged = self._writebacks.merged_into(self.metadata, self._fenced)
        if merged is None:
            return self._fail(
                MetadataUnavailable, "the fenced fragment changed under the recovery; run it again"
            )
        target = merged.closed(self.last_entry_id, self._close_length)
        return [WriteMetadata(target, self.version)]
