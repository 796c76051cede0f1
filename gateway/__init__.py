"""The gateway: the ledger client run as a service (quorum writes, fencing, recovery, logs)."""
