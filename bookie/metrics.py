"""The bookie's Prometheus metrics, in a registry of their own (one per app).

Names follow the scheme of docs/operations.md "Metrics": ``quire_bookie_<what>_<unit>``,
counters ending in ``_total``. Its metric table lists each one.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services import gc_pauses
from services.zk.metrics import ZooKeeperMetrics

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
_REQUEST_BUCKETS_S = (
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
)  # fmt: skip
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


class BookieMetrics:
    """Counters, histograms and gauges named ``quire_bookie_*``.

    Prometheus clients are thread-safe: the group-commit writer thread updates
    the commit metrics, the event loop the request metrics.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        gc_pauses.register(r, "bookie")
        self.adds = Counter(
            "quire_bookie_adds_total", "Entries stored (acknowledged adds)", registry=r
        )
        self.rejected_adds = Counter(
            "quire_bookie_rejected_adds_total",
            "Entries (or whole add requests that did not parse) refused, by error code",
            ["reason"],
            registry=r,
        )
        self.add_latency = Histogram(
            "quire_bookie_add_seconds",
            "Time from a parsed add request to its answer (its entries durable)",
            buckets=_REQUEST_BUCKETS_S,
            registry=r,
        )
        self.reads = Counter("quire_bookie_reads_total", "Entries returned by reads", registry=r)
        self.read_requests = Counter(
            "quire_bookie_read_requests_total", "Single and range read requests", registry=r
        )
        self.read_latency = Histogram(
            "quire_bookie_read_seconds",
            "Time to read the entries of one single or range read request from the store",
            buckets=_REQUEST_BUCKETS_S,
            registry=r,
        )
        self.fence_requests = Counter(
            "quire_bookie_fence_requests_total",
            "Fence requests answered (the fenced flag on disk), from recoveries",
            registry=r,
        )
        self.commits = Counter(
            "quire_bookie_commits_total", "Group-commit transactions committed", registry=r
        )
        self.loop_commits = Counter(
            "quire_bookie_loop_commits_total",
            "Commits the event loop made itself (an add alone while the writer thread is idle)",
            registry=r,
        )
        self.fsyncs = Counter(
            "quire_bookie_fsyncs_total",
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
            "quire_bookie_stored_bytes",
            "Bytes the store occupies on disk (database and write-ahead log)",
            registry=r,
        )
        self.read_only = Gauge(
            "quire_bookie_read_only", "1 while the bookie is read-only, else 0", registry=r
        )
        self.free_ratio = Gauge(
            "quire_bookie_disk_free_ratio", "Free fraction of the data dir's disk", registry=r
        )
        self.free_bytes = Gauge(
            "quire_bookie_disk_free_bytes",
            "Free bytes on the data dir's disk (at the last disk check)",
            registry=r,
        )
        self.total_bytes = Gauge(
            "quire_bookie_disk_total_bytes",
            "Size of the data dir's disk in bytes (at the last disk check)",
            registry=r,
        )
        self.ledgers = Gauge("quire_bookie_ledgers", "Ledgers known to this bookie", registry=r)
        self.lac_polls_waiting = Gauge(
            "quire_bookie_lac_polls_waiting",
            "LAC long polls waiting for a ledger to pass the LAC asked about",
            registry=r,
        )
        self.purging_ledgers = Gauge(
            "quire_bookie_purging_ledgers",
            "Deleted ledgers whose entries the writer is still purging (bookie/writer.py)",
            registry=r,
        )
        self.purged_entries = Counter(
            "quire_bookie_purged_entries_total",
            "Entry rows of deleted ledgers the background purge removed",
            registry=r,
        )
        self.vacuumed_pages = Counter(
            "quire_bookie_vacuumed_pages_total",
            "Free pages the paced incremental vacuum gave back to the file system",
            registry=r,
        )
        self.purge_seconds = Counter(
            "quire_bookie_purge_seconds_total",
            "Writer-thread seconds spent in purge and vacuum steps",
            registry=r,
        )
        self.gc_passes = Counter(
            "quire_bookie_gc_passes_total",
            "Garbage-collection passes (not dry runs), by outcome: ok, or zookeeper_error "
            "(the pass ended at a failed read and kept the rest)",
            ["outcome"],
            registry=r,
        )
        self.gc_freed_ledgers = Counter(
            "quire_bookie_gc_freed_ledgers_total",
            "Ledgers garbage collection deleted (their metadata was gone)",
            registry=r,
        )
        self.gc_freed_bytes = Counter(
            "quire_bookie_gc_freed_bytes_total",
            "Payload bytes of the ledgers garbage collection deleted",
            registry=r,
        )
        self.gc_pending = Gauge(
            "quire_bookie_gc_pending_ledgers",
            "Ledgers whose metadata was found missing and that are not deleted yet",
            registry=r,
        )
        self.zookeeper = ZooKeeperMetrics(r, "bookie")
