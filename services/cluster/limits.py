"""The bounds of a local cluster (``quire up``, ``quire bench --local``, the tests'
clusters; docs/style.md §5), each named with its unit last."""

from __future__ import annotations

BOOKIES_MAX = 32  # bookies one local cluster starts (``quire up --bookies``)

# Waits while a cluster starts (``local.py``, ``config.py``).
ZOOKEEPER_START_DEADLINE_S = 90.0  # a ZooKeeper it starts answers
SERVICE_START_DEADLINE_S = 90.0  # each service reports healthy (``UpConfig`` default)
EXTERNAL_ZOOKEEPER_DEADLINE_S = 10.0  # a ZooKeeper given with --zookeeper answers

# While it runs, and when it stops (``local.py``, ``processes.py``).
SUPERVISE_INTERVAL_S = 0.5  # how often the supervisor checks its processes
LOG_TAIL_LINES = 8  # of a process that died, shown with the error
STOP_GRACE_S = 10.0  # from SIGTERM to SIGKILL

# Ports (``processes.py``): blocks of free ports tried before giving up.
BLOCK_TRIES = 200
