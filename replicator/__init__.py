"""The replication worker (``python -m replicator``): repairs under-replicated ledgers."""
