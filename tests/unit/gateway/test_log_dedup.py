"""The idempotency window on the event loop (gateway/logs/dedup.py): the waiters of a key
in flight, the tail scan's stopping rules, and which of a log's ledgers the rebuild
reads and lets end its walk (gateway/logs/rebuild.py). The window itself is pure and
tested in tests/unit/protocol/test_dedup.py."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar, cast

import pytest

from gateway import limits
from gateway.logs import rebuild
from gateway.logs.dedup import LogWindow, scan_tail
from gateway.logs.rebuild import TailKind, tail_kind
from gateway.logs.steps import LOG_METADATA_KEY, WRITER_METADATA_KEY
from gateway.service import Gateway
from services.errors import InvalidArgument, MetadataUnavailable
from services.protocol import log_records as lr
from services.protocol import saved_keys
from services.protocol.dedup import IN_FLIGHT, Appended, DedupWindow
from services.protocol.logs import Position
from services.protocol.metadata import LedgerMetadata
from services.protocol.saved_keys import SavedLedger
from services.zk.ledger_store import VersionedLedger
from services.zk.saved_keys_store import SavedKeysStore

T = TypeVar("T")
D1, D2 = lr.records_digest([b"1"]), lr.records_digest([b"2"])


def appended(lid: int, eid: int, digest: bytes = D1, at_ms: int = 1000) -> Appended:
    return Appended(Position(lid, eid), Position(lid, eid), digest, at_ms)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def test_waiters_of_a_key_in_flight_get_its_outcome() -> None:
    """Appends waiting on a key in flight wake when it is released, with its positions
    (or None: it failed); a release nobody waits for is harmless."""

    async def body() -> None:
        window = LogWindow(DedupWindow(60_000, 10))
        assert window.keys.claim("k", D1, 0) is None
        assert window.keys.claim("k", D1, 0) is IN_FLIGHT
        first = asyncio.ensure_future(window.released("k"))
        second = asyncio.ensure_future(window.released("k"))
        await asyncio.sleep(0)
        assert not first.done() and not second.done()
        window.keys.settle("k", appended(1, 0), 0)
        window.release("k", appended(1, 0))
        assert await first == appended(1, 0) and await second == appended(1, 0)
        window.release("nobody", None)
        failed = asyncio.ensure_future(window.released("j"))
        await asyncio.sleep(0)
        window.release("j", None)
        assert await failed is None

    run(body())


class Pages:
    """A fake log: ledgers of enveloped entries; counts the pages read."""

    def __init__(self, ledgers: dict[int, list[bytes]]) -> None:
        self.ledgers = ledgers
        self.reads: list[tuple[int, int, int]] = []

    async def __call__(self, lid: int, first: int, last: int) -> list[tuple[int, bytes]]:
        self.reads.append((lid, first, last))
        return [(i, self.ledgers[lid][i]) for i in range(first, last + 1)]


def keyed(key: str, payloads: list[bytes], at_ms: int) -> list[bytes]:
    return list(lr.encode(payloads, at_ms, key, lr.records_digest(payloads)))


def test_scan_tail_finds_whole_keyed_appends_oldest_first() -> None:
    """Keys across ledgers in log order, with the positions of whole batches; unkeyed
    appends and foreign entries skipped; a batch cut short at a ledger's end is not."""
    l1 = keyed("a", [b"x"], 1000) + list(lr.encode([b"n"], 1000)) + [b"foreign"]
    l2 = keyed("b", [b"p", b"q"], 1001) + keyed("cut", [b"r", b"s"], 1002)[:1]
    pages = Pages({1: l1, 2: l2})
    found = run(scan_tail([(1, 2), (2, 2)], pages, 2000, 60_000, 100))
    assert [k for k, _ in found] == ["a", "b"]
    assert found[0][1] == Appended(Position(1, 0), Position(1, 0), lr.records_digest([b"x"]), 1000)
    assert found[1][1].first == Position(2, 0) and found[1][1].last == Position(2, 1)


def test_scan_tail_stops_at_an_old_append() -> None:
    """Reading backwards, the first head older than the window (and clock skew) stops
    the scan: nothing older is read."""
    old = keyed("old", [b"o"], 0)
    new = keyed("new", [b"n"], 100_000)
    pages = Pages({1: old, 2: [*old, *new]})
    found = run(scan_tail([(1, 0), (2, 1)], pages, 100_000, 10_000, 100, page_entries=1))
    assert [k for k, _ in found] == ["new"]
    assert all(lid == 2 for lid, _, _ in pages.reads)


