"""The command line's own bounds (docs/style.md §5), each named with its unit last.

Bounds every service shares (batch entries, list limits, LAC waits) are in
``services/limits.py``; the rest is here, grouped by the commands that apply it.
"""

from __future__ import annotations

# The gateway client (services/cli/client.py): connecting waits at most this long; a
# request as long as the second, since a recovery or a close may wait for slow bookies
# and reads stream for as long as they run.
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 120.0

# ``quire ledger`` (services/cli/ledger.py, services/cli/ledger_io.py): ledgers per page
# of a listing (the option's largest value and its default); the payload bytes of one
# append request: a JSON batch carries base64 (4/3 of the payload) and must stay under
# the gateway's 64 MiB body limit, so 16 MiB of payload leaves room to spare.
LIST_PAGE_MAX = 1000
APPEND_BATCH_BYTES_MAX = 16 * 1024 * 1024

# ``quire log`` (services/cli/log.py, services/cli/log_io.py): records per append
# request unless ``--batch`` says otherwise; each long poll of a following tail (the
# gateway clamps it to 30 s); a tail that found nothing and came back at once (a log
# without ledgers answers without waiting) asks again after this pause rather than
# spinning.
APPEND_BATCH_DEFAULT = 1000
FOLLOW_WAIT_MS = 10_000
EMPTY_POLL_BACKOFF_S = 0.5

# Streams (services/cli/stream_io.py): opening the WebSocket, and each acknowledgement
# the gateway owes, wait at most this long.
STREAM_OPEN_TIMEOUT_S = 10.0
STREAM_ACK_TIMEOUT_S = 60.0

# Progress bars (services/cli/progress.py) are updated at most every this many items, so
# a read of a million small entries is not slowed by them.
PROGRESS_UPDATE_EVERY_ITEMS = 256

# ``quire admin`` waits (services/cli/admin.py): the cluster is looked at this often by
# default, and each look reads at most this many pages of the under-replicated listing
# for the bytes the workers report.
WAIT_POLL_INTERVAL_S = 2.0
WAIT_PROGRESS_PAGES_MAX = 5

# ``quire status`` (services/cli/status.py): under-replicated ledgers and log names
# shown by default and at most (``--first``); logs counted: at most this many pages of
# names, past that the count says incomplete.
STATUS_FIRST_DEFAULT = 5
STATUS_FIRST_MAX = 100
STATUS_LOG_PAGES_MAX = 10

# ``quire admin storage`` and ``quire admin gc`` (services/cli/admin.py): a bookie's
# storage report or pass may take the gateway up to its own bound (gateway/limits.py,
# BOOKIE_STORAGE_TIMEOUT_S); the CLI waits a little longer than that.
STORAGE_CALL_TIMEOUT_S = 70.0
# ``quire admin storage --by-log``: the report, then the count by log, which the gateway
# bounds too (gateway/limits.py, BY_LOG_TIME_MAX_S, plus a page of reads).
STORAGE_BY_LOG_CALL_TIMEOUT_S = 100.0
