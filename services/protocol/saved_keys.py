"""The keys of a log's closed ledgers, saved beside the log so that a new writer loads its
idempotency window without reading every ledger of it (docs/logs.md, "How a log behaves").

A writer that rolled a ledger and closed it reads it back once (it is small: at most
``entries_max`` entries, one page) and saves what the window's rebuild would find in it
(``summarise``): each whole keyed append (key, entry id, entries after the head, stamp,
records digest) and the oldest and newest stamps of its appends. A new writer's rebuild
takes a saved ledger's keys instead of reading its entries
(``gateway/logs/dedup.TailScan.take_saved`` applies the same rules as reading it), and
reads as before every ledger of the log with nothing saved: one closed by a recovery
(its writer crashed or was fenced before saving), attached, too large, or saved by a
writer that crashed between its close and the save. So a save that never happened
costs time, never a key.

Why this is safe to trust without reading the ledger: it is written only after the
ledger is CLOSED, from the entries up to its last entry, and a CLOSED ledger never
changes; a ledger truncated away is no longer in the log's list, so its saved keys are
never looked at. Readers of the log read the ledgers, never this.

Saved ledgers are grouped in segments (one znode each, ``services/zk/saved_keys_store``):
a segment holds at most ``SEGMENT_LEDGERS_MAX`` ledgers and ``SEGMENT_BYTES_MAX`` bytes,
so a roll rewrites a few KB and a new writer reads a whole window of small ledgers in a
handful of pipelined reads. The format, big-endian:

    version    u8   1
    ledgers    u16
    -- per ledger --
    ledger_id  u64
    last       i64  the last entry id (-1: closed empty)
    oldest_ms  i64  the oldest stamp of an append in it (-1: none)
    newest_ms  i64  the newest stamp (-1: none)
    heads      u32
    -- per keyed append --
    entry_id   u32
    remaining  u32  entries of the append after its head
    time_ms    u64
    key_len    u8
    key        key_len bytes (printable ASCII)
    digest     16 bytes
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from services.errors import InvalidArgument, invariant
from services.protocol import log_records

FORMAT_VERSION = 1
# A ledger is saved only when it holds at most this many entries (read back in one page
# when it closed); a larger one is read by the rebuild as before.
ENTRIES_MAX = 1_000
# Bounds of one segment (one znode, well under ZooKeeper's 1 MiB jute.maxbuffer).
SEGMENT_LEDGERS_MAX = 64
SEGMENT_BYTES_MAX = 256 * 1024

_SEGMENT = struct.Struct(">BH")
_LEDGER = struct.Struct(">QqqqI")
_HEAD = struct.Struct(">IIQB")


@dataclass(frozen=True, slots=True)
class SavedHead:
    """One whole keyed append of a saved ledger."""

    key: str
    entry_id: int
    remaining: int
    time_ms: int
    digest: bytes


@dataclass(frozen=True, slots=True)
class SavedLedger:
    """What the window's rebuild needs of one CLOSED log ledger: its whole keyed appends
    in entry order, and the oldest / newest stamp of any append in it (None: none)."""

    ledger_id: int
    last_entry_id: int
    oldest_ms: int | None
    newest_ms: int | None
    heads: tuple[SavedHead, ...]

    def encoded_size(self) -> int:
        return _LEDGER.size + sum(
            _HEAD.size + len(h.key) + log_records.DIGEST_BYTES for h in self.heads
        )


def summarise(
    ledger_id: int, last_entry_id: int, entries: Iterable[tuple[int, bytes]]
) -> SavedLedger:
    """The ``SavedLedger`` of a CLOSED ledger from its entries 0..``last_entry_id`` in
    order: the same keyed appends a scan of it finds (whole appends only:
    ``log_records.visible``), and its appends' oldest and newest stamps. Entries that are
    not log records (no envelope) are passed over, as the scan does."""
    heads: list[SavedHead] = []
    oldest: int | None = None
    newest: int | None = None
    count = 0
    for entry_id, data in entries:
        invariant(entry_id == count, f"entry {entry_id} of ledger {ledger_id} out of order")
        count += 1
        record = log_records.decode(data)
        head = record.head
        if head is None:
            continue
        oldest = head.time_ms if oldest is None else min(oldest, head.time_ms)
        newest = head.time_ms if newest is None else max(newest, head.time_ms)
        keyed = log_records.keyed_append(entry_id, record, last_entry_id)
        if keyed is not None:
            key, digest = keyed
            heads.append(SavedHead(key, entry_id, record.remaining, head.time_ms, digest))
    invariant(count == last_entry_id + 1, f"ledger {ledger_id} summarised from all its entries")
    return SavedLedger(ledger_id, last_entry_id, oldest, newest, tuple(heads))


def fits(segment: Sequence[SavedLedger], ledger: SavedLedger) -> bool:
    """Whether ``ledger`` may join ``segment`` within the segment bounds."""
    size = _SEGMENT.size + sum(s.encoded_size() for s in segment) + ledger.encoded_size()
    return len(segment) < SEGMENT_LEDGERS_MAX and size <= SEGMENT_BYTES_MAX


def savable(ledger: SavedLedger) -> bool:
    """Whether ``ledger`` fits a segment of its own (else it is not saved)."""
    return fits((), ledger)


def encode_segment(ledgers: Sequence[SavedLedger]) -> bytes:
    invariant(len(ledgers) <= SEGMENT_LEDGERS_MAX, "a segment within its bounds")
    out = bytearray(_SEGMENT.pack(FORMAT_VERSION, len(ledgers)))
    for ledger in ledgers:
        out += _LEDGER.pack(
            ledger.ledger_id,
            ledger.last_entry_id,
            -1 if ledger.oldest_ms is None else ledger.oldest_ms,
            -1 if ledger.newest_ms is None else ledger.newest_ms,
            len(ledger.heads),
        )
        for head in ledger.heads:
            key = head.key.encode("ascii")
            out += _HEAD.pack(head.entry_id, head.remaining, head.time_ms, len(key))
            out += key + head.digest
    return bytes(out)


def decode_segment(data: bytes) -> list[SavedLedger]:
    """The ledgers of a segment; ``InvalidArgument`` when it is not one."""
    try:
        version, count = _SEGMENT.unpack_from(data, 0)
        if version != FORMAT_VERSION:
            raise InvalidArgument(f"saved keys of format {version}, not {FORMAT_VERSION}")
        offset = _SEGMENT.size
        ledgers: list[SavedLedger] = []
        for _ in range(count):
            lid, last, oldest, newest, n = _LEDGER.unpack_from(data, offset)
            offset += _LEDGER.size
            heads: list[SavedHead] = []
            for _ in range(n):
                entry_id, remaining, time_ms, key_len = _HEAD.unpack_from(data, offset)
                offset += _HEAD.size
                key = data[offset : offset + key_len].decode("ascii")
                offset += key_len
                digest = data[offset : offset + log_records.DIGEST_BYTES]
                offset += log_records.DIGEST_BYTES
                if len(key) != key_len or len(digest) != log_records.DIGEST_BYTES:
                    raise InvalidArgument("saved keys cut short")
                heads.append(SavedHead(key, entry_id, remaining, time_ms, bytes(digest)))
            ledgers.append(SavedLedger(
                lid, last, None if oldest < 0 else oldest, None if newest < 0 else newest,
                tuple(heads),
            ))  # fmt: skip
        if offset != len(data):
            raise InvalidArgument("saved keys followed by other bytes")
        return ledgers
    except (struct.error, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"not a segment of saved keys: {exc}") from exc
