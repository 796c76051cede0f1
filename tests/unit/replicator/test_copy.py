"""The fragment copier against in-memory bookies: batches, failover, digest checks."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from replicator.copy import CopyJob, CopyLimits, FragmentCopier
from replicator.throttle import ByteThrottle
from services.bookie_client import BookieAddResult, RangeResult
from services.errors import BookieUnavailable, LedgerNotFound
from services.protocol.replication import entries_on
from services.wire import digest
from services.wire.framing import FramedRecord

KEY = digest.mac_key(b"pw")
LEDGER = 7


def _record(entry_id: int, digest_type: str = "hmac-sha256", key: bytes = KEY) -> FramedRecord:
    payload = b"x" * (10 + entry_id)
    return digest.seal(
        FramedRecord(LEDGER, entry_id, entry_id - 1, payload, digest_type=digest_type), key
    )


class FakeBookie:
    def __init__(self, records: dict[int, FramedRecord], fail: bool = False) -> None:
        self.records = records
        self.fail = fail
        self.reads = 0
        self.adds: list[list[FramedRecord]] = []

    async def read_range(
        self,
        ledger_id: int,
        first: int,
        last: int,
        max_entries: int = 1000,
        max_bytes: int = 1 << 20,
    ) -> RangeResult:
        self.reads += 1
        if self.fail:
            raise BookieUnavailable("down")
        if not self.records:
            raise LedgerNotFound("none")
        out, size = [], 0
        for entry_id in sorted(self.records):
            if first <= entry_id <= last and len(out) < max_entries:
                if out and size + len(self.records[entry_id].payload) > max_bytes:
                    break
                out.append(self.records[entry_id])
                size += len(self.records[entry_id].payload)
        return RangeResult(out, max(self.records))

    async def add(
        self, records: list[FramedRecord], timeout_s: float | None = None
    ) -> BookieAddResult:
        if self.fail:
            raise BookieUnavailable("down")
        assert all(r.recovery for r in records)
        self.adds.append(records)
        for r in records:
            self.records[r.entry_id] = r
        return BookieAddResult(len(records), [])


def _copier(
    bookies: dict[str, FakeBookie], entries_max: int = 4, bytes_max: int = 1 << 20
) -> FragmentCopier:
    async def acquire(_: int) -> None:
        return None

    return FragmentCopier(
        bookies.__getitem__, CopyLimits(entries_max, bytes_max, 1.0), acquire, lambda: True
    )


def _job(wanted: list[int], e: int = 3, qw: int = 3, key: bytes | None = KEY) -> CopyJob:
    return CopyJob(LEDGER, ("a", "b", "c"), e, qw, "hmac-sha256", key, wanted, frozenset({"a"}))


def _run(copier: FragmentCopier, job: CopyJob, target: str):  # type: ignore[no-untyped-def]
    async def on_batch(_e: int, _b: int) -> None:
        return None

    return asyncio.run(copier.copy(job, target, on_batch))


def test_copies_every_wanted_entry_in_bounded_batches_with_the_recovery_flag() -> None:
    """10 entries, batches of at most 4: three add requests, every entry verified."""
    full = {i: _record(i) for i in range(10)}
    bookies = {"b": FakeBookie(dict(full)), "c": FakeBookie(dict(full)), "t": FakeBookie({})}
    out = _run(_copier(bookies), _job(list(range(10))), "t")
    assert out.entries == 10 and out.target_failed is None
    assert [len(batch) for batch in bookies["t"].adds] == [4, 4, 2]
    assert {i: r._replace(recovery=False) for i, r in bookies["t"].records.items()} == full


def test_a_byte_bound_splits_batches() -> None:
    """The byte bound ends a batch before the entry bound does (one record always goes)."""
    full = {i: _record(i) for i in range(6)}
    bookies = {"b": FakeBookie(dict(full)), "c": FakeBookie(dict(full)), "t": FakeBookie({})}
    _run(_copier(bookies, entries_max=100, bytes_max=25), _job(list(range(6))), "t")
    assert all(sum(len(r.payload) for r in b) <= 25 or len(b) == 1 for b in bookies["t"].adds)
    assert sorted(bookies["t"].records) == list(range(6))


def test_a_failed_source_fails_over_and_a_forged_replica_is_not_copied() -> None:
    """Source b is down and c holds entry 3 forged (another key): with no replica left
    for it the copy fails rather than copy the forgery; with b back, entry 3 comes from
    b and every other entry from either."""
    full = {i: _record(i) for i in range(6)}
    forged = dict(full)
    forged[3] = _record(3, key=digest.mac_key(b"other"))
    bookies = {"b": FakeBookie({}, fail=True), "c": FakeBookie(forged), "t": FakeBookie({})}
    with pytest.raises(BookieUnavailable):
        _run(_copier(bookies), _job(list(range(6))), "t")
    assert 3 not in bookies["t"].records
    bookies["b"].fail = False
    bookies["b"].records = dict(full)
    bookies["t"] = FakeBookie({})
    out = _run(_copier(bookies), _job(list(range(6))), "t")
    assert out.entries == 6
    assert bookies["t"].records[3].payload == full[3].payload


def test_striped_fragments_read_each_entry_from_its_own_write_set() -> None:
    """E=3 Qw=2: bookie index 0's share comes from the one other replica of each entry."""
    wanted = list(entries_on(0, 11, 0, 3, 2))
    b = {i: _record(i) for i in range(12) if (1 - i) % 3 < 2}
    c = {i: _record(i) for i in range(12) if (2 - i) % 3 < 2}
    bookies = {"b": FakeBookie(b), "c": FakeBookie(c), "t": FakeBookie({})}
    out = _run(_copier(bookies), _job(wanted, e=3, qw=2), "t")
    assert out.entries == len(wanted) and sorted(bookies["t"].records) == wanted


