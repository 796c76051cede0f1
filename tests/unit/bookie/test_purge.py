"""The background purge of deleted ledgers (bookie/writer.py, "The purge"): its pacing,
resuming from the ``purging`` table, a data dir of the older schema, and ledger ids
written again while they still purge. In-process on real SQLite files."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from bookie.operations import AddOp, AddOpResult, DeleteOp, FenceOp, SetLacOp
from bookie.purge import Pacer, StepSize
from bookie.storage import DB_FILE, Reader, create_writer_engine
from tests.bookie_bytes import assert_kept_equals_scan
from tests.unit.bookie.test_writer import run_batch
from tests.unit.bookie.writers import SCHEMA_BEFORE_PURGING, Started, sealed

DEADLINE_S = 20.0


def test_pacer_keeps_to_its_share_while_busy_and_runs_at_once_when_idle():
    """While busy, a step of t seconds is followed by t * (1 - share) / share of the
    writer's own time, so the steps hold ``share`` of it; while idle the next runs now."""
    pacer = Pacer(share=0.2)
    assert pacer.wait_s(0.0) == 0.0
    pacer.ran(ended=10.0, took_s=0.02, busy=True)
    assert abs(pacer.wait_s(10.0) - 0.08) < 1e-9
    assert pacer.wait_s(10.05) > 0
    assert pacer.wait_s(10.08 + 1e-9) == 0.0
    pacer.ran(ended=20.0, took_s=0.02, busy=False)
    assert pacer.wait_s(20.0) == 0.0

    # A simulated busy writer: steps of 20 ms run whenever allowed; over 10 s they take
    # the share of the time, not more.
    pacer = Pacer(share=0.15)
    now = spent = 0.0
    while now < 10.0:
        now += pacer.wait_s(now)
        now += 0.02
        spent += 0.02
        pacer.ran(now, 0.02, busy=True)
    assert 0.14 <= spent / now <= 0.16


def test_step_size_aims_at_its_target_time_within_bounds():
    size = StepSize(size=64, low=8, high=1000, target_s=0.02)
    size.ran(64, 0.01)  # twice as fast as the target: at most doubles
    assert size.size == 128
    size.ran(128, 0.08)  # four times too slow: at most halves
    assert size.size == 64
    size.ran(64, 0.025)
    assert size.size == 51
    size.ran(10, 0.5)  # found less to do than its size: says nothing about the rate
    assert size.size == 51
    for _ in range(20):
        size.ran(size.size, 0.0001)
    assert size.size == 1000
    for _ in range(20):
        size.ran(size.size, 10.0)
    assert size.size == 8


def count(data_dir: Path, sql: str, *args: object) -> int:
    db = sqlite3.connect(data_dir / DB_FILE)
    try:
        return int(db.execute(sql, args).fetchone()[0])
    finally:
        db.close()


