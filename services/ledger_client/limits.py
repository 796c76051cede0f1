"""The ledger client's own bounds (docs/style.md §5), each named with its unit last.

Bounds every service shares are in ``services/limits.py``; what an operator tunes (a
bookie's batch sizes, requests in flight, the add time-out) is a setting
(``services/ledger_client/settings.py``), gathered per bookie sender in ``SenderLimits``
(``services/ledger_client/senders.py``).
"""

from __future__ import annotations

# A bookie's sender (services/ledger_client/senders.py) queues at most this many requests'
# worth of records (entries and bytes of a batch) for its bookie.
QUEUED_BATCHES_MAX = 8
# A log line of a sender names at most this many refused records, and the debug line of
# one add request this many request ids (the rest are counted).
LOGGED_REFUSALS_MAX = 8
LOGGED_REQUEST_IDS_MAX = 32
# Extra add time-out per MiB of payload in flight to the bookie: a floor of 5 MiB/s, below
# what a bookie writes on a loaded machine (benchmarks/README.md, "Measured choices").
ADD_TIMEOUT_PER_MIB_MS = 200
