"""The bookie's store: SQLite in WAL mode through SQLAlchemy Core.

Three tables live in ``bookie.db`` in the data dir:

    entries (ledger_id, entry_id) -> lac, length, digest_type, digest, payload
    ledgers (ledger_id) -> fenced, lac, last_entry_id, bytes
    purging (ledger_id) -> bytes   the deleted ledgers whose entries are not all gone yet

One connection writes: it belongs to the group-commit writer thread
(``bookie.writer``). Reads use a small pool of other connections in worker
threads; WAL lets them read committed data while the writer writes.

Deleting a ledger is cheap and durable: its ``ledgers`` row goes and its id goes into
``purging`` in one group commit, and from then on the ledger is unknown to every reader
and writer of the API. Its entry rows are removed later by the writer thread in small
paced transactions (bookie/writer.py, "The purge"); the one that removes the last of them
removes the ``purging`` row too, so a restart resumes the purge where it stopped. A data
dir of an older version (no ``purging`` table) gets the table when it is opened
(``create_all`` creates missing tables only).

Kept byte counts. ``bytes`` is the payload bytes of the ledger's entry rows (of a purging
ledger: of the rows not purged yet), kept exact by every statement that adds or removes
entry rows, in the same transaction: the writer's per-ledger upsert after its inserts
(bookie/apply.py), a delete (the ledger's count moves to its ``purging`` row), each purge
chunk (it subtracts what it deleted) and the rewrite of a purging id (both go). So the
storage report sums counts, O(ledgers), where it used to scan every entry, O(entries),
and a crash cannot separate a count from its rows. A data dir of an older version (no
``bytes`` columns) gets them when it is opened, filled from a scan of its entries in the
same transaction (``add_kept_bytes``): once, at start-up, before the bookie serves.

The database is created with ``auto_vacuum=INCREMENTAL``: the pages the purge frees are
reused by new entries at once, and paced ``incremental_vacuum(N)`` steps give them back to
the file system afterwards, ending with a checkpoint that truncates the write-ahead log.
With journal sync on, ``synchronous=FULL``: every commit fsyncs the log.
With it off, ``synchronous=NORMAL``: the database stays consistent after a
crash but the last commits may be lost.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Integer,
    LargeBinary,
    MetaData,
    Select,
    Table,
    create_engine,
    event,
    func,
    select,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.pool import QueuePool

from bookie.limits import (
    JOURNAL_SIZE_LIMIT_BYTES,
    PAGE_SIZE_BYTES,
    STORAGE_BUSY_TIMEOUT_MS,
    STORAGE_READ_THREADS,
    WAL_AUTOCHECKPOINT_PAGES,
)
from services.errors import DataDirInUse, present

log = logging.getLogger(__name__)

DB_FILE = "bookie.db"
LOCK_FILE = "bookie.lock"

metadata = MetaData()

entries = Table(
    "entries",
    metadata,
    Column("ledger_id", Integer, primary_key=True, autoincrement=False),
    Column("entry_id", Integer, primary_key=True, autoincrement=False),
    Column("lac", Integer, nullable=False),
    Column("length", Integer, nullable=False),
    Column("digest_type", Integer, nullable=False),
    Column("digest", LargeBinary, nullable=False),
    Column("payload", LargeBinary, nullable=False),
)

ledgers = Table(
    "ledgers",
    metadata,
    Column("ledger_id", Integer, primary_key=True, autoincrement=False),
    Column("fenced", Integer, nullable=False, default=0),
    Column("lac", Integer, nullable=False, default=-1),
    Column("last_entry_id", Integer, nullable=False, default=-1),
    # Payload bytes of its entry rows (module docstring, "Kept byte counts").
    Column("bytes", Integer, nullable=False, default=0, server_default="0"),
)

purging = Table(
    "purging",
    metadata,
    Column("ledger_id", Integer, primary_key=True, autoincrement=False),
    # Payload bytes of its entry rows not purged yet.
    Column("bytes", Integer, nullable=False, default=0, server_default="0"),
)

_QMARK = sqlite.dialect(paramstyle="qmark")


def driver_sql(statement: Any) -> str:
    """A Core statement compiled once to SQLite's own SQL, for ``exec_driver_sql``."""
    return str(statement.compile(dialect=_QMARK))


