"""The Spark connector's own bounds (docs/style.md §5), each named with its unit last.

Bounds every service shares (batch entries, entry sizes) are in ``services/limits.py``;
sizes that follow from the record envelope stay with it (``services/spark/ingest.py``'s
``RECORD_SIZE_MAX_BYTES``). The rest is here, grouped by the part of the connector that
applies it. A module reads a bound a test lowers as ``X``.
"""

from __future__ import annotations

from services.limits import BATCH_ENTRIES_MAX

# The gateway client (services/spark/client.py): a call waits at most this long unless
# its caller says otherwise (reads and their planning); a streamed range read asks the
# socket for this many bytes per chunk. A call without an answer, or answered 503/504,
# is sent again this long apart for at most this long (a ZooKeeper election, a gateway
# restarting): past it the call fails, and with it the task or the job.
REQUEST_TIMEOUT_S = 60.0
STREAM_CHUNK_BYTES = 1 << 20
RETRY_DELAY_S = 0.5
RETRY_BUDGET_S = 30.0

# Batch reads (services/spark/batch_read.py): rows and payload bytes of one Arrow batch
# handed to Spark.
ARROW_BATCH_ROWS = 10_000
ARROW_BATCH_BYTES = 16 << 20

# Partitions of a read (services/spark/options.py, services/spark/stream_read.py): the
# entries and bytes of one partition by default, and the bounds of the options that set
# them (one entry .. 100 million; 1 KiB .. 64 GiB).
DEFAULT_PARTITION_ENTRIES = 100_000
DEFAULT_PARTITION_BYTES = 64 << 20
PARTITION_ENTRIES_MAX = 100_000_000
PARTITION_BYTES_MIN = 1 << 10
PARTITION_BYTES_MAX = 64 << 30

# Streaming reads (services/spark/stream_read.py): entries read per step when looking
# back from the LAC for the end of a whole batch.
BOUNDARY_SCAN_ENTRIES = 64

# Writes (services/spark/ingest.py): each call a write makes (creates, appends, closes,
# attaches) waits at most this long; one append request of a task holds at most this
# many records and stored bytes; ledgers listed per page when a commit or an abort
# looks for a job's ledgers; how many ledgers back from a log's end a streaming abort
# looks for one of its query.
WRITE_REQUEST_TIMEOUT_S = 120.0
REQUEST_RECORDS_MAX = BATCH_ENTRIES_MAX
REQUEST_PAYLOAD_MAX_BYTES = 16 * 1024 * 1024
LIST_PAGE_LEDGERS = 1_000
QUERY_MARK_LOOK_BACK_MAX = 64

# TLS (services/spark/client.py): verifying contexts one process keeps, one per CA
# bundle, client certificate and key and their files' versions (a job names one; a
# rotated file adds one); links of an httpx error's chain searched for a certificate
# verification failure (httpx's error, httpcore's, then OpenSSL's).
TLS_CONTEXTS_MAX = 8
ERROR_CHAIN_MAX = 8
