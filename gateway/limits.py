"""The gateway's own bounds (docs/style.md §5), each named with its unit last.

Bounds every service shares (entry and body sizes, pages, listings) are in
``services/limits.py``; what an operator tunes (time-outs of adds, credits of a stream,
the dedup window) is a setting (``services/settings.py``). The rest is here, grouped by
the part of the gateway that applies it.
"""

from __future__ import annotations

from services.limits import ENTRY_SIZE_MAX_BYTES

# The HTTP plumbing (gateway/http/, gateway/fastpath.py, gateway/app.py).

# The API's JSON bodies are shallow (an object holding an array or a flat map); these
# bounds on a body's nesting and on its arrays and objects in all leave room for more
# without letting a body cost the parser more than its size (gateway/http/json_input.py).
JSON_DEPTH_MAX = 32
JSON_CONTAINERS_MAX = 10_000
# A 400 answer to a body that fails validation names where, cut to this many characters
# (gateway/http/json_input.py).
ERROR_LOCATION_MAX_CHARS = 80
# The fast path keeps one JSON answer template per set of answer keys, at most this many
# (an add's answer has two shapes; gateway/fastpath.py).
ANSWER_TEMPLATES_MAX = 16
# A gateway whose bookie registry view failed to start tries again after this pause
# (gateway/app.py).
REGISTRY_RETRY_DELAY_S = 1.0
# The token file (gateway/http/scopes.py, token_file.py): its size, its tokens, the
# ledger ids, ranges and log patterns one token lists, and how often its modification
# time is looked at (a reload is also asked for with SIGHUP).
TOKEN_FILE_SIZE_MAX_BYTES = 4 * 1024 * 1024
TOKENS_MAX = 10_000
TOKEN_COVERS_MAX = 1_000
TOKEN_FILE_POLL_S = 1.0

# Ledgers (gateway/ledgers/schemas.py).

# docs/api.md: a ledger password is 1-256 printable ASCII characters. It travels in an HTTP
# header, which servers read as latin-1 and strip of leading white space, so a password
# that starts or ends with a space could never be presented again either (the pattern in
# gateway/ledgers/schemas.py).
PASSWORD_LENGTH_MAX = 256
# docs/api.md: a ledger's custom metadata is a flat map of string keys to string values,
# bounded in count and in UTF-8 bytes: a key, a value, and all keys and values together.
METADATA_KEYS_MAX = 64
METADATA_KEY_MAX_BYTES = 256
METADATA_VALUE_MAX_BYTES = 4 * 1024
METADATA_TOTAL_MAX_BYTES = 16 * 1024

# Ledger passwords (gateway/passwords.py): the threads that hash them and the hashes
# queued for them; the verified passwords remembered (so a known one is not hashed
# again); the token bucket of wrong passwords per client address (its burst, its refill
# rate) and the client addresses it tracks.
HASH_WORKERS = 2
HASHES_IN_PROGRESS_MAX = 32
VERIFIED_CACHE_MAX = 4096
FAILED_CHECKS_BURST = 20
FAILED_CHECKS_REFILL_PER_S = 2.0
CLIENTS_TRACKED_MAX = 10_000

# The metadata kept for reads (gateway/metadata_cache.py): the most ledgers and logs
# kept (least recently used dropped first; a closed ledger's metadata is about a
# kilobyte per fragment); how long a read that has a kept copy waits for ZooKeeper
# before it is served the kept copy; how long a closed ledger's kept copy is served
# without asking ZooKeeper again (the longest a swap or a delete made by another
# gateway goes unseen while ZooKeeper answers).
METADATA_CACHE_LEDGERS_MAX = 10_000
METADATA_CACHE_LOGS_MAX = 1_000
METADATA_WAIT_KEPT_S = 0.5
CLOSED_LEDGER_RECHECK_S = 30.0
# The first and last stamps of closed log ledgers kept for searches by time
# (gateway/logs/time_search.py): the most ledgers kept (two integers each), least
# recently used dropped first.
LEDGER_STAMPS_KEPT_MAX = 100_000

# Logs (gateway/logs/).

