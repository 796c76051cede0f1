"""The idempotency window of one log this gateway writes, on the event loop, and the
scan of the log's tail that rebuilds it.

The window itself is pure (services/protocol/dedup.py: keys, digests, expiry, unknown
outcomes, with the clock passed in); ``LogWindow`` adds what waiting needs here: whether
the rebuild from the log's tail finished (``ready``) or failed for good (``failed``),
and the appends waiting for an append of the same key to end (``released``, woken by
``release`` when the append operation settles its key: services/protocol/log_append.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection

from gateway import limits
from services.protocol import log_records
from services.protocol.dedup import Appended, DedupWindow
from services.protocol.logs import Position
from services.protocol.saved_keys import SavedLedger


class LogWindow:
    """A log writer's ``DedupWindow`` (``keys``) with its rebuild's state and the waiters
    of keys in flight."""

    def __init__(self, keys: DedupWindow) -> None:
        self.keys = keys
        self.ready = asyncio.Event()  # set once the rebuild finished (or failed)
        self.failed: str | None = None  # why the rebuild failed for good
        self._released: dict[str, asyncio.Future[Appended | None]] = {}

    async def released(self, key: str) -> Appended | None:
        """Until the append in flight with ``key`` ended: its positions, or None."""
        future = self._released.get(key)
        if future is None:
            future = self._released[key] = asyncio.get_running_loop().create_future()
        return await asyncio.shield(future)

    def release(self, key: str, appended: Appended | None) -> None:
        """The append of ``key`` ended (its key settled in ``keys``): wake its waiters."""
        future = self._released.pop(key, None)
        if future is not None and not future.done():
            future.set_result(appended)


# A page reader: (ledger id, first entry, last entry) -> [(entry id, bytes)] in order.
PageReader = Callable[[int, int, int], Awaitable[list[tuple[int, bytes]]]]


class TailScan:
    """The scan of ``scan_tail``, fed the log's ledgers newest first a few at a time (the
    window rebuild walks the ledger list backwards: ``rebuild.walk_tail``): each ``scan``
    or ``take_saved`` takes ledgers that come before every ledger scanned so far.
    ``done`` once it stopped; ``found`` gives the keyed appends oldest first.

    Reads overlap: while one ledger is scanned, the ledgers after it in the scan that fit
    one page are read ahead, as many as the ledgers scanned so far, at most
    ``TAIL_READ_AHEAD_LEDGERS`` (so a scan that ends in its first ledger, the usual
    hand-over of a log whose window holds one or two ledgers, reads nothing more, and a
    long one keeps that many reads in flight). Pages are still taken in scan order, so
    what is found and where the scan stops are as with one read at a time; a scan that
    stops drops (cancels) the reads ahead of it."""

    def __init__(
        self,
        now_ms: int,
        window_ms: int,
        keys_max: int,
        page_entries: int = 1_000,
        read_ahead: int = limits.TAIL_READ_AHEAD_LEDGERS,
    ) -> None:
        self.cutoff_ms = now_ms - window_ms - limits.DEDUP_CLOCK_SKEW_MS
        self.keys_max = keys_max
        self.page_entries = page_entries
        self.read_ahead = read_ahead  # 0: one read at a time (no task is made)
        self.scanned = 0
        self.ledgers_scanned = 0
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
        backwards, page by page, until a stop (``scan_tail``), reading ahead (see the
        class docstring)."""
        order = list(reversed(ledgers))
        ahead: dict[int, asyncio.Task[list[tuple[int, bytes]]]] = {}
        try:
            for index, (ledger_id, end) in enumerate(order):
                width = min(self.read_ahead, 1 + self.ledgers_scanned)
                for later in range(index, min(index + width, len(order))):
                    lid, last = order[later]
                    if later not in ahead and 0 <= last < self.page_entries:
                        ahead[later] = asyncio.ensure_future(read_page(lid, 0, last))
                self.ledgers_scanned += 1
                stop = end
                while stop >= 0 and not self.done:
                    start = max(0, stop - self.page_entries + 1)
                    early = ahead.pop(index, None) if (start, stop) == (0, end) else None
                    page = (
                        await early
                        if early is not None
                        else await read_page(ledger_id, start, stop)
                    )
                    self.scanned += len(page)
                    too_old = self._take(ledger_id, end, page, ledger_id not in unordered)
                    if too_old or len(self._found) >= self.keys_max:
                        self.done = True
                    if self.scanned >= limits.DEDUP_REBUILD_ENTRIES_MAX:
                        self.done = True
                    stop = start - 1
                if self.done:
                    return
        finally:
            if ahead:
                for task in ahead.values():
                    task.cancel()
                await asyncio.gather(*ahead.values(), return_exceptions=True)

    def take_saved(self, saved: SavedLedger, ordered: bool = True) -> None:
        """Take the keys of a ledger saved when it closed (services/protocol/saved_keys.py)
        as scanning its entries would: its whole keyed appends newest first, until one
        older than the cutoff, and a stop when an append in it (keyed or not) is older
        than the cutoff in an ``ordered`` ledger (a writer's stamps never go backwards,
        so those are its oldest ones), after ``keys_max`` keys or
        ``DEDUP_REBUILD_ENTRIES_MAX`` entries."""
        if self.done:
            return
        self.ledgers_scanned += 1
        self.scanned += saved.last_entry_id + 1
        lid = saved.ledger_id
        for head in reversed(saved.heads):
            if ordered and head.time_ms < self.cutoff_ms:
                self.done = True
                break
            first = Position(lid, head.entry_id)
            last = Position(lid, head.entry_id + head.remaining)
            self._found.append((head.key, Appended(first, last, head.digest, head.time_ms)))
        if ordered and saved.oldest_ms is not None and saved.oldest_ms < self.cutoff_ms:
            self.done = True
        if len(self._found) >= self.keys_max or self.scanned >= limits.DEDUP_REBUILD_ENTRIES_MAX:
            self.done = True

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
            keyed = log_records.keyed_append(entry_id, record, end)
            if keyed is None:
                continue
            key, digest = keyed
            first = Position(ledger_id, entry_id)
            last = Position(ledger_id, entry_id + record.remaining)
            self._found.append((key, Appended(first, last, digest, head.time_ms)))
        return False


