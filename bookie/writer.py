"""Group commit: one writer thread, one transaction and one fsync for many requests.

Async handlers never write. They submit an operation (an add of framed records,
a fence, a LAC update, a ledger delete) with an asyncio future, which goes on a
queue, and await the future. The writer thread owns the only writing connection
(lent to the event loop while the thread is idle: "Commits on the event loop",
below) and loops:

1. block until one operation is queued;
2. take everything else already queued, up to ``GROUP_COMMIT_ENTRIES_MAX``
   entries and ``GROUP_COMMIT_BYTES_MAX`` bytes of payload (one operation may
   overshoot: a request is never split);
3. apply the operations in queue order inside ONE transaction (what each one
   does: bookie/apply.py);
4. commit once (with journal sync on this is the one fsync of the batch);
5. hand the results to the event loop with ONE ``call_soon_threadsafe``,
   which first publishes the new ledger states, then resolves the futures.

Ordering rules. The writer keeps its own copy of every ledger's state
(lac, last entry id, fenced, payload bytes), loaded at start and changed at apply time, so
an operation sees the effect of every operation queued before it: a fence
queued before an add rejects that add, even in the same batch. Nothing is
answered before the commit that made it durable, so a fence is on disk
before its answer and an acknowledged entry survives a crash. The event
loop's view of the ledgers (``LedgerIndex``) changes only after the commit,
so LAC answers and reads never show an uncommitted entry.

Entries are written once. An add of an entry the bookie already stores is
idempotent when every stored field (lac, length, digest type, digest,
payload) is the same: it counts as stored and writes nothing (gateway
retries and recovery write-backs send the same record again). Different
bytes for an existing (ledger, entry) are rejected for that record with
``entry_exists`` and change nothing, recovery adds included. Only entries
at or below the ledger's last entry id can exist, so appends never look.

Fences. A fence is never in a transaction with anything but other fences:
``_take_batch`` ends a batch before the first fence that follows other
operations and after the last fence of a run of fences. So a failing add
cannot fail a fence, and a batch holding a fence is always made durable:
with journal sync off (``--no-journal-sync`` relaxes adds only) the writer
turns ``synchronous=FULL`` on for that one commit, so the fenced flag is
fsynced before the answer, as docs/protocol.md requires.

The driver connection. The writer's connection comes from SQLAlchemy (the engine sets
its pragmas and leaves transactions to us: bookie/storage.py), but each group commit
runs on the sqlite3 connection under it, with the same driver SQL (``BEGIN``, the
statements, ``COMMIT``): SQLAlchemy's begin/execute/commit cost about 70 us a commit
more on this machine (two statements, fsync off), and the writer thread holds the GIL
for most of it, time the event loop then waits for. The range reads do the same
(bookie/storage.py).

If a commit fails (disk full, I/O error), the transaction is rolled back,
every operation of the batch fails, and the writer reloads its copy of the
ledger states from the database. A full disk (SQLite's ``SQLITE_FULL``, an
``ENOSPC``) fails the batch with ``BookieReadOnly`` and calls ``on_disk_full``
first, so the bookie turns read-only before the answers leave (bookie/node.py,
"disk space and read-only mode"): writers replace it as they replace a bookie
that went read-only at its disk check, which a write larger than the free space
left under the threshold can outrun. Any other failure is ``BookieUnavailable``.

Commits on the event loop. With one add in flight (a writer that waits for each
acknowledgement) the hand-off to the thread and back is two wake-ups of a sleeping
thread per add, on the path of every acknowledgement. So an add that finds the writer
thread idle (nothing queued or in hand) is not queued at once: ``submit`` keeps it, and
once the event loop has run everything ready, the loop commits it itself if it is
still alone, with the same code and rules as the thread. Everything else goes to the
thread, which commits while the loop reads the next requests (a commit on the loop
stops the reading): an operation other than an add; a second add submitted before the
loop's turn; any operation while the thread has work; an add of more than
``INLINE_ENTRIES_MAX`` entries or ``INLINE_BYTES_MAX`` bytes (batches: their commits
are longer, and the hand-off matters less to them); and every add while commits take
more than ``INLINE_COMMIT_S_MAX`` on average (a slow disk: reads and all other
requests would wait that long). The kept add is queued first, so queue order holds
across both. The thread holds ``_busy`` for each batch and each purge or vacuum step,
and the loop commits only if it takes ``_busy`` without waiting, so one of them at a
time uses the connection and the ledger states. Measured with one add in flight through
the gateway and under load: benchmarks/README.md, "Measured choices".

The purge. A delete only removes the ledger's row and marks its id purging (bookie/
apply.py, bookie/storage.py), so it costs what a fence costs and answers at once; the
ledger is gone for the API from that commit on. Between batches the thread deletes the
purging ledgers' entry rows in chunks (``PURGE_CHUNK_SQL``), each chunk its own short
transaction that also takes the bytes it deleted off the ledger's ``purging`` row (its
kept count: bookie/storage.py), the last one of a ledger removing that row; once no ledger is
purging, paced ``PRAGMA incremental_vacuum(N)`` steps give the free pages back to the file
system, and one ``wal_checkpoint(TRUNCATE)`` ends the vacuum. Each step is sized to take
about ``PURGE_STEP_S`` (``StepSize``), and runs only when ``Pacer`` allows it: at once while
the writer is idle (no operation served in the last ``PURGE_IDLE_S`` and none queued),
else only while the steps have held at most ``PURGE_BUSY_SHARE`` of the writer's time. So
adds keep most of the writer under any rate of deletes, and an add that arrives during
a step waits for one step at most. The free pages a purge leaves are reused by new
entries at once; the vacuum returns what is left over time. A restart resumes from the
``purging`` table. Measured: benchmarks/README.md, "One bookie to 20 GB".
"""