async def poll(check, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def test_a_delete_answers_before_the_purge_and_the_purge_ends_its_ledger(tmp_path):
    """The delete's commit removes the ledger's row and marks it purging (its entries
    may still be there); the background purge then removes every entry row and the
    purging row, and leaves other ledgers alone."""

    async def main():
        w = Started(tmp_path)
        try:
            blob = bytes(4096)
            for first in range(0, 600, 100):
                op = AddOp(
                    [sealed(1, e, blob) for e in range(first, first + 100)],
                    w.loop.create_future(),
                    100 * 4096,
                )
                w.writer.submit(op)
                assert await op.future == AddOpResult(100, [])
            keep = w.add(2, 0, b"keep")
            assert await keep.future == AddOpResult(1, [])
            delete = DeleteOp(1, w.loop.create_future())
            w.writer.submit(delete)
            assert await delete.future is True
            assert w.index.get(1) is None
            assert count(tmp_path, "SELECT COUNT(*) FROM ledgers WHERE ledger_id = 1") == 0
            # Marked purging in the delete's own commit, unless the purge already ended.
            left = count(tmp_path, "SELECT COUNT(*) FROM entries WHERE ledger_id = 1")
            marked = count(tmp_path, "SELECT COUNT(*) FROM purging WHERE ledger_id = 1")
            assert marked == 1 or left == 0
            # Every chunk takes what it deleted off the purging row's count, in its own
            # transaction: at every moment the count is what is left.
            lefts: set[int] = set()

            def purged() -> bool:
                kept = assert_kept_equals_scan(tmp_path)
                lefts.add(kept.get(("purging", 1), 0))
                return ("purging", 1) not in kept and kept[("ledgers", 2)] == 4

            # The writer counts a chunk's rows after its commit: wait for the count too.
            await poll(
                lambda: purged() and w.count("quire_bookie_purged_entries_total") == 600,
                "the purge to end and be counted",
            )
            assert count(tmp_path, "SELECT COUNT(*) FROM entries WHERE ledger_id = 1") == 0
            assert lefts <= set(range(0, 600 * 4096 + 1, 4096))
            assert w.count("quire_bookie_purged_entries_total") == 600
            assert w.count("quire_bookie_purging_ledgers") == 0
            assert count(tmp_path, "SELECT COUNT(*) FROM entries WHERE ledger_id = 2") == 1
        finally:
            await w.stop()

    asyncio.run(main())


def test_a_restart_resumes_the_purge_from_the_purging_table(tmp_path):
    """A data dir left mid-purge (a ledger's row gone, its id in ``purging``, some of its
    entries still there, as a crash between two chunks leaves it) is purged to the end
    by the next writer; the live ledger's entries and state are untouched."""
    engine = create_writer_engine(tmp_path, True)
    engine.dispose()
    db = sqlite3.connect(tmp_path / DB_FILE)
    with db:
        for lid in (7, 8):
            db.executemany(
                "INSERT INTO entries VALUES (?, ?, ?, ?, 1, ?, ?)",
                [(lid, e, e - 1, e + 1, b"1234", bytes(2000)) for e in range(300)],
            )
        db.execute("INSERT INTO ledgers VALUES (8, 1, 298, 299, 600000)")
        db.execute("INSERT INTO purging VALUES (7, 600000)")
    db.close()

    async def main():
        w = Started(tmp_path)
        try:
            assert w.index.get(7) is None
            assert_kept_equals_scan(tmp_path)
            await poll(
                lambda: count(tmp_path, "SELECT COUNT(*) FROM purging") == 0,
                "the purge to resume and end",
            )
            assert count(tmp_path, "SELECT COUNT(*) FROM entries WHERE ledger_id = 7") == 0
            assert count(tmp_path, "SELECT COUNT(*) FROM entries WHERE ledger_id = 8") == 300
            assert w.index.get(8).to_json() == {
                "ledger_id": 8,
                "lac": 298,
                "last_entry_id": 299,
                "fenced": True,
            }
            assert w.count("quire_bookie_purged_entries_total") == 300
            assert assert_kept_equals_scan(tmp_path) == {("ledgers", 8): 600_000}
        finally:
            await w.stop()

    asyncio.run(main())


def test_a_data_dir_of_the_older_schema_gets_the_purging_table(tmp_path):
    """A store made by the previous version (two tables, no ``purging``) opens: the table
    is created, the stored ledgers read back, and a delete in it is purged."""
    db = sqlite3.connect(tmp_path / DB_FILE, isolation_level=None)
    for statement in SCHEMA_BEFORE_PURGING:
        db.execute(statement)
    db.execute("BEGIN")
    for lid in (3, 4):
        r = sealed(lid, 0, b"old")
        db.execute(
            "INSERT INTO entries VALUES (?, 0, -1, ?, 1, ?, ?)", (lid, r.length, r.digest, b"old")
        )
        db.execute("INSERT INTO ledgers VALUES (?, 0, -1, 0)", (lid,))
    db.execute("COMMIT")
    db.close()

    async def main():
        w = Started(tmp_path)
        try:
            assert count(tmp_path, "SELECT COUNT(*) FROM purging") == 0  # the table exists
            assert sorted(w.index.states()) == [3, 4]
            # The ``bytes`` column came with it, counted from the entries.
            assert assert_kept_equals_scan(tmp_path) == {("ledgers", 3): 3, ("ledgers", 4): 3}
            delete = DeleteOp(3, w.loop.create_future())
            w.writer.submit(delete)
            assert await delete.future is True
            await poll(
                lambda: (
                    count(tmp_path, "SELECT COUNT(*) FROM entries WHERE ledger_id = 3") == 0
                    and count(tmp_path, "SELECT COUNT(*) FROM purging") == 0
                ),
                "the purge of the deleted ledger",
            )
        finally:
            await w.stop()
        reader = Reader(tmp_path)
        try:
            assert [e.payload for e in reader.read_range(4, 0, 9, 10, 1 << 20)] == [b"old"]
        finally:
            reader.close()

    asyncio.run(main())


def test_a_ledger_written_again_while_purging_starts_afresh(tmp_path):
    """An add, a fence or a LAC update to a ledger deleted in the same batch (so its purge
    cannot have run) answers as for a ledger whose purge ended: it starts empty, and
    none of its old entries shows through."""

    def first(loop):
        f = loop.create_future
        return [
            AddOp([sealed(lid, e) for lid in (1, 2, 3) for e in range(5)], f(), 15),
            FenceOp(2, f()),
        ]

    asyncio.run(run_batch(tmp_path, first))

    def second(loop):
        f = loop.create_future
        return [
            DeleteOp(1, f()),
            DeleteOp(2, f()),
            DeleteOp(3, f()),
            AddOp([sealed(1, 2, b"new")], f(), 3),
            FenceOp(2, f()),
            SetLacOp(3, 1, f()),
        ]

    results, _, index, _ = asyncio.run(run_batch(tmp_path, second))
    assert results[:3] == [True, True, True]
    assert results[3] == AddOpResult(1, [])
    assert results[4] == (-1, -1, True)
    assert results[5] == (1, -1, False)
    assert index.get(1).to_json() == {"ledger_id": 1, "lac": 1, "last_entry_id": 2, "fenced": False}
    reader = Reader(tmp_path)
    try:
        assert [(e.entry_id, e.payload) for e in reader.read_range(1, 0, 9, 10, 1 << 20)] == [
            (2, b"new")
        ]
        assert reader.read_range(2, 0, 9, 10, 1 << 20) == []
        assert reader.read_range(3, 0, 9, 10, 1 << 20) == []
        assert reader.purging_ids() == []
    finally:
        reader.close()
    assert assert_kept_equals_scan(tmp_path) == {
        ("ledgers", 1): 3,
        ("ledgers", 2): 0,
        ("ledgers", 3): 0,
    }
