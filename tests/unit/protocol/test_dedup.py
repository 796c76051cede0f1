"""The idempotency window (services/protocol/dedup.py; docs/api.md "Logs",
Idempotency-Key): claim, settle, keys in flight, expiry by time and count with the
clock passed in, reused keys, keys whose outcome was left unknown."""

from __future__ import annotations

import pytest

from services.errors import IdempotencyKeyReused, LedgerFenced
from services.protocol import log_records as lr
from services.protocol.dedup import (
    IN_FLIGHT,
    Appended,
    DedupWindow,
    Unsettled,
    unknown_outcome,
)
from services.protocol.logs import Position

D1, D2 = lr.records_digest([b"1"]), lr.records_digest([b"2"])


def appended(lid: int, eid: int, digest: bytes = D1, at_ms: int = 1000) -> Appended:
    return Appended(Position(lid, eid), Position(lid, eid), digest, at_ms)


def test_claim_settle_then_hit_and_reuse() -> None:
    """First claim appends (None); settled, the same key and digest is a hit; another
    digest is idempotency_key_reused."""
    w = DedupWindow(60_000, 10)
    assert w.claim("k", D1, 1000) is None
    w.settle("k", appended(1, 0), 1000)
    assert w.claim("k", D1, 2000) == appended(1, 0)
    with pytest.raises(IdempotencyKeyReused):
        w.claim("k", D2, 2000)


def test_a_key_in_flight_is_claimed_until_settled() -> None:
    """While the first append of a key is in flight, the same records are IN_FLIGHT (the
    retry waits) and other records are 409; settled as failed, the retry claims it."""
    w = DedupWindow(60_000, 10)
    assert w.claim("k", D1, 0) is None
    assert w.claim("k", D1, 0) is IN_FLIGHT
    with pytest.raises(IdempotencyKeyReused):
        w.claim("k", D2, 0)
    w.settle("k", None, 0)  # the first attempt failed
    assert w.claim("k", D1, 0) is None  # the retry now owns the key
    assert w.claim("k", D1, 0) is IN_FLIGHT
    w.settle("k", appended(1, 0, at_ms=0), 0)
    assert w.claim("k", D1, 0) == appended(1, 0, at_ms=0)
    assert len(w) == 1


def test_expiry_by_time_and_by_count() -> None:
    """Keys older than the window at the clock passed in, and the oldest beyond
    keys_max, are forgotten."""
    w = DedupWindow(1000, 2)
    w.remember("a", appended(1, 0, at_ms=0), 0)
    w.remember("b", appended(1, 1, at_ms=500), 500)
    assert len(w) == 2
    w.remember("c", appended(1, 2, at_ms=600), 600)  # count: "a" goes
    assert len(w) == 2
    assert w.claim("a", D2, 600) is None  # forgotten: no reuse error
    w.settle("a", None, 600)
    assert w.claim("b", D1, 1500) == appended(1, 1, at_ms=500)  # 1000 ms old: still in
    assert w.claim("b", D2, 1501) is None  # expired by time
    w.settle("b", None, 1501)


def test_load_merges_in_time_order_known_keys_win() -> None:
    """A rebuild's keys join the window; a key this writer already knows keeps its
    positions; the merged keys expire oldest first."""
    w = DedupWindow(10_000, 2)
    w.remember("mine", appended(5, 0, at_ms=900), 900)
    found = [("oldest", appended(1, 0, at_ms=50)), ("old", appended(1, 1, at_ms=100)),
             ("mine", appended(4, 4, at_ms=50))]  # fmt: skip
    w.load(found, 1000)
    assert w.claim("mine", D1, 1000) == appended(5, 0, at_ms=900)
    assert w.claim("old", D1, 1000) == appended(1, 1, at_ms=100)
    assert w.claim("oldest", D1, 1000) is None  # beyond keys_max, the oldest went


def test_an_unsettled_key_is_kept_and_given_to_its_retry() -> None:
    """A key whose append's outcome was left unknown is kept with its ledger and entries:
    the retry claims it and gets them to settle first; the same key with other records
    is 409; once settled with positions it is an ordinary hit; failed for good, it is
    forgotten."""
    window = DedupWindow(window_ms=60_000, keys_max=10)
    assert window.claim("k", D1, 1_000) is None
    earlier = Unsettled(7, 3, 5, D1, 1_000)
    window.settle("k", None, 1_001, earlier)
    assert window.claim("k", D1, 1_002) == earlier
    with pytest.raises(IdempotencyKeyReused):
        window.claim("k", D2, 1_003)  # claimed: other records are 409
    found = Appended(Position(7, 3), Position(7, 5), D1, 1_000)
    window.settle("k", found, 1_004)
    assert window.claim("k", D1, 1_005) == found
    window.settle("other", None, 1_006, Unsettled(7, 6, 6, D2, 1_006))
    window.settle("other", None, 1_007)  # failed for good: forgotten
    assert window.claim("other", D2, 1_008) is None


def test_an_unsettled_key_expires_with_the_window() -> None:
    """A key left unsettled is kept only while it is in the window."""
    window = DedupWindow(window_ms=1_000, keys_max=10)
    assert window.claim("k", D1, 0) is None
    window.settle("k", None, 0, Unsettled(7, 0, 0, D1, 0))
    assert window.claim("k", D1, 1_001) is None  # expired: appended afresh


def test_the_test_switch_forgets_unsettled_keys() -> None:
    """``keep_unsettled=False`` (the known bug the simulator must catch) forgets a key
    left unsettled: its retry appends."""
    window = DedupWindow(window_ms=60_000, keys_max=10, keep_unsettled=False)
    assert window.claim("k", D1, 0) is None
    window.settle("k", None, 1, Unsettled(7, 0, 0, D1, 1))
    assert window.claim("k", D1, 2) is None


def test_unknown_outcome_is_ledger_fenced_and_says_why() -> None:
    """A retry whose earlier outcome cannot be told is 409 ledger_fenced: "retry later"
    while its ledger is open, "can no longer be settled" once the ledger is gone."""
    open_ = unknown_outcome("k", 7, gone=False)
    gone = unknown_outcome("k", 7, gone=True)
    assert isinstance(open_, LedgerFenced) and isinstance(gone, LedgerFenced)
    assert "retry later" in open_.message
    assert "truncated" in gone.message and "no longer be settled" in gone.message
