"""The idempotency window of one log's writer, as a pure structure (docs/api.md, "Logs";
docs/style.md §1): the clock is passed in, waiting is the runner's.

A key maps to the positions its append got and the digest of its records
(``log_records.records_digest``). A retry with the same key and the same records is
answered from here and appends nothing; the same key with other records is 409
``idempotency_key_reused``. A key whose first append is still in flight is claimed
(``claim`` answers ``IN_FLIGHT``): the retry waits until that append ends (its runner
carries out ``log_append.ReleaseKey``), then is answered by its success or claims the key
after its failure.

Bounds: keys older than ``window_ms`` or beyond ``keys_max`` (oldest first) are
forgotten. The window is rebuilt from the log's tail when a gateway takes the writer
role (gateway/logs/rebuild.py), because the keys live in the entries themselves: a
hand-over or a crash of the previous writer loses nothing that was appended.

An unknown outcome stays unknown while the key is in the window (``Unsettled``): a
retry whose earlier attempt's ledger has not closed yet, or is gone (truncated away
before the outcome was settled: it may have held the append), is 409 ``ledger_fenced``
(``unknown_outcome``) and appends nothing, since appending again could put the records
in the log twice.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from services.errors import IdempotencyKeyReused, LedgerFenced
from services.protocol.logs import Position


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
    a ledger that had not closed yet. A retry settles it first (``log_append``): in the
    log -> those positions; not in it -> append; still unknown -> unknown again."""

    ledger_id: int
    first_entry_id: int
    last_entry_id: int
    digest: bytes
    at_ms: int


@dataclass(frozen=True, slots=True)
class InFlight:
    """``claim``'s answer while another append of the key is in flight."""


IN_FLIGHT = InFlight()


class DedupWindow:
    """The keys of one log's writer. ``keep_unsettled`` is a test-only switch: False
    brings back a known bug (duel seed 56 of the log simulator), a window that forgets a
    key whose append's outcome was left unknown, so that its retry appends again;
    tests/simulation/test_log_simulation.py shows the simulator catches it."""

    def __init__(self, window_ms: int, keys_max: int, keep_unsettled: bool = True) -> None:
        self.window_ms = window_ms
        self.keys_max = keys_max
        self.keep_unsettled = keep_unsettled
        self._keys: OrderedDict[str, Appended] = OrderedDict()
        self._unsettled: OrderedDict[str, Unsettled] = OrderedDict()
        self._in_flight: dict[str, bytes] = {}  # key -> the digest of its claimed append

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

    def claim(self, key: str, digest: bytes, now_ms: int) -> Appended | Unsettled | InFlight | None:
        """The earlier append of ``key`` (a hit); None: the key is claimed, the caller
        appends and must ``settle`` it; the earlier attempt whose outcome is unknown: the
        key is claimed, the caller settles that attempt first; ``IN_FLIGHT``: another
        append of the key is in flight, the caller waits for it to end and claims again.
        409 when the key came with other records."""
        self._expire(now_ms)
        known = self._keys.get(key)
        if known is not None:
            if known.digest != digest:
                raise key_reused(key)
            return known
        flying = self._in_flight.get(key)
        if flying is not None:
            if flying != digest:
                raise key_reused(key)
            return IN_FLIGHT
        unsettled = self._unsettled.get(key)
        if unsettled is not None and unsettled.digest != digest:
            raise key_reused(key)
        self._in_flight[key] = digest
        return unsettled

    def settle(
        self,
        key: str,
        appended: Appended | None,
        now_ms: int,
        unknown: Unsettled | None = None,
    ) -> None:
        """The claimed append of ``key`` ended: with its positions, or failed (None),
        with an ``unknown`` outcome when its entries may still turn up in the log."""
        self._in_flight.pop(key, None)
        if unknown is not None and not self.keep_unsettled:
            unknown = None
        if appended is not None or unknown is None:
            self._unsettled.pop(key, None)
        if unknown is not None and appended is None:
            self._unsettled[key] = unknown
            self._unsettled.move_to_end(key)
        if appended is not None:
            self.remember(key, appended, now_ms)

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


def key_reused(key: str) -> IdempotencyKeyReused:
    return IdempotencyKeyReused(
        f"Idempotency-Key {key!r} was used within the last window with other records"
    )
