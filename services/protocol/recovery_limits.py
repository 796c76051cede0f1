"""The bounds of a ledger recovery and the phases it goes through
(``recovery.LedgerRecovery``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class RecoveryLimits:
    """Every bound of a recovery (docs/style.md §5)."""

    recovery_read_batch_max: int = 16  # entries being read ahead at once
    recovery_read_attempts_max: int = 3  # reads of one entry from one bookie
    speculative_read_ms: int = 2_000  # a bookie silent this long: ask the next one too
    recovery_write_attempts_max: int = 3  # failed write-backs before a bookie is replaced
    recovery_write_backs_in_flight_max: int = 64  # entries being written back at once
    metadata_attempts_max: int = 10  # CAS writes, or store failures in a row, per step
    metadata_retry_ms: int = 200  # back-off after a store failure before re-reading
    recovery_timeout_ms: int = 120_000  # the longest run, from start() to its result
    ensemble_change_attempts_max: int = 5  # replacements of write-back bookies


class RecoveryPhase(StrEnum):
    MARKING = "marking"  # CAS to IN_RECOVERY in flight
    FENCING = "fencing"
    READING = "reading"  # reading forward and writing back
    CLOSING = "closing"  # CAS to CLOSED in flight
    DONE = "done"
    FAILED = "failed"
