"""Reads without recovery (services/protocol/reader.py): replica order with failover, the
LAC from bookie answers, the readable range, digest checks. Never fencing."""

from __future__ import annotations

from dataclasses import replace

from services.protocol import reader
from services.protocol.metadata import LedgerMetadata
from services.wire.digest import seal
from services.wire.framing import Record

POOL = [f"b{i}:3181" for i in range(1, 6)]


def ledger() -> LedgerMetadata:
    md = LedgerMetadata.new(1, POOL[:3], 2, 2)
    return md.with_ensemble(10, ("b4:3181", "b2:3181", "b3:3181"))


def test_read_order_is_the_write_quorum_then_failover_never_other_bookies() -> None:
    """PROTOCOL.md Ledgers: an entry is on its write quorum only; a reader tries it in
    order and fails over to the other replicas (known-bad ones last)."""
    md = ledger()
    assert reader.read_sequence(md, 4) == ("b2:3181", "b3:3181")  # first fragment
    assert reader.read_sequence(md, 10) == ("b2:3181", "b3:3181")  # 10 % 3 = 1
    assert reader.read_sequence(md, 12) == ("b4:3181", "b2:3181")
    assert reader.read_sequence(md, 12, avoid={"b4:3181"}) == ("b2:3181", "b4:3181")


def test_non_recovery_open_reads_only_up_to_the_lac_it_can_learn() -> None:
    """PROTOCOL.md: opening without recovery never fences; it reads only up to the LAC it
    can learn (the highest any bookie of the last fragment reports)."""
    md = ledger()
    assert reader.lac_bookies(md) == ("b4:3181", "b2:3181", "b3:3181")
    assert reader.lac_from_answers([3, 7, -1]) == 7
    assert reader.lac_from_answers([]) == -1
    assert reader.readable_last(md, 7) == 7
    assert list(reader.readable_range(md, 7)) == list(range(8))
    assert list(reader.readable_range(md, 7, 5, 100)) == [5, 6, 7]
    assert list(reader.readable_range(md, 7, 9)) == []  # from beyond the LAC: empty
    assert list(reader.readable_range(md, -1)) == []


def test_closed_ledger_reads_up_to_its_last_entry() -> None:
    """API.md: a closed ledger is read up to its last entry, never past it."""
    md = ledger().closed(20, 100)
    assert reader.readable_last(md, 3) == 20
    assert list(reader.readable_range(md, 3, 18)) == [18, 19, 20]
    assert list(reader.readable_range(LedgerMetadata.new(2, POOL[:1], 1, 1).closed(-1, 0), 5)) == []


def test_a_replica_is_usable_only_if_its_digest_and_ids_verify() -> None:
    """PROTOCOL.md Ledgers: readers verify the digest; a mismatch (or a replica of another
    entry or ledger) is treated as missing, never returned."""
    md = ledger()
    good = seal(Record(1, 4, 3, b"data", digest_type="crc32c", length=10))
    assert reader.record_usable(good, md, 4)
    assert not reader.record_usable(None, md, 4)
    assert not reader.record_usable(replace(good, payload=b"dat4"), md, 4)
    assert not reader.record_usable(good, md, 5)
    assert not reader.record_usable(replace(good, ledger_id=2), md, 4)
    hmac = LedgerMetadata.new(1, POOL[:3], 2, 2, digest_type="hmac-sha256")
    sealed = seal(Record(1, 0, -1, b"x", digest_type="hmac-sha256", length=1), b"key")
    assert reader.record_usable(sealed, hmac, 0, b"key")
    assert not reader.record_usable(sealed, hmac, 0, b"wrong")
