"""The ledger client's Prometheus metrics: what its runners, handle table and
recoveries count.

The service that runs the client names them (``quire_<service>_<what>_<unit>``, the
scheme of docs/operations.md "Metrics", like ``services.zk.metrics``) and registers them
in its own registry: the gateway exposes them (``gateway/metrics.py``; the metric table
of docs/operations.md lists each). Without a registry they are counted and exposed
nowhere: the replication worker counts the recoveries it runs in its own metrics.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

# The outcomes a recovery ends with (``runners.recovery``): listed so that each series
# exists from the start.
RECOVERY_OUTCOMES = ("closed", "already_closed", "failed")
FENCE_OUTCOMES = ("ok", "failed")


class Tally:
    """A count the event loop changes and a gauge reads (``Gauge.set_function``)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class LedgerClientMetrics:
    def __init__(self, registry: CollectorRegistry | None, service: str) -> None:
        self.registry = registry  # where they are exposed (None: nowhere)
        r = registry
        # Changed twice per bookie request: a plain count, read when scraped, because a
        # Gauge's inc and dec take a lock each (benchmarks/README.md, "Measured choices").
        self.adds_in_flight = Tally()
        Gauge(
            f"quire_{service}_adds_in_flight", "Entries sent and not yet acknowledged", registry=r
        ).set_function(lambda: self.adds_in_flight.value)
        self.ensemble_changes = Counter(
            f"quire_{service}_ensemble_changes_total", "Ensemble changes written", registry=r
        )
        self.recoveries = Counter(
            f"quire_{service}_recoveries_total",
            "Ledger recoveries by outcome",
            ["outcome"],
            registry=r,
        )
        for outcome in RECOVERY_OUTCOMES:
            self.recoveries.labels(outcome)
        self.fence_requests = Counter(
            f"quire_{service}_fence_requests_total",
            "Fence requests sent to bookies by recoveries, by outcome (ok, failed)",
            ["outcome"],
            registry=r,
        )
        for outcome in FENCE_OUTCOMES:
            self.fence_requests.labels(outcome)
        self.ledgers_fenced = Counter(
            f"quire_{service}_ledgers_fenced_total",
            f"Ledgers this {service} fenced (a recovery whose fence covered every write set)",
            registry=r,
        )
        self.entries_read = Counter(
            f"quire_{service}_entries_read_total", "Entries returned to readers", registry=r
        )
        self.read_failovers = Counter(
            f"quire_{service}_read_failovers_total",
            "Entry reads that had to try another replica (missing, corrupt or down)",
            registry=r,
        )
        self.open_handles = Gauge(
            f"quire_{service}_write_handles", f"Write handles this {service} holds", registry=r
        )
