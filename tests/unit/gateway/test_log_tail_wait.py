"""How a tail read waits (gateway/logs/reads.py ``_wait``; issue 42, "many open things"):
on this gateway's own write handle of the log it waits the whole remaining time in one
wait, woken by the handle (LAC, close, fence) or by the log writer losing its role, and
never wakes on a timer to re-read the list; anywhere else it waits in slices of
``WAIT_SLICE_MS`` and the list is re-read between them. Before, every waiting read woke
every 500 ms: 2,500 idle tailing readers took 80 % of the gateway's core.

A whole poll on this gateway's writer of the log reads the log's list from the writer's
copy (``LogWriter.listed``), not from ZooKeeper: a poll asked ZooKeeper twice, 666
reads a second for 10,000 readers. An empty poll ends in the last sixteenth of its
``wait_ms``, never after it (services/protocol/long_poll.py)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from gateway.limits import WAIT_SLICE_MS
from gateway.logs import reads
from gateway.metadata_cache import HIT_WRITER, MetadataCache
from gateway.metrics import GatewayMetrics
from gateway.stopping import Stopping
from services.errors import MetadataUnavailable
from services.protocol import long_poll
from services.protocol.logs import LogMetadata, Position
from services.protocol.metadata import LedgerMetadata
from services.zk.log_store import VersionedLog

POOL = ["b0:1", "b1:1", "b2:1"]


class Runner:
    """A write handle's runner that records its waits."""

    def __init__(self) -> None:
        self.waits: list[tuple[int, float, Callable[[], bool] | None]] = []

    async def wait_lac(
        self, after: int, timeout_s: float, until: Callable[[], bool] | None = None
    ) -> int:
        self.waits.append((after, timeout_s, until))
        return after


def gateway(runner: Runner, writer: Any) -> Any:
    writers = SimpleNamespace(get=lambda name: writer if name == "tail" else None)
    return SimpleNamespace(
        handles=SimpleNamespace(live=lambda lid: runner if lid == 7 else None),
        log_writers=[writers],
        logs=writers,
        stopping=Stopping(),
    )


def readable() -> reads.Readable:
    return reads.Readable(LedgerMetadata.new(7, POOL, 2, 2), 4, False, 100)


def test_a_read_on_the_writers_own_handle_waits_the_whole_time_once() -> None:
    """One wait of the whole remaining time, which ends early once the writer lost its
    role (``until``)."""
    runner = Runner()
    writer = SimpleNamespace(runner=runner, lost=None)
    asyncio.run(reads._wait(gateway(runner, writer), "tail", readable(), 30_000))
    assert len(runner.waits) == 1
    after, timeout_s, until = runner.waits[0]
    assert (after, timeout_s) == (4, 30.0)
    assert until is not None and until() is False
    writer.lost = "another writer took log tail"
    assert until() is True


def test_every_wait_ends_once_the_gateways_shutdown_began() -> None:
    """The waits on a handle (the writer's whole-time one, another's slice) end when the
    shutdown begins (gateway/stopping.py): their ``until`` turns true."""
    for holder in ("writer", "other"):
        runner = Runner()
        writer = SimpleNamespace(runner=runner if holder == "writer" else Runner(), lost=None)
        gw = gateway(runner, writer)
        asyncio.run(reads._wait(gw, "tail", readable(), 30_000))
        (_, _, until) = runner.waits[0]
        assert until is not None and until() is False
        gw.stopping.begin()
        assert until() is True, holder


