"""The bounds of the protocol core's operations (docs/style.md §5): one frozen value per
operation, filled from settings by the services and from its plan by the simulator, and
the constants of the bounds no setting reaches, grouped by the operation that applies
them. Sizes that follow from a format stay with their format (``log_records``,
``logs``, ``metadata``).

They live apart from the operations, in a module that is never compiled: a compiled
frozen dataclass cannot be copied (``copy.deepcopy`` sets its fields one by one), and the
simulator copies its plans, limits included. The module imports no operation of
``services.protocol``, which all read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.limits import BATCH_ENTRIES_MAX, PAGE_BYTES_MAX, PAGE_ENTRIES_MAX


@dataclass(frozen=True)
class WriterLimits:
    """Every bound of a write handle (``writer.WriteHandle``)."""

    adds_in_flight_max: int = 2 * BATCH_ENTRIES_MAX  # entries accepted, not acknowledged
    add_bytes_in_flight_max: int = 128 * 1024 * 1024  # their payload bytes
    add_timeout_ms: int = 20_000
    explicit_lac_delay_ms: int = 20
    ensemble_change_retry_ms: int = 500
    ensemble_change_attempts_max: int = 10  # CAS conflicts before waiting a retry period
    metadata_retry_ms: int = 500
    metadata_failures_max: int = 10  # store failures in a row before giving up an operation
    close_attempts_max: int = 10  # close CAS conflicts (ledger still OPEN) before giving up
    send_batch_entries_max: int = 1_000
    send_batch_bytes_max: int = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CasLimits:
    """The bounds of one metadata compare-and-set (``cas.MetadataCas``)."""

    failures_max: int = 10  # store failures in a row before giving up
    retry_ms: int = 500  # back-off after a store failure before re-reading


@dataclass(frozen=True)
class RecoveryLimits:
    """Every bound of a recovery (``recovery.LedgerRecovery``)."""

    recovery_read_batch_max: int = 16  # entries being read ahead at once
    recovery_read_attempts_max: int = 3  # reads of one entry from one bookie
    speculative_read_ms: int = 2_000  # a bookie silent this long: ask the next one too
    recovery_write_attempts_max: int = 3  # failed write-backs before a bookie is replaced
    recovery_write_backs_in_flight_max: int = 64  # entries being written back at once
    metadata_attempts_max: int = 10  # CAS writes, or store failures in a row, per step
    metadata_retry_ms: int = 200  # back-off after a store failure before re-reading
    recovery_timeout_ms: int = 120_000  # the longest run, from start() to its result
    ensemble_change_attempts_max: int = 5  # replacements of write-back bookies


@dataclass(frozen=True)
class ReadLimits:
    """Every bound of a read (``reads.ReadOp``)."""

    speculative_read_ms: int = 2_000  # a replica slower than this: ask another too
    page_entries_max: int = PAGE_ENTRIES_MAX
    page_bytes_max: int = PAGE_BYTES_MAX  # but the first entry of a page comes whole


@dataclass(frozen=True)
class LacLimits:
    """Every bound of a LAC read (``reads_lac.LacOp``)."""

    speculative_read_ms: int = 2_000  # bookies silent this long are not waited for
    lac_repoll_delay_ms: int = 20  # before re-polling a bookie that answered too early


# Ledgers whose highest LAC a reader keeps (``reads_lac.SeenLacs``, ~100 B each); the
# least recently used is forgotten first.
LAC_MEMORY_LEDGERS_MAX = 100_000

# Taking a log's writer role and rolling its ledger (``log_writer``): an operation
# starts again after a CAS conflict at most this many times, after a back-off doubling
# from first to max (with jitter, so duelling writers drift apart).
LOG_WRITER_ATTEMPTS_MAX = 8
LOG_WRITER_BACKOFF_FIRST_MS = 20
LOG_WRITER_BACKOFF_MAX_MS = 500

# An append to a log (``log_append.LogAppendOp``) is handed to at most this many
# ledgers in a row (a roll before each new one).
APPEND_ATTEMPTS_MAX = 3

# A repair of one ledger (``repair.RepairOp``): plans of the ledger under one lock before
# giving up (it is retried later), targets tried for one fragment before giving up, and
# compare-and-set attempts of one swap.
REPAIR_ROUNDS_MAX = 20
REPAIR_TARGETS_TRIED_MAX = 4
REPAIR_SWAP_ATTEMPTS_MAX = 20

# Placement (``placement.choose_ensemble``): racks tried, over all positions, by the
# search for a sequence of racks meeting the rack policy before it falls back to the
# rack-unaware choice (a few hundred cover every feasible layout of up to 16 bookies).
PLACEMENT_SEARCH_STEPS_MAX = 2_000
