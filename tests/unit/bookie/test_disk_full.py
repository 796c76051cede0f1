"""A full disk under the bookie (docs/api.md "Errors", ``bookie_read_only``): a commit
that finds no room stores nothing of its batch, answers 503 ``bookie_read_only`` rather
than a storage failure, and turns the bookie read-only until room is freed, even when
the free-space threshold had not noticed yet. The disk is SQLite's page limit
(``max_page_count``), which fails a commit with the same ``SQLITE_FULL`` as ENOSPC."""

from __future__ import annotations

import asyncio
import errno
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bookie.ledgers import LedgerIndex
from bookie.metrics import BookieMetrics
from bookie.node import BookieNode
from bookie.operations import AddOp, AddOpResult
from bookie.storage import create_writer_engine, load_ledgers
from bookie.writer import GroupCommitWriter, disk_full
from services.errors import BookieReadOnly
from services.settings import BookieSettings
from tests.unit.bookie.writers import sealed

ENTRY_BYTES = 4096
PAGES_FREE = 8  # of 16 KiB: room for a few dozen entries


def test_full_disk_errors_are_told_from_other_failures() -> None:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL
    assert disk_full(full)
    assert disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert not disk_full(sqlite3.OperationalError("disk I/O error"))
    assert not disk_full(OSError(errno.EIO, "Input/output error"))


def test_a_commit_on_a_full_disk_is_refused_read_only_and_stores_nothing(
    tmp_path: Path,
) -> None:
    """Adds until the store's page limit: the add whose commit overflows it gets
    ``BookieReadOnly`` (503), ``on_disk_full`` runs before its answer is delivered, no
    entry of the failed add is stored or published, every earlier add is intact, and
    once the limit is raised (room freed) the writer stores again."""
    engine = create_writer_engine(tmp_path, True)

    async def main() -> tuple[list[Any], list[str], LedgerIndex, Any]:
        loop = asyncio.get_running_loop()
        index = LedgerIndex(load_ledgers(engine))
        seen: list[str] = []

        def deliver(changes: Any, results: Any) -> None:
            index.apply(changes)
            for future, result in results:
                seen.append("answer")
                future.set_result(result)

        writer = GroupCommitWriter(
            engine,
            True,
            BookieMetrics(),
            loop,
            deliver,
            on_disk_full=lambda: seen.append("disk full"),
        )
        writer.start(load_ledgers(engine))
        raw = writer._conn.connection.driver_connection  # the writer's own connection
        pages = raw.execute("PRAGMA page_count").fetchone()[0]
        raw.execute(f"PRAGMA max_page_count = {pages + PAGES_FREE}")
        answers: list[Any] = []
        try:
            for eid in range(200):
                op = AddOp([sealed(1, eid, bytes(ENTRY_BYTES))], loop.create_future(), ENTRY_BYTES)
                writer.submit(op)
                answers.append(await op.future)
                if isinstance(answers[-1], BookieReadOnly):
                    break
            raw.execute("PRAGMA max_page_count = 100000")
            again = AddOp([sealed(1, len(answers) - 1)], loop.create_future(), 1)
            writer.submit(again)
            after = await again.future
        finally:
            await writer.stop()
        return answers, seen, index, after

    answers, seen, index, after = asyncio.run(main())
    refused = answers[-1]
    assert isinstance(refused, BookieReadOnly), answers[-3:]
    assert refused.http_status == 503 and refused.code == "bookie_read_only"
    assert "disk is full" in refused.message
    assert len(answers) > 1 and all(a == AddOpResult(1, []) for a in answers[:-1])
    assert seen[-3:] == ["disk full", "answer", "answer"]
    failed_id = len(answers) - 1
    assert after == AddOpResult(1, [])
    view = index.get(1)
    assert view is not None and view.last_entry_id == failed_id
    with engine.connect() as conn:
        stored = conn.exec_driver_sql("SELECT entry_id, length(payload) FROM entries")
        rows: dict[int, int] = dict(stored.fetchall())
    assert sorted(rows) == list(range(failed_id + 1))
    assert rows[failed_id] == 1, "the refused add's bytes were not stored"
    engine.dispose()


class Disk:
    """A fake ``shutil.disk_usage`` of a 1,000-byte disk with ``free`` bytes free."""

    def __init__(self, free: int) -> None:
        self.free = free

    def __call__(self, _path: object) -> Any:
        return shutil._ntuple_diskusage(1000, 1000 - self.free, self.free)


def test_a_full_disk_holds_the_bookie_read_only_until_room_is_freed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With 40% free and a 5% threshold the bookie is writable; a commit that finds the
    disk full turns it read-only at once, and it stays so while the free space is what
    it was then (the threshold alone would say writable); more free space than that
    turns it writable again."""
    disk = Disk(400)
    monkeypatch.setattr("bookie.node.shutil.disk_usage", disk)
    node = BookieNode(BookieSettings(data_dir=tmp_path), BookieMetrics())
    node.check_disk()
    assert node.state == "writable"
    node.disk_full()
    assert node.state == "readonly"
    node.check_disk()
    assert node.state == "readonly"
    disk.free = 390
    node.check_disk()
    assert node.state == "readonly"
    disk.free = 600
    node.check_disk()
    assert node.state == "writable"
    disk.free = 30
    node.check_disk()
    assert node.state == "readonly", "the threshold still holds on its own"
    disk.free = 600
    node.check_disk()
    assert node.state == "writable"
