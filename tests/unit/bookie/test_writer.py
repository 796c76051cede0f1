"""The bookie's group-commit writer and ledger index, in-process on a real SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bookie.ledgers import LedgerIndex
from bookie.limits import INLINE_BYTES_MAX, INLINE_COMMIT_S_MAX, INLINE_ENTRIES_MAX
from bookie.metrics import BookieMetrics
from bookie.operations import AddOp, AddOpResult, DeleteOp, FenceOp, SetLacOp
from bookie.storage import Reader, StorageCounts, create_writer_engine, load_ledgers
from bookie.writer import GroupCommitWriter
from services.errors import LedgerNotFound
from services.wire.framing import FramedRecord
from tests.bookie_bytes import assert_kept_equals_scan
from tests.unit.bookie.writers import Started, metric, sealed


async def run_batch(data_dir: Path, make_ops, journal_sync: bool = True):
    """Queue every operation BEFORE the writer starts, so they share one batch."""
    loop = asyncio.get_running_loop()
    metrics = BookieMetrics()
    engine = create_writer_engine(data_dir, journal_sync)
    index = LedgerIndex(load_ledgers(engine))
    published: list[dict] = []

    def deliver(changes, results):
        published.append(changes)
        index.apply(changes)
        for future, result in results:
            future.set_result(result)

    writer = GroupCommitWriter(engine, journal_sync, metrics, loop, deliver)
    ops = make_ops(loop)
    for op in ops:
        writer.submit(op)
    writer.start(load_ledgers(engine))
    results = [await op.future for op in ops]
    await writer.stop()
    engine.dispose()
    return results, metrics, index, published


def test_one_batch_one_commit_in_queue_order(tmp_path):
    """Operations queued together apply in queue order: an add before the fence is stored, a
    normal add after it is rejected, a recovery add after it is stored; the fence commits in
    a transaction of its own, the operations around it share one each (three commits)."""

    def ops(loop):
        f = loop.create_future
        return [
            AddOp([sealed(1, 0), sealed(2, 0)], f(), 2),
            FenceOp(1, f()),
            AddOp([sealed(1, 1), sealed(2, 1)], f(), 2),
            AddOp([sealed(1, 2, recovery=True)], f(), 1),
            SetLacOp(3, 5, f()),
        ]

    results, metrics, index, published = asyncio.run(run_batch(tmp_path, ops))
    assert results[0] == AddOpResult(2, [])
    assert results[1] == (-1, 0, True)
    assert results[2] == AddOpResult(1, [(1, 1, "ledger_fenced")])
    assert results[3] == AddOpResult(1, [])
    assert results[4] == (5, -1, False)
    assert metric(metrics, "quire_bookie_commits_total") == 3
    assert metric(metrics, "quire_bookie_fsyncs_total") == 3
    assert metric(metrics, "quire_bookie_adds_total") == 4
    assert len(published) == 3
    assert index.get(1).to_json() == {"ledger_id": 1, "lac": 1, "last_entry_id": 2, "fenced": True}
    assert index.get(2).last_entry_id == 1
    assert index.get(3).lac == 5

    # Everything is on disk: a new writer engine loads the same states.
    engine = create_writer_engine(tmp_path, True)
    assert load_ledgers(engine) == {1: (1, 2, True), 2: (0, 1, False), 3: (5, -1, False)}
    engine.dispose()
    reader = Reader(tmp_path)
    try:
        assert [e.entry_id for e in reader.read_range(1, 0, 10, 100, 1 << 20)] == [0, 2]
        assert reader.read_entry(1, 1) is None
    finally:
        reader.close()


def test_no_journal_sync_counts_no_fsyncs(tmp_path):
    """With journal sync off, commits happen but no fsync is counted."""

    def ops(loop):
        return [AddOp([sealed(1, 0)], loop.create_future(), 1)]

    _, metrics, _, _ = asyncio.run(run_batch(tmp_path, ops, journal_sync=False))
    assert metric(metrics, "quire_bookie_commits_total") == 1
    assert metric(metrics, "quire_bookie_fsyncs_total") == 0


def test_delete_then_readd_in_one_batch(tmp_path):
    """A delete forgets entries and flags; an add queued after it starts the ledger afresh;
    deleting an unknown ledger answers ledger_not_found."""

    def first(loop):
        f = loop.create_future
        return [AddOp([sealed(4, i) for i in range(5)], f(), 5), FenceOp(4, f())]

    asyncio.run(run_batch(tmp_path, first))

    def second(loop):
        f = loop.create_future
        return [DeleteOp(4, f()), DeleteOp(4, f()), AddOp([sealed(4, 7)], f(), 1)]

    results, _, index, _ = asyncio.run(run_batch(tmp_path, second))
    assert results[0] is True
    assert isinstance(results[1], LedgerNotFound)
    assert results[2] == AddOpResult(1, [])
    assert index.get(4).to_json() == {"ledger_id": 4, "lac": 6, "last_entry_id": 7, "fenced": False}


def test_conditional_delete_keeps_a_ledger_written_since(tmp_path):
    """Garbage collection's delete (bookie/gc.py, docs/operations.md "Space given back")
    deletes only while the ledger's state is the one the collector looked at: an add
    queued before it changes the state, so the ledger and its entries are kept."""

    def ops(loop):
        f = loop.create_future
        return [
            AddOp([sealed(5, 0), sealed(6, 0)], f(), 2),
            AddOp([sealed(5, 1)], f(), 1),
            DeleteOp(5, f(), if_state=(-1, 0, False)),  # the state before the second add
            DeleteOp(6, f(), if_state=(-1, 0, False)),
        ]

    results, _, index, _ = asyncio.run(run_batch(tmp_path, ops))
    assert results[2] is False
    assert results[3] is True
    assert index.get(5).last_entry_id == 1
    assert index.get(6) is None
    reader = Reader(tmp_path)
    try:
        assert [e.entry_id for e in reader.read_range(5, 0, 9, 10, 1 << 20)] == [0, 1]
        assert reader.read_range(6, 0, 9, 10, 1 << 20) == []
    finally:
        reader.close()


def test_range_read_bounds(tmp_path):
    """Range reads stop at max_entries and max_bytes, but always return the first entry."""

    def ops(loop):
        records = [sealed(9, i, bytes(100)) for i in range(10)]
        return [AddOp(records, loop.create_future(), 1000)]

    asyncio.run(run_batch(tmp_path, ops))
    reader = Reader(tmp_path)
    try:
        assert len(reader.read_range(9, 0, 100, 3, 1 << 20)) == 3
        assert len(reader.read_range(9, 0, 100, 100, 250)) == 2
        assert len(reader.read_range(9, 4, 100, 100, 1)) == 1
        assert [e.entry_id for e in reader.read_range(9, 8, 100, 100, 1 << 20)] == [8, 9]
        assert reader.list_ledgers(-1, 10) == [9]
        assert reader.list_ledgers(9, 10) == []
    finally:
        reader.close()


def test_ledger_bytes_page_reads_the_kept_counts(tmp_path):
    """The paged listing of ledgers with their bytes names every ledger stored (one with
    no entry, only a fence flag, has 0 bytes), in id order, each with the payload bytes
    the writer kept for it in the same commits as its entries: what a scan of the
    entries counts, and what ``ledger_bytes`` and the storage report's sums read."""

    def ops(loop):
        return [
            AddOp([sealed(3, i, bytes(100)) for i in range(4)], loop.create_future(), 1000),
            AddOp([sealed(7, 0, bytes(5))], loop.create_future(), 1000),
            FenceOp(5, loop.create_future()),
            AddOp([sealed(11, i, bytes(30)) for i in range(2)], loop.create_future(), 1000),
        ]

    asyncio.run(run_batch(tmp_path, ops))
    assert assert_kept_equals_scan(tmp_path) == {
        ("ledgers", 3): 400,
        ("ledgers", 5): 0,
        ("ledgers", 7): 5,
        ("ledgers", 11): 60,
    }
    reader = Reader(tmp_path)
    try:
        assert reader.ledger_bytes([3, 5, 7, 11, 12]) == {3: 400, 5: 0, 7: 5, 11: 60}
        assert reader.ledger_bytes_page(-1, 2) == [(3, 400), (5, 0)]
        assert reader.ledger_bytes_page(5, 2) == [(7, 5), (11, 60)]
        assert reader.ledger_bytes_page(11, 2) == []
        whole = reader.ledger_bytes_page(-1, 100)
        assert [lid for lid, _ in whole] == reader.list_ledgers(-1, 100)
        counts = reader.storage_counts([7, 12])
        assert counts == StorageCounts(4, 465, 0, 0, {7: 5})
    finally:
        reader.close()


