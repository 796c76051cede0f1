"""How a tail read waits (gateway/logs/reads.py ``_wait``; issue 42, "many open things"):
on this gateway's own write handle of the log it waits the whole remaining time in one
wait, woken by the handle (LAC, close, fence) or by the log writer losing its role, and
never wakes on a timer to re-read the list; anywhere else it waits in slices of
``WAIT_SLICE_MS`` and the list is re-read between them. Before, every waiting read woke
every 500 ms: 2,500 idle tailing readers took 80 % of the gateway's core."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from gateway.limits import WAIT_SLICE_MS
from gateway.logs import reads
from services.protocol.metadata import LedgerMetadata

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


def test_a_read_on_a_handle_the_log_writer_does_not_hold_waits_a_slice() -> None:
    """A handle of the log's ledger that is not the log writer's current one (another
    log's writer here, or a writer that rolled) is waited on for a slice only."""
    runner = Runner()
    other = SimpleNamespace(runner=Runner(), lost=None)
    asyncio.run(reads._wait(gateway(runner, other), "tail", readable(), 30_000))
    assert [(a, t, u) for a, t, u in runner.waits] == [(4, WAIT_SLICE_MS / 1000, None)]
    runner.waits.clear()
    asyncio.run(reads._wait(gateway(runner, None), "tail", readable(), 30_000))
    assert [(a, t) for a, t, _ in runner.waits] == [(4, WAIT_SLICE_MS / 1000)]
