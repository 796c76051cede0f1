"""The bounds of ``quire bench`` (docs/style.md §5), each named with its unit last.

What the gateway fixes is in ``services/limits.py``; what a run is asked for is its
``BenchConfig`` (``config.py``).
"""

from __future__ import annotations

# A run's options (``config.py`` checks them).
CLIENTS_MAX = 10_000
LEDGERS_MAX = 100_000

# Setting up and timing a run (``run.py``, ``window.py``, ``log_bench.py``).
LEDGER_CREATE_THREADS = 16  # ledgers created (and deleted) this many at a time
WRITABLE_WAIT_S = 30.0  # until the gateway sees enough writable bookies
START_DELAY_S = 1.0  # the load processes import and connect before the clock starts
LOAD_SLACK_S = 90.0  # a load process that outlives its window by this much is killed
FSYNC_PROBE_S = 2.0  # the raw fsync probe of --local (--fsync-probe-s)
SAMPLE_INTERVAL_S = 0.1  # the CPU and memory sampler (``measure.py``)
FSYNC_BLOCK_BYTES = 4096  # what the fsync probe appends before each fsync

# Log runs' hand-over (``log_bench.py``).
HANDOVER_BUSY_CLIENTS_MAX = 8  # threads that keep the first writer busy during a hand-over
HANDOVER_BUSY_WAIT_S = 30.0  # until they have had appends acknowledged
HANDOVER_APPEND_DEADLINE_S = 30.0  # the new writer's first acknowledged append
LOG_RETRY_DELAY_S = 0.2  # between a log run's retried set-up calls and appends

# The load generators' connections (``connections.py``, ``load.py``, ``stream_load.py``).
# ``load.py`` reads the two a test lowers as ``limits.X``.
REQUEST_TIMEOUT_S = 60.0  # an answer due longer than this is a time-out error
RESPONSE_HEAD_MAX_BYTES = 64 * 1024
RESPONSE_BODY_MAX_BYTES = 1024 * 1024
MESSAGE_MAX_BYTES = (
    1024 * 1024
)  # a WebSocket message from the gateway: small JSON (``ws_frames.py``)
RECONNECT_DELAY_S = 0.1  # before a closed connection is opened again
WATCH_INTERVAL_S = 1.0  # how often requests in flight are checked against the time-out
ERROR_TEXT_MAX_CHARS = 300  # of the first error, in the report

# Progress lines while a run goes (``load.py``, ``report.py``).
PROGRESS_INTERVAL_S = 0.5  # a load process reports its counts
PROGRESS_TTY_INTERVAL_S = 0.5  # the progress line on a terminal
PROGRESS_PLAIN_INTERVAL_S = 2.0  # on a pipe or file
