"""The running bookie: storage, group-commit writer, registration and disk watch.

Built by the app's lifespan (``start``) and torn down by it (``stop``); the
routes reach it through ``request.app.state.node``. ``start`` returns at once
(after locking the data dir): ZooKeeper, the cookie, the store and the
registration come up in the background, so ``/health`` can answer 503 while
ZooKeeper is unreachable (issue 7 item 10). Everything here runs on
the event loop except the writer thread and the read threads it owns.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bookie.collector import GarbageCollector
from bookie.cookie import check_cookie
from bookie.ledgers import LedgerIndex, LedgerView
from bookie.limits import (
    ADD_BYTES_IN_FLIGHT_MAX,
    KAZOO_REPEAT_WINDOW_S,
    ZK_CONNECT_ATTEMPT_S,
    ZK_RETRY_FIRST_S,
    ZK_RETRY_MAX_S,
)
from bookie.metrics import BookieMetrics
from bookie.operations import AddOp, AddOpResult, DeleteOp, FenceOp, SetLacOp, Snapshot
from bookie.storage import (
    Reader,
    create_writer_engine,
    load_ledgers,
    lock_data_dir,
    store_size_bytes,
    unlock_data_dir,
)
from bookie.writer import GroupCommitWriter
from services import native
from services.budget import ByteBudget
from services.errors import (
    CookieMismatch,
    MetadataUnavailable,
    QuireError,
    Unavailable,
    present,
)
from services.settings import BookieSettings
from services.wire.framing import FramedRecord
from services.zk import paths as zkpaths
from services.zk.registration import Registration
from services.zk.store import MetadataStore

log = logging.getLogger(__name__)


class RepeatFilter(logging.Filter):
    """Lets a message through once per ``window_s``: kazoo logs every failed connection
    attempt (several a second while ZooKeeper is down); our own back-off loop logs each
    of its attempts instead."""

    def __init__(self, window_s: float = KAZOO_REPEAT_WINDOW_S) -> None:
        super().__init__()
        self.window_s = window_s
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = str(record.msg)
        last = self._last.get(key)
        if last is not None and record.created - last < self.window_s:
            return False
        if len(self._last) >= 1000:
            self._last.clear()
        self._last[key] = record.created
        return True


_kazoo_filter = RepeatFilter()


class BookieNode:
    def __init__(self, settings: BookieSettings, metrics: BookieMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.data_dir = Path(settings.data_dir)
        self.bookie_id = settings.address
        # What it registers: HTTPS with TLS on (docs/security.md, "TLS").
        scheme = "http" if settings.tls_files is None else "https"
        self.address = f"{scheme}://{settings.address}"
        self.journal_sync = settings.journal_sync
        self.readonly_free_ratio = settings.readonly_free_ratio
        self.readonly = False
        self.free_ratio = 1.0
        self.free_bytes = 0
        self.total_bytes = 0
        # The free bytes a disk check found just after a commit failed on a full disk;
        # None while no such failure holds the bookie read-only (``disk_full``).
        self.full_at_free_bytes: int | None = None
        self.instance_id = ""
        self.index = LedgerIndex()
        self.metrics.lac_polls_waiting.set_function(lambda: self.index.polls_waiting)
        self.store: MetadataStore | None = None
        self.registration: Registration | None = None
        self.reader: Reader | None = None
        self._engine: Engine | None = None
        self._writer: GroupCommitWriter | None = None
        self._disk_task: asyncio.Task[None] | None = None
        self.collector: GarbageCollector | None = None
        self._gc_task: asyncio.Task[None] | None = None
        self.add_budget = ByteBudget(ADD_BYTES_IN_FLIGHT_MAX)
        self._locked = False
        self.not_open_reason = (
            f"the bookie is starting (connecting to ZooKeeper at {settings.zk}, checking its "
            "cookie, opening its store): not serving data yet"
        )
        self._is_open = False
        self._open_task: asyncio.Task[None] | None = None
        self.refusal: str | None = None
        self.on_refused: Callable[[], None] | None = None

    # -- life cycle ----------------------------------------------------------

    async def start(self) -> None:
        """Lock the data dir (a refusal raises at once), then open in the background.

        The HTTP server serves ``/health`` (503) and ``/metrics`` from the start;
        ``_open_in_background`` connects to ZooKeeper with back-off, verifies the
        cookie, opens the store and registers. Until the store is open, /v1 calls
        answer 503 ``unavailable``. A refusal found there (``CookieMismatch``, a
        store that cannot be opened) is kept in ``refusal`` and ``on_refused`` is
        called: the process then stops and exits 3 (bookie.__main__)."""
        lock_data_dir(self.data_dir)
        self._locked = True
        kazoo_log = logging.getLogger("kazoo.client")
        if _kazoo_filter not in kazoo_log.filters:
            kazoo_log.addFilter(_kazoo_filter)
        self._open_task = asyncio.create_task(self._open_in_background(), name="bookie-open")

    async def _open_in_background(self) -> None:
        try:
            await self._connect()
            await self._open()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a refusal, reported once
            if isinstance(exc, CookieMismatch):
                message = exc.message
            else:
                log.exception("the bookie cannot open its store")
                message = f"cannot open the store: {type(exc).__name__}: {exc}"
            self.refusal = message
            self.not_open_reason = f"the bookie refused to start: {message}"
            if self.on_refused is not None:
                self.on_refused()

    async def _connect(self) -> None:
        """Connect to ZooKeeper and verify the cookie, retrying with back-off while
        ZooKeeper cannot be reached or refuses the bookie's principal; each failed attempt
        is logged once."""
        s = self.settings
        delay = ZK_RETRY_FIRST_S
        attempt = 0
        while True:
            attempt += 1
            store = MetadataStore(
                s.zk_hosts, session_timeout_s=s.zk_session_timeout, credentials=s.zk_credentials
            )
            self.metrics.zookeeper.watch(store)
            try:
                await store.start(ZK_CONNECT_ATTEMPT_S)
                self.instance_id = await check_cookie(
                    store, self.bookie_id, self.data_dir, s.zk, s.zk_root
                )
            except MetadataUnavailable as exc:
                await store.stop()
                self.not_open_reason = (
                    f"the bookie cannot use ZooKeeper at {s.zk} yet (attempt {attempt}, "
                    "retrying; its log says why): not serving data"
                )
                # The error's own words: ZooKeeper out of reach, or refusing our principal
                # (wrong credentials, or none for a locked tree).
                log.warning(
                    "%s; retrying",
                    exc.message,
                    extra={
                        "fields": {
                            "zk": s.zk,
                            "attempt": attempt,
                            "retry_in_s": delay,
                        }
                    },
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, ZK_RETRY_MAX_S)
                continue
            except BaseException:
                await store.stop()
                raise
            self.store = store
            return

    async def _open(self) -> None:
        s = self.settings
        store = present(self.store, "the store is connected before opening")
        self._engine = await asyncio.to_thread(create_writer_engine, self.data_dir, s.journal_sync)
        states = await asyncio.to_thread(load_ledgers, self._engine)
        self.index.apply(dict(states))
        self.metrics.ledgers.set(len(states))
        writer = GroupCommitWriter(
            self._engine,
            s.journal_sync,
            self.metrics,
            asyncio.get_running_loop(),
            self._deliver,
            on_vacuum=self.check_disk,
            on_disk_full=self.disk_full,
        )
        writer.start(states)
        self._writer = writer
        self.reader = Reader(self.data_dir)
        self.check_disk()
        self.registration = Registration(
            store, zkpaths.bookie(self.bookie_id), self.instance_id, self._registered, "bookie"
        )
        await self.registration.start()
        self._disk_task = asyncio.create_task(self._watch_disk(), name="bookie-disk-watch")
        self.collector = GarbageCollector(
            grace_s=s.gc_grace_s,
            interval_s=s.gc_interval_s,
            deletes_per_pass=s.gc_deletes_per_pass,
            index=self.index,
            store=store,
            reader=self.reader,
            delete_if=self.delete_if,
            metrics=self.metrics,
        )
        if s.gc_interval_s > 0:
            self._gc_task = asyncio.create_task(
                self.collector.run_forever(), name="bookie-garbage-collection"
            )
        self._is_open = True
        log.info(
            "bookie started",
            extra={
                "fields": {
                    "bookie_id": self.bookie_id,
                    "data_dir": str(self.data_dir),
                    "instance_id": self.instance_id,
                    "rack": s.rack,
                    "ledgers": len(states),
                    "journal_sync": s.journal_sync,
                    "native": native.STATUS,
                }
            },
        )

    def closing(self) -> None:
        """Shutdown began: long-polls answer now, so the server can drain quickly."""
        self.index.close()

    async def stop(self) -> None:
        self._is_open = False
        self.not_open_reason = "the bookie is stopping"
        self.index.close()
        if self._open_task is not None:
            self._open_task.cancel()
            try:
                await self._open_task
            except asyncio.CancelledError:
                pass
            self._open_task = None
        for task in (self._disk_task, self._gc_task):
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        self._disk_task = self._gc_task = None
        if self.registration is not None:
            await self.registration.stop()
        if self._writer is not None:
            await self._writer.stop()
            self._writer = None
        if self.reader is not None:
            await asyncio.to_thread(self.reader.close)
            self.reader = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        if self.store is not None:
            await self.store.stop()
            self.store = None
        if self._locked:
            unlock_data_dir(self.data_dir)
            self._locked = False

    def open_reader(self) -> Reader:
        """The store's readers; 503 ``unavailable`` once they are closed (a request that
        passed ``check_open`` just before the stop began)."""
        reader = self.reader
        if reader is None:
            raise Unavailable(self.not_open_reason)
        return reader

    def check_open(self) -> None:
        """Raise 503 ``unavailable`` while the store is not open (before the cookie was
        verified with ZooKeeper, or after the stop began)."""
        if not self._is_open:
            raise Unavailable(self.not_open_reason)

    @property
    def ready(self) -> bool:
        return self.registration is not None and self.registration.registered

    # -- the write path ------------------------------------------------------

    def _deliver(
        self,
        changes: dict[int, Snapshot | None],
        results: list[tuple[asyncio.Future[Any], Any]],
    ) -> None:
        """On the loop, after a commit: publish ledger states, then answer the waiters."""
        if changes:
            self.index.apply(changes)
            self.metrics.ledgers.set(len(self.index))
            if self.collector is not None:
                self.collector.rules.written(changes)
        for future, result in results:
            if not future.done():
                future.set_result(result)

    async def _submit(self, make_op: Any) -> Any:
        if self._writer is None:
            raise Unavailable(self.not_open_reason)
        future = asyncio.get_running_loop().create_future()
        self._writer.submit(make_op(future))
        result = await future
        if isinstance(result, QuireError):
            raise result
        return result

    async def add(self, records: list[FramedRecord], payload_bytes: int) -> AddOpResult:
        """Store framed records; answers once they are committed (and fsynced).

        The caller holds ``add_budget`` for the request's body (bookie.fastpath)."""
        result: AddOpResult = await self._submit(lambda f: AddOp(records, f, payload_bytes))
        return result

    async def fence(self, ledger_id: int) -> LedgerView:
        """Fence a ledger: the flag is on disk before this returns."""
        state = await self._submit(lambda f: FenceOp(ledger_id, f))
        self.metrics.fence_requests.inc()
        return LedgerView(ledger_id, *state)

    async def ledger_answer(self, view: LedgerView) -> dict[str, Any]:
        """The JSON answer about a ledger (LAC reads, fence, LAC updates): its state, its
        lengths (at the LAC and at the last entry stored here, for recovery) and this
        bookie's instance id (a reformatted bookie is a new instance)."""
        reader = self.open_reader()
        lac_length, length = await asyncio.get_running_loop().run_in_executor(
            reader.executor, reader.lengths, view.ledger_id, view.lac, view.last_entry_id
        )
        return {
            **view.to_json(),
            "length": length,
            "lac_length": lac_length,
            "instance_id": self.instance_id,
        }

    async def update_lac(self, ledger_id: int, lac: int) -> LedgerView:
        state = await self._submit(lambda f: SetLacOp(ledger_id, lac, f))
        return LedgerView(ledger_id, *state)

    async def delete(self, ledger_id: int) -> None:
        await self._submit(lambda f: DeleteOp(ledger_id, f))

    async def delete_if(self, ledger_id: int, state: Snapshot) -> bool:
        """Delete the ledger only if its state is still ``state`` (garbage collection,
        bookie/collector.py): True when deleted, False when a write changed it since."""
        deleted: bool = await self._submit(lambda f: DeleteOp(ledger_id, f, if_state=state))
        return deleted

    def open_collector(self) -> GarbageCollector:
        """The garbage collector; 503 ``unavailable`` until the store is open."""
        collector = self.collector
        if collector is None:
            raise Unavailable(self.not_open_reason)
        return collector

    # -- disk space and read-only mode ---------------------------------------

    def check_disk(self) -> None:
        """Measure free space; switch read-only when it falls under the threshold and
        back when it is there again; publish the state in ZooKeeper.

        After a commit found the disk full (``disk_full``) the bookie stays read-only
        until there is more free space than just after that failure, as well as free
        space over the threshold: a disk can fill before the threshold is crossed (a
        small disk, a large write), and the threshold alone would turn it writable
        again at once."""
        usage = shutil.disk_usage(self.data_dir)
        self.free_bytes, self.total_bytes = usage.free, usage.total
        self.free_ratio = usage.free / usage.total if usage.total else 0.0
        if self.full_at_free_bytes is not None and self.free_bytes > self.full_at_free_bytes:
            self.full_at_free_bytes = None
        readonly = self.free_ratio < self.readonly_free_ratio or self.full_at_free_bytes is not None
        if readonly != self.readonly:
            self.readonly = readonly
            log.warning(
                "bookie is now %s",
                "read-only" if readonly else "writable",
                extra={
                    "fields": {
                        "free_ratio": round(self.free_ratio, 4),
                        "readonly_free_ratio": self.readonly_free_ratio,
                    }
                },
            )
        if self.registration is not None:
            self.registration.refresh()
        self.metrics.read_only.set(1 if self.readonly else 0)
        self.metrics.free_ratio.set(self.free_ratio)
        self.metrics.free_bytes.set(self.free_bytes)
        self.metrics.total_bytes.set(self.total_bytes)
        self.metrics.bytes_stored.set(store_size_bytes(self.data_dir))

    def disk_full(self) -> None:
        """A commit failed on a full disk (bookie/writer.py): read-only at once, until
        room is freed (``check_disk``)."""
        self.full_at_free_bytes = shutil.disk_usage(self.data_dir).free
        self.check_disk()

    def set_readonly_threshold(self, ratio: float) -> None:
        self.readonly_free_ratio = ratio
        self.check_disk()

    async def _watch_disk(self) -> None:
        interval = self.settings.disk_check_interval
        while True:
            try:
                self.check_disk()
            except OSError:
                log.warning("free-disk check failed", exc_info=True)
            await asyncio.sleep(interval)

    @property
    def state(self) -> str:
        return "readonly" if self.readonly else "writable"

    def _registered(self) -> dict[str, Any]:
        """What the bookie's registration znode says (services/zk/registry.py reads it)."""
        return {
            "id": self.bookie_id,
            "address": self.address,
            "state": self.state,
            "rack": self.settings.rack,
        }

    def info(self) -> dict[str, Any]:
        return {
            "bookie_id": self.bookie_id,
            "address": self.address,
            "state": self.state,
            "instance_id": self.instance_id,
            "rack": self.settings.rack,
            "free_ratio": self.free_ratio,
            "readonly_free_ratio": self.readonly_free_ratio,
            "journal_sync": self.journal_sync,
            "ledgers": len(self.index),
            "free_bytes": self.free_bytes,
            "total_bytes": self.total_bytes,
            "entries_added": int(self.metrics.adds._value.get()),
        }
