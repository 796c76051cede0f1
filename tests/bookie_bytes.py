"""The bookie's kept byte counts against a scan of its entries (bookie/storage.py, "Kept
byte counts"), read from its ``bookie.db`` on a connection of the test's own: the unit
tests' stores and the integration tests' data dirs (WAL: the bookie may be running)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bookie.storage import DB_FILE

# (table, ledger id) -> payload bytes: "ledgers" for a stored ledger, "purging" for a
# deleted one still being purged, "neither" for entry rows no table accounts for.
Counts = dict[tuple[str, int], int]


def kept_and_scanned(data_dir: Path) -> tuple[Counts, Counts]:
    """The kept counts of every ``ledgers`` and ``purging`` row, and the same figures
    summed from the entry rows, both read in one transaction (so they describe one
    committed state, whatever the bookie commits meanwhile)."""
    db = sqlite3.connect(f"file:{Path(data_dir) / DB_FILE}?mode=ro", uri=True, timeout=10)
    try:
        db.execute("BEGIN")
        kept: Counts = {}
        for table in ("ledgers", "purging"):
            for lid, size in db.execute(f"SELECT ledger_id, bytes FROM {table}"):
                kept[(table, lid)] = size
        tables = {lid: table for table, lid in kept}
        scanned: Counts = {key: 0 for key in kept}
        rows = db.execute(
            "SELECT ledger_id, SUM(LENGTH(payload)) FROM entries GROUP BY ledger_id"
        ).fetchall()
        for lid, size in rows:
            scanned[(tables.get(lid, "neither"), lid)] = size
        db.execute("COMMIT")
    finally:
        db.close()
    return kept, scanned


def assert_kept_equals_scan(data_dir: Path) -> Counts:
    """Assert that every kept count equals the scan (and that no entry row is outside
    both tables); the counts, for further checks."""
    kept, scanned = kept_and_scanned(data_dir)
    differ = {
        key: (kept.get(key), scanned.get(key))
        for key in kept.keys() | scanned.keys()
        if kept.get(key) != scanned.get(key)
    }
    assert not differ, f"kept counts differ from the scan, (kept, scanned) by row: {differ}"
    return kept
