"""Events into and effects out of the protocol state machines.

The write handle (``writer.WriteHandle``) and the recovery
(``recovery.LedgerRecovery``) never do I/O. A runner (the gateway's asyncio
loop, or the simulator) feeds them events with ``handle(event)`` and carries
out the effects they return, in order. The runner's whole job:

=====================  =====================================================
effect                 what the runner does, and the event(s) it feeds back
=====================  =====================================================
SendAdds               ``POST /v1/entries`` with ``records`` to ``bookie``.
                       200 -> ``BookieAddsDone(bookie, stored, rejected,
                       reason, reasons, instance_id)``: rejected = the
                       per-record refusals, each with its reason
                       (``ledger_fenced`` -> FENCED, ``invalid_argument``
                       -> CORRUPT, ``entry_exists`` -> ENTRY_EXISTS);
                       ``reason`` sums them up (FENCED if any);
                       ``instance_id`` = the answer's instance header.
                       503 bookie_read_only ->
                       ``BookieAddsDone(bookie, (), all ids, READONLY)``.
                       Any other failure or time-out -> ``BookieAddsDone(
                       bookie, (), all ids, UNAVAILABLE)`` (or
                       ``BookieFailed(bookie)``).
SendLac                ``POST /v1/ledgers/{id}/lac`` to each bookie; fire
                       and forget, nothing is fed back.
WriteMetadata          CAS the znode to ``metadata.to_json()`` at
                       ``expected_version`` (``spread`` false: a fragment
                       it adds could not spread its write quorums over
                       racks, and the runner logs a warning). Success -> ``MetadataWritten(
                       metadata, new_version)``. Bad version -> read it ->
                       ``MetadataConflicted(current, version)``. Unreachable
                       store (outcome unknown) or no znode ->
                       ``MetadataFailed(code, message)``.
ReadMetadata           read the znode -> ``MetadataRead(metadata, version)``
                       or ``MetadataFailed``.
ReadWritableBookies    list the writable bookies (registered, not read-only,
                       not decommissioning) -> ``WritableBookies(ids,
                       instances, racks)`` (each one's registered instance
                       id; the racks of the registered bookies). Both
                       the write handle and the recovery ask for it (to
                       replace a failed bookie). The runner may also send
                       ``WritableBookies`` to the write handle unasked.
SendFence              ``POST /v1/ledgers/{id}/fence`` -> ``FenceDone(
                       bookie, lac, last_entry_id, instance_id, length,
                       lac_length)`` or ``FenceFailed``.
ReadEntries            read those entries from ``bookie`` (one range read) ->
                       one ``EntryRead`` per id, with the answering bookie's
                       instance id: FOUND with the record, MISSING when the
                       bookie says it has no such entry (or no such ledger),
                       ERROR otherwise. An id a range answer may have cut off
                       is an ERROR, not MISSING.
AckAdds / FailAdds     answer the client's add request ``request_id``.
CloseDone/CloseFailed  answer the client's close request ``request_id``.
RecoveryDone/Failed    the recovery's result.
=====================  =====================================================

``Tick(now)``: the write handle and the recovery have timers (add time-outs,
metadata back-offs, the idle LAC update, the recovery's overall time-out);
after every ``handle`` the runner asks ``next_deadline()`` and feeds ``Tick``
no later than that. ``MetadataFailed`` carries the runner's ``now`` too (the
back-off before re-reading starts there). Times are integer milliseconds from any
monotonic clock. Each bookie request needs a time-out of its own in the
runner (a hanging bookie must turn into an event, never block the machine).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from enum import StrEnum

from services.errors import QuireError
from services.protocol.metadata import LedgerMetadata
from services.wire.framing import FramedRecord


class RejectReason(StrEnum):
    """Why a bookie did not store an add."""

    FENCED = "fenced"  # the ledger is fenced on that bookie (a recovery started)
    READONLY = "readonly"  # the bookie is read-only
    UNAVAILABLE = "unavailable"  # unreachable, failed, timed out: outcome unknown
    CORRUPT = "corrupt"  # the record's digest did not verify there: damaged in transit
    ENTRY_EXISTS = "entry_exists"  # the bookie stores other bytes for that entry


class ReadOutcome(StrEnum):
    FOUND = "found"
    MISSING = "missing"
    ERROR = "error"


# ---------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class AddRequested:
    """A client asks to append ``payloads`` (one request, acknowledged as a whole)."""

    request_id: Hashable
    payloads: tuple[bytes, ...]
    now: int


@dataclass(frozen=True, slots=True)
class CloseRequested:
    request_id: Hashable
    now: int


@dataclass(frozen=True, slots=True)
class Tick:
    now: int


@dataclass(frozen=True, slots=True)
class BookieAddsDone:
    """A bookie's answer to ``SendAdds``: ``stored`` are durable there; ``rejected``
    were not stored, for ``reason``. ``reasons`` (when given) is the reason of each
    rejected entry, aligned with ``rejected``; ``reason`` then sums them up (FENCED
    if any entry was refused as fenced). ``instance_id`` is the instance of the bookie
    that answered (None when it did not say): the write handle counts nothing from
    another instance than the one its fragment recorded (a reformatted bookie)."""

    bookie: str
    stored: tuple[int, ...] = ()
    rejected: tuple[int, ...] = ()
    reason: RejectReason | None = None
    reasons: tuple[RejectReason, ...] = ()
    instance_id: str | None = None

    def rejection_reasons(self) -> tuple[RejectReason, ...]:
        """The reason of each rejected entry (``reason`` for all when ``reasons`` is
        not given)."""
        if self.reasons:
            return self.reasons
        return (self.reason or RejectReason.UNAVAILABLE,) * len(self.rejected)


@dataclass(frozen=True, slots=True)
class BookieFailed:
    """Every add in flight to ``bookie`` failed for ``reason``."""

    bookie: str
    reason: RejectReason = RejectReason.UNAVAILABLE


@dataclass(frozen=True, slots=True)
class WritableBookies:
    """The writable bookies, and each one's instance id as registered (parallel to
    ``bookies``; ``()`` or None where unknown). New fragments record the instances of
    the bookies they choose (``metadata.Fragment.instances``). ``racks`` pairs every
    registered bookie (writable or not: an ensemble keeps read-only ones) that
    registered a rack with it; placement spreads write quorums over them
    (``placement.py``)."""

    bookies: tuple[str, ...]
    instances: tuple[str | None, ...] = ()
    racks: tuple[tuple[str, str], ...] = ()

    def instance_map(self) -> dict[str, str | None]:
        """bookie -> its registered instance (only the known ones)."""
        return {b: i for b, i in zip(self.bookies, self.instances, strict=False) if i is not None}

    def rack_map(self) -> dict[str, str]:
        """bookie -> its registered rack (only the bookies that registered one)."""
        return dict(self.racks)


@dataclass(frozen=True, slots=True)
class MetadataWritten:
    """The CAS of ``WriteMetadata`` succeeded; the znode is now at ``version``."""

    metadata: LedgerMetadata
    version: int


@dataclass(frozen=True, slots=True)
class MetadataConflicted:
    """The CAS lost: the znode had changed. ``metadata``/``version`` are its current value."""

    metadata: LedgerMetadata
    version: int


@dataclass(frozen=True, slots=True)
class MetadataRead:
    metadata: LedgerMetadata
    version: int


@dataclass(frozen=True, slots=True)
class MetadataFailed:
    """The metadata store did not answer (a write's outcome is unknown) or the znode is
    gone (``code == "ledger_not_found"``)."""

    code: str
    message: str = ""
    now: int | None = None  # when the runner saw the failure (the back-off starts there)


@dataclass(frozen=True, slots=True)
class FenceDone:
    """The bookie persisted the fence flag; its LAC and last stored entry, the ledger's
    length at each (``lac_length``, ``length``; -1 when unknown or not stored there),
    and the answering bookie's instance (a reformatted bookie is a new instance; None
    when the bookie does not say)."""

    bookie: str
    lac: int
    last_entry_id: int = -1
    instance_id: str | None = None
    length: int = -1
    lac_length: int = -1
    now: int | None = None


@dataclass(frozen=True, slots=True)
class FenceFailed:
    bookie: str


@dataclass(frozen=True, slots=True)
class EntryRead:
    """One entry's answer from ``bookie``, and the instance of the bookie that answered
    (None when it did not say): recovery counts a MISSING only from the instance that
    answered its fence."""

    bookie: str
    entry_id: int
    outcome: ReadOutcome
    record: FramedRecord | None = None
    instance_id: str | None = None
    now: int | None = None


Event = (
    AddRequested
    | CloseRequested
    | Tick
    | BookieAddsDone
    | BookieFailed
    | WritableBookies
    | MetadataWritten
    | MetadataConflicted
    | MetadataRead
    | MetadataFailed
    | FenceDone
    | FenceFailed
    | EntryRead
)


# ---------------------------------------------------------------------- effects


@dataclass(frozen=True, slots=True)
class SendAdds:
    """Store ``records`` (sealed; ``recovery`` flag set on recovery write-backs) on ``bookie``."""

    bookie: str
    records: tuple[FramedRecord, ...]


@dataclass(frozen=True, slots=True)
class SendLac:
    """Tell ``bookies`` the writer's LAC (an explicit LAC update; no answer is needed)."""

    ledger_id: int
    bookies: tuple[str, ...]
    lac: int


