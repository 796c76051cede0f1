"""Which entries a bookie stores, and whether they still match their digests.

The auditor asks a bookie about many ledgers at once (``POST /v1/stored``) instead of
one request per entry: for each ledger, the maximal runs of consecutive entry ids
stored (``ranges``), how many, the last one, the fenced flag, and optionally the
result of re-checking stored entries against their digests.

- Runs: ONE query for every listed ledger, a gaps-and-islands window:
  ``entry_id - ROW_NUMBER() OVER (PARTITION BY ledger_id ORDER BY entry_id)`` is the
  same for every entry of a run, so grouping by it gives each run's first, last and
  count (``RUNS_SQL``). It walks the primary-key index only (no payload is read).
  ``runs_of`` is the same computation in Python (the tests compare them).
- Checks (``verify``): ``sample`` checks at most ``STORED_SAMPLE_ENTRIES_MAX``
  entries of a ledger (the first, the last, evenly spaced ones between:
  ``sample_ids``), ``all`` every entry, read in chunks of at most
  ``CHECK_CHUNK_ENTRIES`` entries and ``CHECK_CHUNK_BYTES`` of payload per read, each
  in a read thread, so the event loop and other reads go on between chunks. A crc32c
  entry is checked with ``services.wire.digest.record_ok`` (ids, LAC, length,
  payload). The framing's record checksum covers transit only: it is not stored, and a
  bookie has no HMAC key, so an hmac-sha256 or none entry is checked for its shape
  only (a known digest type, a digest of the type's length). Only crc32c payloads are
  read.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import Engine

from bookie.ledgers import LedgerIndex
from bookie.limits import CHECK_CHUNK_BYTES, CHECK_CHUNK_ENTRIES, CORRUPT_LISTED_MAX
from bookie.storage import Reader
from services.limits import (
    STORED_BATCH_RUNS_MAX,
    STORED_RUNS_MAX,
    STORED_SAMPLE_ENTRIES_MAX,
)
from services.wire.digest import record_ok
from services.wire.framing import DIGEST_LENGTHS, DIGEST_NAMES, FramedRecord

Verify = Literal["none", "sample", "all"]
Run = tuple[int, int]


_CRC32C = 1


@dataclass(slots=True)
class StoredReport:
    """One ledger's answer (docs/api.md "Bookie", ``GET /v1/ledgers/{id}/stored``)."""

    ledger_id: int
    known: bool
    ranges: list[Run] = field(default_factory=list)
    entries: int = 0
    last_entry_id: int = -1
    fenced: bool = False
    truncated: bool = False
    checked: int = 0
    corrupt: list[int] = field(default_factory=list)

    def to_json(self, with_known: bool) -> dict[str, Any]:
        doc: dict[str, Any] = {"ledger_id": self.ledger_id}
        if with_known:
            doc["known"] = self.known
        doc.update(
            ranges=self.ranges,
            entries=self.entries,
            last_entry_id=self.last_entry_id,
            fenced=self.fenced,
            checked=self.checked,
            corrupt=self.corrupt,
        )
        if self.truncated:
            doc["truncated"] = True
        return doc


# -- pure ----------------------------------------------------------------------


def runs_of(entry_ids: Iterable[int]) -> list[Run]:
    """The maximal runs of consecutive ids in ascending ``entry_ids``."""
    out: list[Run] = []
    first = last = None
    for eid in entry_ids:
        if last is not None and eid == last + 1:
            last = eid
            continue
        if first is not None and last is not None:
            out.append((first, last))
        first = last = eid
    if first is not None and last is not None:
        out.append((first, last))
    return out


