"""A streamed range read (binary frames, NDJSON) reads pages ahead of the one it sends
(gateway/ledgers/pages.py ``read_ahead``): whatever the pages' byte bounds cut, every entry
of the range comes once, in order; a client that goes away leaves no read running."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from gateway.ledgers.pages import read_ahead
from gateway.metadata_cache import MetadataCache
from gateway.metrics import GatewayMetrics
from services.ledger_client.runners import read as reads
from services.limits import PAGE_ENTRIES_MAX, RANGE_ENTRIES_MAX, READ_AHEAD_PAGES
from services.protocol.metadata import LedgerMetadata
from services.protocol.reads_messages import ReadDone
from tests.unit.ledger_client.fakes import FakeLedgerStore

METADATA = LedgerMetadata.new(1, ["a:1", "b:2", "c:3"], 3, 2)


class FakePages:
    """``read_page`` of a ledger whose pages are cut after ``cut(first)`` entries (as
    the byte bound cuts them) or ``entries_max``; records every read and the ones still
    running."""

    def __init__(self, cut: Any, delay: float = 0.0) -> None:
        self.cut = cut
        self.delay = delay
        self.asked: list[tuple[int, int]] = []
        self.running = 0

    async def read_page(
        self,
        ctx: object,
        metadata: LedgerMetadata,
        first: int,
        last: int,
        key: bytes,
        entries_max: int = PAGE_ENTRIES_MAX,
    ) -> ReadDone:
        self.asked.append((first, last))
        self.running += 1
        try:
            await asyncio.sleep(self.delay)
            end = min(last, first + entries_max - 1, first + self.cut(first) - 1)
            return ReadDone(tuple((i, b"%d" % i) for i in range(first, end + 1)), end + 1)
        finally:
            self.running -= 1


def _stream(pages: FakePages, stop: int, take: int | None = None) -> list[int]:
    async def run() -> list[int]:
        metrics = GatewayMetrics()
        metadata = MetadataCache(FakeLedgerStore(), metrics.metadata_cache_hits)
        gw = SimpleNamespace(ctx=SimpleNamespace(), metrics=metrics, metadata=metadata)
        first = await pages.read_page(gw.ctx, METADATA, 0, min(stop, 999), b"")
        seen: list[int] = []
        stream = read_ahead(gw, METADATA, first, stop, b"")  # type: ignore[arg-type]
        async for page in stream:
            seen += [entry_id for entry_id, _ in page.entries]
            if take is not None and len(seen) >= take:
                break
        await stream.aclose()
        return seen

    return asyncio.run(run())


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(pages: FakePages) -> FakePages:
        monkeypatch.setattr(reads, "read_page", pages.read_page)
        return pages

    return install


@pytest.mark.parametrize(
    "cut",
    [
        lambda first: 100_000,  # tiny entries: pages cut by their entry bound only
        lambda first: 1000,  # 8 KiB entries: cut by the byte bound past the first page
        lambda first: 128,  # 64 KiB entries: 8 MiB pages
        lambda first: 1 + first % 7,  # sizes that vary: every page ahead is re-planned
        lambda first: 1,
    ],
    ids=["full", "8k", "byte-bound", "varying", "single"],
)
def test_every_entry_comes_once_in_order(fake: Any, cut: Any) -> None:
    pages = fake(FakePages(cut))
    stop = 4321
    assert _stream(pages, stop) == list(range(stop + 1))
    assert pages.running == 0


def test_pages_are_read_ahead_and_planned_by_what_came(fake: Any) -> None:
    """With 128-entry pages, after the first (planned 1000, came 128) the pages ahead are
    planned 128 long: every read after the re-plan asks exactly the range that comes."""
    pages = fake(FakePages(lambda first: 128))
    _stream(pages, 2047)
    planned = pages.asked[1:]
    assert planned[0] == (128, 255)
    assert all(last - first + 1 == 128 for first, last in planned)
    assert len(pages.asked) == 2048 // 128  # no page was read twice


def test_pages_after_the_first_hold_up_to_the_range_bound(fake: Any) -> None:
    """The first page holds at most PAGE_ENTRIES_MAX entries (its answer comes soon), the
    pages ahead RANGE_ENTRIES_MAX: fewer requests a range, each to the bookies too."""
    pages = fake(FakePages(lambda first: 100_000))
    stop = PAGE_ENTRIES_MAX + 2 * RANGE_ENTRIES_MAX + 9
    assert _stream(pages, stop) == list(range(stop + 1))
    assert pages.asked == [
        (0, PAGE_ENTRIES_MAX - 1),
        (PAGE_ENTRIES_MAX, PAGE_ENTRIES_MAX + RANGE_ENTRIES_MAX - 1),
        (PAGE_ENTRIES_MAX + RANGE_ENTRIES_MAX, PAGE_ENTRIES_MAX + 2 * RANGE_ENTRIES_MAX - 1),
        (PAGE_ENTRIES_MAX + 2 * RANGE_ENTRIES_MAX, stop),
    ]


def test_a_client_that_goes_away_leaves_no_read_running(fake: Any) -> None:
    pages = fake(FakePages(lambda first: 100, delay=0.01))
    seen = _stream(pages, 100_000, take=250)
    assert seen[:250] == list(range(250))
    assert pages.running == 0
    assert len(pages.asked) <= 3 + READ_AHEAD_PAGES  # it read ahead, not the whole range