def test_a_poll_answers_at_once_once_the_shutdown_began() -> None:
    """An empty poll of 30 s on the writer's handle answers as soon as the shutdown
    begins, empty; one that starts after it began answers without waiting; a wait on
    bookies (``unless_stopping``) is cancelled and answers None."""
    runner = WakeableRunner()

    async def scenario() -> tuple[float, float, object]:
        gw, _, _ = poll_gateway(runner, LogMetadata("tail", ledgers=(5, 7)))
        gw.stopping.on_begin(runner.wake_waiters)  # as Gateway.build has it
        started = time.monotonic()
        poll = asyncio.ensure_future(reads.read(gw, "tail", Position(7, 5), 100, 30_000))
        cancelled = asyncio.Event()

        async def bookies() -> int:
            try:
                await asyncio.sleep(30)
            finally:
                cancelled.set()
            return 9

        on_bookies = asyncio.ensure_future(gw.stopping.unless_stopping(bookies()))
        for _ in range(100):  # the poll reaches its wait within a few turns of the loop
            if gw.stopping.waiting == 1:
                break
            await asyncio.sleep(0)
        assert gw.stopping.waiting == 1
        gw.stopping.begin()
        page = await asyncio.wait_for(poll, 5)
        assert page.records == []
        first = time.monotonic() - started
        started = time.monotonic()
        await reads.read(gw, "tail", Position(7, 5), 100, 30_000)
        again = time.monotonic() - started
        assert gw.stopping.waiting == 0 and cancelled.is_set()
        return first, again, await on_bookies

    first, again, waited = asyncio.run(scenario())
    assert waited is None
    assert first < 5 and again < 1


def test_a_read_on_a_handle_the_log_writer_does_not_hold_waits_a_slice() -> None:
    """A handle of the log's ledger that is not the log writer's current one (another
    log's writer here, or a writer that rolled) is waited on for a slice only."""
    runner = Runner()
    other = SimpleNamespace(runner=Runner(), lost=None)
    asyncio.run(reads._wait(gateway(runner, other), "tail", readable(), 30_000))
    assert [(a, t) for a, t, _ in runner.waits] == [(4, WAIT_SLICE_MS / 1000)]
    runner.waits.clear()
    asyncio.run(reads._wait(gateway(runner, None), "tail", readable(), 30_000))
    assert [(a, t) for a, t, _ in runner.waits] == [(4, WAIT_SLICE_MS / 1000)]


class SleepingRunner(Runner):
    """A write handle at LAC 4 that nothing is appended to: a wait lasts its time-out."""

    def __init__(self) -> None:
        super().__init__()
        self.lac = 4
        self.metadata = LedgerMetadata.new(7, POOL, 2, 2)
        self.length = 100

    async def wait_lac(
        self, after: int, timeout_s: float, until: Callable[[], bool] | None = None
    ) -> int:
        await super().wait_lac(after, timeout_s, until)
        await asyncio.sleep(timeout_s)
        return self.lac


class WakeableRunner(SleepingRunner):
    """A write handle at LAC 4 whose waits end at their time-out, or once woken with
    their ``until`` true."""

    def __init__(self) -> None:
        super().__init__()
        self.woken: asyncio.Event | None = None

    def wake_waiters(self) -> None:
        if self.woken is not None:
            self.woken.set()

    async def wait_lac(
        self, after: int, timeout_s: float, until: Callable[[], bool] | None = None
    ) -> int:
        self.waits.append((after, timeout_s, until))
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while until is None or not until():
            self.woken = asyncio.Event()
            try:
                await asyncio.wait_for(self.woken.wait(), max(0.0, end - loop.time()))
            except TimeoutError:
                break
        return self.lac


class ZooKeeperLogs:
    """The log's znode, read through ``get``: the reads are counted; while not
    ``connected`` each fails as a cut-off session's does (also the ``connected`` a
    ``MetadataCache`` given this as its store looks at)."""

    def __init__(self, log: LogMetadata) -> None:
        self.log = log
        self.reads = 0
        self.connected = True

    async def get(self, name: str) -> VersionedLog:
        self.reads += 1
        if not self.connected:
            raise MetadataUnavailable("ZooKeeper is not connected")
        return VersionedLog(self.log, 3)


def poll_gateway(
    runner: SleepingRunner, listed: LogMetadata | None
) -> tuple[Any, ZooKeeperLogs, GatewayMetrics]:
    log = LogMetadata("tail", ledgers=(5, 7))
    zookeeper = ZooKeeperLogs(log)
    writer = SimpleNamespace(runner=runner, lost=None, listed=listed)
    logs = SimpleNamespace(get=lambda name: writer if name == "tail" else None, logs=zookeeper)
    metrics = GatewayMetrics()
    gw = SimpleNamespace(
        handles=SimpleNamespace(live=lambda lid: runner if lid == 7 else None),
        log_writers=[logs],
        logs=logs,
        metadata=MetadataCache(SimpleNamespace(connected=True), metrics.metadata_cache_hits),
        ctx=SimpleNamespace(rng=random.Random(3)),
        stopping=Stopping(),
    )
    return gw, zookeeper, metrics


