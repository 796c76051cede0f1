"""The idempotency window of one log this gateway writes.

A key maps to the positions its append got and the digest of its records
(``log_records.records_digest``). A retry with the same key and the same records is
answered from here and appends nothing; the same key with other records is 409
``idempotency_key_reused``. A key whose first append is still in flight makes the
retry wait for it: success answers both, failure lets the retry append.

Bounds: keys older than ``window_ms`` or beyond ``keys_max`` (oldest first) are
forgotten. The window is rebuilt from the log's tail when this gateway takes the
writer role (``rebuild``), because the keys live in the entries themselves: a
hand-over or a crash of the previous writer loses nothing that was appended.

An unknown outcome stays unknown while the key is in the window: a retry whose earlier
attempt's ledger has not closed yet, or is gone (truncated away before the outcome was
settled: it may have held the append), is 409 ``ledger_fenced`` (``unknown_outcome``)
and appends nothing, since appending again could put the records in the log twice.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass

from services.errors import IdempotencyKeyReused, LedgerFenced
from services.protocol import log_records
from services.protocol.logs import Position

# A rebuild reads at most this many entries back from the log's end (plus clock skew
# allowance between the previous writer and this one).
REBUILD_ENTRIES_MAX = 200_000
CLOCK_SKEW_MS = 5_000


@dataclass(frozen=True, slots=True)
class Appended:
    """What an append with a key got."""

    first: Position
    last: Position
    digest: bytes
    at_ms: int


@dataclass(frozen=True, slots=True)
class Unsettled:
    """An append with a key whose outcome was left unknown: the entries it was given in
    a ledger that had not closed yet. A retry settles it first (``LogWriter``): in the
    log -> those positions; not in it -> append; still unknown -> unknown again."""

    ledger_id: int
    first_entry_id: int
    last_entry_id: int
    digest: bytes
    at_ms: int


class DedupWindow:
    def __init__(self, window_ms: int, keys_max: int) -> None:
        self.window_ms = window_ms
        self.keys_max = keys_max
        self._keys: OrderedDict[str, Appended] = OrderedDict()
        self._unsettled: OrderedDict[str, Unsettled] = OrderedDict()
        self._in_flight: dict[str, tuple[bytes, asyncio.Future[Appended | None]]] = {}
        self.ready = asyncio.Event()  # set once the rebuild finished (or failed)
        self.failed: str | None = None  # why the rebuild failed for good

    def __len__(self) -> int:
        return len(self._keys)

    def _expire(self, now_ms: int) -> None:
        cutoff = now_ms - self.window_ms
        _expire_table(self._keys, cutoff, self.keys_max)
        _expire_table(self._unsettled, cutoff, self.keys_max)

    def remember(self, key: str, appended: Appended, now_ms: int) -> None:
        self._keys[key] = appended
        self._keys.move_to_end(key)
        self._expire(now_ms)

    async def claim(self, key: str, digest: bytes, now_ms: int) -> Appended | Unsettled | None:
        """The earlier append of ``key`` (a hit), or None: the caller appends and must
        ``settle`` the key; or the earlier attempt whose outcome is unknown: the caller
        settles that first (the key is claimed). 409 when the key came with other
        records."""
        while True:
            self._expire(now_ms)
            known = self._keys.get(key)
            if known is not None:
                if known.digest != digest:
                    raise _reused(key)
                return known
            flying = self._in_flight.get(key)
            if flying is None:
                unsettled = self._unsettled.get(key)
                if unsettled is not None and unsettled.digest != digest:
                    raise _reused(key)
                future: asyncio.Future[Appended | None] = asyncio.get_running_loop().create_future()
                self._in_flight[key] = (digest, future)
                return unsettled
            if flying[0] != digest:
                raise _reused(key)
            result = await asyncio.shield(flying[1])
            if result is not None:
                return result
            # The first attempt failed: loop and claim the key for this retry.

    def settle(
        self,
        key: str,
        appended: Appended | None,
        now_ms: int,
        unknown: Unsettled | None = None,
    ) -> None:
        """The claimed append of ``key`` ended: with its positions, or failed (None),
        with an ``unknown`` outcome when its entries may still turn up in the log."""
        flying = self._in_flight.pop(key, None)
        if appended is not None or unknown is None:
            self._unsettled.pop(key, None)
        if unknown is not None and appended is None:
            self._unsettled[key] = unknown
            self._unsettled.move_to_end(key)
        if appended is not None:
            self.remember(key, appended, now_ms)
        if flying is not None and not flying[1].done():
            flying[1].set_result(appended)

    def load(self, found: Iterable[tuple[str, Appended]], now_ms: int) -> None:
        """Keys found in the log (oldest first) by a rebuild; keys already known win."""
        for key, appended in found:
            if key not in self._keys:
                self._keys[key] = appended
        self._keys = OrderedDict(sorted(self._keys.items(), key=lambda kv: kv[1].at_ms))
        self._expire(now_ms)


def _expire_table(table: OrderedDict[str, Appended] | OrderedDict[str, Unsettled],
                  cutoff_ms: int, keys_max: int) -> None:  # fmt: skip
    """Drop the oldest keys: older than the cutoff, or beyond ``keys_max``."""
    while table:
        key = next(iter(table))
        if table[key].at_ms >= cutoff_ms and len(table) <= keys_max:
            break
        del table[key]


def unknown_outcome(key: str, ledger_id: int, gone: bool) -> LedgerFenced:
    """The answer to a retry whose earlier attempt's outcome cannot be told: its ledger
    is not CLOSED yet (``gone`` False: a later retry may tell), or no longer exists
    (``gone``: truncated away, or deleted with the log, before the outcome was settled;
    it may have held the records, so they are not appended again while the key is in
    the window)."""
    if gone:
        return LedgerFenced(
            f"the earlier append with Idempotency-Key {key!r} has an unknown outcome that "
            f"can no longer be settled: ledger {ledger_id}, which may hold it, was truncated "
            "from the log (or deleted with it) before it was; it is not appended again "
            "while the key is in the idempotency window"
        )
    return LedgerFenced(
        f"the earlier append with Idempotency-Key {key!r} has an unknown outcome "
        f"still (ledger {ledger_id} is not closed yet); retry later"
    )


def _reused(key: str) -> IdempotencyKeyReused:
    return IdempotencyKeyReused(
        f"Idempotency-Key {key!r} was used within the last window with other records"
    )


# A page reader: (ledger id, first entry, last entry) -> [(entry id, bytes)] in order.
PageReader = Callable[[int, int, int], Awaitable[list[tuple[int, bytes]]]]


class TailScan:
    """The scan of ``scan_tail``, fed the log's ledgers newest first a few at a time (the
    window rebuild walks the ledger list backwards: ``rebuild.walk_tail``): each ``scan``
    takes ledgers that come before every ledger scanned so far. ``done`` once it
    stopped; ``found`` gives the keyed appends oldest first."""

    def __init__(self, now_ms: int, window_ms: int, keys_max: int, page_entries: int = 1_000):
        self.cutoff_ms = now_ms - window_ms - CLOCK_SKEW_MS
        self.keys_max = keys_max
        self.page_entries = page_entries
        self.scanned = 0
        self.done = False
        self._found: list[tuple[str, Appended]] = []  # newest first

    def found(self) -> list[tuple[str, Appended]]:
        return self._found[::-1]

    async def scan(
        self,
        ledgers: list[tuple[int, int]],
        read_page: PageReader,
        unordered: Collection[int] = frozenset(),
    ) -> None:
        """Scan ``ledgers`` ((ledger id, last entry id) of CLOSED ledgers, in log order)
        backwards, page by page, until a stop (``scan_tail``)."""
        for ledger_id, end in reversed(ledgers):
            stop = end
            while stop >= 0 and not self.done:
                start = max(0, stop - self.page_entries + 1)
                page = await read_page(ledger_id, start, stop)
                self.scanned += len(page)
                too_old = self._take(ledger_id, end, page, ledger_id not in unordered)
                if too_old or len(self._found) >= self.keys_max:
                    self.done = True
                if self.scanned >= REBUILD_ENTRIES_MAX:
                    self.done = True
                stop = start - 1
            if self.done:
                return

    def _take(self, ledger_id: int, end: int, page: list[tuple[int, bytes]], ordered: bool) -> bool:
        """Keep the page's whole keyed appends (newest first); True at a head older than
        the cutoff in an ``ordered`` ledger (nothing older is taken)."""
        for entry_id, data in reversed(page):
            record = log_records.decode(data)
            head = record.head
            if head is None:
                continue
            if ordered and head.time_ms < self.cutoff_ms:
                return True
            if head.key is None or head.digest is None:
                continue
            if not log_records.visible(entry_id, record, end):
                continue
            first = Position(ledger_id, entry_id)
            last = Position(ledger_id, entry_id + record.remaining)
            self._found.append((head.key, Appended(first, last, head.digest, head.time_ms)))
        return False


async def scan_tail(
    ledgers: list[tuple[int, int]],
    read_page: PageReader,
    now_ms: int,
    window_ms: int,
    keys_max: int,
    page_entries: int = 1_000,
    unordered: Collection[int] = frozenset(),
) -> list[tuple[str, Appended]]:
    """The keyed appends in the log's tail, oldest first: ``ledgers`` are (ledger id,
    last entry id) of CLOSED ledgers in log order. Reads backwards page by page and
    stops at an append older than the window (with clock skew allowance), after
    ``keys_max`` keys or ``REBUILD_ENTRIES_MAX`` entries. Only whole appends count (a
    batch cut short by a crash is not in the log: ``log_records.visible``).

    The stop on time holds only where time stamps follow log order: in a log writer's
    ledgers, whose appends are stamped by the gateway as they are made, after the ledger
    joined the log and after every append in the ledgers before it (up to clock skew
    between gateways). The ledgers in ``unordered`` (attached: stamped when their writer
    ran, maybe long before they joined the log) are read for keys, but an old stamp in
    one never ends the scan; the ledgers before them may hold appends newer than it."""
    scan = TailScan(now_ms, window_ms, keys_max, page_entries)
    await scan.scan(ledgers, read_page, unordered)
    return scan.found()