# The hot statements, compiled once from the Core tables above.
# A plain INSERT: the writer never replaces an entry (bookie.writer checks for one
# first), so a conflict here is a bug that fails the batch rather than an overwrite.
INSERT_ENTRY_SQL = driver_sql(entries.insert())
SELECT_ENTRY_SQL = driver_sql(
    select(
        entries.c.lac, entries.c.length, entries.c.digest_type, entries.c.digest, entries.c.payload
    ).where(entries.c.ledger_id == 0, entries.c.entry_id == 0)
)
# A range read: (ledger_id, first, last, limit, offset 0) -> StoredEntry fields in order.
READ_RANGE_SQL = driver_sql(
    select(
        entries.c.entry_id,
        entries.c.lac,
        entries.c.length,
        entries.c.digest_type,
        entries.c.digest,
        entries.c.payload,
    )
    .where(entries.c.ledger_id == 0, entries.c.entry_id >= 0, entries.c.entry_id <= 0)
    .order_by(entries.c.entry_id)
    .limit(1)
)
UPSERT_LEDGER_SQL = driver_sql(ledgers.insert().prefix_with("OR REPLACE"))


@functools.cache
def striped_range_sql(residues: int) -> str:
    """``READ_RANGE_SQL`` for entries whose id mod a stride is one of ``residues`` of
    them: (ledger_id, first, last, stride, residue…, limit, offset 0)."""
    where, order = READ_RANGE_SQL.split(" ORDER BY ")
    marks = ", ".join("?" * residues)
    return f"{where} AND entries.entry_id % ? IN ({marks}) ORDER BY {order}"


DELETE_ENTRIES_SQL = driver_sql(entries.delete().where(entries.c.ledger_id == 0))
DELETE_LEDGER_SQL = driver_sql(ledgers.delete().where(ledgers.c.ledger_id == 0))
# (ledger_id, bytes): a deleted ledger's id and the payload bytes its rows still hold.
INSERT_PURGING_SQL = driver_sql(purging.insert().prefix_with("OR IGNORE"))
DELETE_PURGING_SQL = driver_sql(purging.delete().where(purging.c.ledger_id == 0))
# (bytes purged, ledger_id): a purge chunk's rows leave the purging ledger's count.
PURGED_BYTES_SQL = driver_sql(
    purging.update().values(bytes=purging.c.bytes - 0).where(purging.c.ledger_id == 0)
)
# One chunk of a purge: (ledger_id, limit) -> at most limit of the ledger's entry rows
# deleted, by rowid (the primary key's index finds them), each answering its payload's
# length for the purging row's count (SQLite takes a blob's length from the record's
# header, without reading its overflow pages).
PURGE_CHUNK_SQL = (
    "DELETE FROM entries WHERE rowid IN (SELECT rowid FROM entries WHERE ledger_id = ? LIMIT ?)"
    " RETURNING length(payload)"
)


class FileSpace(NamedTuple):
    """The database file's size and the bytes of its free pages (given back to the file
    system by the next incremental vacuum)."""

    file_bytes: int
    free_pages_bytes: int


class StoredEntry(NamedTuple):
    """An entry as stored (``digest_type`` is the framing's code), in the columns' order."""

    entry_id: int
    lac: int
    length: int
    digest_type: int
    digest: bytes
    payload: bytes


def db_path(data_dir: Path) -> Path:
    return Path(data_dir) / DB_FILE


def has_store(data_dir: Path) -> bool:
    """True when the data dir holds a database (it was used by a bookie)."""
    path = db_path(data_dir)
    return path.exists() and path.stat().st_size > 0


# -- the data-dir lock ---------------------------------------------------------

_locks: dict[Path, int] = {}
_locks_guard = threading.Lock()


def lock_data_dir(data_dir: Path) -> None:
    """Take an exclusive ``flock`` on the data dir for the life of this process.

    Two bookies must never share a data dir; the lock also proves to a restarted
    bookie that an old registration with its instance id is a leftover of a dead
    process. Taking it again in the same process is a no-op.
    """
    data_dir = Path(data_dir).resolve()
    with _locks_guard:
        if data_dir in _locks:
            return
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirInUse(f"data dir {data_dir} is in use by another process") from None
        _locks[data_dir] = fd