async def scan_tail(
    ledgers: list[tuple[int, int]],
    read_page: PageReader,
    now_ms: int,
    window_ms: int,
    keys_max: int,
    page_entries: int = 1_000,
    unordered: Collection[int] = frozenset(),
    read_ahead: int = 0,
) -> list[tuple[str, Appended]]:
    """The keyed appends in the log's tail, oldest first: ``ledgers`` are (ledger id,
    last entry id) of CLOSED ledgers in log order. Reads backwards page by page and
    stops at an append older than the window (with clock skew allowance), after
    ``keys_max`` keys or ``DEDUP_REBUILD_ENTRIES_MAX`` entries (gateway/limits.py). Only
    whole appends count (a batch cut short by a crash is not in the log:
    ``log_records.visible``).

    The stop on time holds only where time stamps follow log order: in a log writer's
    ledgers, whose appends are stamped by the gateway as they are made, after the ledger
    joined the log and after every append in the ledgers before it (up to clock skew
    between gateways). The ledgers in ``unordered`` (attached: stamped when their writer
    ran, maybe long before they joined the log) are read for keys, but an old stamp in
    one never ends the scan; the ledgers before them may hold appends newer than it.

    ``read_ahead`` 0 (the default) reads one page at a time and makes no task, so that
    the log simulator can drive the scan without an event loop; ``TailScan`` says how
    the gateway's rebuild reads ahead."""
    scan = TailScan(now_ms, window_ms, keys_max, page_entries, read_ahead)
    await scan.scan(ledgers, read_page, unordered)
    return scan.found()
