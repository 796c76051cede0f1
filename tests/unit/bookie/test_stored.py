"""Which entries a bookie stores (bookie.stored): the runs, the sample and the digest
checks, pure and against a real SQLite file."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from bookie.ledgers import LedgerIndex
from bookie.storage import (
    INSERT_ENTRY_SQL,
    UPSERT_LEDGER_SQL,
    Reader,
    create_writer_engine,
    load_ledgers,
)
from bookie.stored import (
    StoredReport,
    check_after,
    read_runs,
    row_ok,
    runs_of,
    sample_ids,
    stored_reports,
)
from services.limits import STORED_SAMPLE_ENTRIES_MAX
from services.wire import digest
from services.wire.framing import DIGEST_CODES, FramedRecord


def row(lid: int, eid: int, digest_type: str = "crc32c", payload: bytes = b"p") -> tuple:
    rec = digest.seal(
        FramedRecord(lid, eid, eid - 1, payload, b"", False, digest_type, eid + 1), b"k"
    )
    return (lid, eid, rec.lac, rec.length, DIGEST_CODES[digest_type], rec.digest, payload)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Engine, Reader]]:
    engine = create_writer_engine(tmp_path, journal_sync=False)
    reader = Reader(tmp_path)
    try:
        yield engine, reader
    finally:
        reader.close()
        engine.dispose()


def insert(engine: Engine, rows: list[tuple], fenced: dict[int, bool] | None = None) -> None:
    lids = {r[0] for r in rows} | set(fenced or {})
    with engine.begin() as conn:
        for r in rows:
            conn.exec_driver_sql(INSERT_ENTRY_SQL, r)
        for lid in lids:
            last = max((r[1] for r in rows if r[0] == lid), default=-1)
            flag = int((fenced or {}).get(lid, False))
            size = sum(len(r[6]) for r in rows if r[0] == lid)
            conn.exec_driver_sql(UPSERT_LEDGER_SQL, (lid, flag, -1, last, size))


def test_runs_of_splits_at_gaps() -> None:
    """Maximal runs of consecutive ids; empty input gives no run."""
    assert runs_of([]) == []
    assert runs_of([5]) == [(5, 5)]
    assert runs_of([0, 1, 2, 4, 5, 9]) == [(0, 2), (4, 5), (9, 9)]
    # A bookie of a striped ledger (E=3, Qw=2) holds two of every three entries.
    held = [e for e in range(30) if e % 3 != 2]
    assert runs_of(held) == [(e, e + 1) for e in range(0, 30, 3)]


def test_sql_runs_match_the_python_runs(store: tuple[Engine, Reader]) -> None:
    """The one window-function query gives, for every listed ledger, the same runs,
    counts and last ids as runs_of over its ids; unlisted ledgers are not read."""
    engine, _ = store
    rng = random.Random(3)
    ids = {lid: sorted(rng.sample(range(200), rng.randint(1, 120))) for lid in range(1, 9)}
    insert(engine, [row(lid, e) for lid, eids in ids.items() for e in eids])
    got = read_runs(engine, [3, 1, 2, 4, 5, 6, 7, 99])
    assert sorted(got) == [1, 2, 3, 4, 5, 6, 7]
    for lid in got:
        assert got[lid].ranges == runs_of(ids[lid])
        assert got[lid].entries == len(ids[lid])
        assert got[lid].last_entry_id == ids[lid][-1]
        assert got[lid].truncated is False


def test_runs_are_cut_per_ledger_and_in_total(store: tuple[Engine, Reader]) -> None:
    """Past runs_max runs of a ledger, or total_runs_max in the answer, the list is cut
    and says truncated, while entries and last_entry_id still count every entry."""
    engine, _ = store
    insert(engine, [row(lid, e) for lid in (1, 2) for e in range(0, 20, 2)])  # 10 runs each
    got = read_runs(engine, [1, 2], runs_max=4, total_runs_max=6)
    assert got[1].ranges == [(0, 0), (2, 2), (4, 4), (6, 6)] and got[1].truncated
    assert got[2].ranges == [(0, 0), (2, 2)] and got[2].truncated
    assert (got[1].entries, got[1].last_entry_id) == (10, 18)
    assert (got[2].entries, got[2].last_entry_id) == (10, 18)


def test_sample_is_bounded_spread_and_deterministic() -> None:
    """The sample holds the first and last stored ids, at most the bound, only stored
    ids, evenly spread; small ledgers are checked whole."""
    ranges = [(e, e + 1) for e in range(0, 3000, 3)]
    stored = {e for first, last in ranges for e in range(first, last + 1)}
    ids = sample_ids(ranges)
    assert len(ids) == STORED_SAMPLE_ENTRIES_MAX and ids == sorted(set(ids))
    assert ids[0] == 0 and ids[-1] == 2998 and set(ids) <= stored
    assert ids == sample_ids(ranges)
    gaps = [b - a for a, b in zip(ids, ids[1:], strict=False)]
    assert max(gaps) - min(gaps) <= 3  # evenly spaced by position
    assert sample_ids([(4, 6), (9, 9)]) == [4, 5, 6, 9]
    assert sample_ids([]) == []


def test_row_check_catches_each_kind_of_damage() -> None:
    """A crc32c entry fails when its payload, ids, LAC or length no longer match its
    digest; other types fail only on a digest of the wrong length or unknown type."""
    good = row(1, 5)
    assert row_ok(*good)
    lid, eid, lac, length, dtype, dig, payload = good
    assert not row_ok(lid, eid, lac, length, dtype, dig, b"q")
    assert not row_ok(lid, eid + 1, lac, length, dtype, dig, payload)
    assert not row_ok(lid, eid, lac + 1, length, dtype, dig, payload)
    assert not row_ok(lid, eid, lac, length + 1, dtype, dig, payload)
    assert not row_ok(lid, eid, lac, length, dtype, dig[:3], payload)
    assert not row_ok(lid, eid, lac, length, 3, dig, payload)
    hmac_row = row(1, 5, "hmac-sha256")
    assert row_ok(*hmac_row) and row_ok(*hmac_row[:6], None)
    assert not row_ok(*hmac_row[:5], b"short", None)
    assert row_ok(*row(1, 5, "none"))


def test_check_after_reads_in_bounded_chunks(store: tuple[Engine, Reader]) -> None:
    """A full check goes in chunks of at most entries_max entries and about bytes_max of
    payload, resumes after the last id, finds every corrupt entry once, and ends."""
    engine, _ = store
    rows = [row(1, e, payload=bytes(100)) for e in range(25)]
    bad = {3, 17}
    for e in bad:
        rows[e] = (*rows[e][:6], b"x" * 100)
    insert(engine, rows)
    after, checked, corrupt, chunks = -1, 0, [], 0
    while True:
        chunk = check_after(engine, 1, after, entries_max=10, bytes_max=450)
        assert chunk.checked <= 5  # 450 bytes of 100-byte payloads: 5 at most
        checked += chunk.checked
        corrupt += chunk.corrupt
        chunks += 1
        if chunk.done:
            break
        after = chunk.last
    assert (checked, set(corrupt), len(corrupt)) == (25, bad, 2) and chunks >= 5


def reports(reader: Reader, engine: Engine, ids: list[int], verify: str) -> list[StoredReport]:
    index = LedgerIndex(load_ledgers(engine))
    return asyncio.run(stored_reports(reader, index, ids, verify))  # type: ignore[arg-type]


def test_reports_in_order_with_unknown_ledgers_and_checks(store: tuple[Engine, Reader]) -> None:
    """Answers come in the order asked (repeats included); an unknown ledger is
    known False; a fenced ledger without entries is known; sample and all find the
    corrupt entry, none checks nothing."""
    engine, reader = store
    rows = [row(7, e) for e in range(40)] + [row(8, e) for e in (0, 1, 5)]
    rows[39] = (*rows[39][:6], b"damaged")  # the last entry: every sample holds it
    rows[20] = (*rows[20][:6], b"damaged")
    insert(engine, rows, fenced={9: True})
    got = reports(reader, engine, [8, 404, 7, 9, 8], "none")
    assert [r.ledger_id for r in got] == [8, 404, 7, 9, 8]
    assert got[1].to_json(True) == {
        "ledger_id": 404,
        "known": False,
        "ranges": [],
        "entries": 0,
        "last_entry_id": -1,
        "fenced": False,
        "checked": 0,
        "corrupt": [],
    }
    assert got[0].ranges == [(0, 1), (5, 5)] and got[0].known and not got[0].fenced
    assert got[3].known and got[3].fenced and got[3].entries == 0
    assert got[2].checked == 0 and got[2].corrupt == []

    sampled = reports(reader, engine, [7, 8], "sample")
    assert sampled[0].checked == STORED_SAMPLE_ENTRIES_MAX and 39 in sampled[0].corrupt
    assert sampled[1].checked == 3 and sampled[1].corrupt == []
    full = reports(reader, engine, [7], "all")
    assert (full[0].checked, full[0].corrupt) == (40, [20, 39])