@dataclass(frozen=True, slots=True)
class WriteMetadata:
    metadata: LedgerMetadata
    expected_version: int
    # False when a new fragment of ``metadata`` could not meet the rack policy
    # (``placement.Placement.spread``): the runner logs a warning.
    spread: bool = True


@dataclass(frozen=True, slots=True)
class ReadMetadata:
    ledger_id: int


@dataclass(frozen=True, slots=True)
class ReadWritableBookies:
    pass


@dataclass(frozen=True, slots=True)
class SendFence:
    ledger_id: int
    bookie: str


@dataclass(frozen=True, slots=True)
class ReadEntries:
    ledger_id: int
    bookie: str
    entry_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AckAdds:
    """The add request is acknowledged: entries ``first..last`` are durable on an ack
    quorum each, and so is every lower entry. ``lac >= last_entry_id``."""

    request_id: Hashable
    first_entry_id: int
    last_entry_id: int
    lac: int


@dataclass(frozen=True, slots=True)
class FailAdds:
    """The add request failed with ``error`` (a ``QuireError`` subclass). For
    ``LedgerFenced``, ``QuorumTimeout`` and ``NotEnoughBookies`` the outcome is
    unknown: the entries may or may not have been written."""

    request_id: Hashable
    error: type[QuireError]
    message: str
    # The entry ids the request was given (first, last), when it got that far: the log
    # layer compares them with where the ledger was closed to learn the outcome.
    entries: tuple[int, int] | None = None

    def exception(self) -> QuireError:
        exc = self.error(self.message)
        exc.entries = self.entries
        return exc


