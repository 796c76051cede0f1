"""The bookie's Prometheus metrics, in a registry of their own (one per app)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_FSYNC_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


class BookieMetrics:
    """Counters, histograms and gauges named ``quire_bookie_*``.

    Prometheus clients are thread-safe: the group-commit writer thread updates
    the commit metrics, the event loop the request metrics.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.adds = Counter("quire_bookie_adds", "Entries stored (acknowledged adds)", registry=r)
        self.rejected_adds = Counter(
            "quire_bookie_rejected_adds",
            "Entries (or whole add requests that did not parse) refused, by error code",
            ["reason"],
            registry=r,
        )
        self.reads = Counter("quire_bookie_reads", "Entries returned by reads", registry=r)
        self.read_requests = Counter(
            "quire_bookie_read_requests", "Single and range read requests", registry=r
        )
        self.commits = Counter(
            "quire_bookie_commits", "Group-commit transactions committed", registry=r
        )
        self.fsyncs = Counter(
            "quire_bookie_fsyncs",
            "Commits made durable with fsync (one per group commit while journal sync is on)",
            registry=r,
        )
        self.fsync_latency = Histogram(
            "quire_bookie_fsync_latency_seconds",
            "Time to commit (and fsync, when journal sync is on) one group commit",
            buckets=_FSYNC_BUCKETS_S,
            registry=r,
        )
        self.batch_size = Histogram(
            "quire_bookie_group_commit_entries",
            "Entries written per group commit",
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.batch_requests = Histogram(
            "quire_bookie_group_commit_requests",
            "Requests (adds, fences, LAC updates, deletes) sharing one group commit",
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.bytes_stored = Gauge(
            "quire_bookie_bytes_stored",
            "Bytes the store occupies on disk (database and write-ahead log)",
            registry=r,
        )
        self.read_only = Gauge(
            "quire_bookie_read_only", "1 while the bookie is read-only, else 0", registry=r
        )
        self.free_ratio = Gauge(
            "quire_bookie_disk_free_ratio", "Free fraction of the data dir's disk", registry=r
        )
        self.ledgers = Gauge("quire_bookie_ledgers", "Ledgers known to this bookie", registry=r)
