"""The write handle of one ledger as a state machine (BookKeeper's LedgerHandle).

``WriteHandle.handle(event) -> list[effect]``; see ``messages`` for the events,
the effects and what a runner does with them. Algorithm and ordering rules:

Adds. Entry ids are handed out in order from 0. Each entry is sealed (digest
over ledger id, entry id, the LAC at send time, cumulative length, payload)
and sent to the write set of the fragment that contains it; all records for
one bookie produced by one event go in one ``SendAdds``. An entry is
acknowledged once Qa bookies of its write set stored it and every lower entry
is acknowledged; a request is acknowledged as a whole (``adds.PendingAdds``).
When the handle goes idle with a LAC the bookies have not been told, it sends
an explicit LAC update after ``explicit_lac_delay_ms``.

Bookie failure. A bookie of the current ensemble that fails an add
(unavailable or timed out, read-only, a record it found corrupt, an entry it
stores with other bytes) is replaced: acknowledgements to clients are held
back, a replacement is chosen among the writable bookies (``ReadWritableBookies``)
and the new fragment, starting at ``lac + 1``, is written by CAS. The
change is a sub-machine the handle owns (``ensemble.EnsembleChange``: the
failed bookies, the plan, its CAS attempts and waits); the handle decides what
each metadata result means. While the change is in progress adds keep being
accepted (bounded by ``adds_in_flight_max``). When the CAS lands, pending entries are re-sent to
the new bookies and acknowledgements resume. On a CAS conflict the fresh
metadata decides: not OPEN -> the handle is fenced; OPEN -> plan again. With
no replacement available the change waits (re-reading the writable bookies
every ``ensemble_change_retry_ms``) until the oldest add times out.

A bookie answers each record of an add on its own (``BookieAddsDone.reasons``):
the entries it stored count, those it refused do not, and any refusal but a
fence fails that bookie for this ledger only. An entry the bookie stores with
other bytes (ENTRY_EXISTS) is never counted as stored there, even if an earlier
answer said so.

Replaced instance. The last fragment records the instance each of its bookies had
when it was chosen (``metadata.Fragment.instances``). An add answered by another
instance (a bookie reformatted since: ``quire bookie format``), or by one that names
none, is a failed bookie for that add, whatever it says it stored: that instance lost
the entries the fragment put on it, and it is not fenced even if a recovery fenced the
instance before it, so counting its acks would let this writer gather an ack quorum on
a ledger a recovery closed. Its answer counts for nothing and the bookie is replaced by
an ensemble change, like any failed bookie; the change's CAS then finds a closed
ledger if a recovery ran (the handle is fenced). A refusal as fenced by the new
instance still means fenced (a recovery fenced it).

Fenced. A bookie refusing an add because the ledger is fenced means a
recovery has started: every pending add and every later add fails with
ledger_fenced (the outcome is unknown: they may or may not have been written).

Time-out. When the oldest pending add is older than ``add_timeout_ms`` the
handle gives up on the ledger, as BookKeeper does after an unrecoverable add
error. First it acknowledges, in entry order, every pending entry that has its
ack quorum among the bookies that did not fail (acknowledgements held back by
an ensemble change that never landed, e.g. for want of a replacement bookie:
those bookies keep their places in every ensemble this handle may still write,
so the entries stay on Qa bookies of their write sets). Then every remaining
add fails, with not_enough_bookies while waiting for a replacement and
quorum_timeout otherwise; both are unknown outcomes (the entries may be stored
on their write sets, and a recovery, if this handle cannot close the ledger,
may include them). Finally the handle closes the ledger at its LAC: later adds
fail with ledger_closed, and nothing acknowledged is lost.

Close. No more adds are accepted (ledger_closed); pending adds finish or time
out; then CAS OPEN -> CLOSED at the LAC with its exact length. On conflict the
fresh metadata decides (``ensemble.close_outcome``). Closing again returns the
same metadata. Only one metadata write is in flight at a time, and every one
follows the rules of ``cas.MetadataCas`` (bounded attempts; after a store failure
the outcome is unknown: back off ``metadata_retry_ms``, re-read, and let the fresh
metadata decide).

Parking. A gateway holds a write handle for every ledger it created and did not close,
most of them idle (issue 42's target: 100,000 at 2 KiB each). A handle that is OPEN with
nothing in flight (no pending add, no ensemble change, no failed bookie, no metadata
write or its wait, no close asked) and whose LAC went out is fully described by its
metadata and version, its digest key, its limits, its LAC and its length: ``park()``
returns that as a ``ParkedWriter`` (under 100 bytes), and ``WriteHandle.resume(parked)``
builds a handle that behaves exactly as the parked one would have: the next add gets
entry id ``lac + 1`` and its record carries that LAC and the length; a fence, a close and
every later event are handled as for any idle handle. The runner keeps the parked form
while nothing happens (services/ledger_client/runners/write.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from services.errors import (
    InvalidArgument,
    LedgerClosed,
    LedgerFenced,
    LedgerNotFound,
    MetadataConflict,
    NotEnoughBookies,
    PayloadTooLarge,
    QuireError,
    QuorumTimeout,
    Unavailable,
    invariant,
    present,
)
from services.limits import BATCH_ENTRIES_MAX, STORED_ENTRY_SIZE_MAX_BYTES
from services.protocol.adds import PendingAdds, PendingEntry, PendingRequest, build_sends
from services.protocol.cas import CasFailed, CasFresh, CasWritten, MetadataCas
from services.protocol.ensemble import CloseOutcome, EnsembleChange, close_outcome
from services.protocol.limits import CasLimits, WriterLimits
from services.protocol.messages import (
    AckAdds,
    AddRequested,
    BookieAddsDone,
    BookieFailed,
    CloseDone,
    CloseFailed,
    CloseRequested,
    Effect,
    Event,
    FailAdds,
    MetadataConflicted,
    MetadataFailed,
    MetadataRead,
    MetadataWritten,
    RejectReason,
    SendLac,
    Tick,
    WritableBookies,
)
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.wire.framing import FramedRecord


class HandleState(StrEnum):
    OPEN = "open"  # accepting adds
    CLOSING = "closing"  # no more adds; pending adds finish, then CAS to CLOSED
    CLOSED = "closed"  # closed by this handle
    FENCED = "fenced"  # recovered, closed or deleted by someone else


@dataclass(frozen=True, slots=True)
class ParkedWriter:
    """An idle write handle, compact: all ``WriteHandle.resume`` needs to rebuild it
    (module docstring, "Parking"). Its entries up to ``lac`` are acknowledged, their
    payloads are ``length`` bytes, and the bookies were told the LAC."""

    metadata: LedgerMetadata
    version: int
    digest_key: bytes
    limits: WriterLimits
    lac: int
    length: int

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    @property
    def next_entry_id(self) -> int:
        return self.lac + 1


class WriteHandle:
    """The writer of one OPEN ledger created by this process (ledgers are never re-opened
    for writing)."""

    def __init__(
        self,
        metadata: LedgerMetadata,
        version: int,
        *,
        rng: random.Random,
        digest_key: bytes = b"",
        limits: WriterLimits | None = None,
        now: int = 0,
    ) -> None:
        invariant(metadata.state is LedgerState.OPEN, f"ledger {metadata.ledger_id} not OPEN")
        self.metadata = metadata
        self.version = version
        self.limits = limits or WriterLimits()
        self.ensemble_changes = 0  # written by this handle
        self._key = digest_key
        self._pending = PendingAdds(metadata.ack_quorum)
        self._state = HandleState.OPEN
        self._fence_error: type[QuireError] = LedgerFenced
        self._cas = MetadataCas(
            metadata.ledger_id,
            CasLimits(
                failures_max=self.limits.metadata_failures_max,
                retry_ms=self.limits.metadata_retry_ms,
            ),
        )
        self._change = EnsembleChange(
            self._cas,
            rng,
            retry_ms=self.limits.ensemble_change_retry_ms,
            attempts_max=self.limits.ensemble_change_attempts_max,
        )
        self._meta_kind: Literal["change", "close"] | None = None
        self._close_waiters: list[Hashable] = []
        self._now = now
        self._idle_since = now
        self._lac_sent = -1

    @classmethod
    def resume(cls, parked: ParkedWriter, *, rng: random.Random, now: int = 0) -> WriteHandle:
        """The handle ``parked`` was made from, as it was (module docstring, "Parking")."""
        handle = cls(
            parked.metadata,
            parked.version,
            rng=rng,
            digest_key=parked.digest_key,
            limits=parked.limits,
            now=now,
        )
        handle._pending = PendingAdds(parked.metadata.ack_quorum, parked.lac, parked.length)
        handle._lac_sent = parked.lac
        return handle

    def park(self) -> ParkedWriter | None:
        """The handle as a ``ParkedWriter`` when nothing is in flight and its LAC went
        out, else None (module docstring, "Parking")."""
        pending = self._pending
        if (
            self._state is not HandleState.OPEN
            or pending.entries
            or pending.requests
            or self._change.in_progress
            or self._change.failed
            or self._cas.busy
            or self._cas.next_deadline() is not None
            or self._meta_kind is not None
            or self._close_waiters
            or self._lac_sent < pending.lac
        ):
            return None
        invariant(
            pending.next_entry_id == pending.lac + 1 and pending.length == pending.acked_length,
            f"ledger {self.ledger_id}: nothing pending, yet ids or bytes past the LAC",
        )
        return ParkedWriter(
            self.metadata, self.version, self._key, self.limits, pending.lac, pending.acked_length
        )

    # ------------------------------------------------------------------ queries

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    @property
    def state(self) -> HandleState:
        return self._state

    @property
    def lac(self) -> int:
        """The last entry acknowledged to a client."""
        return self._pending.lac

    @property
    def length(self) -> int:
        """Total payload bytes of the entries up to the LAC."""
        return self._pending.acked_length

    @property
    def next_entry_id(self) -> int:
        return self._pending.next_entry_id

    @property
    def pending_entries(self) -> int:
        return len(self._pending)

    @property
    def changing_ensemble(self) -> bool:
        return self._change.in_progress

    def room(self) -> tuple[int, int]:
        """How many more entries and payload bytes the handle accepts now (back-pressure)."""
        return (
            self.limits.adds_in_flight_max - len(self._pending),
            self.limits.add_bytes_in_flight_max - self._pending.bytes,
        )

    def next_deadline(self) -> int | None:
        """The time (ms) by which the runner must feed ``Tick``, or None."""
        times: list[int] = []
        live = self._state in (HandleState.OPEN, HandleState.CLOSING)
        if live and self._pending.requests:
            times.append(self._pending.requests[0].deadline)
        cas_at = self._cas.next_deadline()
        if cas_at is not None:
            times.append(cas_at)
        change_at = self._change.next_deadline()
        if change_at is not None:
            times.append(change_at)
        if live and not self._pending.entries and self.lac > self._lac_sent:
            times.append(self._idle_since + self.limits.explicit_lac_delay_ms)
        return min(times) if times else None

    # ------------------------------------------------------------------ dispatch

    def handle(self, event: Event) -> list[Effect]:
        now = getattr(event, "now", None)
        if now is not None:
            self._now = max(self._now, now)
        handler = present(
            _HANDLERS.get(type(event)), f"a write handle does not take {type(event).__name__}"
        )
        return handler(self, event)

    # ------------------------------------------------------------------ adds

    def _on_add(self, event: AddRequested) -> list[Effect]:
        rid, payloads = event.request_id, tuple(event.payloads)
        if self._state is HandleState.FENCED:
            return [FailAdds(rid, self._fence_error, self._fenced_message())]
        if self._state is not HandleState.OPEN:
            return [FailAdds(rid, LedgerClosed, f"ledger {self.ledger_id} is closed")]
        if not payloads:
            return [FailAdds(rid, InvalidArgument, "an add needs at least one entry")]
        if len(payloads) > BATCH_ENTRIES_MAX:
            return [FailAdds(rid, PayloadTooLarge, f"over {BATCH_ENTRIES_MAX} entries")]
        if any(len(p) > STORED_ENTRY_SIZE_MAX_BYTES for p in payloads):
            too_large = f"an entry over {STORED_ENTRY_SIZE_MAX_BYTES} bytes"
            return [FailAdds(rid, PayloadTooLarge, too_large)]
        room_entries, room_bytes = self.room()
        if len(payloads) > room_entries or sum(map(len, payloads)) > room_bytes:
            return [FailAdds(rid, Unavailable, f"ledger {self.ledger_id}: too many adds in flight")]
        deadline = self._now + self.limits.add_timeout_ms
        entries = self._pending.add(rid, payloads, deadline, self.metadata.write_set_bookies)
        return self._send(entries)

    def _send(self, entries: list[PendingEntry]) -> list[Effect]:
        """Send each entry to the bookies of its write set that lack it and did not fail."""
        lac = self._pending.lac
        effects = build_sends(
            entries,
            self._change.failed,
            FramedRecord(self.ledger_id, 0, lac, b"", digest_type=self.metadata.digest_type),
            self._key,
            self.limits.send_batch_entries_max,
            self.limits.send_batch_bytes_max,
        )
        if effects:  # a re-sent record carries the LAC of its first send
            sent = max(r.lac for x in effects for r in x.records)
            self._lac_sent = max(self._lac_sent, sent)
        return list(effects)

    def _on_adds_done(self, event: BookieAddsDone) -> list[Effect]:
        if self._state in (HandleState.CLOSED, HandleState.FENCED):
            return []
        reasons = event.rejection_reasons()
        invariant(len(reasons) == len(event.rejected), "a reason for each rejected entry")
        fenced = event.reason is RejectReason.FENCED or RejectReason.FENCED in reasons
        if event.rejected and fenced:
            return self._become_fenced(LedgerFenced)
        if self._replaced_instance(event):
            return self._bookie_failed(event.bookie)
        for entry_id, reason in zip(event.rejected, reasons, strict=True):
            if reason is RejectReason.ENTRY_EXISTS:
                self._pending.discard_ack(event.bookie, entry_id)
        for entry_id in event.stored:
            self._pending.record_ack(event.bookie, entry_id)
        effects = self._advance()
        if event.rejected:
            effects += self._bookie_failed(event.bookie)
        return effects

    def _replaced_instance(self, event: BookieAddsDone) -> bool:
        """Whether another instance of the bookie answered than the one the last fragment
        recorded (module docstring, "Replaced instance"). Every pending entry lies in
        the last fragment (it starts at or below ``lac + 1``); an unknown recorded
        instance (metadata older than instances) is not compared."""
        recorded = self.metadata.last_fragment.instance_of(event.bookie)
        return recorded is not None and event.instance_id != recorded

    def _on_bookie_failed(self, event: BookieFailed) -> list[Effect]:
        if self._state in (HandleState.CLOSED, HandleState.FENCED):
            return []
        if event.reason is RejectReason.FENCED:
            return self._become_fenced(LedgerFenced)
        return self._bookie_failed(event.bookie)

    def _advance(self) -> list[Effect]:
        """Acknowledge what can be; never while an ensemble change is in progress."""
        if self._change.in_progress or self._state is HandleState.FENCED:
            return []
        popped, done = self._pending.advance()
        lac = self._pending.lac
        effects: list[Effect] = [
            AckAdds(r.request_id, r.first_entry_id, r.last_entry_id, lac) for r in done
        ]
        if popped and not self._pending.entries:
            self._idle_since = self._now
        return effects + self._maybe_start_close()

    # ------------------------------------------------------------------ ensemble change

    def _bookie_failed(self, bookie: str) -> list[Effect]:
        """A bookie of the current ensemble failed an add: send it nothing more and have
        the change replace it (module docstring, "Bookie failure")."""
        if bookie not in self.metadata.ensemble or bookie in self._change.failed:
            return []
        self._pending.forget_sends(bookie)
        return self._change.bookie_failed(bookie, self._now)

    def _on_writable(self, event: WritableBookies) -> list[Effect]:
        self._change.take_writable(event)
        if self._change.in_progress and not self._cas.busy:
            return self._plan_change()
        return []

    def _plan_change(self) -> list[Effect]:
        """Write the change in progress, planned on the current metadata, unless the
        handle no longer needs it: closed or fenced, every failed bookie replaced, or
        closing with nothing left to re-send."""
        change = self._change
        if not change.in_progress or self._state in (HandleState.CLOSED, HandleState.FENCED):
            change.end()
            return self._maybe_start_close()
        if not change.replaces_any(self.metadata.ensemble):
            change.end()
            return self._advance()
        if self._state is HandleState.CLOSING and not self._pending.entries:
            change.end()  # nothing left to re-send: closing needs no bookies
            return self._maybe_start_close()
        write = change.plan(self.metadata, self.version, self.lac, self._now)
        if write is None:  # waiting for writable bookies
            return []
        self._meta_kind = "change"
        return [write]

    def _adopt(self, metadata: LedgerMetadata, version: int) -> list[Effect]:
        """Take fresh OPEN metadata: recompute write sets and send pending entries to the
        bookies that do not have them yet; tell replacement bookies the LAC."""
        old_ensemble = set(self.metadata.ensemble)
        self.metadata, self.version = metadata, version
        self._change.forget_replaced(metadata.ensemble)
        self._pending.refresh_write_sets(metadata.write_set_bookies)
        effects = self._send(list(self._pending.entries))
        joined = tuple(b for b in metadata.ensemble if b not in old_ensemble)
        if joined and self.lac >= 0:
            effects.append(SendLac(self.ledger_id, joined, self.lac))
        return effects

    # ------------------------------------------------------------------ close, fence, time

    def _on_close(self, event: CloseRequested) -> list[Effect]:
        if self._state is HandleState.CLOSED:
            return [CloseDone(event.request_id, self.metadata, self.version)]
        self._close_waiters.append(event.request_id)
        if self._state is HandleState.OPEN:
            self._state = HandleState.CLOSING
        return self._maybe_start_close()

    def _maybe_start_close(self) -> list[Effect]:
        if self._cas.busy:
            return []
        if self._state is HandleState.CLOSING:
            if self._pending.entries:
                return []
            self._change.end()  # nothing left to re-send: closing needs no bookies
            return self._write_close()
        if self._state is HandleState.FENCED and self._close_waiters:
            if self.metadata.state is LedgerState.OPEN and self._fence_error is LedgerFenced:
                return self._write_close()  # our view is stale: the CAS tells us the truth
            if close_outcome(self.metadata, self.lac) is CloseOutcome.DONE:
                return self._closed_ok()
            return self._fail_close_waiters(self._fence_error, self._fenced_message())
        return []

    def _write_close(self, *, retry: bool = False) -> list[Effect]:
        """CAS to CLOSED at the LAC; a retry (the ledger is still OPEN) counts towards
        ``close_attempts_max``."""
        if not retry:
            self._cas.begin(self.limits.close_attempts_max)
        write = self._cas.write(self.metadata.closed(self.lac, self.length), self.version)
        if write is None:
            return self._fail_close_waiters(
                MetadataConflict, f"ledger {self.ledger_id}: the close kept losing its CAS"
            )
        self._meta_kind = "close"
        return [write]

    def _closed_ok(self) -> list[Effect]:
        self._state = HandleState.CLOSED
        self._change.end()
        waiters, self._close_waiters = self._close_waiters, []
        return [CloseDone(rid, self.metadata, self.version) for rid in waiters]

    def _fail_close_waiters(self, error: type[QuireError], message: str) -> list[Effect]:
        waiters, self._close_waiters = self._close_waiters, []
        return [CloseFailed(rid, error, message) for rid in waiters]

    def _fenced_message(self) -> str:
        if self._fence_error is LedgerNotFound:
            return f"ledger {self.ledger_id} was deleted"
        return (
            f"ledger {self.ledger_id} was fenced or closed by someone else (a recovery): "
            "the outcome of the add is unknown, it may or may not have been written"
        )

    def _become_fenced(self, error: type[QuireError]) -> list[Effect]:
        if self._state is HandleState.CLOSED:
            return []
        if self._state is not HandleState.FENCED:
            self._state = HandleState.FENCED
            self._fence_error = error
        self._change.end()
        message = self._fenced_message()
        effects: list[Effect] = [
            FailAdds(r.request_id, error, message, (r.first_entry_id, r.last_entry_id))
            for r in self._pending.fail_all()
        ]
        return effects + self._maybe_start_close()

    def _on_tick(self, event: Tick) -> list[Effect]:
        now = self._now
        effects: list[Effect] = []
        live = self._state in (HandleState.OPEN, HandleState.CLOSING)
        requests = self._pending.requests
        if live and requests and requests[0].deadline <= now:
            effects += self._give_up()
        effects += self._cas.tick(now)
        effects += self._change.tick(now)
        live = self._state in (HandleState.OPEN, HandleState.CLOSING)
        idle_due = self._idle_since + self.limits.explicit_lac_delay_ms
        if live and not self._pending.entries and self.lac > self._lac_sent and now >= idle_due:
            bookies = tuple(b for b in self.metadata.ensemble if b not in self._change.failed)
            if bookies:
                effects.append(SendLac(self.ledger_id, bookies, self.lac))
            self._lac_sent = self.lac
        return effects

    def _give_up(self) -> list[Effect]:
        """The oldest add timed out: acknowledge what has its ack quorum among the bookies
        that did not fail, fail the rest (unknown outcome), close at the LAC (module
        docstring, "Time-out")."""
        waiting = self._change.waiting_for_bookies
        if self._change.written:
            # A CAS of the change was sent and may still land (in flight, or its answer
            # was lost): acknowledge nothing more (as BookKeeper holds acks during an
            # ensemble change), so the fragment it writes never starts at or below an
            # acknowledged entry; the rest fails with an unknown outcome.
            popped, done = 0, list[PendingRequest]()
        else:
            popped, done = self._pending.advance(excluding=self._change.failed)
        lac = self._pending.lac
        effects: list[Effect] = [
            AckAdds(r.request_id, r.first_entry_id, r.last_entry_id, lac) for r in done
        ]
        if popped and not self._pending.entries:
            self._idle_since = self._now
        error: type[QuireError] = NotEnoughBookies if waiting else QuorumTimeout
        cause = (
            "a bookie failed and no writable bookie could replace it"
            if waiting
            else "no ack quorum"
        )
        message = (
            f"ledger {self.ledger_id}: {cause} within {self.limits.add_timeout_ms} ms; "
            "the outcome of the add is unknown: its entries may be stored on their write "
            "sets (a later recovery may include them); the ledger is closed at its last "
            f"acknowledged entry ({lac})"
        )
        failed = self._pending.fail_all()
        effects += [
            FailAdds(r.request_id, error, message, (r.first_entry_id, r.last_entry_id))
            for r in failed
        ]
        if failed:  # (if everything had its quorum after all, nothing failed: go on)
            self._state = HandleState.CLOSING
        return effects + self._maybe_start_close()

    # ------------------------------------------------------------------ metadata results

    def _on_metadata(
        self, event: MetadataWritten | MetadataConflicted | MetadataRead | MetadataFailed
    ) -> list[Effect]:
        result = self._cas.take(event, self._now)
        if result is None:
            return []
        kind = present(self._meta_kind, "a metadata result without an operation")
        self._meta_kind = None
        if isinstance(result, CasWritten):
            return self._on_metadata_written(kind, result)
        if isinstance(result, CasFresh):
            return self._on_fresh_metadata(kind, result)
        return self._on_metadata_failed(kind, result)

    def _on_metadata_written(self, kind: str, result: CasWritten) -> list[Effect]:
        if kind == "close":
            self.metadata, self.version = result.metadata, result.version
            return self._closed_ok()
        self.ensemble_changes += 1
        if self._state is HandleState.FENCED:
            self.metadata, self.version = result.metadata, result.version
            return self._maybe_start_close()
        return self._adopt(result.metadata, result.version) + self._plan_change()

    def _on_fresh_metadata(self, kind: str, result: CasFresh) -> list[Effect]:
        """The CAS lost (or its outcome was unknown and we re-read): the fresh metadata
        decides (docs/protocol.md, "Failure while writing" and "Closing as writer")."""
        fresh, version = result.metadata, result.version
        if kind == "change":
            if fresh.state is not LedgerState.OPEN:
                self.metadata, self.version = fresh, version
                return self._become_fenced(LedgerFenced)
            if self._state is HandleState.FENCED:
                self.metadata, self.version = fresh, version
                return self._maybe_start_close()
            return self._adopt(fresh, version) + self._plan_change()
        self.metadata, self.version = fresh, version
        outcome = close_outcome(fresh, self.lac)
        if outcome is CloseOutcome.DONE:
            return self._closed_ok()
        if outcome is CloseOutcome.RETRY:
            return self._write_close(retry=True)
        return self._become_fenced(LedgerFenced)

    def _on_metadata_failed(self, kind: str, result: CasFailed) -> list[Effect]:
        if result.error is LedgerNotFound:
            return self._become_fenced(LedgerNotFound)
        if kind == "close":
            return self._fail_close_waiters(result.error, result.message)
        if self._change.in_progress:
            self._change.wait(self._now)  # the outcome stays unknown: plan again later
        return []


# The handler of each event a write handle takes, one table for all handles: a table of
# bound methods per handle cost about 1 KB each, and a gateway holds tens of thousands of
# idle handles (benchmarks/README.md, "Many open things").
_HANDLERS: dict[type, Callable[[WriteHandle, Any], list[Effect]]] = {
    AddRequested: WriteHandle._on_add,
    CloseRequested: WriteHandle._on_close,
    Tick: WriteHandle._on_tick,
    BookieAddsDone: WriteHandle._on_adds_done,
    BookieFailed: WriteHandle._on_bookie_failed,
    WritableBookies: WriteHandle._on_writable,
    MetadataWritten: WriteHandle._on_metadata,
    MetadataConflicted: WriteHandle._on_metadata,
    MetadataRead: WriteHandle._on_metadata,
    MetadataFailed: WriteHandle._on_metadata,
}
