"""The bookie's own bounds (docs/style.md §5), each named with its unit last.

Bounds every service shares (entry sizes, range pages, stored-entry reports) are in
``services/limits.py``; what an operator tunes (journal sync, its data directory) is a
setting (``services/settings.py``). The rest is here, grouped by the part of the bookie
that applies it.
"""

from __future__ import annotations

from services.limits import PAGE_BYTES_MAX, PAGE_ENTRIES_MAX, STORED_RUNS_MAX

# Adds (bookie/node.py, bookie/fastpath.py).

# Body bytes of add requests in flight (read, queued or being committed); further adds
# wait before reading their bodies (services/budget.py).
ADD_BYTES_IN_FLIGHT_MAX = 64 * 1024 * 1024
# The largest body the fast lane takes: uvicorn's protocol buffers this much of a body
# per connection before it pauses reading (its HIGH_WATER_LIMIT), so a lane's whole body
# holds no more memory than the ASGI path's buffer (bookie/fastpath.py's docstring).
LANE_BODY_MAX_BYTES = 65_536

# The group commit (bookie/writer.py): one batch of the writer thread takes queued
# operations up to these many entries and payload bytes.
GROUP_COMMIT_ENTRIES_MAX = 20_000
GROUP_COMMIT_BYTES_MAX = 32 * 1024 * 1024
# The largest add the event loop commits itself (single records and small batches) ...
INLINE_ENTRIES_MAX = 16
INLINE_BYTES_MAX = 64 * 1024
# ... and only while commits take at most this long on average: a slow disk's fsync
# would stall every request.
INLINE_COMMIT_S_MAX = 0.002

# The SQLite store (bookie/storage.py): the threads that serve reads, and how long a
# connection waits for the database's lock.
STORAGE_READ_THREADS = 4
STORAGE_BUSY_TIMEOUT_MS = 10_000
# 16 KiB pages store 1 KiB entries faster than 4 KiB pages (fewer page splits and WAL
# frames per entry; benchmarks/README.md, "Measured choices"); the checkpoint runs every
# 16 MiB of WAL (this many pages), and a checkpointed WAL is cut back to this size.
PAGE_SIZE_BYTES = 16384
WAL_AUTOCHECKPOINT_PAGES = 1024
JOURNAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024

# Stored-entry checks (bookie/stored.py): one read of a check, bounded work per call of
# a read thread; with verify=all, the most corrupt entry ids listed for one ledger (past
# it the list says truncated).
CHECK_CHUNK_ENTRIES = PAGE_ENTRIES_MAX
CHECK_CHUNK_BYTES = PAGE_BYTES_MAX
CORRUPT_LISTED_MAX = STORED_RUNS_MAX

# LAC long polls waiting at once on one bookie (bookie/ledgers.py); past it a long poll
# answers at once.
LAC_WAITERS_MAX = 10_000

# ZooKeeper (bookie/node.py, services/zk/registration.py). At start-up while ZooKeeper cannot
# be reached, one connection attempt waits this long, then the next one starts after a
# back-off doubling from first to max; kazoo's repeated log lines pass once per window.
ZK_CONNECT_ATTEMPT_S = 2.0
ZK_RETRY_FIRST_S = 0.5
ZK_RETRY_MAX_S = 5.0
KAZOO_REPEAT_WINDOW_S = 60.0

# Garbage collection (bookie/collector.py): the ledgers whose metadata one pipelined read
# of ZooKeeper asks for, and the ledgers the storage report lists by name in each of its
# lists (orphaned, pending delete); past it the counts still cover them all.
GC_LOOKS_PER_READ = 1000
GC_LISTED_MAX = 100
# The purge of deleted ledgers' entries and the vacuum after it (bookie/writer.py, "The
# purge"; bookie/purge.py): the writer thread runs one step (a chunk of entry rows
# deleted, or pages vacuumed, each its own transaction) at a time, sized to take about
# PURGE_STEP_S (the first purge chunk deletes PURGE_CHUNK_ENTRIES_FIRST rows, the first
# vacuum step frees VACUUM_STEP_PAGES_FIRST pages; later ones are scaled by the time the
# last one took, within the bounds). While the writer has served an operation in the last
# PURGE_IDLE_S, the steps take at most PURGE_BUSY_SHARE of its time; when it is idle, all
# of it. The disk check (bookie/node.py) runs at most every PURGE_DISK_CHECK_S meanwhile.
# The share: at 8 GiB, deleting 4 GiB under load, 0.15 purged it in 96 s with adds at
# 0.82 of before meanwhile, 0.10 in 162 s with adds at 0.84, and 0.80 (against 0.75)
# while the deletes were being answered (benchmarks/README.md, "One bookie to 20 GB").
PURGE_STEP_S = 0.02
PURGE_BUSY_SHARE = 0.10
PURGE_IDLE_S = 0.1
PURGE_CHUNK_ENTRIES_FIRST = 64
PURGE_CHUNK_ENTRIES_MIN = 8
PURGE_CHUNK_ENTRIES_MAX = 16_384
VACUUM_STEP_PAGES_FIRST = 64
VACUUM_STEP_PAGES_MIN = 8
VACUUM_STEP_PAGES_MAX = 16_384
PURGE_DISK_CHECK_S = 1.0
