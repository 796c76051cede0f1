"""The bounds every service shares (docs/style.md §5), each named with its unit last.

docs/api.md fixes most of them; the bookie API (docs/api.md "Bookie") uses the same ones, so
a gateway never asks a bookie for more than the bookie serves. Tunables that an
operator may change are settings (``services/settings.py``), not constants here.
"""

from __future__ import annotations

# Ids are non-negative signed 64-bit integers.
ID_MAX = (1 << 63) - 1

# Entries and add requests (docs/api.md: 413 payload_too_large past these).
ENTRY_SIZE_MAX_BYTES = 5 * 1024 * 1024
# What a ledger entry may hold below the API: a log record of ENTRY_SIZE_MAX_BYTES in
# its envelope (``services/protocol/log_records.py``: at most 158 header bytes).
STORED_ENTRY_SIZE_MAX_BYTES = ENTRY_SIZE_MAX_BYTES + 256
BATCH_ENTRIES_MAX = 10_000
BODY_SIZE_MAX_BYTES = 64 * 1024 * 1024
# A create-ledger (or other small JSON) request body.
SMALL_BODY_MAX_BYTES = 1024 * 1024

# Range reads: one answer holds at most this many entries or payload bytes (the
# first entry always comes whole).
PAGE_ENTRIES_MAX = 1_000
PAGE_BYTES_MAX = 8 * 1024 * 1024
# A bookie's range answer, and a page of a streamed range read of the gateway after its
# first (binary frames, NDJSON), hold up to this many entries: each request's fixed
# cost (the bookie's HTTP and routing, the gateway's read op) spread over more of them
# (benchmarks/README.md, "Measured choices"); the byte bound above still holds a page
# in memory. A JSON page stays at PAGE_ENTRIES_MAX (docs/api.md).
RANGE_ENTRIES_MAX = 8_192
# A streamed range read (binary frames, NDJSON) reads this many pages ahead of the one it
# sends (gateway/ledgers/pages.py ``read_ahead``; benchmarks/README.md, "Measured choices").
READ_AHEAD_PAGES = 2

# The most bookies in an ensemble (a ledger's E; a bookie range read's stride).
ENSEMBLE_SIZE_MAX = 64

# Listings (ledgers, logs, bookies' ledgers): the most ids per answer.
LIST_LIMIT_MAX = 1_000

# LAC long polls are clamped to this wait.
LAC_WAIT_MAX_MS = 30_000

# Explicit LAC updates: the most ledgers in one request to a bookie.
LAC_BATCH_MAX = 10_000

# Stored-entry reports (docs/api.md "Bookie" `/v1/ledgers/{id}/stored`, `/v1/stored`): the most
# ledgers one bulk request asks about, the most runs of consecutive entry ids listed
# for one ledger, and for a whole bulk answer (its JSON stays well under the client's
# 32 MiB answer bound); past these the list is cut and says `truncated`.
STORED_BATCH_MAX = 1_000
STORED_RUNS_MAX = 100_000
STORED_BATCH_RUNS_MAX = 500_000
# verify=sample digest-checks at most this many entries of a ledger: the first, the
# last and evenly spaced ones between.
STORED_SAMPLE_ENTRIES_MAX = 16

# The longest idempotency window a gateway may be given (--idempotency-window-s); a log's
# saved keys are kept this long (plus clock skew) for any gateway that takes it over
# (services/zk/saved_keys_store.py).
IDEMPOTENCY_WINDOW_MAX_S = 86_400.0

# Requests one process serves at once; more get a JSON 503 (services/web/server.py). The
# default of ``--requests-in-flight-max``.
REQUESTS_IN_FLIGHT_MAX = 4096
