"""The metadata a gateway keeps for reads (gateway/metadata_cache.py): a closed ledger's is
served without asking ZooKeeper; an open ledger's and a log's are ZooKeeper's while it
answers and the last copy read while it cannot; a kept copy that names a bookie swapped
out since is read again with ZooKeeper's; a ledger this gateway deleted is never served
again; memory is bounded (docs/logs.md "While ZooKeeper elects a leader")."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from gateway import limits
from gateway.metadata_cache import HIT_CLOSED, HIT_UNAVAILABLE, MetadataCache
from gateway.metrics import GatewayMetrics
from services.errors import BookieUnavailable, LedgerNotFound, LogNotFound, MetadataUnavailable
from services.protocol.logs import LogMetadata
from services.protocol.metadata import LedgerMetadata
from services.zk.ledger_store import VersionedLedger
from services.zk.log_store import VersionedLog
from tests.unit.ledger_client.fakes import FakeLedgerStore

T = TypeVar("T")

OPEN = LedgerMetadata.new(7, ["a:1", "b:1"], 2, 2)
CLOSED = OPEN.closed(9, 100)
SWAPPED = CLOSED.replace_bookie(0, "a:1", "c:1")


class Store(FakeLedgerStore):
    """Counts the reads; ``down`` makes them fail as ZooKeeper does when it cannot
    answer, ``hang`` makes them never answer."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.down = False
        self.hang = False

    async def get(self, ledger_id: int) -> VersionedLedger:
        self.reads += 1
        if self.down:
            raise MetadataUnavailable("ZooKeeper unavailable (ConnectionLoss)")
        if self.hang:
            await asyncio.Event().wait()
        return await super().get(ledger_id)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _cache(store: Store, clock: Clock | None = None) -> tuple[MetadataCache, GatewayMetrics]:
    metrics = GatewayMetrics()
    return MetadataCache(store, metrics.metadata_cache_hits, clock or Clock()), metrics


def _hits(metrics: GatewayMetrics, reason: str) -> float:
    return metrics.metadata_cache_hits.labels(reason)._value.get()


def run(coroutine: Awaitable[T]) -> T:
    async def main() -> T:
        return await coroutine

    return asyncio.run(main())


def test_a_closed_ledger_is_read_from_zookeeper_once() -> None:
    store = Store()
    run(store.create(CLOSED))
    cache, metrics = _cache(store)

    async def reads() -> list[LedgerMetadata]:
        return [await cache.ledger(7) for _ in range(5)]

    assert run(reads()) == [CLOSED] * 5
    assert store.reads == 1
    assert _hits(metrics, HIT_CLOSED) == 4


def test_a_closed_ledger_is_served_while_zookeeper_is_down_and_rechecked_later() -> None:
    """Kept copies are served without ZooKeeper; after CLOSED_LEDGER_RECHECK_S one is
    asked again (a swap made elsewhere is then seen), and kept if ZooKeeper is down."""
    store, clock = Store(), Clock()
    run(store.create(CLOSED))
    cache, metrics = _cache(store, clock)

    async def scenario() -> None:
        await cache.ledger(7)
        store.down = True
        assert await cache.ledger(7) == CLOSED
        assert store.reads == 1
        clock.now += limits.CLOSED_LEDGER_RECHECK_S
        assert await cache.ledger(7) == CLOSED  # asked, did not answer: the kept copy
        assert store.reads == 2
        assert _hits(metrics, HIT_UNAVAILABLE) == 1
        store.down = False
        store.nodes[7] = VersionedLedger(SWAPPED, 1)
        assert await cache.ledger(7) == SWAPPED
        assert await cache.ledger(7) == SWAPPED
        assert store.reads == 3

    run(scenario())


def test_an_open_ledger_is_asked_every_time_and_kept_for_when_zookeeper_is_down() -> None:
    store = Store()
    run(store.create(OPEN))
    cache, metrics = _cache(store)

    async def scenario() -> None:
        assert await cache.ledger(7) == OPEN
        assert await cache.ledger(7) == OPEN
        assert store.reads == 2
        store.down = True
        assert await cache.ledger(7) == OPEN
        assert _hits(metrics, HIT_UNAVAILABLE) == 1
        store.connected = False  # SUSPENDED: not even asked
        assert await cache.ledger(7) == OPEN
        assert store.reads == 3
        with pytest.raises(MetadataUnavailable):  # nothing kept for this one
            await cache.ledger(8)

    run(scenario())


