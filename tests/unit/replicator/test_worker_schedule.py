"""The worker's scheduling of postponed open ledgers, with fakes for ZooKeeper and the
repair itself (``replicator.worker``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest

from replicator import worker as worker_module
from replicator.metrics import ReplicatorMetrics
from replicator.repair import RepairContext, RepairResult
from services.protocol.repair import Outcome
from services.settings import ReplicatorSettings

LEDGER = 7
GRACE_MS = 60_000
BOOKIES = ("b1:1", "b2:1", "b3:1")
DEADLINE_S = 10.0


class FakeRegistry:
    def __init__(self, bookies: tuple[str, ...]) -> None:
        self.bookies: dict[str, object] = {b: object() for b in bookies}
        self.decommissioned: set[str] = set()
        self._listeners: list[Callable[[], None]] = []

    def add_listener(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def register(self, *bookies: str) -> None:
        self.bookies = {b: object() for b in bookies}
        for callback in self._listeners:
            callback()


class FakeMarks:
    """One marked ledger; locks always free."""

    def __init__(self) -> None:
        self.marked_ids = [LEDGER]

    def watch_marked(self, callback: Callable[[], None]) -> None:
        pass

    def watch_enabled(self, callback: Callable[[bool], None]) -> None:
        pass

    async def marked(self, limit: int) -> list[int]:
        return list(self.marked_ids)

    async def try_lock(self, ledger_id: int, worker: str, since: int) -> int:
        return 1

    async def unlock(self, ledger_id: int, owner: int) -> bool:
        return True

    async def update_lock(self, lock: object, owner: int) -> None:
        pass


class FakeStore:
    connected = True
    session = 1

    def add_state_listener(self, callback: Callable[[str], None]) -> None:
        pass


def _now_ms() -> int:
    return int(time.time() * 1000)


def _worker(
    monkeypatch: pytest.MonkeyPatch, outcomes: list[RepairResult], calls: list[float]
) -> tuple[worker_module.Worker, FakeRegistry]:
    """A worker whose repairs answer ``outcomes`` in turn (then DONE), each call's time
    appended to ``calls``; its registry lists ``BOOKIES`` but the last."""
    registry = FakeRegistry(BOOKIES[:2])

    class FakeRepair:
        def __init__(self, ctx: Any, ledger_id: int, report: Any) -> None:
            self.ctx = ctx

        async def run(self) -> RepairResult:
            calls.append(time.monotonic())
            if outcomes:
                return outcomes.pop(0)
            self.ctx.marks.marked_ids.clear()  # whole: the mark is deleted
            return RepairResult(Outcome.DONE)

    monkeypatch.setattr(worker_module, "LedgerRepair", FakeRepair)
    settings = ReplicatorSettings(marks_poll_interval=0.05, open_ledger_grace=GRACE_MS / 1000)
    ctx = SimpleNamespace(
        settings=settings,
        marks=FakeMarks(),
        registry=registry,
        metrics=ReplicatorMetrics(),
        now_ms=_now_ms,
        enabled=lambda: True,
    )
    worker = worker_module.Worker(cast(RepairContext, ctx), cast(Any, FakeStore()), "w1")
    worker.start_watching()
    return worker, registry


async def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def test_a_postponed_open_ledger_is_looked_at_again_once_a_bookie_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A postponed open ledger is taken again as soon as a bookie becomes available
    again (its repair then finds the bookie answering and clears the mark), not at the
    end of its grace a minute later; a registry change that brings no bookie back (one
    leaving) leaves it postponed."""
    calls: list[float] = []

    async def main() -> None:
        due = _now_ms() + GRACE_MS
        worker, registry = _worker(monkeypatch, [RepairResult(Outcome.POSTPONED, due)], calls)
        task = asyncio.create_task(worker.run())
        try:
            await _until(
                lambda: LEDGER in worker._not_before and not worker.jobs,
                "the ledger to be postponed",
            )
            assert len(calls) == 1
            registry.register(BOOKIES[0])  # one leaves: nothing is back
            await asyncio.sleep(0.3)  # several polls
            assert len(calls) == 1, "taken again with no bookie back"
            registry.register(*BOOKIES)  # the missing bookie and the other are back
            await _until(lambda: len(calls) == 2, "the ledger to be taken again")
            assert calls[1] - calls[0] < GRACE_MS / 1000 / 2
            await _until(lambda: not worker.jobs and not worker._not_before, "the repair to end")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await worker.aclose()

    asyncio.run(main())


def test_a_bookie_back_while_the_repair_postpones_is_not_missed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bookie that becomes available while a repair is deciding to postpone (it asked
    the bookie before it registered again) makes the worker look at the ledger again at
    once rather than at the end of the grace."""
    calls: list[float] = []
    registry_box: list[FakeRegistry] = []

    class BackDuringRun:
        def __init__(self, ctx: Any, ledger_id: int, report: Any) -> None:
            self.ctx = ctx

        async def run(self) -> RepairResult:
            calls.append(time.monotonic())
            if len(calls) == 1:
                registry_box[0].register(*BOOKIES)  # registers while the round ends
                return RepairResult(Outcome.POSTPONED, _now_ms() + GRACE_MS)
            self.ctx.marks.marked_ids.clear()
            return RepairResult(Outcome.DONE)

    async def main() -> None:
        worker, registry = _worker(monkeypatch, [], calls)
        registry_box.append(registry)
        monkeypatch.setattr(worker_module, "LedgerRepair", BackDuringRun)
        task = asyncio.create_task(worker.run())
        try:
            await _until(lambda: len(calls) == 2, "the ledger to be taken again")
            assert calls[1] - calls[0] < GRACE_MS / 1000 / 2
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await worker.aclose()

    asyncio.run(main())


def test_a_stop_that_comes_as_the_worker_is_woken_stops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The app stops the worker by cancelling its task; a watch may wake the worker in
    the same turn of the loop (a mark deleted as the replicator stops). The cancel must
    end the task: with asyncio.wait_for around the wake-up wait it was lost (wait_for
    returned the event's result instead), the loop ran on, and the replicator's
    shutdown waited for it for ever."""
    calls: list[float] = []

    async def main() -> None:
        worker, _ = _worker(monkeypatch, [], calls)
        task = asyncio.create_task(worker.run())
        try:
            await _until(lambda: len(calls) == 1 and not worker.jobs, "the repair")
            await _until(lambda: bool(worker._wake._waiters), "the worker waiting to be woken")
            worker._wake.set()
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=DEADLINE_S)
            assert task in done, "the worker went on after it was cancelled"
            assert task.cancelled()
        finally:
            task.cancel()

    asyncio.run(main())
