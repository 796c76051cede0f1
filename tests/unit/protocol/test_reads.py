"""Reads without recovery (services/protocol/reads.py): the readable end, replica order
with failover, digest checks, and ``ReadOp`` driven by hand, events in and effects out
(failover order, speculative deadlines, corrupt replicas, page bounds, the unavailable
verdict). Never fencing."""

from __future__ import annotations

from services.errors import BookieUnavailable, EntryNotFound
from services.protocol import reads
from services.protocol.limits import ReadLimits
from services.protocol.messages import Tick
from services.protocol.metadata import LedgerMetadata
from services.protocol.reads import ReadOp
from services.protocol.reads_messages import (
    CancelRequests,
    EntryAnswered,
    RangeAnswered,
    ReadDone,
    ReadEffect,
    ReadEntry,
    ReadFailed,
    ReadRange,
    ReplicaCorrupt,
    RequestFailed,
)
from services.wire.digest import seal
from services.wire.framing import FramedRecord

POOL = [f"b{i}:3181" for i in range(1, 6)]
SPECULATIVE_MS = 100


def ledger() -> LedgerMetadata:
    md = LedgerMetadata.new(1, POOL[:3], 2, 2)
    return md.with_ensemble(10, ("b4:3181", "b2:3181", "b3:3181"))


def record(entry_id: int, payload: bytes | None = None) -> FramedRecord:
    data = payload if payload is not None else f"entry {entry_id}".encode()
    return seal(FramedRecord(1, entry_id, entry_id - 1, data, digest_type="crc32c"))


def corrupt(entry_id: int) -> FramedRecord:
    good = record(entry_id)
    return good._replace(payload=good.payload + b"!")


def asks(effects: list[ReadEffect]) -> list[tuple[str, int]]:
    return [(e.bookie, e.entry_id) for e in effects if isinstance(e, ReadEntry)]


def rid(effect: ReadEffect) -> int:
    """The request id of a bookie request effect."""
    assert isinstance(effect, ReadRange | ReadEntry)
    return effect.request_id


def limits(**kw: int) -> ReadLimits:
    return ReadLimits(speculative_read_ms=SPECULATIVE_MS, **kw)


# ---------------------------------------------------------------------- the rules


def test_read_order_is_the_write_quorum_then_failover_never_other_bookies() -> None:
    """docs/protocol.md Ledgers: an entry is on its write quorum only; a reader tries it in
    order and fails over to the other replicas (known-bad ones last)."""
    md = ledger()
    assert reads.read_sequence(md, 4) == ("b2:3181", "b3:3181")  # first fragment
    assert reads.read_sequence(md, 10) == ("b2:3181", "b3:3181")  # 10 % 3 = 1
    assert reads.read_sequence(md, 12) == ("b4:3181", "b2:3181")
    assert reads.read_sequence(md, 12, avoid={"b4:3181"}) == ("b2:3181", "b4:3181")


def test_the_readable_end_is_the_lac_or_the_last_entry_of_a_closed_ledger() -> None:
    """docs/protocol.md: opening without recovery reads only up to the LAC it can learn (the
    highest any bookie of the last fragment reports); a CLOSED ledger up to its last
    entry, whatever the LAC. Unknown LAC on an open ledger: learn it first (None)."""
    md = ledger()
    assert reads.lac_bookies(md) == ("b4:3181", "b2:3181", "b3:3181")
    assert reads.lac_from_answers([3, 7, -1]) == 7
    assert reads.lac_from_answers([]) == -1
    assert reads.readable_end(md, 7) == 7
    assert reads.readable_end(md, None) is None
    closed = md.closed(20, 100)
    assert reads.readable_end(closed, 3) == 20
    assert reads.readable_end(closed, None) == 20
    empty = LedgerMetadata.new(2, POOL[:1], 1, 1).closed(-1, 0)
    assert reads.readable_end(empty, 5) == -1


