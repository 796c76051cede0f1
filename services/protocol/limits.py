"""The bounds of the protocol core's operations (docs/style.md §5), one frozen value per
operation, filled from settings by the services and from its plan by the simulator.

They live apart from the operations, in a module that is never compiled: a compiled
frozen dataclass cannot be copied (``copy.deepcopy`` sets its fields one by one), and the
simulator copies its plans, limits included.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.limits import BATCH_ENTRIES_MAX


@dataclass(frozen=True)
class WriterLimits:
    """Every bound of a write handle (docs/style.md §5)."""

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