def test_a_silent_zookeeper_is_waited_for_a_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session whose connection went silent is still 'connected' until its read
    time-out: a read with a kept copy waits METADATA_WAIT_KEPT_S, not that long."""
    monkeypatch.setattr(limits, "METADATA_WAIT_KEPT_S", 0.05)
    store = Store()
    run(store.create(OPEN))
    cache, _ = _cache(store)

    async def scenario() -> float:
        await cache.ledger(7)
        store.hang = True
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await cache.ledger(7) == OPEN
        return loop.time() - started

    assert run(scenario()) < 1.0


def test_a_read_that_finds_no_replica_is_tried_again_with_the_current_metadata() -> None:
    """A kept copy that names a bookie swapped out since: the read fails on it, ZooKeeper's
    metadata differs, the read is made again with it (and that copy kept)."""
    store = Store()
    run(store.create(CLOSED))
    cache, _ = _cache(store)
    tried: list[LedgerMetadata] = []

    async def read(metadata: LedgerMetadata) -> str:
        tried.append(metadata)
        if "a:1" in metadata.bookies():
            raise BookieUnavailable("no replica of entry 3")
        return "page"

    async def scenario() -> None:
        kept = await cache.ledger(7)
        store.nodes[7] = VersionedLedger(SWAPPED, 1)
        assert await cache.reading(kept, read) == "page"
        assert tried == [CLOSED, SWAPPED]
        assert await cache.ledger(7) == SWAPPED
        assert store.reads == 2

    run(scenario())


@pytest.mark.parametrize("zookeeper", ["same", "down"])
def test_a_read_that_finds_no_replica_fails_when_nothing_newer_is_known(zookeeper: str) -> None:
    store = Store()
    run(store.create(CLOSED))
    cache, _ = _cache(store)
    calls: list[LedgerMetadata] = []

    async def read(metadata: LedgerMetadata) -> str:
        calls.append(metadata)
        raise BookieUnavailable("no replica of entry 3")

    async def scenario() -> None:
        kept = await cache.ledger(7)
        store.down = zookeeper == "down"
        with pytest.raises(BookieUnavailable):
            await cache.reading(kept, read)

    run(scenario())
    assert calls == [CLOSED]


def test_a_ledger_deleted_elsewhere_is_404_once_its_entries_are_gone() -> None:
    store = Store()
    run(store.create(CLOSED))
    cache, _ = _cache(store)

    async def read(metadata: LedgerMetadata) -> str:
        raise BookieUnavailable("no replica of entry 0")

    async def scenario() -> None:
        kept = await cache.ledger(7)
        await store.delete(7)
        with pytest.raises(LedgerNotFound):
            await cache.reading(kept, read)
        with pytest.raises(LedgerNotFound):  # not kept any more: ZooKeeper is asked
            await cache.ledger(7)
        assert store.reads == 3

    run(scenario())


def test_a_ledger_this_gateway_deleted_is_not_kept_by_a_read_in_flight() -> None:
    """A read that fetched the metadata before the delete and finishes after it keeps
    nothing: the next read asks ZooKeeper (and finds the ledger gone)."""
    store = Store()
    run(store.create(CLOSED))
    cache, _ = _cache(store)

    async def scenario() -> None:
        gate = asyncio.Event()
        original = store.get

        async def slow_get(ledger_id: int) -> VersionedLedger:
            found = await original(ledger_id)
            await gate.wait()
            return found

        store.get = slow_get  # type: ignore[method-assign]
        reading = asyncio.ensure_future(cache.ledger(7))
        await asyncio.sleep(0)
        await store.delete(7)
        cache.forget(7)
        gate.set()
        assert await reading == CLOSED  # it was read before the delete
        store.get = original  # type: ignore[method-assign]
        with pytest.raises(LedgerNotFound):
            await cache.ledger(7)

    run(scenario())


def test_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "METADATA_CACHE_LEDGERS_MAX", 3)
    store = Store()
    for lid in range(1, 6):
        run(store.create(LedgerMetadata.new(lid, ["a:1"], 1, 1).closed(0, 1)))
    cache, _ = _cache(store)

    async def scenario() -> None:
        for lid in range(1, 6):
            await cache.ledger(lid)
        assert len(cache) == 3
        await cache.ledger(5)  # kept
        await cache.ledger(1)  # dropped first, asked again
        assert store.reads == 6

    run(scenario())


def test_a_log_is_zookeepers_while_it_answers_and_the_last_list_read_while_not() -> None:
    store = Store()
    cache, metrics = _cache(store)
    versions = [LogMetadata("orders", ledgers=(1,)), LogMetadata("orders", ledgers=(1, 2))]
    answers: list[Callable[[], LogMetadata]] = []

    async def get(name: str) -> VersionedLog:
        log = answers.pop(0)()
        return VersionedLog(log, 0)

    def down() -> LogMetadata:
        raise MetadataUnavailable("ZooKeeper unavailable (ConnectionLoss)")

    def gone() -> LogMetadata:
        raise LogNotFound("no log 'orders'")

    async def scenario() -> None:
        answers.extend([lambda: versions[0], lambda: versions[1], down, gone])
        assert await cache.log("orders", get) == versions[0]
        assert await cache.log("orders", get) == versions[1]
        assert await cache.log("orders", get) == versions[1]  # ZooKeeper down: kept
        assert _hits(metrics, HIT_UNAVAILABLE) == 1
        with pytest.raises(LogNotFound):
            await cache.log("orders", get)
        answers.append(down)
        with pytest.raises(MetadataUnavailable):  # the deleted log was not kept
            await cache.log("orders", get)

    run(scenario())


def test_the_current_metadata_is_zookeepers_and_the_kept_copy_while_it_cannot_answer() -> None:
    """``GET /v1/ledgers/{id}`` (``current``): a close made elsewhere shows at once, a
    closed ledger is asked again each time; with ZooKeeper down the last copy answers,
    and with nothing kept the call is 503 ``metadata_unavailable``."""
    store = Store()
    run(store.create(OPEN))
    cache, metrics = _cache(store)
    assert run(cache.current(7)) == OPEN
    run(store.compare_and_set(CLOSED, 0))
    store.reads = 0
    assert run(cache.current(7)) == CLOSED
    assert run(cache.current(7)) == CLOSED
    assert store.reads == 2
    store.down = True
    assert run(cache.current(7)) == CLOSED
    assert _hits(metrics, HIT_UNAVAILABLE) == 1
    with pytest.raises(MetadataUnavailable):
        run(cache.current(8))
    store.down = False
    with pytest.raises(LedgerNotFound):
        run(cache.current(8))
