"""The running bookie: storage, group-commit writer, registration and disk watch.

Built by the app's lifespan (``start``) and torn down by it (``stop``); the
routes reach it through ``request.app.state.node``. Everything here runs on
the event loop except the writer thread and the read threads it owns.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bookie.budget import ByteBudget
from bookie.cookie import check_cookie
from bookie.ledgers import LedgerIndex, LedgerView
from bookie.metrics import BookieMetrics
from bookie.registration import Registration
from bookie.storage import (
    Reader,
    create_writer_engine,
    load_ledgers,
    lock_data_dir,
    store_size_bytes,
    unlock_data_dir,
)
from bookie.writer import AddOp, AddResult, DeleteOp, FenceOp, GroupCommitWriter, LacOp
from services.errors import QuireError, Unavailable
from services.settings import BookieSettings
from services.wire.framing import Record
from services.zk.store import MetadataStore

log = logging.getLogger(__name__)

# Body bytes of add requests in flight (read, queued or being committed); further
# adds wait before reading their bodies (STYLE.md §5, bookie.budget).
ADD_BYTES_IN_FLIGHT_MAX = 64 * 1024 * 1024
ZK_START_TIMEOUT_S = 30.0


class BookieNode:
    def __init__(self, settings: BookieSettings, metrics: BookieMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.data_dir = Path(settings.data_dir)
        self.bookie_id = settings.address
        self.address = f"http://{settings.address}"
        self.journal_sync = settings.journal_sync
        self.readonly_free_ratio = settings.readonly_free_ratio
        self.readonly = False
        self.free_ratio = 1.0
        self.instance_id = ""
        self.index = LedgerIndex()
        self.store: MetadataStore | None = None
        self.registration: Registration | None = None
        self.reader: Reader | None = None
        self._engine: Engine | None = None
        self._writer: GroupCommitWriter | None = None
        self._disk_task: asyncio.Task | None = None
        self.add_budget = ByteBudget(ADD_BYTES_IN_FLIGHT_MAX)
        self._locked = False
        self.not_open_reason = "the bookie is starting: not serving data yet"

    # -- life cycle ----------------------------------------------------------

    async def start(self) -> None:
        """Lock the data dir, check the cookie, open the store, register. On failure
        everything already started is stopped again."""
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        s = self.settings
        lock_data_dir(self.data_dir)
        self._locked = True
        self.store = MetadataStore(s.zk_hosts, session_timeout_s=s.zk_session_timeout)
        await self.store.start(ZK_START_TIMEOUT_S)
        self.instance_id = await check_cookie(
            self.store, self.bookie_id, self.data_dir, s.zk, s.zk_root
        )
        self._engine = await asyncio.to_thread(create_writer_engine, self.data_dir, s.journal_sync)
        states = await asyncio.to_thread(load_ledgers, self._engine)
        self.index = LedgerIndex(states)
        self.metrics.ledgers.set(len(states))
        writer = GroupCommitWriter(
            self._engine,
            s.journal_sync,
            self.metrics,
            asyncio.get_running_loop(),
            self._deliver,
            on_vacuum=self.check_disk,
        )
        writer.start(states)
        self._writer = writer
        self.reader = Reader(self.data_dir)
        self.check_disk()
        self.registration = Registration(self.store, self.bookie_id, self.address, self.instance_id)
        self.registration.set_state("readonly" if self.readonly else "writable")
        await self.registration.start()
        self._disk_task = asyncio.create_task(self._watch_disk(), name="bookie-disk-watch")
        log.info(
            "bookie started",
            extra={
                "fields": {
                    "bookie_id": self.bookie_id,
                    "data_dir": str(self.data_dir),
                    "instance_id": self.instance_id,
                    "ledgers": len(states),
                    "journal_sync": s.journal_sync,
                }
            },
        )

    def closing(self) -> None:
        """Shutdown began: long-polls answer now, so the server can drain quickly."""
        self.index.close()

    async def stop(self) -> None:
        self.index.close()
        if self._disk_task is not None:
            self._disk_task.cancel()
            try:
                await self._disk_task
            except asyncio.CancelledError:
                pass
            self._disk_task = None
        if self.registration is not None:
            await self.registration.stop()
        if self._writer is not None:
            await asyncio.to_thread(self._writer.stop)
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

    def check_open(self) -> None:
        """Raise 503 ``unavailable`` while the store is not open (before the cookie was
        verified with ZooKeeper, or after the stop began)."""
        if self._writer is None:
            raise Unavailable(self.not_open_reason)

    @property
    def ready(self) -> bool:
        return self.registration is not None and self.registration.registered

    # -- the write path ------------------------------------------------------

    def _deliver(self, changes: dict, results: list[tuple[asyncio.Future, Any]]) -> None:
        """On the loop, after a commit: publish ledger states, then answer the waiters."""
        if changes:
            self.index.apply(changes)
            self.metrics.ledgers.set(len(self.index))
        for future, result in results:
            if not future.done():
                future.set_result(result)

    async def _submit(self, make_op: Any) -> Any:
        if self._writer is None:
            raise QuireError("the bookie is not running")
        future = asyncio.get_running_loop().create_future()
        self._writer.submit(make_op(future))
        result = await future
        if isinstance(result, QuireError):
            raise result
        return result

    async def add(self, records: list[Record], payload_bytes: int) -> AddResult:
        """Store framed records; answers once they are committed (and fsynced).

        The caller holds ``add_budget`` for the request's body (bookie.fastpath)."""
        return await self._submit(lambda f: AddOp(records, f, payload_bytes))

    async def fence(self, ledger_id: int) -> LedgerView:
        """Fence a ledger: the flag is on disk before this returns."""
        state = await self._submit(lambda f: FenceOp(ledger_id, f))
        return LedgerView(ledger_id, *state)

    async def update_lac(self, ledger_id: int, lac: int) -> LedgerView:
        state = await self._submit(lambda f: LacOp(ledger_id, lac, f))
        return LedgerView(ledger_id, *state)

    async def delete(self, ledger_id: int) -> None:
        await self._submit(lambda f: DeleteOp(ledger_id, f))

    # -- disk space and read-only mode ---------------------------------------

    def check_disk(self) -> None:
        """Measure free space; switch read-only when it falls under the threshold and
        back when it is there again; publish the state in ZooKeeper."""
        usage = shutil.disk_usage(self.data_dir)
        self.free_ratio = usage.free / usage.total if usage.total else 0.0
        readonly = self.free_ratio < self.readonly_free_ratio
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
            self.registration.set_state(self.state)
        self.metrics.read_only.set(1 if self.readonly else 0)
        self.metrics.free_ratio.set(self.free_ratio)
        self.metrics.bytes_stored.set(store_size_bytes(self.data_dir))

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

    def info(self) -> dict:
        return {
            "bookie_id": self.bookie_id,
            "address": self.address,
            "state": self.state,
            "instance_id": self.instance_id,
            "free_ratio": self.free_ratio,
            "readonly_free_ratio": self.readonly_free_ratio,
            "journal_sync": self.journal_sync,
        }
