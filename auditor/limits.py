"""The auditor's own bounds (docs/style.md §5), each named with its unit last.

Bounds every service shares are in ``services/limits.py``; what an operator tunes (the
audit intervals, the grace before a lost bookie's ledgers are marked) is a setting
(``services/settings.py``).
"""

from __future__ import annotations

from services.limits import LIST_LIMIT_MAX

# A full audit (auditor/audit.py) walks the ledgers this many ids a page, reads the
# marks present at its start this many at a time (one pipelined read), and reads at
# most this many pages ahead of the one being checked.
AUDIT_PAGE_LEDGERS = LIST_LIMIT_MAX
MARKS_READ_BATCH_MAX = LIST_LIMIT_MAX
PAGES_AHEAD_MAX = 4

# A replica check (auditor/decisions.py) walks entry ids one by one only for a bookie
# whose count of stored entries in a span falls short (then the exact missing ones
# matter little: one is enough); this bounds that walk.
REPLICA_WALK_ENTRIES_MAX = 1_000_000

# docs/api.md "Bookie" POST /v1/stored: the most ledgers one request of the replica
# check asks a bookie about (auditor/replicas.py).
STORED_BATCH_LEDGERS_MAX = 1_000

# The election (auditor/election.py): a safety net besides the watches re-checks it this
# often; after a ZooKeeper error it is tried again after this pause.
ELECTION_RECHECK_INTERVAL_S = 5.0
ELECTION_RETRY_DELAY_S = 0.5

# The elected auditor (auditor/service.py): after a failed check (ZooKeeper unavailable)
# it waits this long before the next; it re-checks placement this often while a bookie
# is being decommissioned; the under-replicated count at a scrape waits at most this long
# for ZooKeeper.
FAILED_AUDIT_RETRY_S = 1.0
DECOMMISSION_RECHECK_S = 5.0
COUNT_TIMEOUT_S = 5.0

# An auditor that could not start (ZooKeeper unreachable) tries again after this pause
# (auditor/app.py).
START_RETRY_DELAY_S = 1.0

# The placement report (auditor/audit.py ``PlacementReport``): the ledgers breaking the
# rack policy it lists by id (all are counted); the report is one znode the gateway reads.
PLACEMENT_REPORT_LEDGERS_MAX = 100

# Retention (auditor/retention.py): the most ledgers one pass removes from one log (the
# rest wait for the next pass), the attempts at a cursor's or a log's compare-and-set,
# and the pause after a pass that failed (ZooKeeper unavailable).
RETENTION_LEDGERS_PER_LOG_PASS = 100
RETENTION_CAS_ATTEMPTS_MAX = 8
RETENTION_RETRY_S = 5.0
