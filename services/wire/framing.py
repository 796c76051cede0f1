"""The bookie's compact binary framing for entries on the data path.

A body is a sequence of records; each record is a fixed header followed by
the digest and the payload:

    flags        u8     bit 0: recovery add (accepted by a fenced ledger);
                        bits 1-2: digest type (0 none, 1 crc32c, 2 hmac-sha256);
                        bit 3: a record checksum follows the header
    ledger_id    i64    >= 0
    entry_id     i64    >= 0
    lac          i64    >= -1, the writer's last-add-confirmed at send time
    length       i64    >= 0, the ledger's total payload bytes up to and including this entry
    payload_len  u32    <= STORED_ENTRY_SIZE_MAX_BYTES
    digest_len   u16    <= DIGEST_SIZE_MAX_BYTES
    checksum     u32    only with flag bit 3: crc32c of the header bytes, digest and payload
    digest       digest_len bytes
    payload      payload_len bytes

All integers are big-endian. The same framing carries adds to a bookie and
entries read back from it. A body that does not parse is rejected whole.

Why a checksum. A bookie checks a crc32c digest itself, but it cannot check an
HMAC (it has no key, by design) and a ``none`` record has nothing to check: an
entry of such a ledger corrupted in transit would be stored and acknowledged,
and found only by a reader, as a replica missing. So ``encode`` adds a CRC32C
checksum of the whole record (its header with the flags, its digest and its
payload) to every record whose digest type is not crc32c (a crc32c digest
already covers ids, LAC, length and payload, and the bookie verifies it; it
does not cover the flags, which is as before), and
``decode`` checks it: a mismatch is not a parse error (it would refuse the
whole body) but ``FramedRecord.transit_ok`` False, so the bookie refuses that record
alone. A record without the flag (the framing before the checksum) still
parses and has ``transit_ok`` True. CRC32C runs at memory speed (SSE 4.2):
see docs/api.md "Framing" for the measured cost.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import crc32c

from services.errors import InvalidArgument, PayloadTooLarge
from services.limits import BATCH_ENTRIES_MAX, STORED_ENTRY_SIZE_MAX_BYTES

MEDIA_TYPE = "application/x-quire-entries"
HEADER = struct.Struct(">BqqqqIH")
CHECKSUM = struct.Struct(">I")
FLAG_RECOVERY = 0x01
FLAG_CHECKSUM = 0x08
_DIGEST_SHIFT = 1
_DIGEST_MASK = 0x06
_FLAGS_KNOWN = FLAG_RECOVERY | _DIGEST_MASK | FLAG_CHECKSUM
DIGEST_CODES = {"none": 0, "crc32c": 1, "hmac-sha256": 2}
DIGEST_NAMES = {code: name for name, code in DIGEST_CODES.items()}
DIGEST_LENGTHS = {"none": 0, "crc32c": 4, "hmac-sha256": 32}
# Every valid flags byte -> (digest type, digest length, checksum follows, recovery): one
# lookup per record in ``decode`` instead of masks and three lookups.
_FLAG_KINDS = {
    flags: (name, DIGEST_LENGTHS[name], bool(flags & FLAG_CHECKSUM), bool(flags & FLAG_RECOVERY))
    for flags in range(256)
    if not flags & ~_FLAGS_KNOWN
    and (name := DIGEST_NAMES.get((flags & _DIGEST_MASK) >> _DIGEST_SHIFT)) is not None
}


class FramedRecord(NamedTuple):
    """One record of this framing: an entry as a bookie takes and gives it. A named
    tuple, not a frozen dataclass: a range read decodes a thousand of them per page and a
    frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field) cost more than
    the rest of the decoding (benchmarks/README.md, "Measured choices"). Change a field
    with ``record._replace(...)``."""

    ledger_id: int
    entry_id: int
    lac: int
    # A read-only view into the body it came in when decoded with ``copy=False``.
    payload: bytes | memoryview
    digest: bytes = b""
    recovery: bool = False
    digest_type: str = "none"
    length: int = 0
    # False when the record came with a checksum that does not match its bytes (decode
    # sets it; a record built in memory is intact).
    transit_ok: bool = True


def checksummed(digest_type: str) -> bool:
    """Whether ``encode`` adds a record checksum: for every digest a bookie cannot verify
    (all but crc32c)."""
    return digest_type != "crc32c"


def encode(records: Sequence[FramedRecord]) -> bytes:
    """The body of ``records``; a record checksum on each one whose digest type is not
    crc32c (module docstring)."""
    parts: list[bytes | memoryview] = []
    for r in records:
        flags = (FLAG_RECOVERY if r.recovery else 0) | (
            DIGEST_CODES[r.digest_type] << _DIGEST_SHIFT
        )
        checksum = checksummed(r.digest_type)
        if checksum:
            flags |= FLAG_CHECKSUM
        header = HEADER.pack(
            flags, r.ledger_id, r.entry_id, r.lac, r.length, len(r.payload), len(r.digest)
        )
        parts.append(header)
        if checksum:
            crc = crc32c.crc32c(r.payload, crc32c.crc32c(r.digest, crc32c.crc32c(header)))
            parts.append(CHECKSUM.pack(crc))
        parts.append(r.digest)
        parts.append(r.payload)
    return b"".join(parts)


def encode_stored(
    ledger_id: int, entries: Iterable[tuple[int, int, int, int, bytes, bytes]]
) -> bytes:
    """The body of a bookie's read answer, from entries as it stores them: ``(entry_id,
    lac, length, digest code, digest, payload)``. The same bytes as ``encode`` of their
    records (never recovery adds), without building a ``FramedRecord`` each: a range read
    answers a thousand entries."""
    parts: list[bytes] = []
    append, pack, crc = parts.append, HEADER.pack, crc32c.crc32c
    crc32c_code = DIGEST_CODES["crc32c"]
    for entry_id, lac, length, code, digest, payload in entries:
        if code == crc32c_code:
            append(pack(code << _DIGEST_SHIFT, ledger_id, entry_id, lac, length,
                        len(payload), len(digest)))  # fmt: skip
        else:
            header = pack((code << _DIGEST_SHIFT) | FLAG_CHECKSUM, ledger_id, entry_id, lac,
                          length, len(payload), len(digest))  # fmt: skip
            append(header)
            append(CHECKSUM.pack(crc(payload, crc(digest, crc(header)))))
        append(digest)
        append(payload)
    return b"".join(parts)


def decode(
    body: bytes | bytearray | memoryview, max_records: int = BATCH_ENTRIES_MAX, *, copy: bool = True
) -> list[FramedRecord]:
    """Parse a whole body, or raise ``InvalidArgument`` / ``PayloadTooLarge``.

    With ``copy=False`` each payload is a read-only ``memoryview`` into ``body``
    instead of a copy (it keeps ``body`` alive): the bookie's add path uses it to
    hold each entry in memory once, not twice.
    """
    records: list[FramedRecord] = []
    append = records.append
    # Digests (and payloads, with ``copy``) are sliced from the bytes themselves: one
    # object each, where ``bytes(view[a:b])`` makes two (0.33 -> 0.13 us a digest here).
    raw = body if type(body) is bytes else bytes(body)
    view = memoryview(raw)
    pos, end, size = 0, len(raw), HEADER.size
    unpack_header, unpack_checksum, crc = HEADER.unpack_from, CHECKSUM.unpack_from, crc32c.crc32c
    kinds = _FLAG_KINDS
    # A named tuple's ``__new__`` is a Python function; ``tuple.__new__`` builds the same
    # record without that call (0.46 -> 0.16 us a record here: a page holds a thousand).
    new_record = tuple.__new__
    while pos < end:
        start = pos
        if end - pos < size:
            raise InvalidArgument(f"truncated record header at byte {pos}")
        (flags, ledger_id, entry_id, lac, length, payload_len, digest_len) = unpack_header(
            view, pos
        )
        kind = kinds.get(flags)
        if kind is None:
            raise InvalidArgument(f"unknown flags {flags:#x} at byte {pos}")
        digest_type, want_digest_len, checksummed_, recovery = kind
        if ledger_id < 0 or entry_id < 0 or lac < -1 or length < 0:
            raise InvalidArgument(
                f"negative id in record at byte {pos}: ledger {ledger_id} entry {entry_id} "
                f"lac {lac}"
            )
        if payload_len > STORED_ENTRY_SIZE_MAX_BYTES:
            raise PayloadTooLarge(
                f"entry of {payload_len} bytes over the limit of {STORED_ENTRY_SIZE_MAX_BYTES}"
            )
        if digest_len != want_digest_len:
            raise InvalidArgument(
                f"digest of {digest_len} bytes does not fit type {digest_type} "
                f"(ledger {ledger_id} entry {entry_id})"
            )
        pos += size
        transit_ok = True
        if checksummed_:
            if end - pos < CHECKSUM.size:
                raise InvalidArgument(
                    f"truncated record: ledger {ledger_id} entry {entry_id} has no checksum"
                )
            (checksum,) = unpack_checksum(view, pos)
            pos += CHECKSUM.size
            if end - pos >= digest_len + payload_len:
                transit_ok = checksum == crc(
                    view[pos : pos + digest_len + payload_len], crc(view[start : start + size])
                )
        if end - pos < digest_len + payload_len:
            raise InvalidArgument(
                f"truncated record: ledger {ledger_id} entry {entry_id} declares "
                f"{digest_len + payload_len} bytes, {end - pos} remain"
            )
        digest = raw[pos : pos + digest_len]
        pos += digest_len
        payload = raw[pos : pos + payload_len] if copy else view[pos : pos + payload_len]
        pos += payload_len
        append(
            new_record(
                FramedRecord,
                (
                    ledger_id,
                    entry_id,
                    lac,
                    payload,
                    digest,
                    recovery,
                    digest_type,
                    length,
                    transit_ok,
                ),
            )
        )
        if len(records) > max_records:
            raise PayloadTooLarge(f"more than {max_records} entries in one request")
    return records