def test_kept_counts_follow_every_write_and_survive_a_failed_commit(tmp_path):
    """Adds alone and in batches, repeats of stored entries (same bytes: counted once;
    other bytes: refused, not counted), recovery adds on a fenced ledger, a delete (its
    count moves to the purging row) and an add to the deleted id (its old rows and
    count go, the new ledger counts from 0) keep every count equal to a scan; a batch
    whose commit fails counts nothing, and the writer's counts after it are the
    database's (the next add adds to them)."""

    def first(loop):
        f = loop.create_future
        return [
            AddOp([sealed(1, e, bytes(10 + e)) for e in range(5)], f(), 60),
            AddOp([sealed(2, 0, b"abc")], f(), 3),
            AddOp([sealed(1, 2, bytes(12)), sealed(1, 3, b"other"), sealed(2, 1, b"de")], f(), 19),
            FenceOp(2, f()),
            AddOp(
                [sealed(2, 2, b"fgh", recovery=True), sealed(2, 0, b"abc", recovery=True)], f(), 6
            ),
            AddOp([sealed(3, e, bytes(1000)) for e in range(50)], f(), 50_000),
        ]

    results, _, _, _ = asyncio.run(run_batch(tmp_path, first))
    assert results[2] == AddOpResult(2, [(1, 3, "entry_exists")])
    assert assert_kept_equals_scan(tmp_path) == {
        ("ledgers", 1): 10 + 11 + 12 + 13 + 14,
        ("ledgers", 2): 3 + 2 + 3,
        ("ledgers", 3): 50_000,
    }

    async def main():
        w = Started(tmp_path)
        try:
            f = w.loop.create_future
            poisoned = FramedRecord(1, 9, 8, object(), b"", False, "none", 0)  # not bindable
            failed = AddOp([sealed(1, 5, bytes(100)), poisoned], f(), 101)
            w.writer.submit(failed)
            assert isinstance(await failed.future, Exception)
            assert assert_kept_equals_scan(tmp_path)[("ledgers", 1)] == 60
            ops = [
                AddOp([sealed(1, 5, bytes(7))], f(), 7),
                DeleteOp(3, f()),
                DeleteOp(2, f()),
                AddOp([sealed(2, 0, b"new")], f(), 3),
            ]
            for op in ops:
                w.writer.submit(op)
                await op.future
            assert [op.future.result() for op in ops[1:3]] == [True, True]
            kept = assert_kept_equals_scan(tmp_path)
            assert kept[("ledgers", 1)] == 67  # not 167: the failed batch's count is gone
            assert kept[("ledgers", 2)] == 3
            assert ("purging", 2) not in kept  # the rewrite dropped its old rows
            # Ledger 3's rows are purged in the background: its row counts what is left.
            assert kept.get(("purging", 3), 0) <= 50_000
        finally:
            await w.stop()

    asyncio.run(main())


