"""The logs this gateway writes: taking the writer role, appends, rolls.

``writers.LogWriters.acquire`` runs ``AcquireWriter`` (fence and recover the last two
ledgers, create a ledger, CAS it into the list with the next epoch) and then serves
appends through a ``LogWriter`` bound to that epoch. A ``LogWriter`` appends to the
write handle of the LAST ledger of the list, which it created itself.

Losing the role is learnt from the ledger, never from timing: a new writer fences our
last ledger, so our next add fails with ``ledger_fenced``. Any add that fails with an
outcome that may be unknown (fenced, closed under it, time-out, no bookies) is
SETTLED before it is answered (``_settle``):

1. wait (bounded by ``log_settle_timeout_ms``) until the ledger is CLOSED, by our own
   handle or by whoever recovered it; the closed ledger says which of the append's
   entries are in the log: all of them -> the append succeeded (answered with its
   positions); not all -> it is not in the log (a batch cut short never shows to
   readers: ``log_records.visible``); still not closed -> the outcome stays unknown
   and the add's own error is the answer;
2. re-read the log: if another writer holds the role, this one is lost and answers
   409 ``not_writer`` from then on; else (the ledger was fenced by a replication
   worker or closed after a time-out) roll to a new ledger and append again there.

Rolls (``roll``): on demand, and automatically once the current ledger holds
``log_roll_bytes`` or ``log_roll_entries`` or is ``log_roll_age_s`` old. New appends
go to the new ledger as soon as its CAS landed; the old ledger is closed after.

Order: appends that share an ``AppendOrder`` (a log stream's groups,
``gateway/streams/targets.py``) land in the order they were started. Each settles on its
own, so after a fence or a roll a later one could reach the new ledger first (found by
a protocol review: a stream's acknowledgements then went out with descending
positions). The rule: an append hands its entries to a write handle only once the
append before it has ended or was last handed to that same handle; a write handle
gives entries ids in the order they were handed to it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.logs import rebuild, steps
from gateway.logs.dedup import Appended, DedupWindow, Unsettled, unknown_outcome
from gateway.logs.rebuild import wall_ms
from services.errors import (
    InvariantViolation,
    LedgerClosed,
    LedgerFenced,
    LogNotFound,
    NotEnoughBookies,
    NotWriter,
    QuireError,
    QuorumTimeout,
    Unavailable,
    present,
)
from services.ledger_client.runners.write import HandleRunner
from services.protocol import log_records
from services.protocol import log_writer as lw
from services.protocol.logs import Position
from services.zk import paths as zkpaths
from services.zk.log_store import LogStore

if TYPE_CHECKING:  # the gateway builds its log writers with itself (gateway/app.py)
    from gateway.service import Gateway

log = logging.getLogger(__name__)

# Errors after which an add's outcome must be settled (see the module docstring).
_UNSETTLED = (LedgerFenced, LedgerClosed, QuorumTimeout, NotEnoughBookies)
# An append re-sent to a new ledger after its first ledger closed without it, at most
# this many times (each time a roll happened first).
APPEND_ATTEMPTS_MAX = 3
# The log's znode watch is set again this long after ZooKeeper failed to set it.
WATCH_RETRY_S = 1.0


class _UnknownOutcome(Exception):
    """An add whose ledger did not close in time: ``error`` is the answer; the entries
    may still turn up in the log (``dedup.Unsettled``)."""

    def __init__(self, error: QuireError, ledger_id: int, entries: tuple[int, int]) -> None:
        super().__init__(error.message)
        self.error = error
        self.ledger_id = ledger_id
        self.entries = entries


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
        settings = gw.settings
        self.dedup = DedupWindow(
            int(settings.idempotency_window_s * 1000), settings.idempotency_keys_max
        )
        self._rolling: asyncio.Future[int] | None = None
        # Ledgers this writer listed and left behind, maybe not CLOSED yet: the one the
        # last roll left, and one a failed roll may have listed (its CAS's answer lost).
        self._behind: list[int] = []
        self._ledger_started = time.monotonic()
        self._age_timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # This log's metric children, looked up once (the append path is hot).
        metrics = gw.metrics
        self._appends = metrics.log_appends.labels(self.name)
        self._records = metrics.log_records.labels(self.name)
        self._bytes = metrics.log_bytes.labels(self.name)
        self._dedup_hits = metrics.log_dedup_hits.labels(self.name)
        self._latency = metrics.log_append_latency
        self._arm_age_roll()
        self._spawn(self._watch_log())

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
    ) -> AppendResult:
        """Append ``payloads`` (with Idempotency-Key ``key``) as the log's writer. ``fed``
        is called once, as soon as the append's entries were handed to the write handle
        or the append ended without doing so. ``turn`` (from the caller's
        ``AppendOrder``) keeps its appends in order across fences and rolls; a caller
        that starts its next append only once ``fed`` was called gets them into the log
        in order (``gateway/streams/session.py``)."""
        once = _once(fed) if fed is not None else None
        try:
            return await self._append(payloads, key, once, turn)
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
    ) -> AppendResult:
        self._check_role()
        started = time.monotonic()
        digest = log_records.records_digest(payloads) if key is not None else None
        if key is not None and digest is not None:
            if not self.dedup.ready.is_set():
                await self.dedup.ready.wait()
            if self.dedup.failed is not None:
                raise Unavailable(f"{self.dedup.failed}; appends with a key cannot be checked")
            known = await self.dedup.claim(key, digest, wall_ms())
            if isinstance(known, Unsettled):
                known = await self._settle_earlier(key, known)
            if known is not None:
                self._dedup_hits.inc()
                return AppendResult(known.first, known.last, deduplicated=True)
        appended: Appended | None = None
        unknown: Unsettled | None = None
        try:
            now = wall_ms()
            entries = log_records.encode(payloads, now, key, digest)
            first, last = await self._append_entries(entries, fed, turn)
            appended = Appended(first, last, digest or b"", now)
        except _UnknownOutcome as outcome:
            lid, (first_id, last_id) = outcome.ledger_id, outcome.entries
            unknown = Unsettled(lid, first_id, last_id, digest or b"", wall_ms())
            raise outcome.error from None
        finally:
            if key is not None:
                self.dedup.settle(key, appended, wall_ms(), unknown)
        self._appends.inc()
        self._records.inc(len(payloads))
        self._bytes.inc(sum(map(len, payloads)))
        self._latency.observe(time.monotonic() - started)
        self._maybe_roll()
        return AppendResult(first, last)

    async def _settle_earlier(self, key: str, earlier: Unsettled) -> Appended | None:
        """A retry of an append whose outcome was left unknown (the key is claimed): the
        earlier attempt's positions when it is in the log (and remembered), None when it
        is not (the retry appends), else the outcome is still unknown (409
        ``ledger_fenced``, the key kept), also for good when the ledger is gone."""
        end = await steps.closed_end(self.gw, earlier.ledger_id)
        if end is None or end == steps.LEDGER_GONE:
            self.dedup.settle(key, None, wall_ms(), earlier)
            raise unknown_outcome(key, earlier.ledger_id, gone=end is not None)
        if earlier.last_entry_id > end:
            return None
        appended = Appended(
            Position(earlier.ledger_id, earlier.first_entry_id),
            Position(earlier.ledger_id, earlier.last_entry_id),
            earlier.digest,
            earlier.at_ms,
        )
        self.dedup.settle(key, appended, wall_ms())
        return appended

    async def _append_entries(
        self,
        entries: tuple[bytes, ...],
        fed: Callable[[], None] | None = None,
        turn: AppendTurn | None = None,
    ) -> tuple[Position, Position]:
        for _ in range(APPEND_ATTEMPTS_MAX):
            self._check_role()
            runner = self.runner
            if turn is not None:
                # Behind the caller's earlier append (see the module docstring).
                while not turn.may_feed(runner):
                    await turn.wait_before()
                    self._check_role()
                    runner = self.runner
            try:
                submitted = await runner.submit(entries)
                if turn is not None:
                    turn.fed(runner)
                if fed is not None:
                    fed()
                outcome = await submitted
            except _UNSETTLED as exc:
                settled = await self._settle(runner, exc)
                if settled is not None:
                    return settled
                continue  # not in the log, and we still write it: a new ledger took over
            lid = runner.ledger_id
            return Position(lid, outcome.first_entry_id), Position(lid, outcome.last_entry_id)
        raise NotWriter(
            f"log {self.name}: the append failed on {APPEND_ATTEMPTS_MAX} ledgers in a row; "
            "nothing of it is in the log"
        )

    async def _settle(
        self, runner: HandleRunner, exc: QuireError
    ) -> tuple[Position, Position] | None:
        """An add failed with ``exc``: its positions when it is in the log after all,
        None when it is not and this gateway still writes the log (on a new ledger),
        else raises (``not_writer``, or ``exc`` itself while the outcome is unknown)."""
        lid = runner.ledger_id
        if exc.entries is not None:
            end = await steps.closed_end(self.gw, lid)
            if end is None or end == steps.LEDGER_GONE:  # not closed in time, or gone:
                raise _UnknownOutcome(exc, lid, exc.entries)  # the outcome stays unknown
            first, last = exc.entries
            if last <= end:
                return Position(lid, first), Position(lid, last)
        # Not in the log. Still the writer?
        await self._refresh_role()
        self._check_role()
        if self.runner is runner:
            await self.roll("ledger_lost")
        return None

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

    async def _watch_log(self) -> None:
        """Learn early that the log was deleted or taken: one-shot watches on its znode,
        re-armed while the role is held. (The fence on our ledger stays the rule; this
        covers a log deleted elsewhere, whose ledgers' bookies forget the fence.)"""
        changed = asyncio.Event()
        while self.lost is None:
            changed.clear()
            try:
                await self.logs.store.exists_once(zkpaths.log(self.name), changed.set)
                current = (await self.logs.get(self.name)).log
                if not current.held_by(self.gateway_id, self.epoch):
                    self._lose(f"another writer took log {self.name}")
            except LogNotFound:
                self._lose(f"log {self.name} was deleted")
            except QuireError:
                # ZooKeeper trouble: the fence on our ledger still tells; watch again soon.
                await asyncio.sleep(WATCH_RETRY_S)
                continue
            if self.lost is None:
                await changed.wait()

    def _check_role(self) -> None:
        if self.lost is not None:
            raise NotWriter(f"this gateway is no longer the writer of log {self.name}: {self.lost}")

    def _lose(self, why: str) -> None:
        if self.lost is None:
            self.lost = why
            try:
                self.gw.metrics.log_writer_epoch.remove(self.name)
            except KeyError:
                pass
            log.info("lost the writer role", extra={"fields": {"log": self.name, "why": why}})
        self._cancel_age_roll()

    # ------------------------------------------------------------ rolls

    async def roll(self, reason: str = "request") -> int:
        """Roll to a new ledger (single flight: a roll in progress is shared)."""
        self._check_role()
        if self._rolling is None or self._rolling.done():
            self._rolling = asyncio.ensure_future(self._roll(reason))
        return await asyncio.shield(self._rolling)

    async def _roll(self, reason: str) -> int:
        # A new writer fences only the last TWO ledgers: what an earlier roll left must be
        # CLOSED before this roll lists another after it (found by the log simulator: a
        # rolled-out ledger whose close hung, or one a failed roll had listed, stayed OPEN
        # behind the last two for ever, and readers stopped at it, before every later
        # acknowledged record).
        while self._behind:
            await steps.close_for_good(self.gw, self._behind[0])
            self._behind.pop(0)
        op = lw.RollLog(self.log, self.version, self.gateway_id, self.epoch, self.gw.ctx.rng)
        try:
            rolled = await steps.run(self.gw, self.logs, op, op.start())
        except NotWriter as exc:
            self._lose(exc.message)
            raise
        except LogNotFound:
            self._lose(f"log {self.name} was deleted")
            raise
        except QuireError:
            if op.ledger_id is not None:
                self._behind.append(op.ledger_id)  # maybe listed: closed before the next roll
            raise
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
            await steps.close_for_good(self.gw, old.ledger_id)
        except QuireError as exc:
            log.info(
                "closing a rolled-out log ledger failed (a new writer recovers it)",
                extra={"fields": {"log": self.name, "ledger_id": old.ledger_id,
                                  "error": exc.code}},
            )  # fmt: skip

    def _maybe_roll(self) -> None:
        settings = self.gw.settings
        handle = self.runner.handle
        if self._rolling is not None and not self._rolling.done():
            return
        if handle.length >= settings.log_roll_bytes:
            self._spawn(self._auto_roll("size"))
        elif handle.next_entry_id >= settings.log_roll_entries:
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
            if self.lost is None and self.runner.ledger_id == ledger_id:
                self._spawn(self._auto_roll("age"))

        age_s = self.gw.settings.log_roll_age_s
        self._age_timer = asyncio.get_running_loop().call_later(age_s, due)

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
        await rebuild.rebuild_window(self.gw, self.name, self.dedup, previous)

    async def aclose(self) -> None:
        self._cancel_age_roll()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
