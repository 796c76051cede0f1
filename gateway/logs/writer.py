"""The logs this gateway writes: taking the writer role, appends, rolls.

``writers.LogWriters.acquire`` runs ``AcquireWriter`` (fence and recover the last two
ledgers, create a ledger, CAS it into the list with the next epoch) and then serves
appends through a ``LogWriter`` bound to that epoch. A ``LogWriter`` appends to the
write handle of the LAST ledger of the list, which it created itself.

Losing the role is learnt from the ledger, never from timing: a new writer fences our
last ledger, so our next add fails with ``ledger_fenced``. An append is the pure
``LogAppendOp`` (services/protocol/log_append.py: the idempotency key, the add, settling
an add whose outcome may be unknown, then ``not_writer`` or a roll and another attempt);
``LogWriter`` carries out its effects: the key's waiters, the add through the current
ledger's ``HandleRunner``, the wait for a ledger to close (``log_settle_timeout_ms``),
the re-read of the log, the roll. A lost role is answered 409 ``not_writer`` from then on.

Rolls (``roll``): on demand, and automatically once the current ledger holds
``log_roll_bytes`` or ``log_roll_entries`` or is ``log_roll_age_s`` old. New appends
go to the new ledger as soon as its CAS landed; the old ledger is closed after, and
then its keys are saved for the next writer's idempotency window (``rebuild.save_keys``).

Order: appends that share an ``AppendOrder`` (a log stream's groups,
``gateway/streams/targets.py``) land in the order they were started. Each settles on its
own, so after a fence or a roll a later one could reach the new ledger first (found by
a protocol review: a stream's acknowledgements then went out with descending
positions). The rule: an append hands its entries to a write handle only once the
append before it has ended or was last handed to that same handle; a write handle
gives entries ids in the order they were handed to it.

Stamps (``log_append.Stamps``): each attempt's entries are stamped and encoded right
before ``HandleRunner.submit`` is called, with no await in between, so stamps rise with
entry ids. A new writer's stamps start at the time of the log's last entry
(``time_search.last_stamp``, one entry read, walking back over empty ledgers): until
that read ends, appends wait (as keyed appends wait for the window's rebuild); when it
fails for good the writer stamps with its clock alone, and says so in the log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.limits import LOG_WATCH_RETRY_S, REBUILD_ATTEMPTS_MAX, REBUILD_RETRY_FIRST_S
from gateway.logs import rebuild, steps, tail, time_search
from gateway.logs.dedup import LogWindow
from services.clock import wall_ms
from services.errors import (
    InvariantViolation,
    LogNotFound,
    NotWriter,
    PositionMismatch,
    QuireError,
    Unavailable,
    present,
)
from services.ledger_client.runners.write import HandleRunner
from services.protocol import log_append as la
from services.protocol import log_writer as lw
from services.protocol import retention
from services.protocol.dedup import DedupWindow
from services.protocol.logs import ExpectedLast, LogMetadata, Position
from services.protocol.metadata import LedgerMetadata
from services.zk import paths as zkpaths
from services.zk.log_store import LogStore, VersionedLog
from services.zk.saved_keys_store import SavedKeysStore, Tail

if TYPE_CHECKING:  # the gateway builds its log writers with itself (gateway/app.py)
    from gateway.service import Gateway

log = logging.getLogger(__name__)


def _once(callback: Callable[[], None]) -> Callable[[], None]:
    """``callback``, run on the first call only."""
    called = False

    def once() -> None:
        nonlocal called
        if not called:
            called = True
            callback()

    return once


class AppendTurn:
    """One append's place in an ``AppendOrder``: where its entries were last handed
    (``runner``), whether it ended, and the append before it while that one matters."""

    __slots__ = ("before", "runner", "ended", "_moved")

    def __init__(self, before: AppendTurn | None) -> None:
        self.ended: bool = False
        self.runner: HandleRunner | None = None
        self._moved: asyncio.Future[None] | None = None  # awaited by the next append
        self.before = before if before is not None and not before.ended else None

    def may_feed(self, runner: HandleRunner) -> bool:
        """Whether this append may hand its entries to ``runner`` now: the one before it
        ended, or its entries went to ``runner`` last (so they get the lower ids)."""
        before = self.before
        if before is None:
            return True
        if before.ended:
            self.before = None  # an ended append holds nothing back: let it go
            return True
        return before.runner is runner

    async def wait_before(self) -> None:
        """Until the append before this one was handed to a write handle again, or
        ended (bounded as that append is: by its settle time-out and its attempts)."""
        before = present(self.before, "an append waits only behind another")
        moved = before._moved
        if moved is None or moved.done():
            moved = before._moved = asyncio.get_running_loop().create_future()
        await moved

    def fed(self, runner: HandleRunner) -> None:
        self.runner = runner
        self._wake()

    def end(self) -> None:
        self.ended = True
        self.before = self.runner = None
        self._wake()

    def _wake(self) -> None:
        moved, self._moved = self._moved, None
        if moved is not None and not moved.done():
            moved.set_result(None)


class AppendOrder:
    """The appends of one caller that must land in the order they were started (a log
    stream's groups): ``turn()`` places the next one, synchronously, in call order. Only
    the appends in flight are held (each turn lets go of the one before once it ended)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: AppendTurn | None = None

    def turn(self) -> AppendTurn:
        turn = self._last = AppendTurn(self._last)
        return turn


@dataclass(frozen=True, slots=True)
class AppendResult:
    first: Position
    last: Position
    deduplicated: bool = False


class LogWriter:
    """The writer role of one log at one epoch, held by this gateway."""

    def __init__(
        self, gw: Gateway, logs: LogStore, acquired: lw.Acquired, runner: HandleRunner
    ) -> None:
        self.gw = gw
        self.logs = logs
        self.name = acquired.log.name
        self.epoch = acquired.epoch
        self.log = acquired.log
        self.version = acquired.version
        self.runner = runner
        self.lost: str | None = None  # why this gateway no longer writes the log
        # The log's metadata as ZooKeeper has it, for this gateway's reads of the log
        # (``listed``): kept by ``_watch_log`` from a read made after its watch on the
        # znode was armed, dropped the moment that watch fires; served only when at
        # least as new as this gateway's own last write of the znode (``wrote``).
        self._listed: VersionedLog | None = None
        self._written = acquired.version
        settings = gw.settings
        self.dedup = LogWindow(
            DedupWindow(int(settings.idempotency_window_s * 1000), settings.idempotency_keys_max)
        )
        self._rolling: asyncio.Future[int] | None = None
        # Saving the keys of the ledgers this writer closed (``_save_keys``).
        self.saved_keys = SavedKeysStore(logs.store)
        self._saving = asyncio.Lock()
        self._saved_tail: Tail | None = None
        # Ledgers this writer listed and left behind, maybe not CLOSED yet: the one the
        # last roll left, and one a failed roll may have listed (its CAS's answer lost);
        # the next roll closes them first (``RollLog``).
        self._behind: list[int] = []
        self._ledger_started = time.monotonic()
        # The log's retention policy (kept current by ``_watch_log``): a log with one
        # rolls at a quarter of each limit (``RetentionPolicy.roll_limits``).
        self._policy = retention.policy_of(acquired.log)
        self._age_timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Conditional appends (``Expected-Last-Position``, see ``_check_condition``): the
        # appends in flight, the gate a conditional append closes while it waits for them
        # to end and compares, one conditional append at a time, the last record appended
        # to the current ledger, and the last record before it (by the current ledger).
        self._in_flight = 0
        self._alone_waiters: list[asyncio.Future[None]] = []
        self._gate: asyncio.Event | None = None
        self._conditional = asyncio.Lock()
        self._last: Position | None = None
        self._before: tuple[int, Position | None] | None = None
        self._stamps = la.Stamps()
        self._floor_known = asyncio.Event()  # set once ``_stamps`` starts at the log's end
        # This log's metric children, looked up once (the append path is hot).
        metrics = gw.metrics
        self._appends = metrics.log_appends.labels(self.name)
        self._records = metrics.log_records.labels(self.name)
        self._bytes = metrics.log_bytes.labels(self.name)
        self._dedup_hits = metrics.log_dedup_hits.labels(self.name)
        self._latency = metrics.log_append_latency
        self._arm_age_roll()
        self._spawn(self._watch_log())
        previous = [lid for lid in acquired.log.ledgers if lid != acquired.ledger_id]
        self._spawn(self._read_floor(previous))

    @property
    def gateway_id(self) -> str:
        return self.gw.settings.address

    @property
    def ledger_id(self) -> int:
        return self.runner.ledger_id

    # ------------------------------------------------------------ appends

    async def append(
        self,
        payloads: Sequence[bytes],
        key: str | None,
        fed: Callable[[], None] | None = None,
        turn: AppendTurn | None = None,
        condition: ExpectedLast | None = None,
    ) -> AppendResult:
        """Append ``payloads`` (with Idempotency-Key ``key``, only if the log's last
        record is where ``condition`` says) as the log's writer. ``fed``
        is called once, as soon as the append's entries were handed to the write handle
        or the append ended without doing so. ``turn`` (from the caller's
        ``AppendOrder``) keeps its appends in order across fences and rolls; a caller
        that starts its next append only once ``fed`` was called gets them into the log
        in order (``gateway/streams/session.py``)."""
        once = _once(fed) if fed is not None else None
        try:
            if condition is None:
                return await self._append(payloads, key, once, turn)
            async with self._conditional:
                return await self._append(payloads, key, once, turn, condition)
        finally:
            if turn is not None:
                turn.end()
            if once is not None:
                once()

    async def _append(
        self,
        payloads: Sequence[bytes],
        key: str | None,
        fed: Callable[[], None] | None,
        turn: AppendTurn | None = None,
        condition: ExpectedLast | None = None,
    ) -> AppendResult:
        while self._gate is not None and condition is None:
            await self._gate.wait()  # a conditional append compares: after it
        self._in_flight += 1
        try:
            return await self._append_counted(payloads, key, fed, turn, condition)
        finally:
            self._left()

    async def _append_counted(
        self,
        payloads: Sequence[bytes],
        key: str | None,
        fed: Callable[[], None] | None,
        turn: AppendTurn | None,
        condition: ExpectedLast | None,
    ) -> AppendResult:
        self._check_role()
        started = time.monotonic()
        if not self._floor_known.is_set():
            await self._floor_known.wait()
            self._check_role()  # the role may have been lost meanwhile
        if key is not None:
            if not self.dedup.ready.is_set():
                await self.dedup.ready.wait()
            if self.dedup.failed is not None:
                raise Unavailable(f"{self.dedup.failed}; appends with a key cannot be checked")
        op = la.LogAppendOp(self.dedup.keys, self.name, payloads, key)
        try:
            end = await self._run_append(op, op.start(wall_ms()), fed, turn, condition)
        finally:
            if not op.done:  # cancelled: the key is released, a retry may append
                self._carry_out_release(op.abandon(wall_ms()))
        if isinstance(end, la.AppendFailed):
            raise end.error
        if end.deduplicated:
            self._dedup_hits.inc()
            return AppendResult(end.first, end.last, deduplicated=True)
        if end.last.ledger_id == self.runner.ledger_id and (
            self._last is None
            or self._last.ledger_id != end.last.ledger_id
            or self._last.entry_id < end.last.entry_id
        ):
            self._last = end.last
        self._appends.inc()
        self._records.inc(len(payloads))
        self._bytes.inc(sum(map(len, payloads)))
        self._latency.observe(time.monotonic() - started)
        self._maybe_roll()
        return AppendResult(end.first, end.last)

    async def _run_append(
        self,
        op: la.LogAppendOp,
        effects: list[la.Effect],
        fed: Callable[[], None] | None,
        turn: AppendTurn | None,
        condition: ExpectedLast | None,
    ) -> la.AppendDone | la.AppendFailed:
        """Carry out ``op``'s effects, one at a time, until its answer."""
        pending = list(effects)
        while pending:
            effect = pending.pop(0)
            if isinstance(effect, la.AppendDone | la.AppendFailed):
                return effect
            if isinstance(effect, la.ReleaseKey):
                self.dedup.release(effect.key, effect.appended)
                continue
            event = await self._carry_out(effect, fed, turn, condition)
            pending.extend(op.handle(event, wall_ms()))
        raise InvariantViolation(f"an append to log {self.name} ended without an answer")

    def _carry_out_release(self, effects: list[la.Effect]) -> None:
        for effect in effects:
            if isinstance(effect, la.ReleaseKey):
                self.dedup.release(effect.key, effect.appended)

    async def _carry_out(
        self,
        effect: la.Effect,
        fed: Callable[[], None] | None,
        turn: AppendTurn | None,
        condition: ExpectedLast | None,
    ) -> la.Event:
        try:
            if isinstance(effect, la.AddEntries):
                if condition is not None:
                    return await self._add_if(effect, fed, condition)
                return await self._add(effect, fed, turn)
            if isinstance(effect, la.AwaitClosed):
                end = await steps.closed_end(self.gw, effect.ledger_id)
                if end is None:
                    return la.LedgerStillOpen()
                if end == steps.LEDGER_GONE:
                    return la.LedgerGone()
                return la.LedgerEnded(end)
            if isinstance(effect, la.WaitForKey):
                # Not in flight while it waits: a conditional append holding that key
                # waits for the appends in flight to end.
                self._left()
                try:
                    return la.KeyReleased(await self.dedup.released(effect.key))
                finally:
                    self._in_flight += 1
            if isinstance(effect, la.ReadRole):
                await self._refresh_role()
                self._check_role()
                return la.RoleHeld(self.runner.ledger_id)
            if isinstance(effect, la.RollLedger):
                await self.roll(effect.reason)
                return la.RollDone()
        except QuireError as exc:
            return la.StepFailed(exc)
        raise InvariantViolation(f"unexpected append effect {effect!r}")

    async def _add(
        self,
        add: la.AddEntries,
        fed: Callable[[], None] | None,
        turn: AppendTurn | None,
    ) -> la.EntriesAdded | la.AddFailed:
        """Stamp and encode ``add``'s records and hand them to the current ledger's write
        handle, behind the caller's earlier append (see the module docstring), and wait
        for its answer."""
        self._check_role()
        runner = self.runner
        if turn is not None:
            while not turn.may_feed(runner):
                await turn.wait_before()
                self._check_role()
                runner = self.runner
        # No await between the stamp and the call: ids follow the order of the calls.
        stamp = self._stamps.next(wall_ms())
        try:
            submitted = await runner.submit(add.encode(stamp))
            if turn is not None:
                turn.fed(runner)
            if fed is not None:
                fed()
            outcome = await submitted
        except QuireError as exc:
            return la.AddFailed(runner.ledger_id, exc, stamp)
        return la.EntriesAdded(
            runner.ledger_id, outcome.first_entry_id, outcome.last_entry_id, stamp
        )

    async def _read_floor(self, previous: Sequence[int]) -> None:
        """Start the stamps at the time of the log's last entry in ``previous`` (the
        ledgers before this writer's, CLOSED once the role was taken), retrying with
        back-off; appends wait until this ends (see the module docstring)."""
        delay = REBUILD_RETRY_FIRST_S
        try:
            for attempt in range(1, REBUILD_ATTEMPTS_MAX + 1):
                try:
                    floor = await time_search.last_stamp(self.gw, previous)
                except QuireError as exc:
                    log.warning(
                        "could not read the time of the log's last entry",
                        extra={"fields": {"log": self.name, "error": exc.code,
                                          "attempt": attempt}},
                    )  # fmt: skip
                    if attempt < REBUILD_ATTEMPTS_MAX:
                        await asyncio.sleep(delay)
                        delay *= 2
                    continue
                if floor is not None:
                    self._stamps = la.Stamps(floor)  # no append stamped yet: they wait
                return
            log.warning(
                "stamping the log's appends with this gateway's clock alone",
                extra={"fields": {"log": self.name}},
            )
        finally:
            self._floor_known.set()

    async def _add_if(
        self, add: la.AddEntries, fed: Callable[[], None] | None, condition: ExpectedLast
    ) -> la.EntriesAdded | la.AddFailed:
        """``_add`` when the log's last record is where ``condition`` says, else
        ``position_mismatch`` (nothing added). The gate keeps new appends out while the
        appends in flight end, so the last record is known, until these entries were
        handed to the write handle: the next append comes after them."""
        gate = self._gate = asyncio.Event()
        try:
            await self._wait_alone()
            last = await self._last_record()
            if last != condition.position:
                shown = str(last) if last is not None else None
                error = PositionMismatch(
                    f"log {self.name}: the last record is at {shown or 'none (no record)'}, "
                    f"not {condition}; nothing was appended",
                    shown,
                )
                return la.AddFailed(self.runner.ledger_id, error, wall_ms())
            opened = _once(lambda: self._open_gate(gate))

            def handed() -> None:
                opened()
                if fed is not None:
                    fed()

            return await self._add(add, handed, None)
        finally:
            self._open_gate(gate)

    def _open_gate(self, gate: asyncio.Event) -> None:
        if self._gate is gate:
            self._gate = None
        gate.set()

    def _left(self) -> None:
        """An append is no longer in flight: wake the conditional append waiting alone."""
        self._in_flight -= 1
        waiters, self._alone_waiters = self._alone_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _wait_alone(self) -> None:
        """Until this append is the only one in flight (looked at on each end of another)."""
        while self._in_flight > 1:
            ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._alone_waiters.append(ended)
            await ended

    async def _last_record(self) -> Position | None:
        """The log's last record, with no append in flight: the last this writer appended
        to its current ledger, else the last of the ledgers before it (``tail``)."""
        current = self.runner.ledger_id
        if self._last is not None and self._last.ledger_id == current:
            return self._last
        if self._before is None or self._before[0] != current:
            ledgers = self.log.ledgers
            index = self.log.index_of(current)
            before = ledgers[:index] if index is not None else ledgers
            self._before = (current, await tail.last_record(self.gw, before))
        return self._before[1]

    async def _refresh_role(self) -> None:
        try:
            current = await self.logs.get(self.name)
        except LogNotFound:
            self._lose(f"log {self.name} was deleted")
            return
        if current.log.held_by(self.gateway_id, self.epoch):
            self.log, self.version = current.log, current.version
            return
        writer = current.log.writer
        holder = f"{writer.gateway} at epoch {writer.epoch}" if writer else "nobody"
        self._lose(f"another writer took log {self.name} (now: {holder})")

    @property
    def listed(self) -> LogMetadata | None:
        """The log's metadata as current as a ZooKeeper read would give it, or None
        when that is not known now (the watch fired and the log was not read again
        yet, ZooKeeper did not answer, the role is lost).

        Long polls of the log on this gateway take it instead of reading the znode
        (``operations.get_for_read``): each poll of a tailing reader asked ZooKeeper
        twice, a large part of its cost (benchmarks/README.md, "Many open things");
        other reads ask ZooKeeper, so that a change another gateway acknowledged is
        seen at once.
        It is kept from a read of the znode made after a watch on it was armed, so any
        later change fires the watch, and it is dropped as the watch fires, before the
        log is read again: a truncation, a retention pass or a roll (this gateway's
        own too), a new writer or a delete elsewhere, and a lost session (kazoo fires
        every watch then) all drop it. Between a change in ZooKeeper and its
        notification a read gets the copy from before it, as a read that asked
        ZooKeeper just before it would; a read that finds a listed ledger gone asks
        ZooKeeper itself (``reads._missing``), as before. A change this gateway made
        (a roll, a truncation, a retention policy) is seen by its own next read at
        once: a copy older than the version it wrote is not served (``wrote``)."""
        kept = self._listed
        if kept is None or self.lost is not None or kept.version < self._written:
            return None
        return kept.log

    def wrote(self, version: int) -> None:
        """This gateway wrote the log's znode, now at ``version`` (told by the log store
        at each write: ``LogWriters``): until the watch has read it again, this gateway's
        reads ask ZooKeeper (``listed``)."""
        self._written = max(self._written, version)

    async def _watch_log(self) -> None:
        """Learn early that the log was deleted or taken: one-shot watches on its znode,
        re-armed while the role is held. (The fence on our ledger stays the rule; this
        covers a log deleted elsewhere, whose ledgers' bookies forget the fence.) Each
        read of the znode made while the watch is armed and has not fired is kept for
        this gateway's reads of the log (``listed``)."""
        changed = asyncio.Event()

        def fired() -> None:
            self._listed = None
            changed.set()

        while self.lost is None:
            changed.clear()
            try:
                await self.logs.store.exists_once(zkpaths.log(self.name), fired)
                read = await self.logs.get(self.name)
                current = read.log
                if not current.held_by(self.gateway_id, self.epoch):
                    self._lose(f"another writer took log {self.name}")
                elif not changed.is_set():
                    self._listed = read
                policy = retention.policy_of(current)
                if policy != self._policy:
                    self._policy = policy
                    self._arm_age_roll()  # a shorter age may be due now
                    self._maybe_roll()
            except LogNotFound:
                self._lose(f"log {self.name} was deleted")
            except QuireError:
                # ZooKeeper trouble: the fence on our ledger still tells; watch again soon.
                await asyncio.sleep(LOG_WATCH_RETRY_S)
                continue
            if self.lost is None:
                await changed.wait()

    def _check_role(self) -> None:
        if self.lost is not None:
            raise NotWriter(f"this gateway is no longer the writer of log {self.name}: {self.lost}")

    def _lose(self, why: str) -> None:
        self._listed = None
        if self.lost is None:
            self.lost = why
            try:
                self.gw.metrics.log_writer_epoch.remove(self.name)
            except KeyError:
                pass
            log.info("lost the writer role", extra={"fields": {"log": self.name, "why": why}})
        self._cancel_age_roll()
        self._floor_known.set()  # appends waiting for the floor answer not_writer
        if self.runner is not None:
            # Tail reads waiting on our ledger re-read the log's list now (reads.py).
            self.runner.wake_waiters()

    # ------------------------------------------------------------ rolls

    async def roll(self, reason: str = "request") -> int:
        """Roll to a new ledger (single flight: a roll in progress is shared)."""
        self._check_role()
        if self._rolling is None or self._rolling.done():
            self._rolling = asyncio.ensure_future(self._roll(reason))
        return await asyncio.shield(self._rolling)

    async def _roll(self, reason: str) -> int:
        op = lw.RollLog(
            self.log, self.version, self.gateway_id, self.epoch, self.gw.ctx.rng,
            behind=self._behind,
        )  # fmt: skip
        try:
            rolled = await steps.run(self.gw, self.logs, op, op.start())
        except NotWriter as exc:
            self._lose(exc.message)
            raise
        except LogNotFound:
            self._lose(f"log {self.name} was deleted")
            raise
        finally:
            self._behind = op.behind
        if not isinstance(rolled, lw.Rolled):
            raise InvariantViolation(f"a roll answered {rolled!r}")
        old = self.runner
        self._behind.append(old.ledger_id)
        self.runner = present(
            self.gw.handles.live(rolled.ledger_id), "a rolled-in ledger has a live handle"
        )
        self.log, self.version = rolled.log, rolled.version
        self._ledger_started = time.monotonic()
        self._arm_age_roll()
        self.gw.metrics.log_rolls.labels(self.name, reason).inc()
        self._spawn(self._close_old(old))
        return rolled.ledger_id

    async def _close_old(self, old: HandleRunner) -> None:
        """Close the rolled-out ledger: by its handle, or by recovery when the handle is
        no longer live but the ledger is still OPEN (its own close failed), so that
        readers, who stop at an OPEN ledger, go on to the next one."""
        try:
            closed = await steps.close_for_good(self.gw, old.ledger_id)
        except QuireError as exc:
            log.info(
                "closing a rolled-out log ledger failed (a new writer recovers it)",
                extra={"fields": {"log": self.name, "ledger_id": old.ledger_id,
                                  "error": exc.code}},
            )  # fmt: skip
            return
        if closed is not None:
            await self._save_keys(closed)

    async def _save_keys(self, closed: LedgerMetadata) -> None:
        """Save the keys of a ledger this writer rolled out and closed, for the next
        writer's window (``rebuild.save_keys``), one save at a time (each adds to the
        newest segment by compare-and-set). Best effort: a ledger not saved is read by
        the next writer's rebuild."""
        ledger_id = closed.ledger_id
        async with self._saving:
            try:
                self._saved_tail = await rebuild.save_keys(
                    self.gw, self.saved_keys, self.name, closed, self._saved_tail
                )
            except QuireError as exc:
                self._saved_tail = None
                log.info(
                    "could not save a closed log ledger's keys (a new writer reads them)",
                    extra={"fields": {"log": self.name, "ledger_id": ledger_id,
                                      "error": exc.code}},
                )  # fmt: skip
            except Exception:  # noqa: BLE001 - best effort: the roll is done, the keys are read
                self._saved_tail = None
                log.exception(
                    "saving a closed log ledger's keys failed (a new writer reads them)",
                    extra={"fields": {"log": self.name, "ledger_id": ledger_id}},
                )

    def _roll_limits(self) -> tuple[int, int, float]:
        """Bytes, entries and age (s) at which the current ledger rolls."""
        settings = self.gw.settings
        limits = (settings.log_roll_bytes, settings.log_roll_entries, settings.log_roll_age_s)
        return limits if self._policy is None else self._policy.roll_limits(*limits)

    def _maybe_roll(self) -> None:
        runner = self.runner  # its length and next entry id, read without resuming it
        if self._rolling is not None and not self._rolling.done():
            return
        size, entries, _ = self._roll_limits()
        if runner.length >= size:
            self._spawn(self._auto_roll("size"))
        elif runner.next_entry_id >= entries:
            self._spawn(self._auto_roll("entries"))

    async def _auto_roll(self, reason: str) -> None:
        try:
            await self.roll(reason)
        except QuireError as exc:
            log.warning(
                "automatic roll failed",
                extra={"fields": {"log": self.name, "reason": reason, "error": exc.code}},
            )

    def _arm_age_roll(self) -> None:
        self._cancel_age_roll()
        ledger_id = self.runner.ledger_id

        def due() -> None:
            if self.lost is not None or self.runner.ledger_id != ledger_id:
                return
            if self.runner.next_entry_id == 0:
                # An empty ledger holds nothing to age: its clock starts again (an idle
                # log does not make a ledger per period).
                self._ledger_started = time.monotonic()
                self._arm_age_roll()
                return
            self._spawn(self._auto_roll("age"))

        age_s = self._roll_limits()[2] - (time.monotonic() - self._ledger_started)
        self._age_timer = asyncio.get_running_loop().call_later(max(0.0, age_s), due)

    def _cancel_age_roll(self) -> None:
        if self._age_timer is not None:
            self._age_timer.cancel()
            self._age_timer = None

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def rebuild_window(self, previous: Sequence[int]) -> None:
        """Load the keys of the log's tail into the window (``rebuild``)."""
        await rebuild.rebuild_window(self.gw, self.name, self.dedup, previous, self.saved_keys)

    async def aclose(self) -> None:
        self._cancel_age_roll()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