def test_a_replica_is_usable_only_if_its_digest_and_ids_verify() -> None:
    """docs/protocol.md Ledgers: readers verify the digest; a mismatch (or a replica of another
    entry or ledger) is treated as missing, never returned."""
    md = ledger()
    good = seal(FramedRecord(1, 4, 3, b"data", digest_type="crc32c", length=10))
    assert reads.record_usable(good, md, 4)
    assert not reads.record_usable(None, md, 4)
    assert not reads.record_usable(good._replace(payload=b"dat4"), md, 4)
    assert not reads.record_usable(good, md, 5)
    assert not reads.record_usable(good._replace(ledger_id=2), md, 4)
    hmac = LedgerMetadata.new(1, POOL[:3], 2, 2, digest_type="hmac-sha256")
    sealed = seal(FramedRecord(1, 0, -1, b"x", digest_type="hmac-sha256", length=1), b"key")
    assert reads.record_usable(sealed, hmac, 0, b"key")
    assert not reads.record_usable(sealed, hmac, 0, b"wrong")


# ---------------------------------------------------------------------- single entries


def test_a_single_read_fails_over_along_the_write_set_at_once() -> None:
    """A replica that fails (or lacks the entry) moves the read to the next replica of
    the write set at once, in write-set order; the first good copy is the answer."""
    md = ledger()
    op = ReadOp.entry(md, 12, 20, limits=limits())
    first = op.start(now=0)
    assert asks(first) == [("b4:3181", 12)]
    assert op.next_deadline() == SPECULATIVE_MS
    effects = op.handle(RequestFailed(rid(first[0]), "entry_not_found", now=5))
    assert asks(effects) == [("b2:3181", 12)]
    assert op.next_deadline() is None  # the last replica: nothing more to ask in parallel
    effects = op.handle(EntryAnswered(rid(effects[0]), record(12), now=9))
    assert effects == [ReadDone(((12, b"entry 12"),), 13)]
    assert op.finished and op.failovers == 1


def test_a_silent_replica_gets_the_next_asked_in_parallel_at_the_deadline() -> None:
    """Speculative reads: after ``speculative_read_ms`` without an answer the next replica
    is asked too (not before); the first valid answer wins and the other request is
    cancelled; a late answer changes nothing."""
    md = ledger()
    op = ReadOp.entry(md, 0, 5, limits=limits())
    slow = op.start(now=1_000)[0]
    assert op.handle(Tick(1_000 + SPECULATIVE_MS - 1)) == []
    effects = op.handle(Tick(1_000 + SPECULATIVE_MS))
    assert asks(effects) == [("b2:3181", 0)]
    effects = op.handle(EntryAnswered(rid(effects[0]), record(0), now=1_150))
    assert effects == [CancelRequests((rid(slow),)), ReadDone(((0, b"entry 0"),), 1)]
    assert op.handle(EntryAnswered(rid(slow), record(0), now=1_200)) == []
    assert op.failovers == 1


def test_a_corrupt_replica_is_skipped_and_counts_as_missing() -> None:
    """A replica whose digest does not verify is reported and never returned; with every
    replica corrupt or failed the read ends bookie_unavailable, naming each replica."""
    md = ledger()
    op = ReadOp.entry(md, 0, 5, limits=limits())
    effects = op.handle(EntryAnswered(rid(op.start(now=0)[0]), corrupt(0), now=1))
    assert effects[0] == ReplicaCorrupt("b1:3181", 1, 0)
    assert asks(effects[1:]) == [("b2:3181", 0)]
    effects = op.handle(RequestFailed(rid(effects[1]), "bookie_unavailable", now=2))
    assert len(effects) == 1 and isinstance(effects[0], ReadFailed)
    assert effects[0].error is BookieUnavailable
    assert "b1:3181: digest mismatch" in effects[0].message
    assert "b2:3181: bookie_unavailable" in effects[0].message


def test_an_entry_past_the_readable_end_is_not_found_without_asking() -> None:
    """A single entry above the readable end is entry_not_found, and no bookie is asked."""
    effects = ReadOp.entry(ledger(), 8, 7).start(now=0)
    assert len(effects) == 1 and isinstance(effects[0], ReadFailed)
    assert effects[0].error is EntryNotFound


# ---------------------------------------------------------------------- pages


def stored(op: ReadOp, effect: ReadRange) -> list[int]:
    """The entries a bookie answers a range read with: those it stores in the range,
    filtered by the read's stride and residues as a real bookie filters them."""
    return [
        e
        for e in range(effect.first, effect.last + 1)
        if effect.bookie in op.metadata.write_set_bookies(e)
        and (not effect.stride or e % effect.stride in effect.residues)
    ]


