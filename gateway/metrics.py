"""The gateway's Prometheus metrics (one registry per app).

Names follow the scheme of docs/operations.md "Metrics": ``quire_gateway_<what>_<unit>``,
counters ending in ``_total``. Its metric table lists each one. The gateway's own are
its requests' (adds, reads, bodies, streams) and its logs'; the ledger client it runs
counts its writes, reads and recoveries in ``client`` (services/ledger_client/metrics.py),
registered here and exposed with the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services import gc_pauses
from services.budget import ByteBudget
from services.errors import QuireError
from services.ledger_client.metrics import LedgerClientMetrics
from services.zk.metrics import ZooKeeperMetrics

_LATENCY_BUCKETS = (
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
)  # fmt: skip
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 10000)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        gc_pauses.register(r, "gateway")
        self.add_latency = Histogram(
            "quire_gateway_add_seconds",
            "Time from an add request to its acknowledgement",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.read_latency = Histogram(
            "quire_gateway_read_seconds",
            "Time to answer a read request",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.add_batch_size = Histogram(
            "quire_gateway_add_batch_entries",
            "Entries per add request (1 for a raw add, the batch's length for a JSON batch)",
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.entries_added = Counter(
            "quire_gateway_entries_added_total", "Entries acknowledged to clients", registry=r
        )
        self.add_errors = Counter(
            "quire_gateway_add_errors_total", "Failed add requests by error", ["error"], registry=r
        )
        # The ledger client's: registered between the adds' and the logs', the order the
        # exposition has always had.
        self.client = LedgerClientMetrics(r, "gateway")
        # Logs (gateway/logs/): by log name, for the logs this gateway writes.
        self.log_appends = Counter(
            "quire_gateway_log_appends_total", "Log appends acknowledged", ["log"], registry=r
        )
        self.log_records = Counter(
            "quire_gateway_log_records_total", "Log records acknowledged", ["log"], registry=r
        )
        self.log_bytes = Counter(
            "quire_gateway_log_bytes_total", "Log record bytes acknowledged", ["log"], registry=r
        )
        self.log_rolls = Counter(
            "quire_gateway_log_rolls_total",
            "Ledger rolls of logs this gateway writes, by reason",
            ["log", "reason"],
            registry=r,
        )
        self.log_handovers = Counter(
            "quire_gateway_log_handovers_total",
            "Writer roles this gateway took (each fences the log's last two ledgers)",
            ["log"],
            registry=r,
        )
        self.log_dedup_hits = Counter(
            "quire_gateway_log_dedup_hits_total",
            "Appends answered from the idempotency window (nothing appended)",
            ["log"],
            registry=r,
        )
        self.log_writer_epoch = Gauge(
            "quire_gateway_log_writer_epoch",
            "The writer epoch this gateway holds, per log it writes",
            ["log"],
            registry=r,
        )
        self.log_append_latency = Histogram(
            "quire_gateway_log_append_seconds",
            "Time from a log append request to its answer",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        # Entries read to find where a log read from a time starts
        # (gateway/logs/time_search.py): about logarithmic in the log's size per search.
        self.log_time_search_reads = Counter(
            "quire_gateway_log_time_search_reads_total",
            "Entries read by searches of logs by time (from_time)",
            registry=r,
        )
        # Acks to durable cursors, and the ZooKeeper writes they were merged into
        # (gateway/logs/cursors.py: at most one per cursor per --cursor-flush-ms).
        self.cursor_acks = Counter(
            "quire_gateway_cursor_acks_total", "Acks to durable cursors received", registry=r
        )
        self.cursor_writes = Counter(
            "quire_gateway_cursor_writes_total",
            "Cursor positions written to ZooKeeper (merged acks; conflicts not counted)",
            registry=r,
        )
        # Appends forwarded to the gateway writing their log (gateway/logs/owners.py):
        # requests sent, and the records they carried (single records go together:
        # gateway/logs/grouping.py); take-overs of logs with no live writer.
        self.log_forwards = Counter(
            "quire_gateway_log_forwards_total",
            "Append requests forwarded to the gateway writing the log",
            registry=r,
        )
        self.log_forwarded_records = Counter(
            "quire_gateway_log_forwarded_records_total",
            "Client appends those forwarded requests carried (several singles per group)",
            registry=r,
        )
        self.log_takeovers = Counter(
            "quire_gateway_log_takeovers_total",
            "Logs with no live writer taken by this gateway on an append",
            registry=r,
        )
        # Reads served from kept metadata (gateway/metadata_cache.py), by reason: a
        # closed ledger's (ZooKeeper not asked), or ZooKeeper not answering.
        self.metadata_cache_hits = Counter(
            "quire_gateway_metadata_cache_hits_total",
            "Reads served ledger or log metadata this gateway kept, by reason",
            ["reason"],
            registry=r,
        )
        self.zookeeper = ZooKeeperMetrics(r, "gateway")
        self._streams = Gauge(
            "quire_gateway_streams", "Streaming appends open (authorized)", registry=r
        )
        self._streams_waiting = Gauge(
            "quire_gateway_streams_waiting",
            "Streams waiting for the budget of all streams before they read on",
            registry=r,
        )
        self._bodies_waiting = Gauge(
            "quire_gateway_requests_waiting",
            "REST requests waiting for the budget of all request bodies before they read on",
            registry=r,
        )
        self._body_bytes = Gauge(
            "quire_gateway_request_body_bytes",
            "Bytes of REST request bodies read and not yet answered (or, for small JSON "
            "bodies, not yet parsed)",
            registry=r,
        )
        self._stream_bytes = Gauge(
            "quire_gateway_stream_in_flight_bytes",
            "Payload bytes of all streams read and not yet acknowledged",
            registry=r,
        )
        self._long_polls = Gauge(
            "quire_gateway_long_polls_waiting",
            "Long polls (reads and LAC requests with wait_ms) waiting for more to answer",
            registry=r,
        )

    def watch_long_polls(self, waiting: Callable[[], int]) -> None:
        """The long polls waiting, read at each scrape (gateway/stopping.py)."""
        self._long_polls.set_function(waiting)

    def add_began(self, entries: int) -> float:
        """An add request of ``entries`` entries goes to its write handle: its size is
        counted; the answer is the start time ``add_ended`` wants. Every add (REST, fast
        path, stream) is counted through these two."""
        self.add_batch_size.observe(entries)
        return time.monotonic()

    def add_ended(self, entries: int, started: float, error: BaseException | None) -> None:
        """The add's outcome: acknowledged (its latency and entries counted) or failed
        (counted by its error code)."""
        if error is None:
            self.add_latency.observe(time.monotonic() - started)
            self.entries_added.inc(entries)
        elif isinstance(error, QuireError):
            self.add_errors.labels(error.code).inc()

    def watch_bodies(self, budget: ByteBudget) -> None:
        """Report the REST bodies' use of ``budget`` (read when scraped)."""
        self._bodies_waiting.set_function(lambda: budget.waiting)
        self._body_bytes.set_function(lambda: budget.used_bytes)

    def watch_streams(self, budget: ByteBudget) -> None:
        """Report the streams' shares of ``budget`` (read when scraped)."""
        self._streams.set_function(lambda: budget.shares)
        self._streams_waiting.set_function(lambda: budget.waiting)
        self._stream_bytes.set_function(lambda: budget.used_bytes)
