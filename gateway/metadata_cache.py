"""The ledger and log metadata this gateway read, kept so that reads go on answering
while ZooKeeper cannot (an ensemble electing a leader, a gateway cut from it).

What is kept, and why it is safe to serve:

- A CLOSED ledger's metadata never changes but in two ways: the ledger is deleted, or
  a replication worker swaps a bookie of a fragment for another that now holds its
  entries (services/protocol/repair.py). Its state, last entry, length, quorums,
  digest and password never change. So a read of a closed ledger uses the kept copy
  without asking ZooKeeper (``ledger``). A kept copy may therefore name a bookie
  that no longer holds the entries (swapped out, or the ledger deleted elsewhere):
  the read then finds no replica of some entry, and ``reading`` asks ZooKeeper for
  the current metadata and reads once more with it when it differs (a deleted
  ledger is then 404). It never serves wrong bytes: every entry is checked against
  its digest, and the bytes of an entry of a closed ledger are the same on every
  bookie that has it. A copy confirmed by ZooKeeper more than
  ``CLOSED_LEDGER_RECHECK_S`` ago is asked again, as below, so that a swap or a delete
  made by another gateway is seen within that time while ZooKeeper answers.
- An OPEN (or IN_RECOVERY) ledger's metadata, and a log's (its ledger list), change:
  ZooKeeper is asked first, and its answer kept. A log this gateway writes is the
  exception: its writer's copy of the list is as current as ZooKeeper's answer would be
  (kept from a read made under a watch on the log's znode, dropped when the watch fires:
  gateway/logs/writer.py ``LogWriter.listed``), so a read takes it instead of asking.
  Otherwise the kept copy is served only when ZooKeeper cannot answer: at once while the
  session is not connected, else after ``METADATA_WAIT_KEPT_S``. A reader then sees the
  ledger or the log as it was when this gateway last read it: an open ledger read up to
  the LAC its bookies report (its readable end never passes what the writer
  acknowledged, so the reader sees a prefix of the entries), a log up to the last ledger
  of the list it knew (a prefix of the log's one order; records in a ledger rolled in
  since, or behind a truncation made since, are not known, or still shown, as to a
  reader that read just before).

Deletes: ``forget`` drops a ledger (or a log) once this gateway's delete of it is
acknowledged, and a read that was fetching its metadata from ZooKeeper meanwhile does
not keep what it fetched (the store's generation moved), so this gateway never
serves a ledger it deleted. A ledger deleted by another gateway is served by this one
until a read finds no replica (the delete removes the entries from the bookies right
after the metadata) or the recheck finds it gone: at most ``CLOSED_LEDGER_RECHECK_S``
while ZooKeeper answers (docs/operations.md "ZooKeeper leader election").

A CLOSED log ledger's first and last stamps (``stamps``) never change either: a search
by time (gateway/logs/time_search.py) keeps them, so a repeated search reads no entry
to pass over a ledger. A ledger's delete drops them with its metadata (``forget``).

Memory is bounded: each kind is a least-recently-used map of at most
``METADATA_CACHE_LEDGERS_MAX`` ledgers, ``METADATA_CACHE_LOGS_MAX`` logs and
``LEDGER_STAMPS_KEPT_MAX`` ledgers' stamps.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from prometheus_client import Counter

from gateway import limits
from services.errors import BookieUnavailable, LedgerNotFound, LogNotFound, MetadataUnavailable
from services.ledger_client.context import LedgerMetadataStore
from services.protocol.logs import LogMetadata
from services.protocol.metadata import LedgerMetadata, LedgerState
from services.zk.log_store import VersionedLog

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

# The ``reason`` label of the hits counter.
HIT_CLOSED = "closed"  # a closed ledger's kept metadata, ZooKeeper not asked
HIT_UNAVAILABLE = "unavailable"  # ZooKeeper did not answer: the kept copy was served
HIT_WRITER = "writer"  # a log's list from this gateway's writer of it, ZooKeeper not asked


@dataclass(frozen=True, slots=True)
class _Kept(Generic[V]):
    value: V
    confirmed_at: float  # monotonic seconds of ZooKeeper's last answer with it


class _Lru(Generic[K, V]):
    """At most ``size_max`` values, the least recently used dropped first."""

    def __init__(self, size_max: int) -> None:
        self.size_max = size_max
        self._items: OrderedDict[K, _Kept[V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> _Kept[V] | None:
        kept = self._items.get(key)
        if kept is not None:
            self._items.move_to_end(key)
        return kept

    def put(self, key: K, value: V, now: float) -> None:
        self._items[key] = _Kept(value, now)
        self._items.move_to_end(key)
        while len(self._items) > self.size_max:
            self._items.popitem(last=False)

    def pop(self, key: K) -> None:
        self._items.pop(key, None)


class MetadataCache:
    """Kept ledger and log metadata, for reads only (the module's docstring says which
    copy a read gets). Writers, recoveries and deletes read ZooKeeper themselves."""

    def __init__(
        self,
        ledgers: LedgerMetadataStore,
        hits: Counter,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = ledgers
        self._hits = hits
        self._clock = clock
        self._ledgers: _Lru[int, LedgerMetadata] = _Lru(limits.METADATA_CACHE_LEDGERS_MAX)
        self._logs: _Lru[str, LogMetadata] = _Lru(limits.METADATA_CACHE_LOGS_MAX)
        self._stamps: _Lru[int, tuple[int, int]] = _Lru(limits.LEDGER_STAMPS_KEPT_MAX)
        # Bumped by every ``forget``: a fetch that started before it keeps nothing.
        self._generation = 0

    def __len__(self) -> int:
        return len(self._ledgers) + len(self._logs)

    async def ledger(self, ledger_id: int) -> LedgerMetadata:
        """The ledger's metadata for a read: a closed ledger's kept copy (rechecked after
        ``CLOSED_LEDGER_RECHECK_S``), else ZooKeeper's, else (ZooKeeper not answering)
        the kept copy. ``LedgerNotFound`` when ZooKeeper says it does not exist."""
        kept = self._ledgers.get(ledger_id)
        if (
            kept is not None
            and kept.value.state is LedgerState.CLOSED
            and self._clock() - kept.confirmed_at < limits.CLOSED_LEDGER_RECHECK_S
        ):
            self._hits.labels(HIT_CLOSED).inc()
            return kept.value
        return await self._fresh(
            self._ledgers, ledger_id, kept, LedgerNotFound, self._ledger_from_zookeeper
        )

    async def current(self, ledger_id: int) -> LedgerMetadata:
        """The ledger's metadata as ZooKeeper has it now (``GET /v1/ledgers/{id}`` shows a
        close or a swap made elsewhere), else, ZooKeeper not answering, the kept copy."""
        kept = self._ledgers.get(ledger_id)
        return await self._fresh(
            self._ledgers, ledger_id, kept, LedgerNotFound, self._ledger_from_zookeeper
        )

    async def _ledger_from_zookeeper(self, ledger_id: int) -> LedgerMetadata:
        return (await self._store.get(ledger_id)).metadata

    async def reading(
        self, metadata: LedgerMetadata, read: Callable[[LedgerMetadata], Awaitable[T]]
    ) -> T:
        """``read(metadata)``; when no replica could serve an entry (a kept copy that
        names a bookie swapped out since), once more with ZooKeeper's current metadata if
        it differs. ``LedgerNotFound`` when the ledger is gone; the first failure stands
        when the metadata is the same or ZooKeeper does not answer."""
        try:
            return await read(metadata)
        except BookieUnavailable:
            generation = self._generation
            try:
                current = (await self._store.get(metadata.ledger_id)).metadata
            except LedgerNotFound:
                self._ledgers.pop(metadata.ledger_id)
                raise
            except MetadataUnavailable:
                current = metadata
            if current == metadata:
                raise
            if generation == self._generation:
                self._ledgers.put(current.ledger_id, current, self._clock())
        return await read(current)

    async def log(
        self,
        name: str,
        get: Callable[[str], Awaitable[VersionedLog]],
        listed: LogMetadata | None = None,
        kept_allowed: bool = True,
    ) -> LogMetadata:
        """Log ``name``'s metadata for a read: ``listed`` when given (this gateway's
        writer's copy, which its watch on the znode keeps current: gateway/logs/writer.py
        ``LogWriter.listed``; kept as ZooKeeper's answer is, for when ZooKeeper cannot
        answer), else ZooKeeper's (``get``), else (ZooKeeper not answering) the list this
        gateway read last, unless ``kept_allowed`` is False: then ``MetadataUnavailable``
        (asked as when there is a kept copy: not while the session is not connected, and
        ``METADATA_WAIT_KEPT_S`` at most). ``LogNotFound`` when it does not exist."""
        if listed is not None:
            self._hits.labels(HIT_WRITER).inc()
            self._logs.put(name, listed, self._clock())
            return listed
        kept = self._logs.get(name)

        async def from_zookeeper(key: str) -> LogMetadata:
            return (await get(key)).log

        return await self._fresh(self._logs, name, kept, LogNotFound, from_zookeeper, kept_allowed)

    def stamps(self, ledger_id: int) -> tuple[int, int] | None:
        """The first and last stamps kept for a CLOSED log ledger, if any."""
        kept = self._stamps.get(ledger_id)
        return kept.value if kept is not None else None

    def keep_stamps(self, ledger_id: int, first_ms: int, last_ms: int) -> None:
        """Keep a CLOSED log ledger's first and last stamps (they never change)."""
        self._stamps.put(ledger_id, (first_ms, last_ms), self._clock())

    def forget(self, ledger_id: int) -> None:
        """Drop a ledger this gateway deleted (after ZooKeeper acknowledged the delete)."""
        self._generation += 1
        self._ledgers.pop(ledger_id)
        self._stamps.pop(ledger_id)

    def forget_log(self, name: str) -> None:
        """Drop a log this gateway deleted (after ZooKeeper acknowledged the delete)."""
        self._generation += 1
        self._logs.pop(name)

    async def _fresh(
        self,
        kept_map: _Lru[K, V],
        key: K,
        kept: _Kept[V] | None,
        not_found: type[Exception],
        fetch: Callable[[K], Awaitable[V]],
        kept_allowed: bool = True,
    ) -> V:
        """ZooKeeper's value for ``key`` (``fetch``), kept unless a ``forget`` came while
        it was fetched; dropped when ZooKeeper says it does not exist (``not_found``);
        the kept copy when ZooKeeper does not answer and there is one (and it may be
        served: ``kept_allowed``)."""
        generation = self._generation
        try:
            current = await self._ask(lambda: fetch(key), kept is not None)
        except not_found:
            kept_map.pop(key)
            raise
        except MetadataUnavailable:
            if kept is None or not kept_allowed:
                raise
            self._hits.labels(HIT_UNAVAILABLE).inc()
            return kept.value
        if generation == self._generation:
            kept_map.put(key, current, self._clock())
        return current

    async def _ask(self, call: Callable[[], Awaitable[T]], kept: bool) -> T:
        """ZooKeeper's answer to ``call()``. With a kept copy to fall back on, not asked
        while the session is not connected, and waited for ``METADATA_WAIT_KEPT_S`` at
        most otherwise (a connection that went silent is noticed only after the
        session's read time-out): ``MetadataUnavailable`` then."""
        if not kept:
            return await call()
        if not self._store.connected:
            raise MetadataUnavailable("ZooKeeper is not connected")
        try:
            async with asyncio.timeout(limits.METADATA_WAIT_KEPT_S):
                return await call()
        except TimeoutError as exc:
            raise MetadataUnavailable("ZooKeeper did not answer in time") from exc
