"""The envelope the log layer puts around every record it writes into a ledger.

An append request (one record, or a batch) becomes consecutive entries of ONE ledger.
Each entry is ``header + data``; the header says how many entries of the same
request follow it (``remaining``), so every entry knows where its batch ends, and the
first entry of a request (the head) also carries how many records the request holds
and, when the client sent one, its idempotency key with a digest of the request's
records. Every entry carries the request's time stamp (the head and a timed
continuation alike), so that a search by time reads one entry per step
(gateway/logs/time_search.py).

    magic      u8   0xA7
    kind       u8   0 continuation (no time), 1 head, 2 timed continuation
    remaining  u32  entries of the same request after this one
    -- head and timed continuation --
    time_ms    u64  the append's stamp (ms since the Unix epoch; the writer's stamps
                    never go backwards within a log: gateway/logs/writer.py)
    -- head only --
    key_len    u8   0..128 (0: no key)
    key        key_len bytes (printable ASCII)
    digest     16 bytes, present when key_len > 0 (``records_digest``)

``encode`` writes kinds 1 and 2; kind 0 is a continuation written before entries
carried their time, still read (its time is unknown: ``LogEntry.time_ms`` is None).

Why the key lives in the entry: the dedup window must survive a writer hand-over and
a gateway crash, and the entries are the one thing every later writer can read
(gateway/logs/rebuild.py scans the log's tail).

Batches are atomic to readers (``visible``): an entry is readable only once every
entry of its request is, i.e. ``entry_id + remaining <= end`` where ``end`` is the
LAC of an open ledger or the last entry of a closed one. A request cut short by a
writer crash (its first entries recovered, the rest not) thus never shows, and its
retry (same idempotency key) lands whole in a later ledger.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from services.errors import InvalidArgument, invariant

MAGIC = 0xA7
KIND_CONTINUATION = 0
KIND_HEAD = 1
KIND_TIMED_CONTINUATION = 2
KEY_MAX_CHARS = 128
DIGEST_BYTES = 16
_PREFIX = struct.Struct(">BBI")
_HEAD = struct.Struct(">QB")
_TIME = struct.Struct(">Q")
# The largest header: a head with the longest key.
ENVELOPE_MAX_BYTES = _PREFIX.size + _HEAD.size + KEY_MAX_CHARS + DIGEST_BYTES


def check_key(key: str) -> str:
    """``key`` when it is a valid ``Idempotency-Key`` (1-128 printable ASCII)."""
    # isascii + isprintable: exactly " " to "~" (one C pass each, on the append path).
    if not (1 <= len(key) <= KEY_MAX_CHARS) or not (key.isascii() and key.isprintable()):
        raise InvalidArgument("Idempotency-Key must be 1-128 printable ASCII characters")
    return key


def records_digest(payloads: Sequence[bytes]) -> bytes:
    """What "the same body" means for an idempotency key: the request's records, in
    order (a raw single record and a JSON batch of that one record are the same)."""
    h = hashlib.sha256()
    for payload in payloads:
        h.update(len(payload).to_bytes(8, "big"))
        h.update(payload)
    return h.digest()[:DIGEST_BYTES]


@dataclass(frozen=True, slots=True)
class Head:
    """What the first entry of an append request says about the request."""

    time_ms: int
    count: int
    key: str | None = None
    digest: bytes | None = None


class LogEntry(NamedTuple):
    """One decoded entry of a log: its record's data, how many entries of its request
    follow, the head, and the record's time stamp (None for an entry without one: a
    kind-0 continuation, or an entry not written by the log layer).
    (A named tuple, not a frozen dataclass: a bulk read decodes one per entry.)"""

    data: bytes
    remaining: int
    head: Head | None
    time_ms: int | None = None


def encode(
    payloads: Sequence[bytes], time_ms: int, key: str | None = None, digest: bytes | None = None
) -> tuple[bytes, ...]:
    """The entries of one append request (its records in order, each enveloped)."""
    count = len(payloads)
    invariant(count >= 1, "an append holds at least one record")
    invariant((key is None) == (digest is None), "a key goes with the records' digest")
    key_bytes = key.encode("ascii") if key is not None else b""
    head = (
        _PREFIX.pack(MAGIC, KIND_HEAD, count - 1)
        + _HEAD.pack(time_ms, len(key_bytes))
        + key_bytes
        + (digest or b"")
    )
    out = [head + payloads[0]]
    stamp = _TIME.pack(time_ms)
    for index in range(1, count):
        prefix = _PREFIX.pack(MAGIC, KIND_TIMED_CONTINUATION, count - 1 - index)
        out.append(prefix + stamp + payloads[index])
    return tuple(out)


def decode(entry: bytes) -> LogEntry:
    """An entry's record. An entry without a valid envelope (not written by the log
    layer) is a record of its own: all of it is data."""
    if len(entry) < _PREFIX.size or entry[0] != MAGIC or entry[1] > KIND_TIMED_CONTINUATION:
        return LogEntry(entry, 0, None)
    _, kind, remaining = _PREFIX.unpack_from(entry)
    if kind == KIND_CONTINUATION:
        return LogEntry(entry[_PREFIX.size :], remaining, None)
    if kind == KIND_TIMED_CONTINUATION:
        if len(entry) < _PREFIX.size + _TIME.size:
            return LogEntry(entry, 0, None)
        (time_ms,) = _TIME.unpack_from(entry, _PREFIX.size)
        return LogEntry(entry[_PREFIX.size + _TIME.size :], remaining, None, time_ms)
    at = _PREFIX.size
    if len(entry) < at + _HEAD.size:
        return LogEntry(entry, 0, None)
    time_ms, key_len = _HEAD.unpack_from(entry, at)
    at += _HEAD.size
    key: str | None = None
    digest: bytes | None = None
    if key_len:
        if key_len > KEY_MAX_CHARS or len(entry) < at + key_len + DIGEST_BYTES:
            return LogEntry(entry, 0, None)
        key = entry[at : at + key_len].decode("ascii", "replace")
        at += key_len
        digest = entry[at : at + DIGEST_BYTES]
        at += DIGEST_BYTES
    return LogEntry(entry[at:], remaining, Head(time_ms, remaining + 1, key, digest), time_ms)


def data_span(buffer: bytes, start: int, end: int) -> tuple[int, int]:
    """Where the record data of the entry held in ``buffer[start:end]`` begins, and its
    ``remaining``: ``decode`` without building the record or copying its data (a bulk
    reader cuts the data out itself, once). Agrees with ``decode`` on every entry (a
    test holds them together)."""
    size = end - start
    if size < _PREFIX.size or buffer[start] != MAGIC or buffer[start + 1] > KIND_TIMED_CONTINUATION:
        return start, 0
    _, kind, remaining = _PREFIX.unpack_from(buffer, start)
    at = start + _PREFIX.size
    if kind == KIND_CONTINUATION:
        return at, remaining
    if kind == KIND_TIMED_CONTINUATION:
        if size < _PREFIX.size + _TIME.size:
            return start, 0
        return at + _TIME.size, remaining
    if size < _PREFIX.size + _HEAD.size:
        return start, 0
    _, key_len = _HEAD.unpack_from(buffer, at)
    at += _HEAD.size
    if key_len:
        if key_len > KEY_MAX_CHARS or end < at + key_len + DIGEST_BYTES:
            return start, 0
        at += key_len + DIGEST_BYTES
    return at, remaining


def visible(entry_id: int, record: LogEntry, end: int) -> bool:
    """Whether a reader may see this entry's record when entries up to ``end`` are
    readable: only once its whole request is (batches are atomic)."""
    return entry_id + record.remaining <= end


def keyed_append(entry_id: int, record: LogEntry, end: int) -> tuple[str, bytes] | None:
    """The key and digest of a whole keyed append starting at this entry, or None: what
    the idempotency window keeps of a ledger, whether read (gateway/logs/dedup.py
    ``TailScan``) or saved when it closed (services/protocol/saved_keys.py): a head with
    a key and a digest whose whole request is readable up to ``end``."""
    head = record.head
    if head is None or head.key is None or head.digest is None:
        return None
    return (head.key, head.digest) if visible(entry_id, record, end) else None


def visible_records(entries: Iterable[tuple[int, bytes]], end: int) -> Iterator[tuple[int, bytes]]:
    """The records of consecutive ``entries`` ((entry id, stored bytes)) a reader may see
    when entries up to ``end`` are readable: up to the first that is not ``visible``
    (visibility only falls along a ledger, so nothing after it shows either)."""
    for entry_id, stored in entries:
        record = decode(stored)
        if not visible(entry_id, record, end):
            return
        yield entry_id, record.data


def envelope_size(count: int, key: str | None) -> int:
    """Header bytes of a request of ``count`` records (for size accounting)."""
    head = _PREFIX.size + _HEAD.size + (len(key) + DIGEST_BYTES if key else 0)
    return head + (count - 1) * (_PREFIX.size + _TIME.size)
