"""Helpers of the group-commit writer's tests (tests/unit/bookie/test_writer*.py): sealed
records, metric values, and a writer started on a real SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bookie.ledgers import LedgerIndex
from bookie.metrics import BookieMetrics
from bookie.operations import AddOp
from bookie.storage import create_writer_engine, load_ledgers
from bookie.writer import GroupCommitWriter
from services.wire import digest
from services.wire.framing import FramedRecord

# The stores earlier versions made (bookie/storage.py before the ``purging`` table, and
# before the kept byte counts), for the tests of their migration.
SCHEMA_BEFORE_PURGING = [
    "PRAGMA page_size=16384",
    "PRAGMA auto_vacuum=INCREMENTAL",
    "PRAGMA journal_mode=WAL",
    "CREATE TABLE entries (ledger_id INTEGER NOT NULL, entry_id INTEGER NOT NULL, "
    "lac INTEGER NOT NULL, length INTEGER NOT NULL, digest_type INTEGER NOT NULL, "
    "digest BLOB NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (ledger_id, entry_id))",
    "CREATE TABLE ledgers (ledger_id INTEGER NOT NULL, fenced INTEGER NOT NULL, "
    "lac INTEGER NOT NULL, last_entry_id INTEGER NOT NULL, PRIMARY KEY (ledger_id))",
]
SCHEMA_BEFORE_BYTES = [
    *SCHEMA_BEFORE_PURGING,
    "CREATE TABLE purging (ledger_id INTEGER NOT NULL, PRIMARY KEY (ledger_id))",
]


def sealed(lid: int, eid: int, payload: bytes = b"x", recovery: bool = False) -> FramedRecord:
    return digest.seal(FramedRecord(lid, eid, eid - 1, payload, b"", recovery, "crc32c", eid + 1))


def metric(metrics: BookieMetrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


class Started:
    """A started writer, its metrics and the ledger index its deliveries update."""

    def __init__(self, data_dir: Path, journal_sync: bool = True) -> None:
        self.loop = asyncio.get_running_loop()
        self.metrics = BookieMetrics()
        self.engine = create_writer_engine(data_dir, journal_sync)
        self.index = LedgerIndex(load_ledgers(self.engine))
        self.writer = GroupCommitWriter(
            self.engine, journal_sync, self.metrics, self.loop, self.deliver
        )
        self.writer.start(load_ledgers(self.engine))

    def deliver(self, changes, results) -> None:
        self.index.apply(changes)
        for future, result in results:
            future.set_result(result)

    def add(self, lid: int, eid: int, payload: bytes = b"x") -> AddOp:
        op = AddOp([sealed(lid, eid, payload)], self.loop.create_future(), len(payload))
        self.writer.submit(op)
        return op

    def count(self, name: str) -> float:
        return metric(self.metrics, name)

    async def stop(self) -> None:
        await self.writer.stop()
        self.engine.dispose()