@dataclass(frozen=True, slots=True)
class CloseDone:
    request_id: Hashable
    metadata: LedgerMetadata
    version: int


@dataclass(frozen=True, slots=True)
class CloseFailed:
    request_id: Hashable
    error: type[QuireError]
    message: str
    # The entry ids the request was given (first, last), when it got that far: the log
    # layer compares them with where the ledger was closed to learn the outcome.
    entries: tuple[int, int] | None = None

    def exception(self) -> QuireError:
        exc = self.error(self.message)
        exc.entries = self.entries
        return exc


@dataclass(frozen=True, slots=True)
class RecoveryDone:
    """The ledger is CLOSED (by this recovery or, when ``closed_here`` is false, by
    someone else: a concurrent recovery or the writer)."""

    metadata: LedgerMetadata
    version: int
    closed_here: bool


@dataclass(frozen=True, slots=True)
class RecoveryFailed:
    """The recovery gave up; the ledger may be left IN_RECOVERY, and running the
    recovery again continues it (retriable unless ``error.retriable`` is false)."""

    error: type[QuireError]
    message: str

    def exception(self) -> QuireError:
        return self.error(self.message)


Effect = (
    SendAdds
    | SendLac
    | WriteMetadata
    | ReadMetadata
    | ReadWritableBookies
    | SendFence
    | ReadEntries
    | AckAdds
    | FailAdds
    | CloseDone
    | CloseFailed
    | RecoveryDone
    | RecoveryFailed
)