def sample_ids(ranges: Sequence[Run], count_max: int = STORED_SAMPLE_ENTRIES_MAX) -> list[int]:
    """A deterministic spread of at most ``count_max`` ids stored in ``ranges``: the
    first, the last and evenly spaced ones between (by position among the ids)."""
    starts: list[int] = []  # position of each run's first id
    total = 0
    for first, last in ranges:
        starts.append(total)
        total += last - first + 1
    if total == 0 or count_max <= 0:
        return []
    if total <= count_max:
        positions = list(range(total))
    elif count_max == 1:
        positions = [0]
    else:
        positions = sorted({i * (total - 1) // (count_max - 1) for i in range(count_max)})
    out = []
    for pos in positions:
        k = bisect_right(starts, pos) - 1
        out.append(ranges[k][0] + pos - starts[k])
    return out


def row_ok(
    ledger_id: int,
    entry_id: int,
    lac: int,
    length: int,
    digest_type: int,
    digest: bytes,
    payload: bytes | None,
) -> bool:
    """Whether a stored entry passes the checks a bookie can make (module docstring)."""
    name = DIGEST_NAMES.get(digest_type)
    if name is None or len(digest) != DIGEST_LENGTHS[name]:
        return False
    if name != "crc32c":
        return True
    record = FramedRecord(ledger_id, entry_id, lac, payload or b"", digest, False, name, length)
    return record_ok(record)


# -- SQL (run in read threads) ---------------------------------------------------


def runs_sql(ledgers: int) -> str:
    """The runs of ``ledgers`` listed ledgers, ordered by ledger then first id. A deleted
    ledger whose entries are still being purged (bookie/writer.py, "The purge") has none:
    it is unknown here from its delete on."""
    marks = ", ".join("?" * ledgers)
    return (
        "SELECT ledger_id, MIN(entry_id), MAX(entry_id), COUNT(*) FROM ("
        " SELECT ledger_id, entry_id,"
        " entry_id - ROW_NUMBER() OVER (PARTITION BY ledger_id ORDER BY entry_id) AS run"
        f" FROM entries WHERE ledger_id IN ({marks})"
        " AND ledger_id NOT IN (SELECT ledger_id FROM purging)"
        ") GROUP BY ledger_id, run ORDER BY ledger_id, run"
    )


@dataclass(slots=True)
class Runs:
    ranges: list[Run] = field(default_factory=list)
    entries: int = 0
    last_entry_id: int = -1
    truncated: bool = False


def read_runs(
    engine: Engine,
    ledger_ids: Sequence[int],
    runs_max: int = STORED_RUNS_MAX,
    total_runs_max: int = STORED_BATCH_RUNS_MAX,
) -> dict[int, Runs]:
    """The runs of every listed ledger that has entries, in one query. At most
    ``runs_max`` runs are listed per ledger and ``total_runs_max`` in all (by ledger
    id); the counts and last ids always cover every entry."""
    out: dict[int, Runs] = {}
    if not ledger_ids:
        return out
    budget = total_runs_max
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(runs_sql(len(ledger_ids)), tuple(ledger_ids))
        for lid, first, last, count in rows:
            runs = out.get(lid)
            if runs is None:
                runs = out[lid] = Runs()
            if len(runs.ranges) < runs_max and budget > 0:
                runs.ranges.append((first, last))
                budget -= 1
            else:
                runs.truncated = True
            runs.entries += count
            runs.last_entry_id = last
    return out


_CHECK_COLUMNS = (
    "SELECT entry_id, lac, length, digest_type, digest,"
    f" CASE WHEN digest_type = {_CRC32C} THEN payload END FROM entries"
)


@dataclass(slots=True)
class Checked:
    """The outcome of one read of a check: entries checked, the corrupt ones, the last
    id read, and whether the ledger (past ``after``) was read to its end."""

    checked: int = 0
    corrupt: list[int] = field(default_factory=list)
    last: int = -1
    done: bool = True


def check_ids(engine: Engine, wanted: Sequence[tuple[int, Sequence[int]]]) -> list[Checked]:
    """Check the listed entries of each ledger (a sample: a few ids per ledger). One
    query per ledger on the driver's cursor (SQLAlchemy's per-statement work would cost
    more than the query)."""
    out = []
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        for lid, ids in wanted:
            result = Checked()
            if ids:
                marks = ", ".join("?" * len(ids))
                sql = f"{_CHECK_COLUMNS} WHERE ledger_id = ? AND entry_id IN ({marks})"
                for row in cursor.execute(sql, (lid, *ids)):
                    result.checked += 1
                    if not row_ok(lid, *row):
                        result.corrupt.append(row[0])
            result.corrupt.sort()
            out.append(result)
        cursor.close()
    finally:
        raw.close()
    return out


def check_after(
    engine: Engine,
    ledger_id: int,
    after: int,
    entries_max: int = CHECK_CHUNK_ENTRIES,
    bytes_max: int = CHECK_CHUNK_BYTES,
) -> Checked:
    """Check the ledger's entries after ``after``, ascending: at most ``entries_max`` of
    them and about ``bytes_max`` of crc32c payload (the first always)."""
    sql = f"{_CHECK_COLUMNS} WHERE ledger_id = ? AND entry_id > ? ORDER BY entry_id LIMIT ?"
    result = Checked(last=after, done=False)
    size = 0
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(sql, (ledger_id, after, entries_max)).all()
    for row in rows:
        if result.checked and size >= bytes_max:
            return result
        payload = row[5]
        size += len(payload) if payload is not None else 0
        result.checked += 1
        result.last = row[0]
        if not row_ok(ledger_id, *row):
            result.corrupt.append(row[0])
    result.done = len(rows) < entries_max
    return result


# -- the answer -------------------------------------------------------------------


async def stored_reports(
    reader: Reader, index: LedgerIndex, ledger_ids: Sequence[int], verify: Verify
) -> list[StoredReport]:
    """The reports of ``ledger_ids``, in the order asked (a repeated id answers twice);
    a ledger neither in the index nor with entries is ``known`` False."""
    loop = asyncio.get_running_loop()
    unique = list(dict.fromkeys(ledger_ids))
    runs = await loop.run_in_executor(reader.executor, read_runs, reader.engine, unique)
    reports: dict[int, StoredReport] = {}
    for lid in unique:
        view = index.get(lid)
        r = runs.get(lid) or Runs()
        known = view is not None or r.entries > 0
        fenced = view is not None and view.fenced
        reports[lid] = StoredReport(
            lid, known, r.ranges, r.entries, r.last_entry_id, fenced, r.truncated
        )
    if verify == "sample":
        await _check_samples(reader, [reports[lid] for lid in unique])
    elif verify == "all":
        for lid in unique:
            await _check_all(reader, reports[lid])
    return [reports[lid] for lid in ledger_ids]


async def _check_samples(reader: Reader, reports: list[StoredReport]) -> None:
    loop = asyncio.get_running_loop()
    group: list[tuple[StoredReport, list[int]]] = []
    size = 0
    for i, report in enumerate(reports):
        ids = sample_ids(report.ranges)
        if report.truncated and report.last_entry_id not in ids:
            ids.append(report.last_entry_id)
        if ids:
            group.append((report, ids))
            size += len(ids)
        if group and (size >= CHECK_CHUNK_ENTRIES // 4 or i == len(reports) - 1):
            wanted = [(rep.ledger_id, ids) for rep, ids in group]
            results = await loop.run_in_executor(reader.executor, check_ids, reader.engine, wanted)
            for (rep, _), result in zip(group, results, strict=True):
                rep.checked, rep.corrupt = result.checked, result.corrupt
            group, size = [], 0


async def _check_all(reader: Reader, report: StoredReport) -> None:
    loop = asyncio.get_running_loop()
    after = -1
    while True:
        chunk = await loop.run_in_executor(
            reader.executor, check_after, reader.engine, report.ledger_id, after
        )
        report.checked += chunk.checked
        room = CORRUPT_LISTED_MAX - len(report.corrupt)
        if len(chunk.corrupt) > room:
            report.truncated = True
        report.corrupt.extend(chunk.corrupt[: max(room, 0)])
        if chunk.done:
            return
        after = chunk.last
