"""Garbage-collection passes over a real store and a fake ZooKeeper (bookie/collector.py;
docs/operations.md "Space given back"): a pass deletes a ledger only on its second look
at missing metadata, never while the session is not connected or when it changed during
the read (the pass ends there and keeps the rest), a dry run deletes nothing, and the
storage report lists what waits with its reason."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

from bookie.collector import GarbageCollector
from bookie.operations import DeleteOp, Snapshot
from bookie.storage import Reader
from services.errors import MetadataUnavailable
from services.zk import paths as zkpaths
from services.zk.store import Versioned
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


class SlowCount:
    """The reader with a count of bytes per ledger that takes ``delay_s`` and is counted."""

    def __init__(self, reader: Reader, delay_s: float) -> None:
        self.reader = reader
        self.delay_s = delay_s
        self.counts = 0

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.reader, name)

    def ledger_bytes(self, ledger_ids: list[int] | None = None) -> dict[int, int]:
        self.counts += 1
        time.sleep(self.delay_s)  # the scan of a large store, in the reader's thread
        return self.reader.ledger_bytes(ledger_ids)


def test_a_costly_count_of_bytes_is_shared_and_reused_for_ten_times_its_time(
    tmp_path: Path,
) -> None:
    """The report's bytes per ledger scan every entry: reports asked together share one
    count, a report within ten times the count's duration reuses it (its bytes as of
    then, its ledgers current), and a later one counts again."""

    async def body(collector, store, started) -> None:  # type: ignore[no-untyped-def]
        slow = SlowCount(collector._reader, 0.2)
        collector._reader = slow
        first, second = await asyncio.gather(collector.report("b1"), collector.report("b1"))
        assert slow.counts == 1
        assert first["bytes_counted_at"] == second["bytes_counted_at"]
        assert first["bytes_count_ms"] >= 200
        assert first["live"] == {"ledgers": 3, "bytes": 300}
        await started.add(1, 1, b"y" * 50).future
        reused = await collector.report("b1")
        assert slow.counts == 1 and reused["live"]["bytes"] == 300  # as of the count
        # Ten times the count's duration later, the next report counts again.
        counted = collector._counted
        collector._counted = dataclasses.replace(counted, at=counted.at - 10 * counted.took_s)
        fresh = await collector.report("b1")
        assert slow.counts == 2 and fresh["live"]["bytes"] == 350

    asyncio.run(with_collector(tmp_path, body))
