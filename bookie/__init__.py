"""The bookie: a storage node of Quire (see docs/api.md "Bookie").

It stores entries durably (SQLite in WAL mode, group commit, fsync before the
answer), keeps a per-ledger fenced flag and LAC, serves single and range
reads, registers itself in ZooKeeper and guards its identity with a cookie.
It knows nothing about quorums.
"""

import services  # noqa: F401,E402  first: it puts the compiled add path in place (services/native.py)