def test_long_poll_wakes_on_change_and_times_out():
    """wait_past answers as soon as the ledger passes `after`, or with the current state
    when the wait is over, or None for a ledger still unknown."""

    async def main():
        index = LedgerIndex({1: (3, 4, False)})
        assert (await index.wait_past(1, 2, 10.0)).lac == 3  # already past
        loop = asyncio.get_running_loop()
        started = loop.time()
        waiter = asyncio.create_task(index.wait_past(1, 4, 10.0))
        unknown = asyncio.create_task(index.wait_past(2, -1, 10.0))
        await asyncio.sleep(0)
        index.apply({1: (4, 5, False), 2: (-1, 0, False)})
        assert (await waiter).last_entry_id == 5
        assert (await unknown).last_entry_id == 0
        assert loop.time() - started < 5.0
        view = await index.wait_past(1, 100, 0.05)
        assert view is not None and view.last_entry_id == 5
        assert await index.wait_past(77, 0, 0.05) is None
        # Shutting down: waits end at once.
        late = asyncio.create_task(index.wait_past(1, 100, 30.0))
        await asyncio.sleep(0)
        index.close()
        assert (await asyncio.wait_for(late, 5.0)).lac == 4

    asyncio.run(main())


def test_a_long_poll_on_a_ledger_deleted_while_it_waits_answers_none_at_once():
    """A ledger deleted during a 30 s poll: the poll ends at once with None (the route's
    404), while a poll on a ledger still unknown goes on waiting for its first entry."""

    async def main():
        index = LedgerIndex({1: (3, 4, False), 3: (3, 4, False)})
        deleted = asyncio.create_task(index.wait_past(1, 4, 30.0))
        unknown = asyncio.create_task(index.wait_past(2, -1, 30.0))
        await asyncio.sleep(0)
        assert index.polls_waiting == 2
        index.apply({1: (3, 4, True)})  # fenced: a change, not past 4, so it waits on
        await asyncio.sleep(0)
        assert not deleted.done()
        index.apply({1: None})
        assert await asyncio.wait_for(deleted, 5.0) is None
        await asyncio.sleep(0)
        assert not unknown.done()
        index.apply({2: (-1, 0, False)})
        assert (await asyncio.wait_for(unknown, 5.0)).last_entry_id == 0
        # Deleted, then a late LAC update re-creates a record before the poll runs: the
        # poll still ends (None), it does not wait on the new record.
        recreated = asyncio.create_task(index.wait_past(3, 4, 30.0))
        await asyncio.sleep(0)
        index.apply({3: None})
        index.apply({3: (4, -1, False)})
        assert await asyncio.wait_for(recreated, 5.0) is None
        assert index.polls_waiting == 0

    asyncio.run(main())


