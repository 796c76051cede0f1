"""The gateway: the ledger client run as a service (quorum writes, fencing, recovery, logs)."""

import services  # noqa: F401,E402  first: it puts the compiled add path in place (services/native.py)