def test_an_empty_poll_on_the_writer_asks_zookeeper_nothing() -> None:
    """A poll that finds nothing, on the writer gateway whose copy of the list is
    current, reads the list from that copy on both of its passes (before and after the
    wait) and never from ZooKeeper; without the copy (the watch fired, the role lost)
    it reads ZooKeeper on each pass, as before."""
    runner = SleepingRunner()
    gw, zookeeper, metrics = poll_gateway(runner, LogMetadata("tail", ledgers=(5, 7)))
    page = asyncio.run(reads.read(gw, "tail", Position(7, 5), 100, 160))
    assert (page.records, page.next, page.caught_up) == ([], Position(7, 5), True)
    assert zookeeper.reads == 0
    assert metrics.metadata_cache_hits.labels(HIT_WRITER)._value.get() == 2
    assert len(runner.waits) == 1

    gw, zookeeper, metrics = poll_gateway(SleepingRunner(), None)
    asyncio.run(reads.read(gw, "tail", Position(7, 5), 100, 160))
    assert zookeeper.reads == 2
    assert metrics.metadata_cache_hits.labels(HIT_WRITER)._value.get() == 0


def test_an_empty_poll_ends_in_the_last_sixteenth_of_its_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Asked to wait 800 ms, an empty poll draws a wait between 750 and 800 ms, waits on
    the handle no longer than that (once), and answers after it (plus the scheduling of
    a loop, which a busy machine stretches); polls asked alike draw different waits.

    The spread is checked on the recorded draws, not on the measured times: a stall of
    the loop ends every timer in one turn, which would erase a measured spread."""
    drawn: dict[asyncio.Task[Any] | None, int] = {}
    draw = long_poll.wait_ms

    def recorded_draw(asked_ms: int) -> int:
        ms = draw(asked_ms)
        drawn[asyncio.current_task()] = ms
        return ms

    monkeypatch.setattr(long_poll, "wait_ms", recorded_draw)
    timeouts: dict[asyncio.Task[Any] | None, float] = {}

    class TimedRunner(SleepingRunner):
        async def wait_lac(
            self, after: int, timeout_s: float, until: Callable[[], bool] | None = None
        ) -> int:
            timeouts[asyncio.current_task()] = timeout_s
            return await super().wait_lac(after, timeout_s, until)

    runner = TimedRunner()
    gw, _, _ = poll_gateway(runner, LogMetadata("tail", ledgers=(5, 7)))
    # Per poll: the drawn wait, the handle's time-out (ms) and the time the poll took.
    polls: list[tuple[int, float, float]] = []

    async def polls_of_eight() -> None:
        async def one() -> None:
            started = time.monotonic()
            await reads.read(gw, "tail", Position(7, 5), 100, 800)
            waited_ms = (time.monotonic() - started) * 1000
            task = asyncio.current_task()
            polls.append((drawn[task], timeouts[task] * 1000, waited_ms))

        await asyncio.gather(*(one() for _ in range(8)))

    asyncio.run(polls_of_eight())
    assert len(polls) == 8 and len(runner.waits) == 8, polls  # one wait per poll
    assert all(750 <= ms <= 800 for ms, _, _ in polls), polls
    draws = [ms for ms, _, _ in polls]
    assert max(draws) - min(draws) > 5, draws
    # The handle is asked to wait what is left of the drawn wait, never the asked 800 ms
    # (a poll that ignored its draw would wait 800 where it drew less: fails here).
    assert all(timeout_ms <= ms for ms, timeout_ms, _ in polls), polls
    # Not before the drawn wait is over (by construction of the deadline, to the ms the
    # wait is rounded to), nor far after: a poll that waited its whole wait again would
    # take 750 ms or more longer (a second wait of any length on the handle is caught
    # exactly by the count of waits above); 700 ms leaves room for a loaded machine.
    assert all(ms - 2 <= waited <= ms + 700 for ms, _, waited in polls), polls