def test_failed_commit_fails_its_batch_and_the_writer_goes_on(tmp_path):
    """When a group commit fails, every operation of the batch gets bookie_unavailable,
    nothing of it is stored, and later operations are served normally."""
    from services.errors import BookieUnavailable

    def ops(loop):
        f = loop.create_future
        poisoned = FramedRecord(1, 1, 0, object(), b"", False, "none", 0)  # sqlite cannot bind it
        return [AddOp([sealed(1, 0)], f(), 1), SetLacOp(2, 3, f()), AddOp([poisoned], f(), 1)]

    results, metrics, index, _ = asyncio.run(run_batch(tmp_path, ops))
    assert all(isinstance(r, BookieUnavailable) for r in results)
    assert metric(metrics, "quire_bookie_commits_total") == 0
    assert index.get(1) is None and index.get(2) is None

    def later(loop):
        return [AddOp([sealed(1, 0)], loop.create_future(), 1)]

    results, _, index, _ = asyncio.run(run_batch(tmp_path, later))
    assert results == [AddOpResult(1, [])]
    assert index.get(1).last_entry_id == 0 and index.get(2) is None


def test_a_failing_add_cannot_fail_a_fence_queued_with_it(tmp_path):
    """A fence never shares a transaction with adds: queued between an add and an add
    whose commit fails, the fence is stored and answered, and its flag is on disk."""
    from services.errors import BookieUnavailable

    def ops(loop):
        f = loop.create_future
        poisoned = FramedRecord(1, 1, 0, object(), b"", False, "none", 0)  # sqlite cannot bind it
        return [AddOp([sealed(1, 0)], f(), 1), FenceOp(2, f()), AddOp([poisoned], f(), 1)]

    results, metrics, index, _ = asyncio.run(run_batch(tmp_path, ops))
    assert results[0] == AddOpResult(1, [])
    assert results[1] == (-1, -1, True)
    assert isinstance(results[2], BookieUnavailable)
    assert index.get(2).fenced
    engine = create_writer_engine(tmp_path, True)
    assert load_ledgers(engine)[2] == (-1, -1, True)
    engine.dispose()


def test_fences_are_fsynced_without_journal_sync(tmp_path):
    """With journal sync off, adds commit without fsync but every batch holding a fence is
    committed with synchronous=FULL (counted as an fsync); the connection goes back to
    NORMAL afterwards, so later adds stay relaxed."""
    levels: list[str] = []
    original = GroupCommitWriter._set_synchronous

    def spy(conn, level):
        levels.append(level)
        original(conn, level)

    def ops(loop):
        f = loop.create_future
        return [
            AddOp([sealed(1, 0)], f(), 1),
            FenceOp(1, f()),
            FenceOp(2, f()),
            AddOp([sealed(3, 0)], f(), 1),
        ]

    GroupCommitWriter._set_synchronous = staticmethod(spy)
    try:
        results, metrics, _, _ = asyncio.run(run_batch(tmp_path, ops, journal_sync=False))
    finally:
        GroupCommitWriter._set_synchronous = staticmethod(original)
    assert results[1] == (-1, 0, True) and results[2] == (-1, -1, True)
    assert metric(metrics, "quire_bookie_commits_total") == 3
    assert metric(metrics, "quire_bookie_fsyncs_total") == 1
    assert levels == ["FULL", "NORMAL"]


