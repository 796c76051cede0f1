"""Wall-clock time as the services stamp it: milliseconds since the Unix epoch.

Stamps that other processes read (a ledger's or a log's ``created_at``, a log record's
time, a mark's ``marked_at``, a missing bookie's first sighting) use it; waits and
time-outs use the monotonic clock instead.
"""

from __future__ import annotations

import time


def wall_ms() -> int:
    """Now, in milliseconds since the Unix epoch."""
    return int(time.time() * 1000)
