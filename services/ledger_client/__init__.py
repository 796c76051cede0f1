"""The ledger client: BookKeeper's client side of the protocol, run with real bookies.

It writes ledgers (write handles with their runners, the per-bookie senders that batch
adds across ledgers, explicit LAC updates), reads them (speculative reads, LAC reads
and long polls) and recovers them (fence and close), by carrying out the effects of the
pure state machines of ``services/protocol/`` (docs/style.md §1) over a small context
(``context.py``). It has its own settings (``settings.py``) and metrics
(``metrics.py``); the gateway serves it over REST and the replication worker recovers
open ledgers with it (docs/architecture.md, "The pieces"). It imports no service.
"""
