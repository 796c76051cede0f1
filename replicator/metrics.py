"""The replicator's Prometheus metrics (one registry per app).

Names follow the scheme of docs/operations.md "Metrics": ``quire_replicator_<what>_<unit>``,
counters ending in ``_total``. Its metric table lists each one.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services import gc_pauses
from services.zk.metrics import ZooKeeperMetrics

RECOVERY_OUTCOMES = ("completed", "failed")

_DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)


class ReplicatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        gc_pauses.register(r, "replicator")
        self.ledgers_replicated = Counter(
            "quire_replicator_ledgers_replicated_total",
            "Ledgers made whole again (their mark cleared) by this worker",
            registry=r,
        )
        self.entries_replicated = Counter(
            "quire_replicator_entries_replicated_total",
            "Entries copied to replacement bookies",
            registry=r,
        )
        self.bytes_replicated = Counter(
            "quire_replicator_replicated_bytes_total",
            "Payload bytes copied to replacement bookies",
            registry=r,
        )
        self.repair_duration = Histogram(
            "quire_replicator_repair_duration_seconds",
            "Time from taking a ledger's lock to clearing its mark",
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.recoveries = Counter(
            "quire_replicator_recoveries_total",
            "Open ledgers this worker fenced and closed (their writer did not replace a "
            "lost bookie of the last fragment within the grace period), by outcome",
            ["outcome"],
            registry=r,
        )
        for outcome in RECOVERY_OUTCOMES:
            self.recoveries.labels(outcome)
        self.lock_contention = Counter(
            "quire_replicator_lock_contention_total",
            "Marked ledgers skipped because another worker held their lock",
            registry=r,
        )
        self.failures = Counter(
            "quire_replicator_failures_total",
            "Ledger repairs that failed (lock released, retried after a back-off), by reason",
            ["reason"],
            registry=r,
        )
        self.ledgers_in_flight = Gauge(
            "quire_replicator_ledgers_in_flight", "Ledgers this worker is repairing now", registry=r
        )
        self.zookeeper = ZooKeeperMetrics(r, "replicator")