def _cover_answers(op: ReadOp, effects: list[ReadEffect], now: int) -> list[ReadEffect]:
    """Answer every range read with the entries its bookie stores."""
    out: list[ReadEffect] = []
    for effect in effects:
        if isinstance(effect, ReadRange):
            ids = stored(op, effect)
            out += op.handle(RangeAnswered(effect.request_id, tuple(map(record, ids)), now))
    return out


def test_a_page_is_read_with_one_range_read_per_cover_bookie_and_bounded_by_count() -> None:
    """Cover bookies (indexes 0, Qw, …) hold every entry: one range read each, cut at
    ``page_entries_max`` and at the fragment's end, each asked only for the residues
    (entry id mod E) no cover before it stores, so that every entry comes once;
    next_entry_id says where to go on."""
    md = LedgerMetadata.new(1, POOL[:5], 2, 2).with_ensemble(7, POOL[:5])
    op = ReadOp.page(md, 2, 100, limits=limits(page_entries_max=4))
    effects = op.start(now=0)
    ranges = [e for e in effects if isinstance(e, ReadRange)]
    assert [(e.bookie, e.first, e.last, e.entries_max) for e in ranges] == [
        (b, 2, 5, 4) for b in (POOL[0], POOL[2], POOL[4])
    ]
    assert [(e.stride, e.residues) for e in ranges] == [(5, (0, 4)), (5, (1, 2)), (5, (3,))]
    assert sorted(e for r in ranges for e in stored(op, r)) == [2, 3, 4, 5]  # each once
    done = _cover_answers(op, effects, now=3)
    assert done == [ReadDone(tuple((e, f"entry {e}".encode()) for e in range(2, 6)), 6)]
    op = ReadOp.page(md, 5, 100, limits=limits())
    op.start(now=0)
    assert op.last == 6  # the page ends with the fragment
    assert ReadOp.page(md, 5, 4).start(now=0) == [ReadDone((), None)]


def test_a_page_is_bounded_by_bytes_but_its_first_entry_comes_whole() -> None:
    """Past ``page_bytes_max`` payload bytes the page ends before the entry that would
    pass it; a first entry larger than the bound is still returned, alone."""
    md = LedgerMetadata.new(1, POOL[:1], 1, 1)
    op = ReadOp.page(md, 0, 9, limits=limits(page_bytes_max=10))
    (ask,) = op.start(now=0)
    answer = tuple(record(e, b"abcd") for e in range(10))
    assert op.handle(RangeAnswered(rid(ask), answer, 1)) == [
        ReadDone(((0, b"abcd"), (1, b"abcd")), 2)
    ]
    op = ReadOp.page(md, 0, 9, limits=limits(page_bytes_max=10))
    (ask,) = op.start(now=0)
    big = (record(0, b"x" * 50), record(1, b"y"))
    assert op.handle(RangeAnswered(rid(ask), big, 1)) == [ReadDone(((0, b"x" * 50),), 1)]
    # Entries that fill the bound exactly all come: only passing it ends the page.
    op = ReadOp.page(md, 0, 9, limits=limits(page_bytes_max=12))
    (ask,) = op.start(now=0)
    assert op.handle(RangeAnswered(rid(ask), answer, 1)) == [
        ReadDone(((0, b"abcd"), (1, b"abcd"), (2, b"abcd")), 3)
    ]