def test_a_failed_target_is_reported_and_legacy_keys_check_the_checksum_only() -> None:
    """A target that fails ends the copy with target_failed; without a key (legacy hmac)
    the records are copied on their checksum alone."""
    full = {i: _record(i) for i in range(3)}
    bookies = {"b": FakeBookie(dict(full)), "c": FakeBookie(dict(full)), "t": FakeBookie({}, True)}
    assert _run(_copier(bookies), _job([0, 1, 2]), "t").target_failed == "bookie_unavailable"
    bookies["t"] = FakeBookie({})
    assert _run(_copier(bookies), _job([0, 1, 2], key=None), "t").entries == 3


def test_the_throttle_reserves_bytes_at_the_rate() -> None:
    """A token bucket: free within its burst, then waits size/rate; 0 is unlimited."""
    now = [0.0]
    throttle = ByteThrottle(1000, clock=lambda: now[0])
    assert throttle.reserve(250) == 0.0
    assert throttle.reserve(500) == pytest.approx(0.5)
    now[0] += 1.0
    assert throttle.reserve(100) == 0.0
    assert ByteThrottle(0).reserve(10**9) == 0.0


def test_a_last_resort_source_is_read_only_for_entries_no_other_replica_yields() -> None:
    """A live bookie being decommissioned (``last_resort``) is read for the entries no
    other replica yields (Qw=1 there: its copy is the only one) and never before them."""
    wanted = list(range(6))
    leaving = {i: _record(i) for i in wanted}
    other = {i: _record(i) for i in wanted if i % 2 == 0}  # b lacks the odd entries
    bookies = {"b": FakeBookie(other), "c": FakeBookie(dict(leaving)), "t": FakeBookie({})}
    job = replace(_job(wanted), last_resort=frozenset({"c"}))
    out = _run(_copier(bookies, entries_max=100), job, "t")
    assert out.entries == 6 and sorted(bookies["t"].records) == wanted
    assert bookies["b"].reads >= 1
    assert bookies["c"].reads <= 3  # one per entry b lacked, at most
    only = {"a": FakeBookie({}), "c": FakeBookie(dict(leaving)), "t": FakeBookie({})}
    qw1 = CopyJob(LEDGER, ("a", "c"), 2, 1, "hmac-sha256", KEY, [1, 3, 5], frozenset({"a"}))
    with pytest.raises(BookieUnavailable):  # c unusable too: nothing to read from
        _run(_copier(only), replace(qw1, unusable=frozenset({"a", "c"})), "t")
    assert _run(_copier(only), replace(qw1, last_resort=frozenset({"c"})), "t").entries == 3
    assert sorted(only["t"].records) == [1, 3, 5]
