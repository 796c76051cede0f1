"""The asyncio runner of write handles (the protocol core's ``WriteHandle``).

The core decides; this module only carries out its effects and feeds the
results back (STYLE.md §1): ``SendAdds`` go to the per-bookie senders
(batched across ledgers), ``WriteMetadata``/``ReadMetadata`` to the ledger
store, ``ReadWritableBookies`` to the registry view, ``SendLac`` to the
bookies (fire and forget), and ``AckAdds``/``FailAdds``/``CloseDone``/
``CloseFailed`` resolve the futures the routes await. Events are fed one at a
time on the event loop; an effect that answers synchronously is fed back with
``call_soon`` so ``handle`` is never re-entered. After every event the runner
arms a timer for ``next_deadline()`` and feeds ``Tick`` then.

Back-pressure: an add waits (bounded by ``admission_wait_s``) until the handle
has room for it, so a slow bookie slows clients instead of growing memory.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from gateway.context import GatewayContext
from gateway.runners.base import EffectRunner
from gateway.senders import SenderTable
from services.errors import Unavailable
from services.protocol import messages as m
from services.protocol.metadata import LedgerMetadata
from services.protocol.writer import HandleState, WriteHandle, WriterLimits

log = logging.getLogger(__name__)

ADMISSION_WAIT_S = 30.0
# An idle ledger's explicit LAC update goes to every bookie of its ensemble (coalesced
# across ledgers per bookie, gateway/senders.py); with many ledgers each written a few
# times a second, a 20 ms idle delay sent one after nearly every add (39 % of the
# gateway's CPU with 64 ledgers, measured before coalescing). Tailing readers see the
# last entry within this delay; busy ledgers carry the LAC on every add anyway.
EXPLICIT_LAC_DELAY_MS = 200
WRITER_LIMITS = WriterLimits(explicit_lac_delay_ms=EXPLICIT_LAC_DELAY_MS)
CLOSED_HANDLES_KEPT_MAX = 100_000


def now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(frozen=True, slots=True)
class AddOutcome:
    first_entry_id: int
    last_entry_id: int
    lac: int


class HandleRunner(EffectRunner):
    def __init__(self, ctx: GatewayContext, senders: SenderTable, handle: WriteHandle) -> None:
        super().__init__(ctx)
        self.senders = senders
        self.handle = handle
        self._ids = itertools.count()
        self._adds: dict[int, asyncio.Future[AddOutcome]] = {}
        self._closes: dict[int, asyncio.Future[tuple[LedgerMetadata, int]]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self.closed_metadata: LedgerMetadata | None = None
        self._ensemble_changes_seen = 0
        # Called once the handle is no longer live and nobody awaits it (HandleTable).
        self.on_retired: Callable[[HandleRunner], None] | None = None

    @property
    def ledger_id(self) -> int:
        return self.handle.ledger_id

    @property
    def lac(self) -> int:
        return self.handle.lac

    @property
    def live(self) -> bool:
        return self.handle.state in (HandleState.OPEN, HandleState.CLOSING)

    # ------------------------------------------------------------ requests

    async def add(self, payloads: tuple[bytes, ...]) -> AddOutcome:
        await self._admit(len(payloads), sum(map(len, payloads)))
        rid = next(self._ids)
        future: asyncio.Future[AddOutcome] = asyncio.get_running_loop().create_future()
        self._adds[rid] = future
        self._feed(m.AddRequested(rid, payloads, now_ms()))
        return await future

    async def close(self) -> tuple[LedgerMetadata, int]:
        rid = next(self._ids)
        future: asyncio.Future[tuple[LedgerMetadata, int]] = (
            asyncio.get_running_loop().create_future()
        )
        self._closes[rid] = future
        self._feed(m.CloseRequested(rid, now_ms()))
        return await future

    async def wait_lac(self, after: int, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for the LAC to pass ``after``; return the LAC."""

        try:
            await asyncio.wait_for(
                self._wait_until(lambda: self.lac > after or not self.live), timeout_s
            )
        except TimeoutError:
            pass
        return self.lac

    async def _wait_until(self, predicate) -> None:  # type: ignore[no-untyped-def]
        """Wait until ``predicate()`` holds; re-checked after every event fed."""
        loop = asyncio.get_running_loop()
        while not predicate():
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def _admit(self, entries: int, size: int) -> None:
        """Wait until the handle has room (back-pressure), bounded in time."""
        if not self.live:
            return  # the handle answers with its own error

        def fits() -> bool:
            room_entries, room_bytes = self.handle.room()
            idle = self.handle.pending_entries == 0
            return not self.live or idle or (entries <= room_entries and size <= room_bytes)

        if fits():
            return
        try:
            await asyncio.wait_for(self._wait_until(fits), ADMISSION_WAIT_S)
        except TimeoutError as exc:
            raise Unavailable(
                f"ledger {self.ledger_id}: too many adds in flight; retry later"
            ) from exc

    # ------------------------------------------------------------ the loop

    def _handle(self, event: m.Event) -> list[m.Effect]:
        return self.handle.handle(event)

    def _after_feed(self) -> None:
        changes = self.handle.ensemble_changes
        if changes > self._ensemble_changes_seen:
            self.ctx.metrics.ensemble_changes.inc(changes - self._ensemble_changes_seen)
            self._ensemble_changes_seen = changes
        self._arm_timer()
        self._notify()
        if self.on_retired is not None and not self.live and not self._adds and not self._closes:
            self.on_retired(self)

    def _apply(self, effect: m.Effect) -> None:
        metrics = self.ctx.metrics
        if isinstance(effect, m.SendAdds):
            bookie = effect.bookie
            metrics.adds_in_flight.inc(len(effect.records))

            def done(stored, rejected, reason, bookie=bookie, n=len(effect.records)):  # type: ignore[no-untyped-def]
                metrics.adds_in_flight.dec(n)
                self._feed(m.BookieAddsDone(bookie, stored, rejected, reason))

            self.senders.get(bookie).send(effect.records, done)
        elif isinstance(effect, m.AckAdds):
            future = self._adds.pop(effect.request_id, None)
            if future is not None and not future.done():
                future.set_result(
                    AddOutcome(effect.first_entry_id, effect.last_entry_id, effect.lac)
                )
        elif isinstance(effect, m.FailAdds):
            future = self._adds.pop(effect.request_id, None)
            if future is not None and not future.done():
                future.set_exception(effect.exception())
        elif isinstance(effect, m.ReadWritableBookies):
            self._feed_soon(m.WritableBookies(tuple(self.ctx.writable_bookies())))
        elif isinstance(effect, m.SendLac):
            for bookie in effect.bookies:
                self.senders.lac(bookie).update(effect.ledger_id, effect.lac)
        elif isinstance(effect, m.CloseDone):
            self.closed_metadata = effect.metadata
            future = self._closes.pop(effect.request_id, None)
            if future is not None and not future.done():
                future.set_result((effect.metadata, effect.version))
        elif isinstance(effect, m.CloseFailed):
            future = self._closes.pop(effect.request_id, None)
            if future is not None and not future.done():
                future.set_exception(effect.exception())
        else:
            log.error("unexpected effect %r", effect)

    def _arm_timer(self) -> None:
        deadline = self.handle.next_deadline()
        if deadline == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is None:
            return
        delay_s = max(0.0, (deadline - now_ms()) / 1000)
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        self._feed(m.Tick(now_ms()))

    def _notify(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for future in [*self._adds.values(), *self._closes.values()]:
            if not future.done():
                future.set_exception(Unavailable("the gateway is shutting down"))
        await self._cancel_tasks()


class HandleTable:
    """The write handles this gateway holds, by ledger id.

    Handles of ledgers this gateway closed are kept (bounded, oldest dropped
    first) so a second close returns the same object and an add answers
    ``ledger_closed`` rather than ``not_writer``."""

    def __init__(self, ctx: GatewayContext) -> None:
        self.ctx = ctx
        self.senders = SenderTable(ctx.bookie)
        self._live: dict[int, HandleRunner] = {}
        self._closed: OrderedDict[int, HandleRunner] = OrderedDict()

    def open(self, metadata: LedgerMetadata, version: int, digest_key: bytes) -> HandleRunner:
        handle = WriteHandle(
            metadata,
            version,
            rng=self.ctx.rng,
            digest_key=digest_key,
            limits=WRITER_LIMITS,
            now=now_ms(),
        )
        runner = HandleRunner(self.ctx, self.senders, handle)
        runner.on_retired = self._retire
        self._live[metadata.ledger_id] = runner
        self.ctx.metrics.open_handles.set(len(self._live))
        return runner

    def get(self, ledger_id: int) -> HandleRunner | None:
        runner = self._live.get(ledger_id)
        if runner is not None and not runner.live and not runner._adds and not runner._closes:
            self._retire(runner)
        return self._live.get(ledger_id) or self._closed.get(ledger_id)

    def _retire(self, runner: HandleRunner) -> None:
        """Move a handle that is no longer live from the live table to the bounded table
        of closed ones: as soon as it stops being live (``on_retired``), not only on the
        next lookup, so handles closed or fenced and never looked up again do not pile
        up in the unbounded live table."""
        if self._live.get(runner.ledger_id) is not runner:
            return
        self._live.pop(runner.ledger_id, None)
        self._closed[runner.ledger_id] = runner
        while len(self._closed) > CLOSED_HANDLES_KEPT_MAX:
            self._closed.popitem(last=False)
        self.ctx.metrics.open_handles.set(len(self._live))

    def forget(self, ledger_id: int) -> None:
        self._live.pop(ledger_id, None)
        self._closed.pop(ledger_id, None)
        self.ctx.metrics.open_handles.set(len(self._live))

    @property
    def live_count(self) -> int:
        """Write handles held and still live."""
        return len(self._live)

    def live(self, ledger_id: int) -> HandleRunner | None:
        """The live write handle of the ledger, if this gateway holds one."""
        runner = self.get(ledger_id)
        return runner if runner is not None and runner.live else None

    def writer_lac(self, ledger_id: int) -> int | None:
        """The LAC of this gateway's live write handle of the ledger, else None."""
        runner = self.live(ledger_id)
        return runner.lac if runner is not None else None

    async def aclose(self) -> None:
        runners = [*self._live.values(), *self._closed.values()]
        await asyncio.gather(*(r.aclose() for r in runners), return_exceptions=True)
        await self.senders.aclose()
