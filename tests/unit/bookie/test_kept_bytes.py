"""The migration to kept byte counts (bookie/storage.py, "Kept byte counts"): a store of
the previous version (``ledgers`` and ``purging`` without their ``bytes`` columns) gets
the columns when it is opened, counted from its entries, once; the writer then keeps
them from there. In-process on real SQLite files."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from bookie.operations import AddOp, AddOpResult
from bookie.storage import DB_FILE, Reader, create_writer_engine
from tests.bookie_bytes import assert_kept_equals_scan
from tests.unit.bookie.writers import SCHEMA_BEFORE_BYTES, Started, sealed


def previous_store(data_dir: Path) -> None:
    """A store as the previous version leaves it: ledger 3 with 40 entries of 1,000
    bytes, ledger 4 fenced with no entry, ledger 5 with one empty entry, and ledger 7
    deleted with 25 of its entries of 300 bytes not purged yet."""
    db = sqlite3.connect(data_dir / DB_FILE, isolation_level=None)
    try:
        for statement in SCHEMA_BEFORE_BYTES:
            db.execute(statement)
        db.execute("BEGIN")
        for lid, count, size in ((3, 40, 1000), (5, 1, 0), (7, 25, 300)):
            for eid in range(count):
                r = sealed(lid, eid, bytes(size))
                db.execute(
                    "INSERT INTO entries VALUES (?, ?, ?, ?, 1, ?, ?)",
                    (lid, eid, eid - 1, r.length, r.digest, r.payload),
                )
        db.execute("INSERT INTO ledgers VALUES (3, 0, 38, 39)")
        db.execute("INSERT INTO ledgers VALUES (4, 1, -1, -1)")
        db.execute("INSERT INTO ledgers VALUES (5, 0, -1, 0)")
        db.execute("INSERT INTO purging VALUES (7)")
        db.execute("COMMIT")
    finally:
        db.close()


def columns(data_dir: Path, table: str) -> list[str]:
    db = sqlite3.connect(data_dir / DB_FILE)
    try:
        return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
    finally:
        db.close()


def test_a_store_of_the_previous_version_gets_its_counts_when_opened(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Opening a previous version's store adds the ``bytes`` columns, counted from the
    entries (a purging ledger: the rows left), says so in the log with the time it
    took, and does it once: a second open finds the columns and logs nothing."""
    previous_store(tmp_path)
    assert "bytes" not in columns(tmp_path, "ledgers")
    with caplog.at_level(logging.INFO, logger="bookie.storage"):
        create_writer_engine(tmp_path, True).dispose()
    assert "bytes" in columns(tmp_path, "ledgers") and "bytes" in columns(tmp_path, "purging")
    assert assert_kept_equals_scan(tmp_path) == {
        ("ledgers", 3): 40_000,
        ("ledgers", 4): 0,
        ("ledgers", 5): 0,
        ("purging", 7): 7_500,
    }
    done = [r for r in caplog.records if r.getMessage().startswith("counted the payload")]
    assert len(done) == 1
    fields = done[0].__dict__["fields"]
    assert fields["ledgers"] == 3 and fields["bytes"] == 40_000 and fields["took_s"] >= 0

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bookie.storage"):
        create_writer_engine(tmp_path, True).dispose()
    assert not [r for r in caplog.records if "payload bytes" in r.getMessage()]


def test_the_writer_keeps_the_migrated_counts(tmp_path: Path) -> None:
    """After the migration the writer starts from the counted figures: adds (and a
    recovery write-back to the fenced ledger) add to them, the purge of the ledger
    deleted before the upgrade takes its bytes away to 0, and the storage report's sums
    read them."""
    previous_store(tmp_path)

    async def main() -> None:
        w = Started(tmp_path)
        try:
            assert await w.add(3, 40, bytes(500)).future == AddOpResult(1, [])
            recovery = AddOp([sealed(4, 0, b"four", recovery=True)], w.loop.create_future(), 4)
            w.writer.submit(recovery)  # ledger 4 is fenced: a recovery write-back
            assert await recovery.future == AddOpResult(1, [])
            deadline = asyncio.get_running_loop().time() + 20.0
            while ("purging", 7) in assert_kept_equals_scan(tmp_path):
                assert asyncio.get_running_loop().time() < deadline, "the purge did not end"
                await asyncio.sleep(0.02)
        finally:
            await w.stop()

    asyncio.run(main())
    assert assert_kept_equals_scan(tmp_path) == {
        ("ledgers", 3): 40_500,
        ("ledgers", 4): 4,
        ("ledgers", 5): 0,
    }
    reader = Reader(tmp_path)
    try:
        counts = reader.storage_counts([4])
        assert (counts.ledgers, counts.bytes, counts.purging_ledgers, counts.sizes) == (
            3,
            40_504,
            0,
            {4: 4},
        )
    finally:
        reader.close()
