"""The ledger client's bounds (docs/style.md §5): what its runners, senders, handle
table and recoveries read through the context.

The client has no flags of its own. A service builds these from its settings: the
gateway from its flags (``GatewaySettings.ledger_client``; each bound is a flag there,
with its limits and description, docs/api.md), whose defaults are the ones here; the
replication worker, which only recovers, from the defaults
(replicator/openledger.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LedgerClientSettings:
    # Writes: the longest wait of an add for room in its ledger; the longest wait of an
    # add for its ack quorum (services/protocol/writer.py "Time-out"); the idle time
    # before a ledger's LAC is sent explicitly; closed write handles remembered.
    admission_wait_ms: int = 30_000
    add_timeout_ms: int = 20_000
    explicit_lac_delay_ms: int = 200
    closed_handles_kept_max: int = 100_000
    # Reads and recoveries: a replica slower than this gets another one asked too; the
    # pause before re-polling a bookie that answered a long poll early; the longest run
    # of one ledger recovery.
    speculative_read_ms: int = 2_000
    lac_repoll_delay_ms: int = 20
    recovery_timeout_ms: int = 120_000
    # The per-bookie senders (services/ledger_client/senders.py ``SenderLimits``).
    bookie_requests_in_flight_max: int = 4
    bookie_requests_in_flight_eager: int = 1
    bookie_pipeline_entries_min: int = 64
    bookie_pipeline_bytes_min: int = 512 * 1024
    bookie_batch_entries_max: int = 2_000
    bookie_batch_bytes_max: int = 16 * 1024 * 1024
    bookie_add_timeout_ms: int = 800
