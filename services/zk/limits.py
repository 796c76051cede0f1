"""The ZooKeeper adapter's own bounds (docs/style.md §5), each named with its unit last.

The session time-out and the hosts are settings (``services/settings.py``); the id bounds
of the znode paths stay with the paths (``services/zk/paths.py``).
"""

from __future__ import annotations

# The store (services/zk/store.py): one operation's time-out when the caller gives none.
OPERATION_TIMEOUT_S = 15.0
# Connecting in the background (``start_retrying``): each attempt's time-out, and the
# back-off between attempts (doubling from the first delay up to the last).
CONNECT_ATTEMPT_TIMEOUT_S = 3.0
CONNECT_DELAY_FIRST_S = 0.5
CONNECT_DELAY_MAX_S = 10.0
# kazoo's reconnection after a connection is lost (kazoo's ``connection_retry``): the
# pause before the first attempt and the longest between attempts (doubling, jittered),
# tried for ever. While the ensemble elects a leader every server refuses sessions; the
# longest pause is what a client may lose after the new leader serves, so it is short
# (a refused attempt costs a server one accept and close; measured in
# benchmarks/README.md "ZooKeeper leader election").
RECONNECT_DELAY_FIRST_S = 0.05
RECONNECT_DELAY_MAX_S = 0.25
STATE_POLL_S = 0.05  # how often ``wait_connected`` looks at the connection
WATCH_SETUP_THREADS_MAX = 4  # threads making kazoo watches (each reads its znode)
# The credentials file (services/zk/auth.py): one line USER:PASSWORD; a larger file is
# refused rather than read into memory.
AUTH_FILE_BYTES_MAX = 4096
# Setting the ACL of a whole tree (services/zk/acls.py): requests sent before their
# answers are waited for.
ACL_BATCH_NODES_MAX = 1000

# Under-replication marks and their locks (services/zk/underreplication.py): the
# compare-and-set of one mark is tried at most this many times against concurrent
# changes; one try_lock creates at most this many times (one lost with the connection is
# retried); one unlock reads and deletes at most this many times.
MARK_CAS_ATTEMPTS_MAX = 20
LOCK_ATTEMPTS_MAX = 3
LOCK_RELEASE_ATTEMPTS_MAX = 20
# A registration znode (services/zk/registration.py: a bookie's, a gateway's) is checked
# at least this often, and a failed check is tried again after this pause.
REGISTRATION_RECHECK_INTERVAL_S = 5.0
REGISTRATION_RETRY_DELAY_S = 0.25
# ``MetadataStore.get_many`` (services/zk/store.py): the reads of one ZooKeeper read-only
# multi. Its answer is the sum of the znodes read (ZooKeeper does not bound it, kazoo
# reads it whole): 200 ledgers' metadata is about 60 KB here, 13 MB at worst (each with
# 64 KiB of custom metadata) — as much as today's pipelined single reads of the same
# znodes, since callers already bound the reads of one call (1,000 a page).
MULTI_READ_OPS_MAX = 200
