"""A simulated gateway's log layer: the runner of gateway/logs/steps.py and
gateway/logs/writer.py over the simulated world (``logs``).

It runs the real ``AcquireWriter`` and ``RollLog`` (services/protocol/log_writer.py)
and the real ``LogAppendOp`` with the real idempotency window
(services/protocol/log_append.py, services/protocol/dedup.py) by carrying out their
effects here: adds through the current ledger's real ``WriteHandle``, waits for a
ledger to close (bounded by the plan's settle time-out), re-reads of the log, rolls,
waiters of a key in flight. The window is rebuilt from the log's tail by the gateway's
own ``scan_tail``.

``fence_last_only`` (a plan flag, never the product's) makes the gateway fence only
the LAST ledger when it takes the role: the bug protocol.txt warns against.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

from gateway.limits import SETTLE_POLL_FIRST_S
from gateway.logs.rebuild import walk_tail
from gateway.logs.steps import LOG_METADATA_KEY, WRITER_METADATA_KEY
from services.errors import (
    LogNotFound,
    MetadataUnavailable,
    NotWriter,
    QuireError,
    invariant,
)
from services.protocol import log_append as la
from services.protocol import log_records, saved_keys
from services.protocol import log_writer as lw
from services.protocol.dedup import Appended, DedupWindow
from services.protocol.logs import LogMetadata, Position
from services.protocol.messages import RecoveryDone, RecoveryFailed
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.protocol.recovery import LedgerRecovery
from services.protocol.writer import HandleState
from services.zk.ledger_store import VersionedLedger
from tests.simulation.logs import LOG_NAME, Coroutine, Fut, LogWorld, Task, gather
from tests.simulation.runner import Runner
from tests.simulation.scenario import LedgerSim

RECOVERY_ATTEMPTS_MAX = 5
# ``RollLog(close_behind=...)``, a test-only switch: on, a roll closes (or recovers) the
# ledgers earlier rolls left (the rolled-out one, one a failed roll may have listed)
# before listing another, since a new writer fences only the last two. A test turns it
# off to show the simulator finds the bug it fixed (an OPEN ledger behind the last two,
# for ever).
ROLL_CLOSES_PREVIOUS = True
# The window's test-only switch ``DedupWindow(keep_unsettled=...)`` (duel seed 56 found
# the bug): off, an append whose outcome is left unknown (its ledger not CLOSED within
# the settle time) is forgotten by the window, so a retry with its key appends again,
# and when the first attempt is recovered into the log after all the key is there
# twice. A test turns it off to show the simulator finds that bug.
KEEP_UNSETTLED_KEYS = True
# A test-only switch: on, a new writer starts its stamps at the time of the log's last
# entry (gateway/logs/writer.py ``_read_floor``; read here straight from the bookies'
# storage, at once); off, a gateway whose clock is behind its predecessor's stamps its
# first appends below the log's last stamp. A test turns it off to show the checker
# sees stamps go backwards.
STAMP_FLOOR = True
# Each gateway's clock is off the simulation's by this much (by the order the gateways
# were made), so that a hand-over goes to a slower clock as often as to a faster one.
CLOCK_SKEWS_MS = (3_000, 0, 1_500)
# The simulated window keeps every key of a run (a run is far shorter than a window).
WINDOW_MS = 10**9
WINDOW_KEYS_MAX = 10**6
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


class Writer:
    """gateway/logs/writer.LogWriter: the role at one epoch."""

    def __init__(
        self, gw: LogGateway, acquired: lw.Acquired, ledger: LedgerSim, floor_ms: int
    ) -> None:
        self.gw = gw
        self.stamps = la.Stamps(floor_ms)
        self.epoch = acquired.epoch
        self.log: LogMetadata = acquired.log
        self.version = acquired.version
        self.ledger = ledger
        self.lost: str | None = None
        self.window = DedupWindow(WINDOW_MS, WINDOW_KEYS_MAX, keep_unsettled=KEEP_UNSETTLED_KEYS)
        self.ready = gw.world.fut()  # the window rebuilt
        self._released: dict[str, Fut] = {}  # key -> its waiters' future
        self.rolling: Fut | None = None
        self.behind: list[int] = []  # listed and left behind by this writer, maybe OPEN

    def check_role(self) -> None:
        if self.lost is not None:
            raise NotWriter(f"{self.gw.name} no longer writes the log: {self.lost}")

    def released(self, key: str) -> Fut:
        """Resolved when the append in flight with ``key`` ends (gateway/logs/dedup.py)."""
        fut = self._released.get(key)
        if fut is None:
            fut = self._released[key] = self.gw.world.fut()
        return fut

    def release(self, key: str, appended: Appended | None) -> None:
        fut = self._released.pop(key, None)
        if fut is not None:
            fut.resolve(appended)


class LogGateway:
    def __init__(self, world: LogWorld, name: str, fence_last_only: bool) -> None:
        self.world = world
        self.name = name
        self.fence_last_only = fence_last_only
        self.skew_ms = CLOCK_SKEWS_MS[len(world.gateways) % len(CLOCK_SKEWS_MS)]
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
        previous = [lid for lid in acquired.log.ledgers if lid != acquired.ledger_id]
        floor_ms = self._last_stamp(previous) if STAMP_FLOOR else 0
        writer = self.writer = Writer(self, acquired, ledger, floor_ms)
        world.log_checker.on_acquired(self.name, acquired, world.scheduler.now)
        self.spawn(self._rebuild(writer, previous))
        return writer

    def _last_stamp(self, previous: list[int]) -> int:
        """gateway/logs/time_search.last_stamp: the stamp of the last entry of the last
        non-empty CLOSED ledger of ``previous`` (0: none)."""
        for lid in reversed(previous):
            ledger = self.world.ledger(lid)
            md = ledger.cell.metadata
            end = md.last_entry_id
            if md.state is not LedgerState.CLOSED or end is None or end < 0:
                continue
            [data] = self.world.stored(ledger, end, end)
            stamp = log_records.decode(data).time_ms if data is not None else None
            return stamp or 0
        return 0

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
        """LogWriter._append: the real ``LogAppendOp``, its effects carried out here."""
        w = self.writer
        if w is None:
            raise NotWriter(f"{self.name} is not the writer")
        w.check_role()
        if key is not None:
            yield w.ready
        op = la.LogAppendOp(w.window, LOG_NAME, payloads, key)
        stats = self.world.stats
        pending = op.start(self.world.scheduler.now)
        while pending:
            effect = pending.pop(0)
            if isinstance(effect, la.AppendDone):
                if effect.deduplicated:
                    stats["unsettled key found in the log" if effect.settled else "dedup hit"] += 1
                    return AppendResult(effect.first, effect.last, True, w.epoch)
                if effect.settled:
                    stats["failed add found in the log"] += 1
                self._maybe_roll(w)
                return AppendResult(effect.first, effect.last, False, w.epoch)
            if isinstance(effect, la.AppendFailed):
                if effect.outcome_unknown:
                    stats["append outcome left unknown"] += 1
                raise effect.error
            if isinstance(effect, la.ReleaseKey):
                w.release(effect.key, effect.appended)
                continue
            event = yield from self._carry_out_append(w, effect)
            pending.extend(op.handle(event, self.world.scheduler.now))
        raise QuireError("an append ended without an answer")

    def _carry_out_append(self, w: Writer, effect: la.Effect) -> Coroutine:
        try:
            if isinstance(effect, la.AddEntries):
                w.check_role()
                ledger = w.ledger
                # Stamped as the add is handed over (``world.add`` gives ids at once).
                stamp = w.stamps.next(self.world.scheduler.now + self.skew_ms)
                try:
                    ack = yield self.world.add(ledger, effect.encode(stamp))
                except QuireError as exc:
                    return la.AddFailed(ledger.ledger_id, exc, stamp)
                first, last = ack.first_entry_id, ack.last_entry_id
                return la.EntriesAdded(ledger.ledger_id, first, last, stamp)
            if isinstance(effect, la.AwaitClosed):
                end = yield from self._closed_end(self.world.ledger(effect.ledger_id))
                return la.LedgerStillOpen() if end is None else la.LedgerEnded(end)
            if isinstance(effect, la.WaitForKey):
                return la.KeyReleased((yield w.released(effect.key)))
            if isinstance(effect, la.ReadRole):
                yield from self._refresh_role(w)
                w.check_role()
                return la.RoleHeld(w.ledger.ledger_id)
            if isinstance(effect, la.RollLedger):
                yield from self.roll(w, effect.reason)
                return la.RollDone()
        except QuireError as exc:
            return la.StepFailed(exc)
        raise QuireError(f"unexpected append effect {effect!r}")

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
        op = lw.RollLog(w.log, w.version, self.name, w.epoch, self.rng, behind=w.behind,
                        close_behind=ROLL_CLOSES_PREVIOUS)  # fmt: skip
        try:
            rolled = yield from self._run(op, op.start())
        except (NotWriter, LogNotFound) as exc:
            w.lost = exc.message
            raise
        finally:
            w.behind = op.behind
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
            return
        yield from self._save_keys(old)

    def _save_keys(self, old: LedgerSim) -> Coroutine:
        """LogWriter._save_keys: the closed ledger read back once and its keys saved
        beside the log (a round trip each way; lost if this gateway crashes first, and
        not made when a copy of an entry cannot be read or the ledger is large)."""
        world = self.world
        md = old.cell.metadata
        end = md.last_entry_id
        if md.state is not LedgerState.CLOSED or end is None or end + 1 > saved_keys.ENTRIES_MAX:
            return
        yield world.sleep(world.network.delay())
        found = world.stored(old, 0, end)
        if any(data is None for data in found):
            world.stats["keys not saved (an entry unreadable)"] += 1
            return
        summary = saved_keys.summarise(old.ledger_id, end, enumerate(found))  # type: ignore[arg-type]
        if not saved_keys.savable(summary):
            return
        yield world.sleep(world.network.delay())
        if world.metadata_fails():
            world.stats["keys not saved (ZooKeeper unavailable)"] += 1
            return
        world.saved_keys[old.ledger_id] = summary
        world.stats["keys saved"] += 1

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
        # The saved keys as one listing of the log's segments reads them (some of them
        # may be read, some not: a ledger without saved keys is read from the bookies).
        saved = {lid: world.saved_keys[lid] for lid in previous if lid in world.saved_keys}
        world.stats["rebuild: ledgers taken from saved keys"] += len(saved)

        async def read_metadata(chunk: list[int]) -> list[VersionedLedger | QuireError | None]:
            out: list[VersionedLedger | QuireError | None] = []
            for lid in chunk:
                cell = world.ledger(lid).cell
                # Every ledger of the simulated log is a writer's own.
                custom = {LOG_METADATA_KEY: LOG_NAME, WRITER_METADATA_KEY: self.name}
                out.append(VersionedLedger(replace(cell.metadata, custom=custom), cell.version))
            return out

        async def read_entries(
            md: LedgerMetadata, first: int, last: int
        ) -> list[tuple[int, bytes]]:
            lid = md.ledger_id
            found = world.stored(world.ledger(lid), first, last)
            if any(data is None for data in found):
                raise QuireError(f"ledger {lid}: no copy of an entry in {first}..{last}")
            return [(first + i, data) for i, data in enumerate(found) if data is not None]

        coro = walk_tail(
            read_metadata, read_entries, previous, world.scheduler.now, 10**9, 10**6, saved,
            read_ahead=0,
        )  # fmt: skip
        try:
            coro.send(None)
        except StopIteration as stop:
            w.window.load(stop.value, world.scheduler.now)
        except QuireError:
            world.stats["window rebuild failed"] += 1
        else:
            coro.close()
            invariant(False, "walk_tail waited on something")
        w.ready.resolve()
