"""Reads without a real bookie (gateway/reads.py): the non-writer LAC long poll waits for
the LAC to pass ``after``, not merely for an entry to arrive, and answers the current
LAC when the time is up."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from gateway import reads
from gateway.metrics import GatewayMetrics
from services.bookie_client import LacInfo
from services.protocol.metadata import LedgerMetadata


class FakeBookies:
    """Every bookie of the ensemble stores every entry (E == Qw); a long poll ends when
    the LAC or the last entry passes ``after``, like bookie/ledgers.py ``wait_past``."""

    def __init__(self) -> None:
        self.lac = -1
        self.last_entry_id = -1
        self.changed = asyncio.Event()
        self.calls = 0

    def set(self, lac: int, last_entry_id: int) -> None:
        self.lac, self.last_entry_id = lac, last_entry_id
        self.changed.set()
        self.changed = asyncio.Event()

    def info(self) -> LacInfo:
        return LacInfo(1, self.lac, self.last_entry_id, False)

    async def read_lac(self, ledger_id: int, after: int | None = None, wait_ms: int = 0):  # type: ignore[no-untyped-def]
        self.calls += 1
        deadline = time.monotonic() + wait_ms / 1000
        while after is not None and not (self.lac > after or self.last_entry_id > after):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except TimeoutError:
                break
        return self.info()


def _ctx(bookies: FakeBookies) -> SimpleNamespace:
    return SimpleNamespace(bookie=lambda _: bookies, metrics=GatewayMetrics())


METADATA = LedgerMetadata.new(1, ["a:1", "b:2", "c:3"], 3, 3)


def test_long_poll_waits_for_the_lac_not_just_the_entry() -> None:
    """Entry 5 arrives carrying LAC 4 (every bookie stores it and ends its poll); the
    LAC update to 5 follows 100 ms later: the poll answers 5, not 4, and at once then."""

    async def run() -> tuple[int, float]:
        bookies = FakeBookies()
        bookies.set(4, 4)

        async def writer() -> None:
            await asyncio.sleep(0.05)
            bookies.set(4, 5)  # the entry, with the LAC of its send time
            await asyncio.sleep(0.1)
            bookies.set(5, 5)  # the writer's idle LAC update

        task = asyncio.ensure_future(writer())
        started = time.monotonic()
        lac = await reads.wait_bookies_lac(_ctx(bookies), METADATA, 4, 5_000)
        await task
        return lac, time.monotonic() - started

    lac, elapsed = asyncio.run(run())
    assert lac == 5
    assert 0.1 <= elapsed < 2


def test_long_poll_answers_the_current_lac_when_time_is_up() -> None:
    """Nothing new within wait_ms: the current LAC, after about wait_ms."""

    async def run() -> tuple[int, float]:
        bookies = FakeBookies()
        bookies.set(7, 7)
        started = time.monotonic()
        lac = await reads.wait_bookies_lac(_ctx(bookies), METADATA, 7, 300)
        return lac, time.monotonic() - started

    lac, elapsed = asyncio.run(run())
    assert lac == 7
    assert 0.25 <= elapsed < 2


def test_long_poll_with_an_entry_stored_but_no_lac_update_is_bounded() -> None:
    """An entry past ``after`` whose LAC never comes: the poll re-asks at a bounded rate
    and answers the old LAC when the time is up."""

    async def run() -> tuple[int, float, int]:
        bookies = FakeBookies()
        bookies.set(2, 3)
        started = time.monotonic()
        lac = await reads.wait_bookies_lac(_ctx(bookies), METADATA, 2, 400)
        return lac, time.monotonic() - started, bookies.calls

    lac, elapsed, calls = asyncio.run(run())
    assert lac == 2
    assert 0.35 <= elapsed < 2
    # three bookies, at most one poll each per LAC_REPOLL_DELAY_S (plus the first)
    assert calls <= 3 * (0.4 / reads.LAC_REPOLL_DELAY_S + 2)