from __future__ import annotations

import asyncio
import errno
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine

from bookie import limits
from bookie.apply import LedgerState, Row, apply_add, apply_other
from bookie.metrics import BookieMetrics
from bookie.operations import AddOp, AddOpResult, DeleteOp, Deliver, FenceOp, Op, Snapshot
from bookie.purge import Pacer, StepSize
from bookie.storage import (
    DELETE_PURGING_SQL,
    INSERT_ENTRY_SQL,
    PURGE_CHUNK_SQL,
    PURGED_BYTES_SQL,
    UPSERT_LEDGER_SQL,
    load_ledger_bytes_on,
    load_ledgers_on,
    load_purging_on,
)
from services.errors import BookieReadOnly, BookieUnavailable, QuireError, invariant

log = logging.getLogger(__name__)

_COMMIT_S_WEIGHT = 0.2  # of the newest commit in the moving average of commit times

_STOP = object()


class GroupCommitWriter:
    """The writer thread. ``submit`` is called on the event loop; all else runs in the thread."""

    def __init__(
        self,
        engine: Engine,
        journal_sync: bool,
        metrics: BookieMetrics,
        loop: asyncio.AbstractEventLoop,
        deliver: Deliver,
        on_vacuum: Callable[[], None] | None = None,
        on_disk_full: Callable[[], None] | None = None,
    ) -> None:
        self._engine = engine
        self._journal_sync = journal_sync
        self._metrics = metrics
        self._loop = loop
        self._deliver = deliver
        self._on_vacuum = on_vacuum
        self._on_disk_full = on_disk_full
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._ledgers: dict[int, LedgerState] = {}
        self._held: Any = None
        self._conn: Any = None
        self._thread = threading.Thread(target=self._run, name="bookie-writer", daemon=True)
        # On the loop: operations queued for the thread and not yet delivered back, and
        # the add the loop keeps to commit itself (module docstring, "Commits on the event
        # loop"), only ever while nothing is outstanding.
        self._outstanding = 0
        self._kept: AddOp | None = None
        self._inline_open = True
        self._commit_s = 0.0  # moving average of commit times, both paths
        self._on_loop = False
        self._busy = threading.Lock()
        # The purge (module docstring, "The purge"): the deleted ledgers whose entries
        # are not all gone, whether a vacuum is due, and the pacing of their steps.
        self._purging: set[int] = set()
        self._vacuum_due = False
        self._pacer = Pacer(limits.PURGE_BUSY_SHARE)
        self._chunk = StepSize(
            limits.PURGE_CHUNK_ENTRIES_FIRST,
            limits.PURGE_CHUNK_ENTRIES_MIN,
            limits.PURGE_CHUNK_ENTRIES_MAX,
            limits.PURGE_STEP_S,
        )
        self._pages = StepSize(
            limits.VACUUM_STEP_PAGES_FIRST,
            limits.VACUUM_STEP_PAGES_MIN,
            limits.VACUUM_STEP_PAGES_MAX,
            limits.PURGE_STEP_S,
        )
        self._last_op_at = 0.0  # perf_counter when the writer last committed operations
        self._disk_checked_at = 0.0

    def start(self, states: dict[int, Snapshot]) -> None:
        """Connect (here, so a failure raises to the caller) and start the thread."""
        self._conn = self._engine.connect()
        sizes = load_ledger_bytes_on(self._conn)
        self._ledgers = {
            lid: [lac, last, fenced, sizes.get(lid, 0)]
            for lid, (lac, last, fenced) in states.items()
        }
        self._purging = set(load_purging_on(self._conn))
        # Free pages a crash or an older version left are given back too.
        raw = self._conn.connection.driver_connection
        self._vacuum_due = int(raw.execute("PRAGMA freelist_count").fetchone()[0]) > 0
        self._metrics.purging_ledgers.set(len(self._purging))
        self._thread.start()

    def submit(self, op: Op) -> None:
        """On the loop: keep ``op`` to commit it on the loop if the thread is idle and it
        is a small add, alone so far; else queue it (after the kept add, if any)."""
        if (
            self._kept is None
            and self._outstanding == 0
            and self._inline_open
            and isinstance(op, AddOp)
            and len(op.records) <= limits.INLINE_ENTRIES_MAX
            and op.payload_bytes <= limits.INLINE_BYTES_MAX
            and self._commit_s <= limits.INLINE_COMMIT_S_MAX
        ):
            self._kept = op
            self._loop.call_soon(self._commit_kept)
            return
        self._queue_kept()
        self._outstanding += 1
        self._queue.put(op)

    def _queue_kept(self) -> None:
        """Hand the add the loop kept to the thread, ahead of anything submitted later."""
        if self._kept is not None:
            self._outstanding += 1
            self._queue.put(self._kept)
            self._kept = None

    def _commit_kept(self) -> None:
        """On the loop: commit the kept add here, or queue it if the thread is busy."""
        op = self._kept
        if op is None:
            return  # queued for the thread meanwhile, behind or with other operations
        if not self._busy.acquire(blocking=False):
            self._queue_kept()  # the thread is still vacuuming after its last batch
            return
        self._kept = None
        self._on_loop = True
        try:
            self._commit_batch(self._conn, [op])
        except Exception as exc:  # noqa: BLE001 - every waiter gets the failure
            log.exception("group commit on the event loop failed")
            self._fail([op], exc)
        finally:
            self._on_loop = False
            self._busy.release()

    def _hand_back(
        self, changes: dict[int, Snapshot | None], results: list[tuple[asyncio.Future[Any], Any]]
    ) -> None:
        """Give a batch's results to the loop: directly when committed on it; from the
        thread by a thread-safe call, which also counts the operations as delivered."""
        if self._on_loop:
            self._deliver(changes, results)
        else:
            self._loop.call_soon_threadsafe(self._delivered, changes, results)

    def _delivered(
        self, changes: dict[int, Snapshot | None], results: list[tuple[asyncio.Future[Any], Any]]
    ) -> None:
        self._outstanding -= len(results)
        self._deliver(changes, results)

    async def stop(self) -> None:
        """On the loop: commit nothing more here and queue the add the loop kept; then
        the thread applies and commits everything queued so far, and ends."""
        self._inline_open = False
        self._queue_kept()
        await asyncio.to_thread(self._end_thread)

    def _end_thread(self) -> None:
        self._queue.put(_STOP)
        self._thread.join()

    # -- the thread ----------------------------------------------------------

    def _run(self) -> None:
        with self._conn as conn:
            while True:
                batch, stop = self._take_batch(self._background_wait_s())
                if batch:
                    with self._busy:
                        try:
                            self._commit_batch(conn, batch)
                        except Exception as exc:  # noqa: BLE001 - the thread must not die
                            log.exception("group commit writer error")
                            self._fail(batch, exc)
                if stop:
                    return
                if self._background_wait_s() == 0.0:
                    with self._busy:
                        self._background_step(conn)

    def _fail(self, batch: list[Op], exc: Exception) -> None:
        """Answer every operation of ``batch`` with the failure (module docstring): a
        full disk tells the node first, on the loop, ahead of the answers."""
        err: QuireError
        if disk_full(exc):
            err = BookieReadOnly(
                f"the bookie's disk is full ({exc}): nothing of the request was stored; "
                "the bookie is read-only until room is freed"
            )
            if self._on_disk_full is not None:
                if self._on_loop:
                    self._on_disk_full()
                else:
                    self._loop.call_soon_threadsafe(self._on_disk_full)
        else:
            err = BookieUnavailable(f"storage failure: {type(exc).__name__}: {exc}")
        self._hand_back({}, [(op.future, err) for op in batch])

    def _take_batch(self, wait_s: float | None = None) -> tuple[list[Op], bool]:
        """Wait for the first operation (at most ``wait_s``; None: as long as it takes),
        then drain what is queued, within the bounds."""
        first = self._held
        if first is None:
            try:
                if wait_s is None:
                    first = self._queue.get()
                elif wait_s > 0:
                    first = self._queue.get(timeout=wait_s)
                else:
                    first = self._queue.get_nowait()
            except queue.Empty:
                return [], False
        self._held = None
        if first is _STOP:
            return [], True
        batch = [first]
        fences = isinstance(first, FenceOp)
        entries = len(first.records) if isinstance(first, AddOp) else 1
        size = first.payload_bytes if isinstance(first, AddOp) else 0
        while entries < limits.GROUP_COMMIT_ENTRIES_MAX and size < limits.GROUP_COMMIT_BYTES_MAX:
            try:
                op = self._queue.get_nowait()
            except queue.Empty:
                break
            if op is _STOP:
                return batch, True
            if isinstance(op, FenceOp) != fences:
                # Fences commit on their own (module docstring); keep queue order.
                self._held = op
                break
            if isinstance(op, AddOp):
                if entries + len(op.records) > limits.GROUP_COMMIT_ENTRIES_MAX or (
                    size + op.payload_bytes > limits.GROUP_COMMIT_BYTES_MAX
                ):
                    self._held = op
                    break
                entries += len(op.records)
                size += op.payload_bytes
            else:
                entries += 1
            batch.append(op)
        return batch, False

    def _commit_batch(self, conn: Any, batch: list[Op]) -> None:
        synced = self._journal_sync or isinstance(batch[0], FenceOp)
        if synced and not self._journal_sync:
            self._set_synchronous(conn, "FULL")
        try:
            self._commit_batch_on(conn, batch, synced)
        finally:
            if synced and not self._journal_sync:
                self._set_synchronous(conn, "NORMAL")

    @staticmethod
    def _set_synchronous(conn: Any, level: str) -> None:
        """Change the commit's sync level between transactions (on the driver connection,
        in autocommit mode, like the vacuum's pragmas)."""
        conn.connection.driver_connection.execute(f"PRAGMA synchronous={level}")

    def _commit_batch_on(self, conn: Any, batch: list[Op], synced: bool) -> None:
        results: list[tuple[asyncio.Future[Any], Any]] = []
        touched: set[int] = set()
        deleted: set[int] = set()
        rows: list[Row] = []
        written: dict[tuple[int, int], Row] = {}  # rows of this transaction, by key
        # The transaction goes straight to the pooled sqlite3 connection (module
        # docstring, "The driver connection"): SQLAlchemy's begin/execute/commit layers
        # cost about 70 us a commit here, most of it holding the GIL.
        db = conn.connection.driver_connection
        try:
            db.execute("BEGIN")
            try:
                for op in batch:
                    if isinstance(op, AddOp):
                        result = apply_add(
                            db, self._ledgers, self._purging, op, rows, written, touched
                        )
                        results.append((op.future, result))
                    else:
                        if rows:  # keep queue order: earlier adds before this operation
                            db.executemany(INSERT_ENTRY_SQL, rows)
                            rows = []
                        if isinstance(op, DeleteOp):
                            written.clear()  # everything written so far is flushed
                        answer = apply_other(db, self._ledgers, self._purging, op, touched, deleted)
                        results.append((op.future, answer))
                if rows:
                    db.executemany(INSERT_ENTRY_SQL, rows)
                stored = sum(r.stored for _, r in results if isinstance(r, AddOpResult))
                upserts = [
                    (lid, int(st[2]), st[0], st[1], st[3])
                    for lid in touched
                    if (st := self._ledgers.get(lid)) is not None
                ]
                if upserts:
                    db.executemany(UPSERT_LEDGER_SQL, upserts)
                started = time.perf_counter()
                db.execute("COMMIT")  # the one fsync of the batch
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            elapsed = time.perf_counter() - started
            self._commit_s += (elapsed - self._commit_s) * _COMMIT_S_WEIGHT
        except Exception as exc:  # noqa: BLE001 - every waiter gets the failure
            if disk_full(exc):
                log.warning("group commit of %d operations: the disk is full: %s", len(batch), exc)
            else:
                log.exception("group commit of %d operations failed", len(batch))
            self._reload()
            self._fail(batch, exc)
            return
        self._last_op_at = time.perf_counter()
        metrics = self._metrics
        metrics.commits.inc()
        if self._on_loop:
            metrics.loop_commits.inc()
        if synced:
            metrics.fsyncs.inc()
        metrics.fsync_latency.observe(elapsed)
        metrics.batch_size.observe(stored)
        metrics.batch_requests.observe(len(batch))
        if stored:
            metrics.adds.inc(stored)
        changes: dict[int, Snapshot | None] = {}
        for lid in touched | deleted:
            st = self._ledgers.get(lid)
            changes[lid] = None if st is None else (st[0], st[1], bool(st[2]))
        invariant(len(results) == len(batch), "one result per operation of the batch")
        # Deletes add to the purge and rewrites of a purging id take from it.
        metrics.purging_ledgers.set(len(self._purging))
        self._hand_back(changes, results)

    # -- the purge (module docstring, "The purge") -----------------------------

    def _background_wait_s(self) -> float | None:
        """Seconds until the next purge or vacuum step may run; None: nothing to do."""
        if not self._purging and not self._vacuum_due:
            return None
        return self._pacer.wait_s(time.perf_counter())

    def _background_step(self, conn: Any) -> None:
        """One purge chunk or vacuum step (the thread holds ``_busy``), then pace."""
        raw = conn.connection.driver_connection
        started = time.perf_counter()
        try:
            if self._purging:
                self._purge_chunk(raw)
            else:
                self._vacuum_step(raw)
        except Exception:  # noqa: BLE001 - the purge is retried; nothing is lost
            # A step changes no state before its commit (a chunk rolls back its own
            # transaction, a vacuum step is autocommit): nothing to reload.
            log.warning("purge of deleted ledgers failed; retrying", exc_info=True)
            self._pacer.next_at = time.perf_counter() + 1.0
            return
        ended = time.perf_counter()
        took = ended - started
        self._metrics.purge_seconds.inc(took)
        busy = (
            ended - self._last_op_at < limits.PURGE_IDLE_S
            or self._held is not None
            or not self._queue.empty()
        )
        self._pacer.ran(ended, took, busy)
        if self._on_vacuum is not None and (
            ended - self._disk_checked_at >= limits.PURGE_DISK_CHECK_S
            or not (self._purging or self._vacuum_due)
        ):
            self._disk_checked_at = ended
            self._loop.call_soon_threadsafe(self._on_vacuum)

    def _purge_chunk(self, raw: Any) -> None:
        """Delete one chunk of the lowest purging ledger's entries, in a transaction of
        its own with the purging row's count of bytes left; the one that finds the last of
        them ends the ledger's purge too."""
        lid = min(self._purging)
        size = self._chunk.size
        started = time.perf_counter()
        raw.execute("BEGIN")
        try:
            lengths = raw.execute(PURGE_CHUNK_SQL, (lid, size)).fetchall()
            did = len(lengths)
            done = did < size
            if done:
                raw.execute(DELETE_PURGING_SQL, (lid,))
            else:
                raw.execute(PURGED_BYTES_SQL, (sum(n for (n,) in lengths), lid))
            raw.execute("COMMIT")
        except BaseException:
            if raw.in_transaction:
                raw.execute("ROLLBACK")
            raise
        self._chunk.ran(did, time.perf_counter() - started)
        self._vacuum_due = True
        self._metrics.purged_entries.inc(did)
        if done:
            self._purging.discard(lid)
            self._metrics.purging_ledgers.set(len(self._purging))

    def _vacuum_step(self, raw: Any) -> None:
        """Give at most one step's free pages back to the file system; when none are
        left, checkpoint the write-ahead log and truncate it (the vacuum is over)."""
        # These pragmas go straight to the driver connection, in autocommit mode
        # (isolation_level None). ``execute`` steps a statement once, and each step
        # of incremental_vacuum frees one page; ``executescript`` steps it to the end.
        before = int(raw.execute("PRAGMA freelist_count").fetchone()[0])
        if before:
            size = self._pages.size
            started = time.perf_counter()
            raw.executescript(f"PRAGMA incremental_vacuum({size});")
            left = int(raw.execute("PRAGMA freelist_count").fetchone()[0])
            self._pages.ran(before - left, time.perf_counter() - started)
            self._metrics.vacuumed_pages.inc(max(0, before - left))
            if left:
                return
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        self._vacuum_due = False

    def _reload(self) -> None:
        try:
            states = load_ledgers_on(self._conn)
            sizes = load_ledger_bytes_on(self._conn)
        except Exception:  # noqa: BLE001 - keep the (more restrictive) state we have
            log.exception("could not reload ledger states after a failed commit")
            return
        fenced = {lid for lid, st in self._ledgers.items() if st[2]}
        self._ledgers = {
            lid: [lac, last, f or lid in fenced, sizes.get(lid, 0)]
            for lid, (lac, last, f) in states.items()
        }
        try:
            self._purging = set(load_purging_on(self._conn))
        except Exception:  # noqa: BLE001 - as above
            log.exception("could not reload the purging ledgers after a failed commit")
        self._metrics.purging_ledgers.set(len(self._purging))


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the store's size limit) is full."""
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC
