"""The replication worker's own bounds (docs/style.md §5), each named with its unit last.

Bounds every service shares are in ``services/limits.py``; what an operator tunes (the
copy rate, batch sizes, request time-outs) is a setting (``services/settings.py``).
"""

from __future__ import annotations

# A worker that could not start (ZooKeeper unreachable) tries again after this pause
# (replicator/app.py).
START_RETRY_DELAY_S = 1.0
# Connecting to a bookie waits at most this long, however long the request time-out
# setting is (replicator/app.py).
BOOKIE_CONNECT_TIMEOUT_MS_MAX = 2_000
# The copy rate's token bucket holds at most this many seconds of rate: a burst after an
# idle spell (replicator/throttle.py).
THROTTLE_BURST_S = 0.25

# The worker's scan and schedule (replicator/worker.py): marked ledger ids read in one
# walk of the marks; a ledger locked by another worker is looked at again after this
# pause; a ledger whose repair failed waits a back-off doubling from first to max (with
# jitter) before its next attempt.
MARKS_SCAN_MAX = 100_000
CONTENTION_RETRY_S = 1.0
LEDGER_BACKOFF_FIRST_S = 0.5
LEDGER_BACKOFF_MAX_S = 30.0
# A repair writes its progress into the ledger's lock at most this often
# (replicator/repair.py).
LOCK_PROGRESS_INTERVAL_S = 0.5

# Opening a ledger to repair it (replicator/openledger.py): entries read to check an
# unsealed MAC key before a recovery uses it; ledgers whose missing sealed key was logged
# (each once), at most this many remembered; bookies whose first absence is remembered,
# at most this many (the oldest go first: forgetting only delays a repair).
KEY_CHECK_ENTRIES_MAX = 8
LEGACY_LOGGED_MAX = 10_000
MISSING_TRACKED_MAX = 10_000
