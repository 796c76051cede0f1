"""The pure protocol core of Quire: BookKeeper's ledger protocol without I/O.

Nothing in this package imports FastAPI, httpx, kazoo, SQLAlchemy or asyncio,
reads a clock or draws unseeded randomness: time arrives in events (integer
milliseconds), randomness as a seeded ``random.Random``. The gateway's async
runner and the simulator (tests/simulation) run the same state machines.

Modules, one per operation (docs/style.md §1):

- ``quorum``     write sets, ack quorums, fencing coverage, absence (arithmetic)
- ``placement``  choosing an ensemble and replacement bookies
- ``metadata``   ``LedgerMetadata`` / ``Fragment`` (znode body and API object)
- ``messages``   the events and effects, and what a runner does with each
- ``adds``       in-order ack tracking of pending adds (PendingAddOp)
- ``ensemble``   ensemble changes (the plan, the write handle's ``EnsembleChange``
                 sub-machine) and the writer's close outcomes
- ``cas``        one metadata compare-and-set with its retry rules (writer and recovery)
- ``writer``     ``WriteHandle``: adds, ensemble changes, fencing, close
- ``recovery``   ``LedgerRecovery``: fence, read forward, write back, close
- ``readforward`` the recovery's read-forward: find the last entry past the floor
- ``writeback``  recovery write-backs and the bookie replacements they may need
- ``reads``      reads without recovery: the readable end, replica order, ``ReadOp``
- ``reads_lac``  ``LacOp``: a reader's LAC read and LAC long poll
- ``reads_messages``  the read operations' events and effects
- ``log_writer`` ``AcquireWriter``, ``AttachLedgers``, ``RollLog``: a log's writer role
- ``log_append`` ``LogAppendOp``: one append by a log's writer, settled when unknown
- ``dedup``      the idempotency window of a log's writer
"""