def data_dir_locked_elsewhere(data_dir: Path) -> bool:
    """True when another process holds the data dir's lock."""
    data_dir = Path(data_dir).resolve()
    with _locks_guard:
        if data_dir in _locks:
            return False
    path = data_dir / LOCK_FILE
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock we may have taken
    return False


def unlock_data_dir(data_dir: Path) -> None:
    data_dir = Path(data_dir).resolve()
    with _locks_guard:
        fd = _locks.pop(data_dir, None)
    if fd is not None:
        os.close(fd)


# -- engines -------------------------------------------------------------------


def _autocommit_engine(path: Path, pool_size: int, pragmas: list[str]) -> Engine:
    """An engine whose connections leave transactions to us.

    pysqlite's own implicit BEGIN is switched off (``isolation_level=None``) and
    SQLAlchemy's ``begin()`` emits ``BEGIN`` itself: the SQLAlchemy-documented
    recipe that makes pragmas, DDL and transactions do what they say.
    """
    engine = create_engine(
        f"sqlite:///{path}",
        poolclass=QueuePool,
        pool_size=pool_size,
        max_overflow=0,
        connect_args={"check_same_thread": False, "timeout": STORAGE_BUSY_TIMEOUT_MS / 1000},
    )

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in pragmas:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine


def create_writer_engine(data_dir: Path, journal_sync: bool) -> Engine:
    """The engine of the single writing connection; creates the schema if missing.

    ``page_size`` and ``auto_vacuum`` only take effect before the first table
    exists (and before WAL mode is on), so they come first; on an existing
    database they are no-ops.
    """
    path = db_path(data_dir)
    pragmas = [
        f"PRAGMA page_size={PAGE_SIZE_BYTES}",
        "PRAGMA auto_vacuum=INCREMENTAL",
        "PRAGMA journal_mode=WAL",
        f"PRAGMA synchronous={'FULL' if journal_sync else 'NORMAL'}",
        f"PRAGMA busy_timeout={STORAGE_BUSY_TIMEOUT_MS}",
        f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}",
        f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT_BYTES}",
    ]
    engine = _autocommit_engine(path, 1, pragmas)
    with engine.begin() as conn:
        metadata.create_all(conn)
        add_kept_bytes(conn)
    return engine


# The payload bytes of each ledger's entry rows, counted from the rows (the migration's
# fill, and what the kept counts must always equal).
_SCAN_BYTES = (
    "(SELECT coalesce(sum(length(payload)), 0) FROM entries"
    " WHERE entries.ledger_id = {table}.ledger_id)"
)


def add_kept_bytes(conn: Connection) -> None:
    """Give a store of an older version its ``bytes`` columns, filled from its entries
    (module docstring, "Kept byte counts"), in the caller's transaction: a crash leaves
    the old schema, and the next start does it again. A scan of every entry (about 1.5 s
    a GB: benchmarks/README.md, "One bookie to 20 GB"), so it is logged with its time.
    A store that has the columns is left as it is."""
    missing = [
        table.name
        for table in (ledgers, purging)
        if "bytes"
        not in {row[1] for row in conn.exec_driver_sql(f"PRAGMA table_info({table.name})")}
    ]
    if not missing:
        return
    log.info(
        "counting the payload bytes of every ledger (a data dir of an older version: "
        "once, before the bookie serves; about 1.5 s a GB)",
        extra={"fields": {"tables": missing}},
    )
    started = time.perf_counter()
    for name in missing:
        conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0")
        conn.exec_driver_sql(f"UPDATE {name} SET bytes = {_SCAN_BYTES.format(table=name)}")
    counted = conn.execute(select(func.count(), func.coalesce(func.sum(ledgers.c.bytes), 0)))
    count, total = counted.one()
    log.info(
        "counted the payload bytes of every ledger",
        extra={
            "fields": {
                "ledgers": count,
                "bytes": total,
                "took_s": round(time.perf_counter() - started, 3),
            }
        },
    )


def create_reader_engine(data_dir: Path) -> Engine:
    pragmas = [f"PRAGMA busy_timeout={STORAGE_BUSY_TIMEOUT_MS}", "PRAGMA query_only=ON"]
    return _autocommit_engine(db_path(data_dir), STORAGE_READ_THREADS, pragmas)