def test_scan_tail_stops_after_keys_max_and_entries_max(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = [e for i in range(10) for e in keyed(f"k{i}", [b"."], 5000)]
    found = run(scan_tail([(1, 9)], Pages({1: entries}), 5000, 60_000, 3, page_entries=2))
    assert [k for k, _ in found] == ["k6", "k7", "k8", "k9"]  # a page past keys_max
    monkeypatch.setattr(limits, "DEDUP_REBUILD_ENTRIES_MAX", 4)
    pages = Pages({1: entries})
    found = run(scan_tail([(1, 9)], pages, 5000, 60_000, 100, page_entries=2))
    assert [k for k, _ in found] == ["k6", "k7", "k8", "k9"]
    assert len(pages.reads) == 2


def test_scan_tail_reads_past_old_stamps_in_unordered_ledgers() -> None:
    """An attached ledger at the tail whose records were stamped long before it joined
    the log does not end the scan: the keyed append before it, within the window, is
    found; an old stamp in a writer's ledger still ends it."""
    writer = keyed("old", [b"o"], 0) + keyed("recent", [b"r"], 95_000)
    attached = list(lr.encode([b"t0", b"t1"], 1_000))
    pages = Pages({1: writer, 2: attached})
    ledgers = [(1, 1), (2, 1)]
    assert run(scan_tail(ledgers, pages, 100_000, 10_000, 100)) == []  # the bug: stops at 2
    found = run(scan_tail(ledgers, Pages({1: writer, 2: attached}), 100_000, 10_000, 100,
                          unordered={2}))  # fmt: skip
    assert [k for k, _ in found] == ["recent"]


WRITER = {LOG_METADATA_KEY: "l", WRITER_METADATA_KEY: "g:1"}
TASK = {LOG_METADATA_KEY: "l", "quire.job": "j", "quire.task": "0.0"}


def ledger(lid: int, custom: dict[str, str], created_at: int, last: int = 0) -> LedgerMetadata:
    meta = LedgerMetadata.new(lid, ["b1", "b2", "b3"], 2, 2, custom=custom, created_at=created_at)
    return meta.closed(last, 10 * (last + 1))


def test_tail_kind_trusts_time_only_in_a_writers_ledger() -> None:
    """A ledger a log writer made (marked) is WRITER; one with only quire.log (a writer's
    from before the mark) is read without trusting its times; a Spark task's (quire.job,
    quire.task) is passed over."""
    assert tail_kind(ledger(1, WRITER, 0)) is TailKind.WRITER
    assert tail_kind(ledger(2, {LOG_METADATA_KEY: "l"}, 0)) is TailKind.UNMARKED
    assert tail_kind(ledger(3, TASK, 0)) is TailKind.ATTACHED


class Log:
    """A log's ledgers for ``rebuild.walk_tail``: metadata and enveloped entries; counts
    the metadata reads (their sizes) and the ledgers whose entries were read."""

    def __init__(self, ledgers: list[tuple[int, dict[str, str], int, list[bytes]]]) -> None:
        self.metadata = {
            lid: ledger(lid, custom, created_at, len(entries) - 1)
            for lid, custom, created_at, entries in ledgers
        }
        self.entries = {lid: entries for lid, _, _, entries in ledgers}
        self.ids = [lid for lid, _, _, _ in ledgers]
        self.metadata_reads: list[int] = []
        self.entries_read: set[int] = set()

    async def get_many(self, ledger_ids: list[int]) -> list[VersionedLedger | None]:
        self.metadata_reads.append(len(ledger_ids))
        return [
            VersionedLedger(self.metadata[lid], 0) if lid in self.metadata else None
            for lid in ledger_ids
        ]

    async def read(
        self, metadata: LedgerMetadata, first: int, last: int
    ) -> list[tuple[int, bytes]]:
        self.entries_read.add(metadata.ledger_id)
        stored = self.entries[metadata.ledger_id]
        return [(i, stored[i]) for i in range(first, last + 1)]

    def walk(
        self,
        now_ms: int = 100_000,
        window_ms: int = 10_000,
        saved: dict[int, SavedLedger] | None = None,
        read_ahead: int = limits.TAIL_READ_AHEAD_LEDGERS,
    ) -> list[str]:
        found = run(
            rebuild.walk_tail(
                self.get_many, self.read, self.ids, now_ms, window_ms, 100, saved, read_ahead
            )
        )
        return [key for key, _ in found]

    def found(self, saved: dict[int, SavedLedger] | None = None) -> list[tuple[str, Appended]]:
        return run(rebuild.walk_tail(self.get_many, self.read, self.ids, 100_000, 10_000, 100,
                                     saved))  # fmt: skip

    def saved(self, *ledger_ids: int) -> dict[int, SavedLedger]:
        """The saved keys of ``ledger_ids`` as their writer saves them when they close."""
        return {
            lid: saved_keys.summarise(lid, len(self.entries[lid]) - 1,
                                      enumerate(self.entries[lid]))
            for lid in ledger_ids
        }  # fmt: skip


def test_tail_walk_ends_only_at_an_old_record_of_a_writers_ledger() -> None:
    """Walking back along the list (cut-off: 100 s - 10 s window - 5 s skew = 85 s):
    attached ledgers are neither read nor end the walk, however old; creation times end
    nothing (a writer's ledger made long before it joined the log, empty, and one made
    long ago holding recent appends); an old stamp in an unmarked ledger ends nothing;
    the first record older than the cut-off in a writer's ledger ends the walk."""
    log = Log(
        [
            (1, WRITER, 0, keyed("ancient", [b"a"], 0)),
            (2, WRITER, 1_000, keyed("old", [b"o"], 80_000) + keyed("k2", [b"2"], 95_000)),
            (3, {LOG_METADATA_KEY: "l"}, 3_000, keyed("k3", [b"3"], 2_000)),
            (4, WRITER, 90_000, keyed("k4", [b"4"], 96_000)),
            (5, WRITER, 1_000, []),
            (6, TASK, 1_500, keyed("task", [b"t"], 1_500)),
            (7, TASK, 1_600, list(lr.encode([b"t0", b"t1"], 1_600))),
        ]
    )
    # One ledger at a time, so that nothing past the stop is read (the reads ahead and
    # their bound: test_the_scan_reads_small_ledgers_ahead_bounded).
    assert log.walk(read_ahead=0) == ["k2", "k3", "k4"]
    assert log.entries_read == {2, 3, 4}  # the attached ledgers are never read


def test_tail_walk_over_many_attached_ledgers_takes_few_reads() -> None:
    """A tail of many attached ledgers (which never end the walk) is read in growing
    batches: 100 ledgers behind the writer's in 3 pipelined reads, not 7."""
    ledgers = [(1, WRITER, 0, keyed("old", [b"o"], 0))]
    ledgers += [(lid, TASK, 99_000, list(lr.encode([b"t"], 99_000))) for lid in range(2, 102)]
    log = Log(ledgers)
    assert log.walk() == []
    assert log.metadata_reads == [16, 32, 53] and log.entries_read == {1}


def test_tail_walk_fails_on_a_failed_read_and_passes_over_invalid_metadata() -> None:
    """A metadata read that fails (ZooKeeper) fails the walk, and the rebuild tries
    again; a ledger whose metadata is not valid (no entry of it can be read) or that was
    deleted meanwhile is passed over."""
    log = Log([(1, WRITER, 0, keyed("k1", [b"1"], 99_000)), (3, WRITER, 0, [])])

    async def failing(ledger_ids: list[int]) -> list[VersionedLedger | None]:
        raise MetadataUnavailable("zk")

    with pytest.raises(MetadataUnavailable):
        run(rebuild.walk_tail(failing, log.read, [1, 2, 3], 100_000, 10_000, 100))

    async def invalid(ledger_ids: list[int]) -> list[VersionedLedger | InvalidArgument | None]:
        found = await log.get_many(ledger_ids)
        bad = InvalidArgument("not valid metadata")
        return [bad if lid == 3 else f for lid, f in zip(ledger_ids, found, strict=True)]

    found = run(rebuild.walk_tail(invalid, log.read, [1, 2, 3], 100_000, 10_000, 100))
    assert [key for key, _ in found] == ["k1"]


def dense_log(ledgers: int) -> Log:
    """A writer's ledgers of one keyed append and one unkeyed each, all within the window
    but the first (cut-off: 85 s)."""
    rows = [(1, WRITER, 0, keyed("ancient", [b"a"], 0))]
    for lid in range(2, ledgers + 2):
        entries = keyed(f"k{lid}", [b"r", b"s"], 90_000 + lid) + list(
            lr.encode([b"u"], 90_000 + lid)
        )
        rows.append((lid, WRITER, 0, entries))
    return Log(rows)


def test_tail_walk_takes_saved_ledgers_without_reading_them() -> None:
    """The walk finds the same keys, with the same positions, whether a ledger's keys are
    saved or read; a saved ledger's metadata and entries are not read, an unsaved one
    (the last, never saved: its writer crashed; one in the middle whose save was lost)
    is; a saved ledger older than the window ends the walk as reading it would."""
    plain = dense_log(40)
    expected = plain.found()
    assert [k for k, _ in expected] == [f"k{lid}" for lid in range(2, 42)]
    log = dense_log(40)
    saved = log.saved(*range(1, 41))
    del saved[20]
    assert log.found(saved) == expected
    assert log.entries_read == {20, 41}
    assert sum(log.metadata_reads) == 2
    # Every ledger saved: nothing read at all, and the ancient one ended the walk.
    log = dense_log(40)
    assert log.found(log.saved(*range(1, 42))) == expected
    assert log.entries_read == set() and log.metadata_reads == []


def test_a_saved_ledger_is_taken_as_its_entries_would_be() -> None:
    """Against the scan of its entries, for ledgers of mixed stamps around the cut-off:
    the keys found and where the walk stops agree (the ledger with a head older than
    the cut-off, saved or read, ends it)."""
    rows = [
        (1, WRITER, 0, keyed("before", [b"b"], 95_000)),
        (2, WRITER, 0, keyed("old", [b"o"], 80_000) + keyed("new", [b"n"], 96_000)),
        (3, WRITER, 0, list(lr.encode([b"u"], 97_000)) + keyed("last", [b"l", b"m"], 97_000)),
    ]
    for saved_ids in [(), (2,), (3,), (2, 3), (1, 2, 3)]:
        log = Log(rows)
        found = log.found(log.saved(*saved_ids))
        assert [k for k, _ in found] == ["new", "last"], saved_ids
        assert found == Log(rows).found()


class SlowPages(Pages):
    """Pages that take a few loop turns each; records how many were in flight at most."""

    def __init__(self, ledgers: dict[int, list[bytes]]) -> None:
        super().__init__(ledgers)
        self.in_flight = 0
        self.most_in_flight = 0

    async def __call__(self, lid: int, first: int, last: int) -> list[tuple[int, bytes]]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        for _ in range(3):
            await asyncio.sleep(0)
        self.in_flight -= 1
        return await super().__call__(lid, first, last)


def test_the_scan_reads_small_ledgers_ahead_bounded() -> None:
    """Small ledgers are read several at a time (at most TAIL_READ_AHEAD_LEDGERS in
    flight), one request each, with the same keys found as one read at a time; a scan
    that stops early reads at most that many ledgers past its stop."""
    log = dense_log(60)
    ledgers = [(lid, len(entries) - 1) for lid, entries in log.entries.items()]

    def scan(read_ahead: int) -> tuple[list[tuple[str, Appended]], SlowPages]:
        pages = SlowPages(log.entries)
        found = run(scan_tail(ledgers, pages, 100_000, 10_000, 100, read_ahead=read_ahead))
        return found, pages

    one_at_a_time, slow = scan(0)
    overlapped, fast = scan(limits.TAIL_READ_AHEAD_LEDGERS)
    assert overlapped == one_at_a_time and len(overlapped) == 60
    assert slow.most_in_flight == 1
    assert 1 < fast.most_in_flight <= limits.TAIL_READ_AHEAD_LEDGERS
    assert len(fast.reads) == len(slow.reads) == 61  # one request per ledger
    # A stop after the newest ledger (keys_max 1): the reads ahead of it stay bounded.
    pages = SlowPages(log.entries)
    found = run(scan_tail(ledgers, pages, 100_000, 10_000, 1,
                          read_ahead=limits.TAIL_READ_AHEAD_LEDGERS))  # fmt: skip
    assert [k for k, _ in found] == ["k61"]
    assert len(pages.reads) <= 1 + limits.TAIL_READ_AHEAD_LEDGERS


def test_a_rebuild_that_breaks_fails_the_window_instead_of_hanging() -> None:
    """An error that is not a QuireError (a bug, here in reading the saved keys) ends the
    rebuild at once: the window is ready and failed, so keyed appends waiting for it are
    answered 503 rather than left hanging."""

    class Broken:
        async def read(self, name: str) -> dict[int, object]:
            raise AttributeError("a bug")

    async def body() -> None:
        window = LogWindow(DedupWindow(60_000, 10))
        await asyncio.wait_for(
            rebuild.rebuild_window(
                cast(Gateway, None), "s", window, [1, 2], cast(SavedKeysStore, Broken())
            ),
            timeout=5.0,
        )
        assert window.ready.is_set()
        assert window.failed == "the idempotency window of log s could not be rebuilt"

    asyncio.run(body())