def test_same_bytes_are_idempotent_different_bytes_are_refused(tmp_path):
    """Re-adding an entry with the same bytes stores nothing new and counts as stored (also
    as a recovery add on a fenced ledger, and twice in one batch); different bytes for an
    existing entry are refused per record with entry_exists and change nothing, also for
    recovery adds on a fenced ledger and for a duplicate inside one batch."""

    def first(loop):
        f = loop.create_future
        return [AddOp([sealed(5, 0, b"a"), sealed(5, 1, b"b"), sealed(5, 2, b"c")], f(), 3)]

    asyncio.run(run_batch(tmp_path, first))

    def second(loop):
        f = loop.create_future
        return [
            AddOp([sealed(5, 1, b"b"), sealed(5, 0, b"X"), sealed(5, 3, b"d")], f(), 3),
            AddOp([sealed(5, 3, b"d"), sealed(5, 3, b"Y")], f(), 2),
            FenceOp(5, f()),
            AddOp([sealed(5, 2, b"c", recovery=True), sealed(5, 1, b"Z", recovery=True)], f(), 2),
        ]

    results, metrics, index, _ = asyncio.run(run_batch(tmp_path, second))
    assert results[0] == AddOpResult(2, [(5, 0, "entry_exists")])
    assert results[1] == AddOpResult(1, [(5, 3, "entry_exists")])
    assert results[3] == AddOpResult(1, [(5, 1, "entry_exists")])
    assert index.get(5).last_entry_id == 3
    reader = Reader(tmp_path)
    try:
        got = {e.entry_id: bytes(e.payload) for e in reader.read_range(5, 0, 10, 100, 1 << 20)}
    finally:
        reader.close()
    assert got == {0: b"a", 1: b"b", 2: b"c", 3: b"d"}


# -- commits on the event loop (bookie/writer.py, "Commits on the event loop") ------------


async def answers(*ops) -> list:
    return [await asyncio.wait_for(op.future, 10) for op in ops]


def test_an_add_alone_on_an_idle_writer_is_committed_by_the_loop_others_by_the_thread(
    tmp_path,
):
    """An add submitted alone while the thread is idle commits on the event loop, three
    times in a row; five adds submitted in one loop iteration go to the thread, and so
    does an add of more than INLINE_ENTRIES_MAX entries. Loop commits count in both
    counters, are fsynced and are on disk. (How many commits the thread makes of the five
    depends on when it wakes: group commit takes what is queued.)"""

    async def main():
        w = Started(tmp_path)
        try:
            for eid in range(3):
                assert await answers(w.add(1, eid)) == [AddOpResult(1, [])]
            loop_commits = w.count("quire_bookie_loop_commits_total")
            five = [w.add(1, eid) for eid in range(3, 8)]
            assert await answers(*five) == [AddOpResult(1, [])] * 5
            many = [sealed(1, eid) for eid in range(8, 9 + INLINE_ENTRIES_MAX)]
            batch = AddOp(many, w.loop.create_future(), len(many))
            w.writer.submit(batch)
            assert await answers(batch) == [AddOpResult(len(many), [])]
            return w, loop_commits
        finally:
            await w.stop()

    w, loop_commits = asyncio.run(main())
    assert loop_commits == 3
    assert w.count("quire_bookie_loop_commits_total") == 3
    thread_commits = w.count("quire_bookie_commits_total") - 3
    assert 2 <= thread_commits <= 6
    assert w.count("quire_bookie_fsyncs_total") == 3 + thread_commits
    last = 8 + INLINE_ENTRIES_MAX
    assert w.count("quire_bookie_adds_total") == last + 1
    assert w.index.get(1).last_entry_id == last
    engine = create_writer_engine(tmp_path, True)
    assert load_ledgers(engine)[1] == (last - 1, last, False)
    engine.dispose()


