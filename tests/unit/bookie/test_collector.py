"""Garbage-collection passes over a real store and a fake ZooKeeper (bookie/collector.py;
docs/operations.md "Space given back"): a pass deletes a ledger only on its second look
at missing metadata, never while the session is not connected or when it changed during
the read (the pass ends there and keeps the rest), a dry run deletes nothing, and the
storage report lists what waits with its reason."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bookie.collector import GarbageCollector
from bookie.operations import DeleteOp, Snapshot
from bookie.storage import Reader
from services.errors import MetadataUnavailable
from services.zk import paths as zkpaths
from services.zk.store import Versioned
from tests.bookie_bytes import assert_kept_equals_scan
from tests.unit.bookie.writers import Started


class FakeStore:
    """The metadata store's calls a pass makes: the ledgers in ``present`` exist."""

    def __init__(self, present: set[int]) -> None:
        self.present = {zkpaths.ledger(lid) for lid in present}
        self.connected = True
        self.session_id: int | None = 7
        self.syncs = 0
        self.fail = False
        self.new_session_during_read = False

    async def sync(self, path: str) -> None:
        self.syncs += 1

    async def get_many(self, paths: list[str]) -> list[Versioned | None]:
        if self.fail:
            raise MetadataUnavailable("ZooKeeper did not answer in time")
        if self.new_session_during_read:
            self.session_id = 8
        return [Versioned(b"{}", 0, 0) if p in self.present else None for p in paths]


async def with_collector(data_dir: Path, body) -> None:  # type: ignore[no-untyped-def]
    started = Started(data_dir)
    reader = Reader(data_dir)
    store = FakeStore({1})
    for lid in (1, 2, 3):
        await started.add(lid, 0, b"x" * 100).future

    async def delete_if(lid: int, state: Snapshot) -> bool:
        op = DeleteOp(lid, started.loop.create_future(), if_state=state)
        started.writer.submit(op)
        result: bool = await op.future
        return result

    collector = GarbageCollector(
        grace_s=0.0,
        interval_s=0.0,
        deletes_per_pass=10,
        index=started.index,
        store=store,  # type: ignore[arg-type]
        reader=reader,
        delete_if=delete_if,
        metrics=started.metrics,
    )
    try:
        await body(collector, store, started)
    finally:
        reader.close()
        await started.stop()


def test_a_ledger_is_deleted_on_the_second_look_only(tmp_path: Path) -> None:
    """The first pass that finds metadata missing deletes nothing and the report lists the
    ledgers with their bytes; the next pass deletes them and counts what it freed."""

    async def body(collector, store, started) -> None:  # type: ignore[no-untyped-def]
        first = await collector.run_pass(dry_run=False)
        assert first["freed_ledgers"] == 0 and first["waiting_ledgers"] == 2
        assert store.syncs == 1
        report = await collector.report("b1")
        assert [o["ledger_id"] for o in report["orphaned"]] + [
            p["ledger_id"] for p in report["pending_delete"]
        ] == [2, 3]
        assert all(o["bytes"] == 100 for o in report["orphaned"] + report["pending_delete"])
        assert report["live"] == {"ledgers": 1, "bytes": 100}
        second = await collector.run_pass(dry_run=False)
        assert second["freed_ledgers"] == 2 and second["freed_bytes"] == 200
        assert started.index.get(1) is not None
        assert started.index.get(2) is None and started.index.get(3) is None
        after = await collector.report("b1")
        assert after["orphaned_count"] == after["pending_delete_count"] == 0
        assert after["last_pass"]["freed_ledgers"] == 2

    asyncio.run(with_collector(tmp_path, body))


def test_a_dry_run_deletes_nothing_and_starts_no_clock(tmp_path: Path) -> None:
    """Dry runs record no look (a real pass after them is still a first look) and delete
    nothing even when a real pass would."""

    async def body(collector, store, started) -> None:  # type: ignore[no-untyped-def]
        for _ in range(3):
            dry = await collector.run_pass(dry_run=True)
            assert dry["freed_ledgers"] == 0 and dry["waiting_ledgers"] == 2
        assert collector.rules.missing() == {}
        await collector.run_pass(dry_run=False)
        dry = await collector.run_pass(dry_run=True)
        assert dry["freed_ledgers"] == 2
        assert started.index.get(2) is not None and started.index.get(3) is not None
        assert collector.last_pass["freed_ledgers"] == 0

    asyncio.run(with_collector(tmp_path, body))


