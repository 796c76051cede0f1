"""The auditor's Prometheus metrics (one registry per app).

Names follow the scheme of docs/operations.md "Metrics": ``quire_auditor_<what>_<unit>``,
counters ending in ``_total``. ``quire_auditor_under_replicated_ledgers`` is the
number of marks as they are now and ``quire_auditor_bookies`` the bookies by state
as this auditor's watches see them: the ``/metrics`` route refreshes both before it
renders (``Auditor.refresh_gauges``), so neither is a stale count.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services import gc_pauses
from services.zk.metrics import ZooKeeperMetrics

# The states of quire_auditor_bookies, as in the admin API's cluster object.
BOOKIE_STATES = ("writable", "readonly", "unavailable")

_AUDIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class AuditorMetrics:
    # The per-log series (dropped when the log is gone).
    def per_log(self) -> tuple[Gauge | Counter, ...]:
        return (
            self.log_ledgers, self.log_records, self.log_bytes, self.log_oldest,
            self.retention_removed_bytes, self.retention_skipped, self.retention_held,
        )  # fmt: skip

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        gc_pauses.register(r, "auditor")
        self.underreplicated = Gauge(
            "quire_auditor_under_replicated_ledgers",
            "Ledgers marked under-replicated now (counted from the marks at scrape)",
            registry=r,
        )
        self.bookies = Gauge(
            "quire_auditor_bookies",
            "Bookies by state: writable, readonly (registered; decommissioning ones count "
            "here), unavailable (a cookie but not registered, not decommissioned)",
            ["state"],
            registry=r,
        )
        for state in BOOKIE_STATES:
            self.bookies.labels(state)
        self.elected = Gauge(
            "quire_auditor_elected", "1 while this auditor is the elected one", registry=r
        )
        self.audits = Counter(
            "quire_auditor_audits_total",
            "Checks run, by kind (full: placement and replicas; placement: after a lost "
            "or decommissioned bookie) and outcome",
            ["kind", "outcome"],
            registry=r,
        )
        self.audit_duration = Histogram(
            "quire_auditor_audit_duration_seconds",
            "Duration of completed checks",
            ["kind"],
            buckets=_AUDIT_BUCKETS,
            registry=r,
        )
        self.ledgers_marked = Counter(
            "quire_auditor_ledgers_marked_total",
            "Marks written (a ledger marked again with new missing bookies counts again)",
            registry=r,
        )
        self.marks_cleared = Counter(
            "quire_auditor_marks_cleared_total",
            "Stale marks deleted (the ledger was whole)",
            registry=r,
        )
        self.bookies_lost = Counter(
            "quire_auditor_bookies_lost_total",
            "Bookies gone for longer than the lost-bookie delay (seen by the elected auditor)",
            registry=r,
        )
        self.bookies_skipped = Counter(
            "quire_auditor_bookies_skipped_total",
            "Bookies skipped by a replica check (no answer in time)",
            registry=r,
        )
        self.placement_violations = Gauge(
            "quire_auditor_placement_violations",
            "Ledgers whose write quorums span fewer racks than the rack policy wants, as "
            'the last complete check found them (docs/operations.md "Racks")',
            registry=r,
        )
        # Retention (auditor/retention.py): what each log holds as the last pass counted
        # it (closed ledgers' records and bytes; its open ledger counts in ``ledgers``
        # only), what passes removed, and the passes.
        self.log_ledgers = Gauge(
            "quire_auditor_log_ledgers", "Ledgers a log lists", ["log"], registry=r
        )
        self.log_records = Gauge(
            "quire_auditor_log_records",
            "Records in a log's closed ledgers (its open ledger's are not counted)",
            ["log"],
            registry=r,
        )
        self.log_bytes = Gauge(
            "quire_auditor_log_bytes",
            "Bytes of a log's closed ledgers (ledger lengths; its open ledger's are not counted)",
            ["log"],
            registry=r,
        )
        self.log_oldest = Gauge(
            "quire_auditor_log_oldest_seconds",
            "Unix time at which a log's oldest ledger was made (its records are no older)",
            ["log"],
            registry=r,
        )
        self.retention_removed = Counter(
            "quire_auditor_retention_removed_ledgers_total",
            "Ledgers retention removed from a log, by the limit that removed them "
            "(age, bytes, records, backlog)",
            ["log", "reason"],
            registry=r,
        )
        self.retention_removed_bytes = Counter(
            "quire_auditor_retention_removed_bytes_total",
            "Bytes of the ledgers retention removed from a log",
            ["log"],
            registry=r,
        )
        self.retention_skipped = Counter(
            "quire_auditor_retention_skipped_records_total",
            "Records retention removed before a durable cursor of the log acknowledged them",
            ["log"],
            registry=r,
        )
        self.retention_held = Gauge(
            "quire_auditor_retention_held_ledgers",
            "Ledgers past a log's limits kept for its durable cursors (retain_for_cursors)",
            ["log"],
            registry=r,
        )
        self.retention_passes = Counter(
            "quire_auditor_retention_passes_total",
            "Retention passes, by outcome (done, failed, not_elected)",
            ["outcome"],
            registry=r,
        )
        self.retention_pass_duration = Histogram(
            "quire_auditor_retention_pass_duration_seconds",
            "Duration of completed retention passes",
            buckets=_AUDIT_BUCKETS,
            registry=r,
        )
        self.zookeeper = ZooKeeperMetrics(r, "auditor")