# A change to a log's ledger list (truncate, attach, delete) is a compare-and-set on its
# znode, tried at most this many times against concurrent changes (operations.py).
LOG_CAS_ATTEMPTS_MAX = 8
# A durable cursor's merged acks are written by compare-and-set on its znode, tried at
# most this many times against other gateways' writes of the same cursor (cursors.py).
CURSOR_CAS_ATTEMPTS_MAX = 16
# Ledgers deleted at once when a log is deleted or truncated (operations.py).
DELETES_IN_FLIGHT_MAX = 16
# Ledger metadata look-ups in flight when a log's usage is counted (reads.py).
USAGE_LOOKUPS_IN_FLIGHT = 64
# The most ledgers one attach request adds to a log (operations.py).
ATTACH_LEDGERS_MAX = 10_000
# A waiting read re-reads the log's list and the ledger's state at least this often,
# unless it waits on this gateway's own write handle of the log (reads.py ``_wait``).
WAIT_SLICE_MS = 500
# A read from the log's first record that finds it truncated away meanwhile reads the
# list again, at most this many times (reads.py).
TRUNCATED_RETRIES_MAX = 8
# The window rebuild reads the metadata of the log's last ledgers this many at a time at
# first, doubling up to the most (one pipelined read each): a log whose tail is mostly
# attached ledgers, which never end the walk, is walked in few round trips (rebuild.py).
TAIL_METADATA_BATCH = 16
TAIL_METADATA_BATCH_MAX = 512
# The window rebuild's scan reads this many small ledgers (one page each) ahead of the
# one it takes, at most (dedup.py ``TailScan``).
TAIL_READ_AHEAD_LEDGERS = 8
# A failed window rebuild, or a new writer's failed read of the log's last stamp, is
# tried again this many times, backing off from the first delay (rebuild.py, writer.py).
REBUILD_ATTEMPTS_MAX = 6
REBUILD_RETRY_FIRST_S = 0.2
# The dedup window's rebuild reads at most this many entries back from the log's end,
# and reads back past the window by this clock skew allowance between the previous
# writer and this one (dedup.py).
DEDUP_REBUILD_ENTRIES_MAX = 200_000
DEDUP_CLOCK_SKEW_MS = 5_000
# Waiting for a ledger to close (``closed_end``): the first and the longest poll pause
# (steps.py).
SETTLE_POLL_FIRST_S = 0.01
SETTLE_POLL_MAX_S = 0.2
# A log writer sets its log's znode watch again this long after ZooKeeper failed to set
# it (writer.py).
LOG_WATCH_RETRY_S = 1.0

# Any gateway appends (gateway/logs/owners.py): the connect time-out to another gateway;
# the time a forward may take beyond the owner's own bounds (its add time-out and settle
# time-out), also added to the session time-out while waiting for an unreachable owner's
# registration to go; the routes an append may take before it is refused (each a
# forward refused or a role lost meanwhile); the logs whose writer a gateway remembers
# as a hint; hand-overs a draining gateway runs at once.
FORWARD_CONNECT_TIMEOUT_S = 2.0
FORWARD_GRACE_S = 2.0
FORWARD_HOPS_MAX = 4
# Single records forwarded together (grouping.py): groups in flight per gateway, log and
# token before records wait to leave together; a group's records and bytes (the first
# record always goes).
FORWARD_GROUPS_IN_FLIGHT_MAX = 2
FORWARD_GROUP_RECORDS_MAX = 256
FORWARD_GROUP_BYTES_MAX = 1024 * 1024
LOG_WRITERS_KNOWN_MAX = 100_000
DRAIN_HANDOVERS_CONCURRENT_MAX = 8
DRAIN_TIMEOUT_S = 60.0  # one hand-over (a take-over fences and recovers), or a whole drain
# Entries read back at a time when looking for a log's last visible record (tail.py).
TAIL_PAGE_ENTRIES = 256

# Streams (gateway/streams/session.py): bounds of one stream; the credits (records in
# flight) and their payload bytes are settings (``stream_credits``,
# ``stream_bytes_in_flight_max``).
STREAM_GROUP_ENTRIES_MAX = 256  # records in one add
STREAM_GROUP_BYTES_MAX = 8 * 1024 * 1024  # their payload bytes (the first always goes)
STREAM_CONTROL_MAX_BYTES = 16 * 1024  # a text (control) message
STREAM_AUTH_WAIT_MS = 10_000  # for the auth message when the headers are not enough
# A WebSocket message the server reads at all: a record a little over the entry bound
# still arrives whole and is answered payload_too_large (4413); a larger one is refused
# by the WebSocket protocol itself (1009 message too big). gateway/__main__.py hands it
# to the server.
STREAM_MESSAGE_MAX_BYTES = ENTRY_SIZE_MAX_BYTES + 1024 * 1024

# The Admin API (gateway/admin/service.py): a bookie that does not answer /v1/info in
# this time shows null figures; marks read from ZooKeeper at once while listing the
# under-replicated ledgers.
BOOKIE_INFO_TIMEOUT_S = 2.0
# A bookie's storage report and a garbage-collection pass asked through the Admin API
# (a pass reads the metadata of every ledger the bookie stores; a report sums its entries).
BOOKIE_STORAGE_TIMEOUT_S = 60.0
MARK_READS_CONCURRENT_MAX = 32
# A bookie's space counted by log (gateway/admin/by_log.py): the most ledgers looked at
# and the longest it pages on (then the answer says truncated), ledgers per page of the
# bookie's listing (and per pipelined metadata read), and the logs listed by name.
BY_LOG_LEDGERS_MAX = 100_000
BY_LOG_TIME_MAX_S = 20.0
BY_LOG_PAGE_LEDGERS = 1_000
BY_LOG_LOGS_LISTED_MAX = 100