def test_a_hanging_cover_bookie_is_given_up_and_its_entries_read_elsewhere_it_last() -> None:
    """A cover bookie silent at the deadline is cancelled and suspected: its residues are
    asked again, as ranges, from the other bookie storing each (the deadline starts
    again); a corrupt copy in a range answer counts as missing and that entry is read
    from its replicas, the slow bookie last."""
    md = LedgerMetadata.new(1, POOL[:3], 2, 2)  # cover: b1 (index 0) and b3 (index 2)
    op = ReadOp.page(md, 0, 5, limits=limits())
    hang, fast = op.start(now=0)
    assert isinstance(hang, ReadRange) and isinstance(fast, ReadRange)
    assert (hang.bookie, hang.residues, fast.bookie, fast.residues) == (
        "b1:3181", (0, 2), "b3:3181", (1,)
    )  # fmt: skip
    assert op.handle(RangeAnswered(rid(fast), (record(1), record(4)), now=4)) == []
    assert op.next_deadline() == SPECULATIVE_MS
    effects = op.handle(Tick(SPECULATIVE_MS))
    assert effects[0] == CancelRequests((rid(hang),))
    again = [e for e in effects[1:] if isinstance(e, ReadRange)]
    # residue 0 (entries 0, 3) is on b1 b2, residue 2 (entries 2, 5) on b3 b1
    assert [(e.bookie, e.stride, e.residues) for e in again] == [
        ("b2:3181", 3, (0,)), ("b3:3181", 3, (2,))
    ]  # fmt: skip
    assert op.next_deadline() == 2 * SPECULATIVE_MS
    assert op.handle(RangeAnswered(rid(again[0]), (record(0), record(3)), now=110)) == []
    effects = op.handle(RangeAnswered(rid(again[1]), (corrupt(2), record(5)), now=120))
    assert asks(effects) == [("b3:3181", 2)]  # entry 2: b3 (not suspected) then b1
    effects = op.handle(RequestFailed(rid(effects[0]), "bookie_unavailable", now=130))
    assert asks(effects) == [("b1:3181", 2)]
    effects = op.handle(EntryAnswered(rid(effects[0]), record(2), now=140))
    assert effects == [ReadDone(tuple((e, f"entry {e}".encode()) for e in range(6)), 6)]


def test_a_failed_cover_bookie_is_replaced_by_range_reads_until_none_is_left() -> None:
    """A cover bookie failing its range read at once: its residues go, as ranges, to the
    next bookie of their write sets; when that fails too and no bookie is left for a
    residue, its entries are read one by one (and fail: no replica)."""
    md = LedgerMetadata.new(1, POOL[:3], 2, 2)
    op = ReadOp.page(md, 0, 2, limits=limits())
    first, second = op.start(now=0)
    effects = op.handle(RequestFailed(rid(first), "bookie_unavailable", now=1))
    assert [(e.bookie, e.residues) for e in effects if isinstance(e, ReadRange)] == [
        ("b2:3181", (0,)), ("b3:3181", (2,))
    ]  # fmt: skip
    assert op.failovers == 2
    b2, b3 = effects
    assert op.handle(RangeAnswered(rid(second), (record(1),), now=2)) == []
    assert op.handle(RangeAnswered(rid(b3), (record(2),), now=3)) == []
    effects = op.handle(RequestFailed(rid(b2), "bookie_unavailable", now=4))
    assert asks(effects) == [("b1:3181", 0)]  # residue 0: b1 and b2 tried, entry by entry
    effects = op.handle(RequestFailed(rid(effects[0]), "bookie_unavailable", now=5))
    assert asks(effects) == [("b2:3181", 0)]
    effects = op.handle(RequestFailed(rid(effects[0]), "bookie_unavailable", now=6))
    assert len(effects) == 1 and isinstance(effects[0], ReadFailed)
    assert effects[0].error is BookieUnavailable


def test_no_replica_of_a_page_entry_is_bookie_unavailable() -> None:
    """An entry at or below the readable end that no replica serves ends the read with
    bookie_unavailable (the entries before it are not returned as a short page)."""
    md = LedgerMetadata.new(1, POOL[:2], 2, 2)
    op = ReadOp.page(md, 0, 1, limits=limits())
    (cover,) = op.start(now=0)
    effects = op.handle(RequestFailed(rid(cover), "bookie_unavailable", now=1))
    assert [(e.bookie, e.stride) for e in effects if isinstance(e, ReadRange)] == [
        ("b2:3181", 0)
    ]  # the range again from the other replica (all residues: no filter)
    effects = op.handle(RequestFailed(rid(effects[0]), "bookie_unavailable", now=2))
    assert asks(effects) == [("b1:3181", 0)]  # then entry by entry
    effects = op.handle(RequestFailed(rid(effects[0]), "bookie_unavailable", now=3))
    assert asks(effects) == [("b2:3181", 0)]
    effects = op.handle(RequestFailed(rid(effects[0]), "bookie_unavailable", now=4))
    assert isinstance(effects[0], ReadFailed) and effects[0].error is BookieUnavailable
    assert op.finished and op.handle(Tick(10_000)) == []