def load_ledgers(engine: Engine) -> dict[int, tuple[int, int, bool]]:
    """Every ledger's ``(lac, last_entry_id, fenced)`` as stored."""
    with engine.connect() as conn:
        return load_ledgers_on(conn)


def load_ledgers_on(conn: Connection) -> dict[int, tuple[int, int, bool]]:
    """``load_ledgers`` on a connection the caller holds (in its own transaction)."""
    with conn.begin():
        rows = conn.execute(
            select(ledgers.c.ledger_id, ledgers.c.lac, ledgers.c.last_entry_id, ledgers.c.fenced)
        ).all()
    return {lid: (lac, last, bool(fenced)) for lid, lac, last, fenced in rows}


def load_ledger_bytes_on(conn: Connection) -> dict[int, int]:
    """Every ledger's kept payload bytes (the writer's starting counts)."""
    with conn.begin():
        return {
            lid: size for lid, size in conn.execute(select(ledgers.c.ledger_id, ledgers.c.bytes))
        }


def load_purging_on(conn: Connection) -> list[int]:
    """The ids of the deleted ledgers whose entries are still being purged, ascending."""
    with conn.begin():
        return [
            row[0]
            for row in conn.execute(select(purging.c.ledger_id).order_by(purging.c.ledger_id))
        ]


def store_size_bytes(data_dir: Path) -> int:
    """Bytes on disk of the database and its write-ahead log."""
    total = 0
    for name in (DB_FILE, DB_FILE + "-wal"):
        try:
            total += (Path(data_dir) / name).stat().st_size
        except FileNotFoundError:
            pass
    return total


def _ids_after(after: int, limit: int) -> Select[int]:
    """The ids of the ledgers stored here above ``after``, ascending, at most ``limit``."""
    return (
        select(ledgers.c.ledger_id)
        .where(ledgers.c.ledger_id > after)
        .order_by(ledgers.c.ledger_id)
        .limit(limit)
    )


class StorageCounts(NamedTuple):
    """What the storage report reads from the kept counts, in one transaction: the
    ledgers stored and their payload bytes, the purging ones and the bytes left of them,
    and the bytes of the ledgers asked about (those stored here, by id)."""

    ledgers: int
    bytes: int
    purging_ledgers: int
    purging_bytes: int
    sizes: dict[int, int]


# Ids per ``IN (...)`` list of the reads by id (SQLite allows 32,766 parameters).
_IDS_PER_QUERY = 1000


