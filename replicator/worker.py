"""The worker's scheduler: which marked ledgers to repair, how many at once, and when.

Marks are found by a watch on ``/underreplication/changed`` (the auditor bumps it
after marking) and by a walk of the marks every ``--marks-poll-interval``; every
wake walks the marks and starts a repair for each marked ledger that is not in
flight and not backing off, up to ``--ledgers-in-flight-max`` at once. A repair
takes the ledger's lock (a lock another worker holds: skipped, counted as
contention), runs ``replicator.repair.LedgerRepair`` and always releases the lock
before the ledger can be taken again.
A failure backs off exponentially with jitter; a postponed open ledger comes back
when its grace period ends, or at once when a bookie becomes available again (the
registry lists it, not decommissioning): if it is the one the ledger's last fragment
waits for, the repair finds it answering and clears the mark instead of leaving the
ledger marked for the rest of the grace; if not, the ledger is postponed again to the
same time (the grace runs from when its bookie was first seen missing).

Session states (docs/style.md §8). SUSPENDED: no new lock is taken until CONNECTED; a
repair that ends meanwhile (its ZooKeeper call failed with the connection) still
holds its lock, since the session and its ephemeral lock may survive the drop: the
release waits the drop out (``UnderReplicationStore.unlock``), and a lock this
session still holds for this worker is found ours by the next ``try_lock``.
LOST: the session's locks are gone, so every repair in flight is cancelled (its
swap would still be safe, by CAS, but another worker may now hold the lock) and
the worker carries on once CONNECTED with a new session. While replication is
disabled (``/underreplication/disabled``) no repair starts and the ones in flight
stop before their next swap or mark deletion: marks stay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any

from kazoo.protocol.states import KazooState

from replicator.limits import (
    CONTENTION_RETRY_S,
    LEDGER_BACKOFF_FIRST_S,
    LEDGER_BACKOFF_MAX_S,
    MARKS_SCAN_MAX,
)
from replicator.repair import LedgerRepair, Progress, RepairContext
from services.errors import QuireError
from services.protocol.repair import Outcome
from services.zk.store import MetadataStore
from services.zk.underreplication import LockInfo

log = logging.getLogger(__name__)


@dataclass
class Job:
    ledger_id: int
    session: int  # the ZooKeeper session that holds the ledger's lock
    lock: LockInfo
    started: float = field(default_factory=time.monotonic)
    task: asyncio.Task[None] | None = None
    progress: dict[str, Any] = field(default_factory=dict)
    returns: int = 0  # the worker's count of bookies available again when it started


class Worker:
    def __init__(self, ctx: RepairContext, store: MetadataStore, worker_id: str) -> None:
        self.ctx = ctx
        self.store = store
        self.worker_id = worker_id
        self.settings = ctx.settings
        self.enabled = True
        self.paused = False
        self.jobs: dict[int, Job] = {}
        self._starting: set[int] = set()
        self._not_before: dict[int, float] = {}
        self._postponed: set[int] = set()  # open ledgers waiting for their grace
        self._available: set[str] = set()  # registered and not decommissioning
        self._returns = 0  # registry changes that made a bookie available again
        self._failures: dict[int, int] = {}
        self._wake = asyncio.Event()
        self._rng = random.Random()
        self._tasks: set[asyncio.Task[None]] = set()
        ctx.enabled = lambda: self.enabled

    # ------------------------------------------------------------ events

    def start_watching(self) -> None:
        """Install the watches (the store is connected)."""
        self.store.add_state_listener(self._on_state)
        self.ctx.marks.watch_marked(self.wake)
        self.ctx.marks.watch_enabled(self._on_enabled)
        self._available = self._usable_bookies()
        self.ctx.registry.add_listener(self._on_registry)

    def wake(self) -> None:
        self._wake.set()

    def _usable_bookies(self) -> set[str]:
        registry = self.ctx.registry
        return {b for b in registry.bookies if b not in registry.decommissioned}

    def _on_registry(self) -> None:
        """A bookie available again may be one a postponed open ledger waits for: look at
        those ledgers now rather than at the end of their grace."""
        available = self._usable_bookies()
        back = available - self._available
        self._available = available
        if not back:
            return
        self._returns += 1  # a repair in flight that postpones now looks again at once
        if not self._postponed:
            return
        log.info("bookies available again (%s): %d postponed open ledgers looked at now",
                 ", ".join(sorted(back)), len(self._postponed))  # fmt: skip
        for ledger_id in self._postponed:
            self._not_before.pop(ledger_id, None)
        self._postponed.clear()
        self.wake()

    def _on_enabled(self, enabled: bool) -> None:
        if enabled != self.enabled:
            log.info("replication %s", "enabled" if enabled else "disabled")
        self.enabled = enabled
        self.wake()

    def _on_state(self, state: str) -> None:
        if state == KazooState.SUSPENDED:
            self.paused = True
        elif state == KazooState.LOST:
            self.paused = True
            if self.jobs:
                log.warning(
                    "ZooKeeper session lost: abandoning %d repairs in flight (their locks are "
                    "gone); they are taken again after reconnecting",
                    len(self.jobs),
                )
            for job in list(self.jobs.values()):
                if job.task is not None:
                    job.task.cancel()
        elif state == KazooState.CONNECTED:
            self.paused = False
            self.wake()

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Walk the marks on every wake and at least every poll interval, for ever."""
        while True:
            try:
                await self._scan()
            except QuireError as exc:
                log.warning("walking the marks failed: %s", exc)
            timeout = self.settings.marks_poll_interval
            if self._not_before:
                soonest = min(self._not_before.values()) - time.monotonic()
                timeout = max(0.05, min(timeout, soonest))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()

    async def _scan(self) -> None:
        if self.paused or not self.enabled or not self.store.connected:
            return
        room = self.settings.ledgers_in_flight_max - len(self.jobs) - len(self._starting)
        if room <= 0:
            return
        marked = await self.ctx.marks.marked(limit=MARKS_SCAN_MAX)
        now = time.monotonic()
        present = set(marked)
        for ledger_id in list(self._not_before):
            if ledger_id not in present:
                self._forget(ledger_id)
        for ledger_id in marked:
            if room <= 0:
                break
            if ledger_id in self.jobs or ledger_id in self._starting:
                continue
            if self._not_before.get(ledger_id, 0.0) > now:
                continue
            room -= 1
            self._starting.add(ledger_id)
            task = asyncio.get_running_loop().create_task(self._take(ledger_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _forget(self, ledger_id: int) -> None:
        self._not_before.pop(ledger_id, None)
        self._failures.pop(ledger_id, None)
        self._postponed.discard(ledger_id)

    async def _take(self, ledger_id: int) -> None:
        """Lock the ledger and repair it in a task of its own (cancelled on LOST)."""
        try:
            since = self.ctx.now_ms()
            try:
                session = await self.ctx.marks.try_lock(ledger_id, self.worker_id, since)
            except QuireError as exc:
                log.warning("locking ledger %d failed: %s", ledger_id, exc)
                self._back_off(ledger_id)
                return
            if session is None:
                self.ctx.metrics.lock_contention.inc()
                self._postponed.discard(ledger_id)
                self._not_before[ledger_id] = time.monotonic() + CONTENTION_RETRY_S
                return
            job = Job(ledger_id, session, LockInfo(ledger_id, self.worker_id, since, {}))
            job.returns = self._returns
            self.jobs[ledger_id] = job
            self.ctx.metrics.ledgers_in_flight.set(len(self.jobs))
            job.task = asyncio.current_task()
        finally:
            self._starting.discard(ledger_id)
        try:
            await self._repair(job)
        finally:
            # The job stays in flight until its lock is released, so that no new take of
            # the ledger by this worker races the release (both under one session).
            try:
                await asyncio.shield(self._unlock(job))
            finally:
                self.jobs.pop(ledger_id, None)
                self.ctx.metrics.ledgers_in_flight.set(len(self.jobs))
                self.wake()

    async def _repair(self, job: Job) -> None:
        ctx, ledger_id = self.ctx, job.ledger_id

        async def report(progress: Progress) -> None:
            job.progress = progress.as_dict()
            if self._owns(job):
                lock = LockInfo(ledger_id, self.worker_id, job.lock.since, job.progress)
                await ctx.marks.update_lock(lock, job.session)

        try:
            result = await LedgerRepair(ctx, ledger_id, report).run()
        except asyncio.CancelledError:
            ctx.metrics.failures.labels("session_lost").inc()
            self._back_off(ledger_id, first=True)
            raise
        except QuireError as exc:
            log.warning("repair of ledger %d failed: %s", ledger_id, exc)
            ctx.metrics.failures.labels(exc.code).inc()
            self._back_off(ledger_id)
            return
        except Exception:
            log.exception("repair of ledger %d failed", ledger_id)
            ctx.metrics.failures.labels("internal").inc()
            self._back_off(ledger_id)
            return
        if result.outcome is Outcome.DONE:
            ctx.metrics.ledgers_replicated.inc()
            ctx.metrics.repair_duration.observe(time.monotonic() - job.started)
            log.info("ledger %d is whole again", ledger_id)
            self._forget(ledger_id)
        elif result.outcome is Outcome.POSTPONED and result.due_ms is not None:
            wait_s = max(0.0, (result.due_ms - ctx.now_ms()) / 1000)
            if job.returns != self._returns:
                wait_s = 0.0  # a bookie came back during the repair: maybe the awaited one
            log.info("ledger %d is open: its last fragment waits %.1f s", ledger_id, wait_s)
            self._not_before[ledger_id] = time.monotonic() + wait_s
            self._postponed.add(ledger_id)
        else:
            self._forget(ledger_id)

    def _owns(self, job: Job) -> bool:
        """The job's session lives (SUSPENDED included): a lost session's locks are gone."""
        return self.store.session == job.session

    async def _unlock(self, job: Job) -> None:
        try:
            released = await self.ctx.marks.unlock(job.ledger_id, job.session)
        except QuireError as exc:
            released = False
            log.warning("unlocking ledger %d failed: %s", job.ledger_id, exc)
        if not released:
            log.warning(
                "ledger %d: its lock could not be released (ZooKeeper unreachable); it is "
                "this worker's again at its next attempt",
                job.ledger_id,
            )

    def _back_off(self, ledger_id: int, first: bool = False) -> None:
        self._postponed.discard(ledger_id)  # a failure's back-off is not cut short
        failures = 0 if first else self._failures.get(ledger_id, 0) + 1
        self._failures[ledger_id] = failures
        delay = min(LEDGER_BACKOFF_MAX_S, LEDGER_BACKOFF_FIRST_S * 2 ** max(0, failures - 1))
        delay *= 0.5 + self._rng.random()
        self._not_before[ledger_id] = time.monotonic() + delay

    # ------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        return {
            "id": self.worker_id,
            "enabled": self.enabled,
            "in_flight": [
                {"ledger_id": job.ledger_id, "progress": dict(job.progress)}
                for job in sorted(self.jobs.values(), key=lambda j: j.ledger_id)
            ],
        }

    async def aclose(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
