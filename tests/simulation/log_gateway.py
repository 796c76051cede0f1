"""A simulated gateway's log layer: what gateway/logs/steps.py and gateway/logs/writer.py
do, step for step, over the simulated world (``logs``).

It runs the real ``AcquireWriter`` and ``RollLog`` (services/protocol/log_writer.py) by
carrying out their effects, appends records in the real envelope
(services/protocol/log_records.py) through the current ledger's real ``WriteHandle``,
and settles an append whose add failed with an unknown outcome as ``LogWriter._settle``
does: wait (bounded) for the ledger to be CLOSED and compare; not in it -> re-read
the log: another writer means ``not_writer``, else roll and append again. The dedup
window is rebuilt from the log's tail by the gateway's own ``scan_tail``.

``fence_last_only`` (a plan flag, never the product's) makes the gateway fence only
the LAST ledger when it takes the role: the bug protocol.txt warns against.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from gateway.logs.dedup import Appended, scan_tail
from gateway.logs.steps import SETTLE_POLL_FIRST_S
from gateway.logs.writer import _UNSETTLED, APPEND_ATTEMPTS_MAX
from services.errors import (
    IdempotencyKeyReused,
    LogNotFound,
    MetadataUnavailable,
    NotWriter,
    QuireError,
    QuorumTimeout,
    invariant,
)
from services.protocol import log_records
from services.protocol import log_writer as lw
from services.protocol.logs import LogMetadata, Position
from services.protocol.messages import RecoveryDone, RecoveryFailed
from services.protocol.metadata import LedgerState
from services.protocol.recovery import LedgerRecovery
from services.protocol.writer import HandleState
from tests.simulation.logs import Coroutine, Fut, LogWorld, Task, gather
from tests.simulation.runner import Runner
from tests.simulation.scenario import LedgerSim

RECOVERY_ATTEMPTS_MAX = 5
# LogWriter._roll closes (or recovers) the ledgers earlier rolls left (the rolled-out
# one, one a failed roll may have listed) before listing another: a new writer fences
# only the last two. A test turns it off to show the
# simulator finds the bug it fixed (an OPEN ledger behind the last two, for ever).
ROLL_CLOSES_PREVIOUS = True
# The product's dedup.Unsettled (seed 56 of the duel runs found the bug): an append whose outcome is
# left unknown (its ledger not CLOSED within the settle time) is forgotten by the
# gateway's window, so a retry with its key appends again, and when the first attempt
# is recovered into the log after all the key is there twice. With this on, the window
# keeps such a key with its ledger and entries, and a retry first settles them: in the
# log -> answered with those positions; not -> appended; still unknown -> unknown again.
KEEP_UNSETTLED_KEYS = True
SETTLE_POLL_MAX_MS = 200


class FenceLastOnly(lw.AcquireWriter):
    """The broken variant: fences only the last ledger of the list."""

    def _on_read(self, event: lw.LogRead) -> list[lw.Effect]:
        effects = super()._on_read(event)
        return [
            lw.RecoverLedgers(e.ledger_ids[-1:]) if isinstance(e, lw.RecoverLedgers) else e
            for e in effects
        ]


@dataclass(frozen=True, slots=True)
class AppendResult:
    first: Position
    last: Position
    deduplicated: bool
    epoch: int


class Window:
    """gateway/logs/dedup.DedupWindow with the simulator's futures (no expiry: a run is
    far shorter than the window)."""

    def __init__(self, world: LogWorld) -> None:
        self.world = world
        self.keys: dict[str, Appended] = {}
        self.in_flight: dict[str, tuple[bytes, Fut]] = {}
        self.unsettled: dict[str, tuple[bytes, int, int, int]] = {}  # digest, ledger, entries
        self.ready = world.fut()

    def claim(self, key: str, digest: bytes) -> Coroutine:
        while True:
            known = self.keys.get(key)
            if known is not None:
                if known.digest != digest:
                    raise IdempotencyKeyReused(f"key {key} reused")
                return known
            flying = self.in_flight.get(key)
            if flying is None:
                self.in_flight[key] = (digest, self.world.fut())
                return None
            if flying[0] != digest:
                raise IdempotencyKeyReused(f"key {key} reused")
            result = yield flying[1]
            if result is not None:
                return result

    def settle(self, key: str, appended: Appended | None) -> None:
        flying = self.in_flight.pop(key, None)
        if appended is not None:
            self.keys[key] = appended
        if flying is not None:
            flying[1].resolve(appended)

    def load(self, found: list[tuple[str, Appended]]) -> None:
        for key, appended in found:
            self.keys.setdefault(key, appended)


class Writer:
    """gateway/logs/writer.LogWriter: the role at one epoch."""

    def __init__(self, gw: LogGateway, acquired: lw.Acquired, ledger: LedgerSim) -> None:
        self.gw = gw
        self.epoch = acquired.epoch
        self.log: LogMetadata = acquired.log
        self.version = acquired.version
        self.ledger = ledger
        self.lost: str | None = None
        self.window = Window(gw.world)
        self.rolling: Fut | None = None
        self.behind: list[int] = []  # listed and left behind by this writer, maybe OPEN

    def check_role(self) -> None:
        if self.lost is not None:
            raise NotWriter(f"{self.gw.name} no longer writes the log: {self.lost}")


class LogGateway:
    def __init__(self, world: LogWorld, name: str, fence_last_only: bool) -> None:
        self.world = world
        self.name = name
        self.fence_last_only = fence_last_only
        self.rng = random.Random(world.config.seed * 101 + len(world.gateways))
        self.life = 0
        self.up = True
        self.writer: Writer | None = None
        self.runners: list[Runner] = []  # write handles and recoveries of this life
        self._acquiring: Fut | None = None

    # ------------------------------------------------------------ life

    def spawn(self, gen: Coroutine) -> Fut:
        return Task(self, gen).result

    def crash(self) -> None:
        if not self.up:
            return
        self.up = False
        self.life += 1  # every task of the old life stops
        for runner in self.runners:
            runner.dead = True
        self.runners = []
        self.writer = None
        self._acquiring = None

    def restart(self) -> None:
        if not self.up:
            self.up = True
            self.life += 1

    # ------------------------------------------------------------ the role

    def acquire(self) -> Fut:
        """Take the writer role (single flight): the ``Writer``, or the error."""
        if not self.up:
            fut = self.world.fut()
            fut.resolve(None, QuireError("gateway down"))
            return fut
        if self._acquiring is None or self._acquiring.done:
            self._acquiring = self.spawn(self._acquire())
        return self._acquiring

    def _acquire(self) -> Coroutine:
        world = self.world
        kind = FenceLastOnly if self.fence_last_only else lw.AcquireWriter
        op = kind(world.log_cell.log.name, self.name, self.rng)
        acquired = yield from self._run(op, op.start())
        invariant(isinstance(acquired, lw.Acquired), "acquire ended otherwise")
        ledger = world.ledger(acquired.ledger_id)
        old = self.writer
        if old is not None:
            old.lost = f"this gateway took the role again at epoch {acquired.epoch}"
        writer = self.writer = Writer(self, acquired, ledger)
        world.log_checker.on_acquired(self.name, acquired, world.scheduler.now)
        previous = [lid for lid in acquired.log.ledgers if lid != acquired.ledger_id]
        self.spawn(self._rebuild(writer, previous))
        return writer

    def _run(self, op: lw.AcquireWriter | lw.RollLog, effects: list[lw.Effect]) -> Coroutine:
        """gateway/logs/steps.run."""
        pending = list(effects)
        while pending:
            effect = pending.pop(0)
            if isinstance(effect, lw.Acquired | lw.Rolled):
                return effect
            if isinstance(effect, lw.Failed):
                raise effect.exception()
            if isinstance(effect, lw.DeleteLedger):
                self.world.stats["unused log ledger deleted"] += 1
                continue
            event = yield from self._carry_out(op, effect)
            pending.extend(op.handle(event))
        raise QuireError("a log operation ended without an answer")

    def _carry_out(self, op: Any, effect: lw.Effect) -> Coroutine:
        world = self.world
        try:
            if isinstance(effect, lw.ReadLog):
                log, version = yield world.read_log()
                return lw.LogRead(log, version)
            if isinstance(effect, lw.RecoverLedgers):
                futs = [self.spawn(self.close_for_good(lid)) for lid in effect.ledger_ids]
                yield gather(world.scheduler, futs)
                return lw.LedgersRecovered()
            if isinstance(effect, lw.CreateLedger):
                e, w, a = effect.ensemble_size, effect.write_quorum, effect.ack_quorum
                ledger = yield world.create_ledger(self, e, w, a)
                return lw.LedgerCreated(ledger.ledger_id)
            if isinstance(effect, lw.WriteLog):
                answer, version = yield world.cas_log(self.name, effect.log, effect.version)
                if answer == "written":
                    return lw.LogWritten(version)
                return lw.LogConflict() if answer == "conflict" else lw.LogWriteUnknown()
            if isinstance(effect, lw.Wait):
                yield world.sleep(effect.ms)
                return lw.Waited()
        except QuireError as exc:
            return lw.StepFailed(type(exc), exc.message)
        raise QuireError(f"unexpected log effect {effect!r}")

    def close_for_good(self, ledger_id: int) -> Coroutine:
        """steps.close_for_good: close our own live handle, else fence and recover."""
        world = self.world
        ledger = world.ledger(ledger_id)
        mine = ledger.writer in self.runners
        if mine and ledger.handle.state in (HandleState.OPEN, HandleState.CLOSING):
            try:
                yield world.close(ledger)
                return None
            except QuireError:
                world.stats["own close failed, recovering"] += 1
        for attempt in range(RECOVERY_ATTEMPTS_MAX):
            yield world.sleep(world.network.delay())
            if world.metadata_fails():
                error: QuireError = MetadataUnavailable("simulated")
            else:
                md, version = ledger.read_metadata(f"{self.name}-rec", stale=True)
                if md.state is LedgerState.CLOSED:
                    return None
                try:
                    yield self._recover(ledger, md, version)
                    return None
                except QuireError as exc:
                    error = exc
            if attempt + 1 == RECOVERY_ATTEMPTS_MAX:
                raise error
            yield world.sleep(self.rng.randint(50, 300))
        return None

    def _recover(self, ledger: LedgerSim, md: Any, version: int) -> Fut:
        fut = self.world.fut()
        name = f"{self.name}-rec"
        recovery = LedgerRecovery(md, version, digest_key=ledger.key,
                                  limits=ledger.config.recovery_limits)  # fmt: skip
        ledger.recoveries.append(recovery)

        def on_result(effect: Any) -> None:
            if isinstance(effect, RecoveryDone):
                ledger.checker.on_recovery_done(name, effect)
                fut.resolve(effect.metadata)
            elif isinstance(effect, RecoveryFailed):
                fut.resolve(None, effect.exception())

        runner = Runner(ledger, name, recovery, on_result, stale_reads=True)
        self.runners.append(runner)
        runner.execute(recovery.start(self.world.scheduler.now))
        return fut

    # ------------------------------------------------------------ appends

    def append(self, payloads: tuple[bytes, ...], key: str | None) -> Fut:
        """An append request: ``AppendResult`` or the error it is answered with."""
        return self.spawn(self._append(payloads, key))

    def _append(self, payloads: tuple[bytes, ...], key: str | None) -> Coroutine:
        w = self.writer
        if w is None:
            raise NotWriter(f"{self.name} is not the writer")
        w.check_role()
        digest = log_records.records_digest(payloads) if key is not None else None
        if key is not None and digest is not None:
            yield w.window.ready
            known = yield from w.window.claim(key, digest)
            if known is not None:
                self.world.stats["dedup hit"] += 1
                return AppendResult(known.first, known.last, True, w.epoch)
        appended: Appended | None = None
        try:
            if key is not None and key in w.window.unsettled:
                known = yield from self._settle_key(w, key)
                if known is not None:
                    appended = known
                    return AppendResult(known.first, known.last, True, w.epoch)
            now = self.world.scheduler.now
            entries = log_records.encode(payloads, now, key, digest)
            try:
                first, last = yield from self._append_entries(w, entries)
            except _UNSETTLED as exc:
                where = getattr(exc, "ledger_id", None)
                if KEEP_UNSETTLED_KEYS and key and exc.entries is not None and where is not None:
                    w.window.unsettled[key] = (digest or b"", where, *exc.entries)
                raise
            appended = Appended(first, last, digest or b"", now)
        finally:
            if key is not None:
                w.window.settle(key, appended)
        self._maybe_roll(w)
        return AppendResult(first, last, False, w.epoch)

    def _settle_key(self, w: Writer, key: str) -> Coroutine:
        """A retry of an append whose outcome was left unknown: its positions when the
        first attempt is in the log, None when it is not (append it), else unknown."""
        digest, lid, first, last = w.window.unsettled[key]
        end = yield from self._closed_end(self.world.ledger(lid))
        if end is None:
            raise QuorumTimeout(f"the append with key {key} has an unknown outcome still")
        del w.window.unsettled[key]
        if last > end:
            return None
        self.world.stats["unsettled key found in the log"] += 1
        return Appended(Position(lid, first), Position(lid, last), digest, 0)

    def _append_entries(self, w: Writer, entries: tuple[bytes, ...]) -> Coroutine:
        for _ in range(APPEND_ATTEMPTS_MAX):
            w.check_role()
            ledger = w.ledger
            try:
                ack = yield self.world.add(ledger, entries)
            except _UNSETTLED as exc:
                settled = yield from self._settle(w, ledger, exc)
                if settled is not None:
                    return settled
                continue
            lid = ledger.ledger_id
            return Position(lid, ack.first_entry_id), Position(lid, ack.last_entry_id)
        raise NotWriter(f"the append failed on {APPEND_ATTEMPTS_MAX} ledgers in a row")

    def _settle(self, w: Writer, ledger: LedgerSim, exc: QuireError) -> Coroutine:
        lid = ledger.ledger_id
        if exc.entries is not None:
            end = yield from self._closed_end(ledger)
            if end is None:
                self.world.stats["append outcome left unknown"] += 1
                exc.ledger_id = lid  # type: ignore[attr-defined]
                raise exc
            first, last = exc.entries
            if last <= end:
                self.world.stats["failed add found in the log"] += 1
                return Position(lid, first), Position(lid, last)
        yield from self._refresh_role(w)
        w.check_role()
        if w.ledger is ledger:
            yield from self.roll(w, "ledger_lost")
        return None

    def _closed_end(self, ledger: LedgerSim) -> Coroutine:
        world = self.world
        deadline = world.scheduler.now + world.plan.settle_timeout_ms
        delay = int(SETTLE_POLL_FIRST_S * 1000)
        while True:
            yield world.sleep(world.network.delay())
            if not world.metadata_fails():
                md, _ = ledger.read_metadata(self.name, stale=False)
                if md.state is LedgerState.CLOSED:
                    return md.last_entry_id
            if world.scheduler.now + delay > deadline:
                return None
            yield world.sleep(delay)
            delay = min(delay * 2, SETTLE_POLL_MAX_MS)

    def _refresh_role(self, w: Writer) -> Coroutine:
        log, version = yield self.world.read_log()
        if log.held_by(self.name, w.epoch):
            w.log, w.version = log, version
            return
        w.lost = f"another writer took the log (now {log.writer})"

    # ------------------------------------------------------------ rolls

    def roll(self, w: Writer, reason: str) -> Coroutine:
        """LogWriter.roll: single flight."""
        w.check_role()
        if w.rolling is None or w.rolling.done:
            w.rolling = self.spawn(self._roll(w, reason))
        return (yield w.rolling)

    def _roll(self, w: Writer, reason: str) -> Coroutine:
        while w.behind and ROLL_CLOSES_PREVIOUS:
            yield from self.close_for_good(w.behind[0])
            w.behind.pop(0)
        op = lw.RollLog(w.log, w.version, self.name, w.epoch, self.rng)
        try:
            rolled = yield from self._run(op, op.start())
        except (NotWriter, LogNotFound) as exc:
            w.lost = exc.message
            raise
        except QuireError:
            if op.ledger_id is not None:
                w.behind.append(op.ledger_id)
            raise
        old = w.ledger
        w.behind.append(old.ledger_id)
        w.ledger = self.world.ledger(rolled.ledger_id)
        w.log, w.version = rolled.log, rolled.version
        self.world.stats[f"roll ({reason})"] += 1
        self.spawn(self._close_old(old))
        return rolled.ledger_id

    def _close_old(self, old: LedgerSim) -> Coroutine:
        if old.handle.state not in (HandleState.OPEN, HandleState.CLOSING):
            return
        try:
            yield self.world.close(old)
        except QuireError:
            self.world.stats["closing a rolled-out ledger failed"] += 1

    def _maybe_roll(self, w: Writer) -> None:
        if w.rolling is not None and not w.rolling.done:
            return
        if w.lost is None and w.ledger.handle.next_entry_id >= self.world.plan.roll_entries:
            self.spawn(self._auto_roll(w, "entries"))

    def _auto_roll(self, w: Writer, reason: str) -> Coroutine:
        try:
            yield from self.roll(w, reason)
        except QuireError:
            self.world.stats["roll failed"] += 1

    def roll_on_demand(self) -> None:
        w = self.writer
        if self.up and w is not None and w.lost is None:
            self.spawn(self._auto_roll(w, "request"))

    # ------------------------------------------------------------ the window

    def _rebuild(self, w: Writer, previous: list[int]) -> Coroutine:
        """LogWriter.rebuild_window over the CLOSED ledgers before ours (read from the
        bookies' storage: a read that finds no copy fails the rebuild, as a failed read
        does in the gateway)."""
        world = self.world
        yield world.sleep(world.network.delay())
        ledgers: list[tuple[int, int]] = []
        for lid in previous:
            md = world.ledger(lid).cell.metadata
            if md.state is LedgerState.CLOSED and md.last_entry_id is not None:
                ledgers.append((lid, md.last_entry_id))

        async def read_page(lid: int, first: int, last: int) -> list[tuple[int, bytes]]:
            found = world.stored(world.ledger(lid), first, last)
            if any(data is None for data in found):
                raise QuireError(f"ledger {lid}: no copy of an entry in {first}..{last}")
            return [(first + i, data) for i, data in enumerate(found) if data is not None]

        coro = scan_tail(ledgers, read_page, world.scheduler.now, 10**9, 10**6)
        try:
            coro.send(None)
        except StopIteration as stop:
            w.window.load(stop.value)
        except QuireError:
            world.stats["window rebuild failed"] += 1
        else:
            coro.close()
            invariant(False, "scan_tail waited on something")
        w.window.ready.resolve()
