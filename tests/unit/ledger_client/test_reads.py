"""Reads without a real bookie (services/ledger_client/runners/read.py running the core's ReadOp and
LacOp): the non-writer LAC long poll waits for
the LAC to pass ``after``, not merely for an entry to arrive, and answers the current
LAC when the time is up; reads fail over past down, corrupt and hanging replicas
without waiting out a time-out per entry; the LAC a non-writer gateway reports (and
reads up to) never goes backwards."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from gateway.ledgers.pages import last_readable
from services.bookie_client import LacInfo, RangeResult
from services.errors import BookieUnavailable, EntryNotFound, LedgerNotFound
from services.ledger_client.metrics import LedgerClientMetrics
from services.ledger_client.runners import read as reads
from services.protocol.metadata import LedgerMetadata
from services.protocol.reads_lac import SeenLacs
from services.wire.digest import seal
from services.wire.framing import FramedRecord


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

    async def read_lac(self, ledger_id: int, after: int | None = None, wait_ms: int = 0) -> LacInfo:
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


REPOLL_DELAY_MS = 20


def _settings(speculative_read_ms: int = 2_000) -> SimpleNamespace:
    return SimpleNamespace(
        speculative_read_ms=speculative_read_ms, lac_repoll_delay_ms=REPOLL_DELAY_MS
    )


def _ctx(bookies: FakeBookies) -> SimpleNamespace:
    return SimpleNamespace(
        bookie=lambda _: bookies, metrics=LedgerClientMetrics(None, "gateway"),
        settings=_settings(), lacs_seen=SeenLacs(),
    )  # fmt: skip


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
        lac = (await reads.wait_bookies_lac(_ctx(bookies), METADATA, 4, 5_000)).lac
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
        lac = (await reads.wait_bookies_lac(_ctx(bookies), METADATA, 7, 300)).lac
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
        lac = (await reads.wait_bookies_lac(_ctx(bookies), METADATA, 2, 400)).lac
        return lac, time.monotonic() - started, bookies.calls

    lac, elapsed, calls = asyncio.run(run())
    assert lac == 2
    assert 0.35 <= elapsed < 2
    # three bookies, at most one poll each per lac_repoll_delay_ms (plus the first)
    assert calls <= 3 * (400 / REPOLL_DELAY_MS + 2)


# ---------------------------------------------------------------- failover and hanging bookies


class ReplicaBookie:
    """A bookie holding sealed entries of one ledger: ``ok``, ``hang`` (never answers),
    ``down`` (fails at once) or ``corrupt`` (answers records with a bad digest)."""

    def __init__(self, entries: dict[int, bytes], mode: str = "ok") -> None:
        self.entries = entries
        self.mode = mode
        self.calls = 0
        self.ranges: list[tuple[int, tuple[int, ...]]] = []  # (stride, residues) asked

    def _record(self, entry_id: int) -> FramedRecord:
        record = FramedRecord(
            1, entry_id, entry_id - 1, self.entries[entry_id], digest_type="crc32c"
        )
        record = seal(record)
        if self.mode == "corrupt":
            record = record._replace(payload=record.payload + b"!")
        return record

    async def _gate(self) -> None:
        self.calls += 1
        if self.mode == "hang":
            await asyncio.sleep(3600)
        if self.mode == "down":
            raise BookieUnavailable("connection refused")

    async def read_entry(self, ledger_id: int, entry_id: int) -> FramedRecord:
        await self._gate()
        if entry_id not in self.entries:
            raise EntryNotFound(f"no entry {entry_id}")
        return self._record(entry_id)

    async def read_range(
        self, ledger_id: int, first: int, last: int, max_entries: int = 1000, max_bytes: int = 0,
        stride: int = 0, residues: tuple[int, ...] = (),
    ) -> RangeResult:  # fmt: skip
        await self._gate()
        self.ranges.append((stride, residues))
        ids = [e for e in sorted(self.entries) if first <= e <= last
               and (not stride or e % stride in residues)][:max_entries]  # fmt: skip
        return RangeResult([self._record(e) for e in ids], max(self.entries, default=-1))

    async def read_lac(self, ledger_id: int, after: int | None = None, wait_ms: int = 0) -> LacInfo:
        await self._gate()
        return LacInfo(1, max(self.entries, default=-1), max(self.entries, default=-1), False)


def _cluster(modes: list[str], count: int = 9) -> tuple[LedgerMetadata, dict[str, ReplicaBookie]]:
    """E=3, Qw=2 over bookies b0..b2 with ``modes``; each holds its write-set entries."""
    metadata = LedgerMetadata.new(1, ["b0", "b1", "b2"], 2, 2)
    stores: dict[str, dict[int, bytes]] = {b: {} for b in metadata.ensemble}
    for e in range(count):
        for b in metadata.write_set_bookies(e):
            stores[b][e] = f"entry {e}".encode()
    return metadata, {b: ReplicaBookie(stores[b], m) for b, m in zip(stores, modes, strict=True)}


def _ctx_of(bookies: dict[str, ReplicaBookie], speculative_ms: int = 100) -> SimpleNamespace:
    """A context whose speculative read delay is 100 ms (or ``speculative_ms``)."""
    return SimpleNamespace(
        bookie=lambda b: bookies[b], metrics=LedgerClientMetrics(None, "gateway"),
        settings=_settings(speculative_ms), lacs_seen=SeenLacs(),
    )  # fmt: skip


def test_read_entry_asks_the_next_replica_when_one_hangs() -> None:
    """A replica silent for speculative_read_ms gets the next one asked in parallel; one
    that fails or answers a bad digest moves on at once; a corrupt replica is never
    returned; no valid replica at all is BookieUnavailable."""
    metadata, bookies = _cluster(["hang", "ok", "ok"])  # entry 0: write set b0, b1

    async def run() -> None:
        started = time.monotonic()
        data = await reads.read_single(_ctx_of(bookies), metadata, 0, 8, b"")
        assert data == b"entry 0"
        assert 0.09 <= time.monotonic() - started < 1
        for first in ("down", "corrupt"):
            # "At once": well before a speculative delay of 60 s (a loaded machine may take
            # longer than 100 ms to run the read at all).
            bookies["b0"].mode = first
            started = time.monotonic()
            data = await reads.read_single(_ctx_of(bookies, 60_000), metadata, 0, 8, b"")
            assert data == b"entry 0" and time.monotonic() - started < 30
        bookies["b1"].mode = "corrupt"
        with pytest.raises(BookieUnavailable):
            await reads.read_single(_ctx_of(bookies), metadata, 0, 8, b"")
        with pytest.raises(EntryNotFound):
            await reads.read_single(_ctx_of(bookies), metadata, 9, 8, b"")

    asyncio.run(run())


def test_read_page_gives_up_on_a_hanging_cover_bookie() -> None:
    """A cover bookie whose range read hangs costs one speculative_read_ms per page, not a
    time-out per entry: its entries come from their other replica, the slow one last."""
    metadata, bookies = _cluster(["hang", "ok", "ok"], count=30)

    async def run() -> None:
        started = time.monotonic()
        page = await reads.read_page(_ctx_of(bookies), metadata, 0, 29, b"")
        assert [e for e, _ in page.entries] == list(range(30))
        assert [d for _, d in page.entries] == [f"entry {e}".encode() for e in range(30)]
        assert time.monotonic() - started < 0.5
        assert bookies["b0"].calls == 1  # only the range read: never asked first again

    asyncio.run(run())


def test_bookies_lac_does_not_wait_for_a_hanging_bookie() -> None:
    """A non-writer LAC read uses the bookies that answered within speculative_read_ms;
    with no answer at all from anyone it is BookieUnavailable."""
    metadata, bookies = _cluster(["hang", "ok", "ok"])

    async def run() -> None:
        started = time.monotonic()
        assert await reads.bookies_lac(_ctx_of(bookies), metadata) == 8
        assert time.monotonic() - started < 0.5
        for b in bookies.values():
            b.mode = "down"
        with pytest.raises(BookieUnavailable):
            await reads.bookies_lac(_ctx_of(bookies), metadata)

    asyncio.run(run())


# ---------------------------------------------------------------- the LAC never goes backwards


class LacBookie:
    """A bookie that answers a fixed LAC (or ``ledger_not_found``) and a range read of
    entries 0..``last``."""

    def __init__(self, lac: int | None) -> None:
        self.lac = lac

    async def read_lac(self, ledger_id: int, after: int | None = None, wait_ms: int = 0) -> LacInfo:
        if self.lac is None:
            raise LedgerNotFound("a new bookie: no such ledger yet")
        return LacInfo(ledger_id, self.lac, self.lac, False)

    async def read_range(
        self, ledger_id: int, first: int, last: int, max_entries: int = 1000, max_bytes: int = 0,
        stride: int = 0, residues: tuple[int, ...] = (),
    ) -> RangeResult:  # fmt: skip
        ids = [e for e in range(first, min(last, 9) + 1) if not stride or e % stride in residues]
        records = [
            seal(FramedRecord(ledger_id, e, e - 1, f"entry {e}".encode(), digest_type="crc32c"))
            for e in ids
        ]
        return RangeResult(records, 9)


def test_a_bookie_reporting_a_lower_lac_later_never_lowers_the_reported_lac() -> None:
    """A non-writer gateway learnt LAC 7 from the ensemble (a, b, c). Then the writer
    replaced b and c by d and e, new bookies that report LAC 3 and "no such ledger":
    the LAC read, the long poll and the range read's readable end still say 7 (and a
    long poll for after=5 answers at once); a higher LAC is taken as it comes; a deleted
    ledger's LAC is forgotten."""
    bookies = {"a": LacBookie(7), "b": LacBookie(7), "c": LacBookie(5)}
    bookies |= {"d": LacBookie(3), "e": LacBookie(None)}
    before = LedgerMetadata.new(1, ["a", "b", "c"], 3, 2)
    after = before.with_ensemble(8, ("a", "d", "e"))
    ctx = SimpleNamespace(
        bookie=lambda b: bookies[b], metrics=LedgerClientMetrics(None, "gateway"),
        settings=_settings(100), lacs_seen=SeenLacs(),
    )  # fmt: skip
    gw = SimpleNamespace(ctx=ctx, handles=SimpleNamespace(writer_lac=lambda _: None))

    async def run() -> None:
        assert await reads.bookies_lac(ctx, before) == 7
        bookies["a"].lac = None  # a lost the ledger too (a reformatted disk)
        assert await reads.bookies_lac(ctx, after) == 7
        assert await last_readable(gw, after) == 7
        page = await reads.read_page(ctx, after, 0, await last_readable(gw, after), b"")
        assert [e for e, _ in page.entries] == list(range(8))
        started = time.monotonic()
        assert (await reads.wait_bookies_lac(ctx, after, 5, 5_000)).lac == 7
        assert time.monotonic() - started < 0.5  # answered at once: 7 is past after=5
        assert (await reads.wait_bookies_lac(ctx, after, 7, 50)).lac == 7  # timed out: still 7
        bookies["d"].lac = 9
        assert await reads.bookies_lac(ctx, after) == 9
        bookies["d"].lac = 3
        assert await reads.bookies_lac(ctx, after) == 9
        reads.forget_lac(ctx, 1)
        assert await reads.bookies_lac(ctx, after) == 3

    asyncio.run(run())