def _sizes_of(conn: Connection, ledger_ids: list[int]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for at in range(0, len(ledger_ids), _IDS_PER_QUERY):
        chunk = ledger_ids[at : at + _IDS_PER_QUERY]
        query = select(ledgers.c.ledger_id, ledgers.c.bytes).where(ledgers.c.ledger_id.in_(chunk))
        sizes.update({lid: size for lid, size in conn.execute(query)})
    return sizes


class Reader:
    """Reads committed entries on read-only connections, in worker threads."""

    def __init__(self, data_dir: Path) -> None:
        self._engine = create_reader_engine(data_dir)
        self._executor = ThreadPoolExecutor(STORAGE_READ_THREADS, thread_name_prefix="bookie-read")

    @property
    def executor(self) -> ThreadPoolExecutor:
        return self._executor

    @property
    def engine(self) -> Engine:
        """The read-only engine, for queries of other modules (``bookie.stored``) that
        run in ``executor``."""
        return self._engine

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._engine.dispose()

    def read_entry(self, ledger_id: int, entry_id: int) -> StoredEntry | None:
        query = select(
            entries.c.entry_id,
            entries.c.lac,
            entries.c.length,
            entries.c.digest_type,
            entries.c.digest,
            entries.c.payload,
        ).where(entries.c.ledger_id == ledger_id, entries.c.entry_id == entry_id)
        with self._engine.connect() as conn:
            row = conn.execute(query).first()
        return StoredEntry(*row) if row else None

    def read_range(
        self,
        ledger_id: int,
        first: int,
        last: int,
        entries_max: int,
        bytes_max: int,
        stride: int = 0,
        residues: tuple[int, ...] = (),
    ) -> list[StoredEntry]:
        """Entries in ``[first, last]`` ascending: at most ``entries_max`` of them and
        ``bytes_max`` of payload, except that the first entry is always returned."""
        # The compiled statement on the pooled connection's sqlite3 cursor: a Core select's
        # result rows cost more per row (benchmarks/README.md, "Measured choices").
        # Rows become ``StoredEntry`` tuples with ``tuple.__new__``: ``_make`` is two Python
        # calls a row (framing.decode does the same for records).
        out: list[StoredEntry] = []
        append, new = out.append, tuple.__new__
        total = 0
        with self._engine.connect() as conn:
            driver = present(
                conn.connection.driver_connection,
                "a pooled connection has its sqlite3 connection",
            )
            if stride:
                sql = striped_range_sql(len(residues))
                params: tuple[int, ...] = (ledger_id, first, last, stride, *residues)
            else:
                sql, params = READ_RANGE_SQL, (ledger_id, first, last)
            for row in driver.execute(sql, (*params, entries_max, 0)):
                size = len(row[5])
                if out and total + size > bytes_max:
                    break
                total += size
                append(new(StoredEntry, row))
        return out

    def lengths(self, ledger_id: int, lac: int, last_entry_id: int) -> tuple[int, int]:
        """The ledger's length (the ``length`` field: total payload bytes up to and
        including the entry) at the LAC and at the last entry stored here; 0 for
        entry -1, -1 when this bookie does not store that entry."""
        wanted = {lac, last_entry_id} - {-1}
        found: dict[int, int] = {}
        if wanted:
            query = select(entries.c.entry_id, entries.c.length).where(
                entries.c.ledger_id == ledger_id, entries.c.entry_id.in_(sorted(wanted))
            )
            with self._engine.connect() as conn:
                found = {eid: length for eid, length in conn.execute(query)}

        def at(entry_id: int) -> int:
            return 0 if entry_id == -1 else found.get(entry_id, -1)

        return at(lac), at(last_entry_id)

    def list_ledgers(self, after: int, limit: int) -> list[int]:
        with self._engine.connect() as conn:
            return [row[0] for row in conn.execute(_ids_after(after, limit))]

    def ledger_bytes(self, ledger_ids: list[int]) -> dict[int, int]:
        """The kept payload bytes of those of ``ledger_ids`` stored here (0: no entry)."""
        with self._engine.connect() as conn:
            return _sizes_of(conn, ledger_ids)

    def ledger_bytes_page(self, after: int, limit: int) -> list[tuple[int, int]]:
        """One page of the ledgers stored here (ids above ``after``, ascending, at most
        ``limit``), each with its kept payload bytes (0: no entry): one read of the
        ``ledgers`` table, so the ids and the bytes agree (not the deleted ledgers still
        being purged: they have no row there)."""
        query = (
            select(ledgers.c.ledger_id, ledgers.c.bytes)
            .where(ledgers.c.ledger_id > after)
            .order_by(ledgers.c.ledger_id)
            .limit(limit)
        )
        with self._engine.connect() as conn:
            return [(lid, size) for lid, size in conn.execute(query)]

    def storage_counts(self, ledger_ids: list[int]) -> StorageCounts:
        """The storage report's figures from the kept counts (module docstring, "Kept
        byte counts"), read in one transaction: a sum over the ledgers and the purging
        ledgers, O(ledgers), not a scan of the entries; with the bytes of ``ledger_ids``."""
        total = select(func.count(), func.coalesce(func.sum(ledgers.c.bytes), 0))
        left = select(func.count(), func.coalesce(func.sum(purging.c.bytes), 0))
        with self._engine.connect() as conn:
            count, size = conn.execute(total).one()
            purging_count, purging_size = conn.execute(left).one()
            sizes = _sizes_of(conn, ledger_ids)
        return StorageCounts(int(count), int(size), int(purging_count), int(purging_size), sizes)

    def purging_ids(self) -> list[int]:
        """The deleted ledgers whose entries the writer is still purging."""
        with self._engine.connect() as conn:
            return load_purging_on(conn)

    def file_space(self) -> FileSpace:
        """The database's pages in all and free, as committed (the write-ahead log
        included), in bytes."""
        with self._engine.connect() as conn:
            page_size = conn.exec_driver_sql("PRAGMA page_size").scalar_one()
            pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
            free = conn.exec_driver_sql("PRAGMA freelist_count").scalar_one()
        return FileSpace(int(pages) * int(page_size), int(free) * int(page_size))