def test_what_the_loop_kept_goes_to_the_thread_ahead_of_a_fence(tmp_path):
    """An add kept for the loop, then a fence and an add of the same ledger in the same
    iteration: the kept add is queued ahead of the fence, so it is stored and the later
    add is refused with ledger_fenced; the thread commits all of it."""

    async def main():
        w = Started(tmp_path)
        try:
            before = w.add(1, 0)
            fence = FenceOp(1, w.loop.create_future())
            w.writer.submit(fence)
            after = w.add(1, 1)
            return w, await answers(before, fence, after)
        finally:
            await w.stop()

    w, results = asyncio.run(main())
    assert results == [AddOpResult(1, []), (-1, 0, True), AddOpResult(0, [(1, 1, "ledger_fenced")])]
    assert w.count("quire_bookie_loop_commits_total") == 0
    assert w.count("quire_bookie_commits_total") == 3


def test_large_adds_and_slow_commits_go_to_the_thread(tmp_path):
    """The loop commits an add of at most INLINE_BYTES_MAX bytes itself: a larger one goes
    to the thread; while commits are slow on average, every add goes to the thread."""

    async def main():
        w = Started(tmp_path)
        try:
            assert await answers(w.add(1, 0, bytes(INLINE_BYTES_MAX + 1))) == [AddOpResult(1)]
            w.writer._commit_s = INLINE_COMMIT_S_MAX * 10  # a slow disk
            assert await answers(w.add(1, 1)) == [AddOpResult(1, [])]
            return w
        finally:
            await w.stop()

    w = asyncio.run(main())
    assert w.count("quire_bookie_commits_total") == 2
    assert w.count("quire_bookie_loop_commits_total") == 0


def test_the_loop_queues_its_adds_while_the_thread_holds_the_connection(tmp_path):
    """While the thread holds the connection (here: the test holds its lock, as the thread
    does through a batch and its vacuum), the loop does not wait for it: the kept add is
    queued, and the thread commits it once the connection is free."""

    async def main():
        w = Started(tmp_path)
        try:
            w.writer._busy.acquire()
            try:
                op = w.add(1, 0)
                await asyncio.sleep(0)  # the loop's turn: it queues the add
                assert w.writer._outstanding == 1
                assert not op.future.done()
            finally:
                w.writer._busy.release()
            return w, await answers(op)
        finally:
            await w.stop()

    w, results = asyncio.run(main())
    assert results == [AddOpResult(1, [])]
    assert w.count("quire_bookie_commits_total") == 1
    assert w.count("quire_bookie_loop_commits_total") == 0


def test_a_failed_commit_on_the_loop_fails_its_adds_and_the_loop_goes_on(tmp_path):
    """A commit that fails on the loop answers its add with bookie_unavailable, stores
    nothing of it, and the next add is committed on the loop as before."""
    from services.errors import BookieUnavailable

    async def main():
        w = Started(tmp_path)
        try:
            poisoned = AddOp(
                [sealed(1, 0), FramedRecord(1, 1, 0, object(), b"", False, "none", 0)],
                w.loop.create_future(),
                2,
            )  # sqlite cannot bind the second record
            w.writer.submit(poisoned)
            failed = await answers(poisoned)
            later = await answers(w.add(1, 0))
            return w, failed, later
        finally:
            await w.stop()

    w, failed, later = asyncio.run(main())
    assert isinstance(failed[0], BookieUnavailable)
    assert later == [AddOpResult(1, [])]
    assert w.count("quire_bookie_commits_total") == 1
    assert w.count("quire_bookie_loop_commits_total") == 1
    assert w.index.get(1).last_entry_id == 0


def test_stopping_commits_what_the_loop_kept(tmp_path):
    """An add kept for the loop when the stop begins is committed by the thread before it
    ends: nothing submitted is dropped."""

    async def main():
        w = Started(tmp_path)
        op = w.add(7, 0)
        await w.stop()  # before the loop's turn
        return w, await answers(op)

    w, results = asyncio.run(main())
    assert results == [AddOpResult(1, [])]
    assert w.count("quire_bookie_loop_commits_total") == 0
    engine = create_writer_engine(tmp_path, True)
    assert load_ledgers(engine)[7] == (-1, 0, False)
    engine.dispose()
