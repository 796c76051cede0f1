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
