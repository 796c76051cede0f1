"""The asyncio runner of write handles (the protocol core's ``WriteHandle``).

The core decides; this module only carries out its effects and feeds the
results back (docs/style.md §1): ``SendAdds`` go to the per-bookie senders
(batched across ledgers), ``WriteMetadata``/``ReadMetadata`` to the ledger
store, ``ReadWritableBookies`` to the registry view, ``SendLac`` to the
bookies (fire and forget), and ``AckAdds``/``FailAdds``/``CloseDone``/
``CloseFailed`` resolve the futures the routes await. Events are fed one at a
time on the event loop; an effect that answers synchronously is fed back with
``call_soon`` so ``handle`` is never re-entered. After every event the runner
arms a timer for ``next_deadline()`` and feeds ``Tick`` then.

Back-pressure: an add waits (bounded by ``admission_wait_ms``) until the handle
has room for it and so has the add queue of every bookie of its ensemble
(services/ledger_client/senders.py), so a slow or busy bookie slows clients instead of growing
memory or being taken for a failed one; past the wait the add fails as
unavailable (503, retriable).
The table of handles is ``services.ledger_client.handles.HandleTable``.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from services.errors import QuireError, Unavailable, present
from services.ledger_client.context import LedgerClientContext
from services.ledger_client.runners.base import EffectRunner
from services.ledger_client.senders import AddAnswer, BookieSender, SenderTable
from services.protocol import messages as m
from services.protocol.metadata import LedgerMetadata
from services.protocol.writer import HandleState, ParkedWriter, WriteHandle
from services.wire.framing import FramedRecord


@dataclass(frozen=True, slots=True)
class AddOutcome:
    first_entry_id: int
    last_entry_id: int
    lac: int


@dataclass(frozen=True, slots=True)
class AddsDone:
    """The callback of a handle's adds to one bookie. Equal for equal (handle, bookie),
    so the sender groups a request's records of one handle into one call
    (services/ledger_client/senders.py ``_by_callback``) without the handle keeping a
    callback per bookie: a gateway holds tens of thousands of idle handles
    (benchmarks/README.md, "Many open things")."""

    runner: HandleRunner
    bookie: str

    def __call__(self, answer: AddAnswer) -> None:
        self.runner._on_adds_done(self.bookie, answer)


class HandleRunner(EffectRunner):
    """Runs one ledger's write handle. While nothing happens the handle is parked
    (services/protocol/writer.py, "Parking"): the runner keeps only its ``ParkedWriter``
    and drops the handle and its own per-handle containers; the next event, or anything
    asking for ``handle``, resumes it in place, so whoever holds the runner (the handle
    table, log writers, streams) keeps holding the right one. ``lac``, ``live``,
    ``metadata``, ``length`` and ``next_entry_id`` answer from either form without
    resuming. Slotted: a gateway holds one per open ledger (benchmarks/README.md,
    "Many open things")."""

    __slots__ = (
        "senders",
        "_writer",
        "_parked",
        "_next_request_id",
        "_adds",
        "_closes",
        "_waiters",
        "_admission",
        "closed_metadata",
        "_ensemble_changes_seen",
        "_ensemble",
        "_ensemble_senders",
        "_park_soon",
        "on_retired",
        "_stopped",
    )

    def __init__(self, ctx: LedgerClientContext, senders: SenderTable, handle: WriteHandle) -> None:
        super().__init__(ctx)
        self.senders = senders
        self._writer: WriteHandle | None = handle
        self._parked: ParkedWriter | None = None
        self._next_request_id = 0
        # The futures of the add and close requests fed and not yet answered, by request
        # id; None while there are none (an empty dict costs 64 bytes a handle).
        self._adds: dict[Hashable, asyncio.Future[AddOutcome]] | None = None
        self._closes: dict[Hashable, asyncio.Future[tuple[LedgerMetadata, int]]] | None = None
        # The waits on this handle (``_wait_until``), in arrival order; a dict so that a
        # wait that timed out leaves in O(1) (10,000 tailing polls may wait on one handle).
        # None while nobody waits.
        self._waiters: dict[asyncio.Future[None], None] | None = None
        # Adds waiting for room, in turn (``_admit``): the first is woken by ``_notify``.
        # None while no add waits: an empty deque holds about 600 bytes, and a gateway
        # holds tens of thousands of idle handles (benchmarks/README.md, "Many open things").
        self._admission: collections.deque[asyncio.Future[None]] | None = None
        self.closed_metadata: LedgerMetadata | None = None
        self._ensemble_changes_seen = 0
        # The senders of the ensemble's bookies (``_admits``), for the ensemble they are of.
        self._ensemble: tuple[str, ...] = ()
        self._ensemble_senders: tuple[BookieSender, ...] = ()
        # A check for parking is scheduled (``handle`` resumed the handle outside a feed).
        self._park_soon = False
        # Called once the handle is no longer live and nobody awaits it (HandleTable).
        self.on_retired: Callable[[HandleRunner], None] | None = None
        # Why the runner was stopped (``aclose``): every request and wait then fails with it.
        self._stopped: QuireError | None = None
        self._park()  # a new ledger's handle is idle until its first add

    # ------------------------------------------------------------ parking

    @property
    def handle(self) -> WriteHandle:
        """The write handle, resumed if it was parked (and parked again once idle)."""
        handle = self._writer
        if handle is None:
            handle = self._resume()
            if not self._park_soon:
                # Asked from outside a feed (a read of the handle's state): park it again
                # after the caller's step if nothing came of it.
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:  # no loop to park it later on: it stays resumed
                    return handle
                self._park_soon = True
                loop.call_soon(self._park_later)
        return handle

    @property
    def parked(self) -> bool:
        return self._writer is None

    def _resume(self) -> WriteHandle:
        parked = present(self._parked, "a write runner with neither a handle nor a parked one")
        handle = self._writer = WriteHandle.resume(parked, rng=self.ctx.rng, now=self.ctx.clock())
        self._parked = None
        self._ensemble_changes_seen = 0
        return handle

    def _park_later(self) -> None:
        self._park_soon = False
        self._park()

    def _park(self) -> None:
        """Keep only the ``ParkedWriter`` of the handle when it is idle enough (the
        handle decides: ``WriteHandle.park``) and nothing of the runner's waits on it:
        no request awaits an answer, no add waits for room, no timer, no task."""
        handle = self._writer
        if (
            handle is None
            or self._adds
            or self._closes
            or self._admission
            or self._timer is not None
            or self._tasks
        ):
            return
        parked = handle.park()
        if parked is None:
            return
        self._parked, self._writer = parked, None
        self._adds = self._closes = None
        self._tasks = None
        self._ensemble, self._ensemble_senders = (), ()
        self._ensemble_changes_seen = 0

    @property
    def ledger_id(self) -> int:
        parked = self._parked
        return parked.ledger_id if parked is not None else self.handle.ledger_id

    @property
    def lac(self) -> int:
        parked = self._parked
        return parked.lac if parked is not None else self.handle.lac

    @property
    def live(self) -> bool:
        if self._stopped is not None:
            return False
        if self._parked is not None:
            return True  # only an OPEN handle parks, and it stays OPEN until resumed
        return self.handle.state in (HandleState.OPEN, HandleState.CLOSING)

    @property
    def metadata(self) -> LedgerMetadata:
        """The ledger's metadata as the handle last knew it."""
        parked = self._parked
        return parked.metadata if parked is not None else self.handle.metadata

    @property
    def length(self) -> int:
        """Total payload bytes of the entries up to the LAC."""
        parked = self._parked
        return parked.length if parked is not None else self.handle.length

    @property
    def next_entry_id(self) -> int:
        parked = self._parked
        return parked.next_entry_id if parked is not None else self.handle.next_entry_id

    @property
    def idle(self) -> bool:
        """No add or close request awaits an answer from this handle."""
        return not self._adds and not self._closes

    @property
    def retired(self) -> bool:
        """No longer live and nobody awaits it: the table may move it to the closed ones."""
        return not self.live and self.idle

    def _request_id(self) -> int:
        rid = self._next_request_id
        self._next_request_id = rid + 1
        return rid

    # ------------------------------------------------------------ requests

    async def add(self, payloads: tuple[bytes, ...]) -> AddOutcome:
        return await (await self.submit(payloads))

    async def submit(self, payloads: tuple[bytes, ...]) -> asyncio.Future[AddOutcome]:
        """Admit the add (back-pressure) and feed it; its outcome's future, not awaited.
        Adds submitted one after the other by one caller get ascending entry ids in that
        order (a streaming append's records: ``gateway/streams/session.py``)."""
        await self._admit(len(payloads), sum(map(len, payloads)))
        if self._stopped is not None:
            raise self._stopped
        rid = self._request_id()
        future: asyncio.Future[AddOutcome] = asyncio.get_running_loop().create_future()
        if self._adds is None:
            self._adds = {}
        self._adds[rid] = future
        self._feed(m.AddRequested(rid, payloads, self.ctx.clock()))
        return future

    async def close(self) -> tuple[LedgerMetadata, int]:
        if self._stopped is not None:
            raise self._stopped
        rid = self._request_id()
        future: asyncio.Future[tuple[LedgerMetadata, int]] = (
            asyncio.get_running_loop().create_future()
        )
        if self._closes is None:
            self._closes = {}
        self._closes[rid] = future
        self._feed(m.CloseRequested(rid, self.ctx.clock()))
        return await future

    def fenced(self) -> None:
        """The ledger was fenced under the handle (``HandleTable.recovered``): fed as a
        bookie's fence refusal, which fences the handle whatever it waits for."""
        bookie = self.metadata.ensemble[0]
        self._feed(m.BookieFailed(bookie, m.RejectReason.FENCED))

    async def wait_lac(
        self, after: int, timeout_s: float, until: Callable[[], bool] | None = None
    ) -> int:
        """Wait up to ``timeout_s`` for the LAC to pass ``after`` (or the handle to stop
        being live, or ``until()`` to hold, checked when ``wake_waiters`` is called);
        return the LAC. Raises the runner's error once it is stopped (``aclose``: a delete's
        ``LedgerNotFound``, the shutdown's ``Unavailable``)."""

        def done() -> bool:
            return self.lac > after or not self.live or (until is not None and until())

        try:
            async with asyncio.timeout(timeout_s):
                await self._wait_until(done)
        except TimeoutError:
            pass
        return self.lac

    def wake_waiters(self) -> None:
        """Have the waits on this handle check their condition now (something they
        wait for changed outside the handle: gateway/logs/writer.py ``_lose``)."""
        if self._waiters:
            waiters, self._waiters = self._waiters, None
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def _wait_until(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds; re-checked after every event fed."""
        loop = asyncio.get_running_loop()
        while True:
            if self._stopped is not None:
                raise self._stopped  # also for a wait woken just before the stop
            if predicate():
                return
            waiter: asyncio.Future[None] = loop.create_future()
            if self._waiters is None:
                self._waiters = {}
            self._waiters[waiter] = None
            try:
                await waiter
            finally:
                if self._waiters is not None:
                    self._waiters.pop(waiter, None)
                    if not self._waiters:
                        self._waiters = None

    async def _admit(self, entries: int, size: int) -> None:
        """Wait until the handle and its bookies' queues have room (back-pressure),
        bounded in time. Adds that wait are admitted in turn (``_admission``): only the
        first checks for room, woken by every event fed and by requests leaving a full
        queue (``_notify``), and once admitted it wakes the next. Woken all at once, the
        hundreds of adds of 256 streams waiting on full queues were each re-checked after
        every event (a cost in their number times the events)."""
        if not self._admission and self._admits(entries, size):
            return  # the common case, decided without a future or a clock read
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ctx.settings.admission_wait_ms / 1000
        waiter: asyncio.Future[None] = loop.create_future()
        queue = self._admission
        if queue is None:
            queue = self._admission = collections.deque()
        queue.append(waiter)
        admitted = False
        try:
            # Checked with no await between the last check and the caller feeding its add.
            while queue[0] is not waiter or not self._admits(entries, size):
                if self._stopped is not None:
                    raise self._stopped
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise Unavailable(self._refusal(entries, size))
                try:
                    async with asyncio.timeout(remaining):
                        await waiter
                except TimeoutError as exc:
                    raise Unavailable(self._refusal(entries, size)) from exc
                fresh: asyncio.Future[None] = loop.create_future()
                queue[queue.index(waiter)] = fresh
                waiter = fresh
            admitted = True
        finally:
            queue.remove(waiter)
            if queue and not queue[0].done():
                queue[0].set_result(None)  # the next in turn checks now
            if not queue and self._admission is queue:
                self._admission = None
            if not admitted:
                # Refused in time (or cancelled): the checks may have resumed the handle
                # after its re-park was looked at (``handle``); nothing else would park it.
                self._park()

    def _refusal(self, entries: int, size: int) -> str:
        """Why an add of ``entries`` and ``size`` bytes was not admitted in time."""
        busy = [s.bookie_id for s in self._ensemble_senders if not s.has_room(entries, size)]
        if busy:
            return (f"ledger {self.ledger_id}: the add queue of bookie(s) {', '.join(busy)} "
                    "is full (busy, not failed); retry later")  # fmt: skip
        return f"ledger {self.ledger_id}: too many adds in flight; retry later"

    def _admits(self, entries: int, size: int) -> bool:
        """Whether an add of ``entries`` and ``size`` bytes is admitted now: the handle
        is no longer live (it then answers the add with its own error), or it has room
        for it (or nothing pending) and every bookie of its ensemble has room in its add
        queue. When a queue is full, this handle is woken when requests leave it."""
        if not self.live:
            return True
        handle = self.handle
        room_entries, room_bytes = handle.room()
        if not ((entries <= room_entries and size <= room_bytes) or handle.pending_entries == 0):
            return False
        ensemble = handle.metadata.ensemble
        if ensemble is not self._ensemble:
            self._ensemble = ensemble
            self._ensemble_senders = tuple(self.senders.get(bookie) for bookie in ensemble)
        for sender in self._ensemble_senders:
            if not sender.has_room(entries, size):
                sender.when_room(self._notify)
                return False
        return True

    # ------------------------------------------------------------ the loop

    def _feed(self, event: m.Event) -> None:
        if self._stopped is None:  # a stopped runner sends nothing more (no late LAC update)
            super()._feed(event)

    def _handle(self, event: m.Event) -> list[m.Effect]:
        handle = self._writer
        if handle is None:
            handle = self._resume()
        return handle.handle(event)

    def _next_deadline(self) -> int | None:
        handle = self._writer
        return handle.next_deadline() if handle is not None else None

    def _after_feed(self) -> None:
        handle = self._writer
        if handle is not None:
            changes = handle.ensemble_changes
            if changes > self._ensemble_changes_seen:
                self.ctx.metrics.ensemble_changes.inc(changes - self._ensemble_changes_seen)
                self._ensemble_changes_seen = changes
        self._notify()
        if self.on_retired is not None and self.retired:
            self.on_retired(self)
        self._park()

    def _after_task(self) -> None:
        # A task's own feed (an ensemble change's metadata write) ran while the task was
        # still listed, so that feed could not park the handle: it may now.
        self._park()

    def _apply(self, effect: m.Effect) -> None:
        if isinstance(effect, m.SendAdds):
            self._send_adds(effect.bookie, effect.records)
        elif isinstance(effect, m.AckAdds):
            future = self._adds.pop(effect.request_id, None) if self._adds else None
            if future is not None and not future.done():
                future.set_result(
                    AddOutcome(effect.first_entry_id, effect.last_entry_id, effect.lac)
                )
        elif isinstance(effect, m.FailAdds):
            future = self._adds.pop(effect.request_id, None) if self._adds else None
            if future is not None and not future.done():
                future.set_exception(effect.exception())
        elif isinstance(effect, m.ReadWritableBookies):
            self._feed_soon(self.ctx.writable_event())
        elif isinstance(effect, m.SendLac):
            for bookie in effect.bookies:
                self.senders.lac(bookie).update(effect.ledger_id, effect.lac)
        elif isinstance(effect, m.CloseDone):
            self.closed_metadata = effect.metadata
            closing = self._closes.pop(effect.request_id, None) if self._closes else None
            if closing is not None and not closing.done():
                closing.set_result((effect.metadata, effect.version))
        elif isinstance(effect, m.CloseFailed):
            closing = self._closes.pop(effect.request_id, None) if self._closes else None
            if closing is not None and not closing.done():
                closing.set_exception(effect.exception())
        else:
            self._unexpected(effect)

    def _send_adds(self, bookie: str, records: tuple[FramedRecord, ...]) -> None:
        self.ctx.metrics.adds_in_flight.value += len(records)
        # One callback per bookie: the sender answers all of this handle's records of one
        # request in one call (services/ledger_client/senders.py ``_by_callback``), one event fed.
        self.senders.get(bookie).send(records, AddsDone(self, bookie))

    def _on_adds_done(self, bookie: str, answer: AddAnswer) -> None:
        self.ctx.metrics.adds_in_flight.value -= len(answer.stored) + len(answer.rejected)
        self._feed(answer.event(bookie))

    def _notify(self) -> None:
        if self._admission and not self._admission[0].done():
            self._admission[0].set_result(None)
        if self._waiters:
            waiters, self._waiters = self._waiters, None
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def aclose(self, error: QuireError | None = None) -> None:
        """Stop the runner: every add and close awaiting an answer, every add waiting for
        room and every wait on the handle (``wait_lac``) fails with ``error`` at once
        (default: 503, the gateway is shutting down; the gateway's delete of an open
        ledger gives ``LedgerNotFound``), then the timer and tasks are cancelled."""
        if error is None:
            error = Unavailable("the gateway is shutting down")
        self._stopped = error  # and no event is fed from now on (``_feed``)
        futures: list[asyncio.Future[Any]] = [
            *(self._adds or {}).values(),
            *(self._closes or {}).values(),
            *(self._admission or ()),
            *(self._waiters or ()),
        ]
        self._waiters = None
        for future in futures:
            if not future.done():
                future.set_exception(error)
        await self._stop()