def test_no_look_counts_while_zookeeper_is_away_or_the_session_changes(tmp_path: Path) -> None:
    """A disconnected session, a session that changed during the read, or a failed read
    end the pass with an error and record nothing; first looks taken before are kept."""

    async def body(collector, store, started) -> None:  # type: ignore[no-untyped-def]
        store.connected = False
        away = await collector.run_pass(dry_run=False)
        assert away["error"] and away["waiting_ledgers"] == 0
        store.connected = True
        store.new_session_during_read = True
        moved = await collector.run_pass(dry_run=False)
        assert moved["error"] and collector.rules.missing() == {}
        store.new_session_during_read = False
        await collector.run_pass(dry_run=False)  # the first look
        store.fail = True
        failed = await collector.run_pass(dry_run=False)
        assert failed["error"] and failed["freed_ledgers"] == 0
        assert set(collector.rules.missing()) == {2, 3}  # kept, first looks untouched
        assert started.index.get(2) is not None
        store.fail = False
        assert (await collector.run_pass(dry_run=False))["freed_ledgers"] == 2

    asyncio.run(with_collector(tmp_path, body))


def test_a_ledger_written_since_the_look_is_kept(tmp_path: Path) -> None:
    """A ledger whose state changed since its first look (a write) is kept and its clock
    starts again, even without the node's write hook (the state comparison alone)."""

    async def body(collector, store, started) -> None:  # type: ignore[no-untyped-def]
        await collector.run_pass(dry_run=False)
        await started.add(2, 1, b"y" * 10).future  # a write after the first look
        second = await collector.run_pass(dry_run=False)
        assert second["freed_ledgers"] == 1  # ledger 3 only
        assert started.index.get(2) is not None
        assert set(collector.rules.missing()) == {2}  # its clock started again

    asyncio.run(with_collector(tmp_path, body))


def test_the_report_reads_the_kept_counts_afresh_each_time(tmp_path: Path) -> None:
    """The report's bytes are the counts the writer keeps with each ledger (no scan of
    the entries, so nothing to reuse): an add shows in the next report, a delete moves
    the ledger's bytes from live to purging at once (and out of the report once purged),
    and live, orphaned and pending bytes add up to the kept counts of the stored
    ledgers."""

    async def body(collector, store, started) -> None:  # type: ignore[no-untyped-def]
        first = await collector.report("b1")
        assert first["live"] == {"ledgers": 3, "bytes": 300}
        assert first["purging"] == {"ledgers": 0, "bytes": 0}
        assert first["bytes_count_ms"] >= 0 and first["bytes_counted_at"]
        await started.add(1, 1, b"y" * 50).future
        assert (await collector.report("b1"))["live"] == {"ledgers": 3, "bytes": 350}

        await collector.run_pass(dry_run=False)  # ledgers 2 and 3: metadata missing
        report = await collector.report("b1")
        assert report["live"] == {"ledgers": 1, "bytes": 150}
        waiting = report["orphaned"] + report["pending_delete"]
        assert [(o["ledger_id"], o["bytes"]) for o in waiting] == [(2, 100), (3, 100)]

        op = DeleteOp(1, started.loop.create_future())
        started.writer.submit(op)
        assert await op.future is True
        gone = await collector.report("b1")
        assert gone["live"] == {"ledgers": 0, "bytes": 0}
        # Purging: the bytes left of ledger 1 (0 once its purge, in the background, ended).
        assert gone["purging"] in ({"ledgers": 1, "bytes": 150}, {"ledgers": 0, "bytes": 0})
        kept = assert_kept_equals_scan(tmp_path)
        assert kept[("ledgers", 2)] == kept[("ledgers", 3)] == 100

    asyncio.run(with_collector(tmp_path, body))
