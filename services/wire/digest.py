"""Entry digests: CRC32C, or HMAC-SHA256 keyed from the ledger password.

The digest covers the ledger id, the entry id, the writer's LAC at send time,
the ledger's total length up to the entry, and the payload, so a replica moved
to the wrong place or a torn payload is caught. Writers compute it once;
readers verify it again (docs/style.md §4).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

import crc32c

from services.wire.framing import FramedRecord

DIGEST_TYPES = ("crc32c", "hmac-sha256", "none")
_HEADER = struct.Struct(">qqqq")


def mac_key(password: bytes) -> bytes:
    """The HMAC key of a ledger: derived from its password, never the password itself."""
    return hashlib.sha256(b"quire-ledger-mac:" + password).digest()


def _mac_key_pad(cluster_secret: str | None, ledger_id: int) -> bytes:
    secret = (cluster_secret or "").encode()
    return hmac.new(secret, b"quire-mac-key-seal:%d" % ledger_id, hashlib.sha256).digest()


def seal_mac_key(key: bytes, cluster_secret: str | None, ledger_id: int) -> str:
    """The MAC key of ledger ``ledger_id`` sealed for its metadata: XOR with
    HMAC-SHA256(cluster secret, ledger id), base64. Each ledger id has one key, so the
    pad is never reused; without the cluster secret anyone who reads ZooKeeper can
    unseal it (run with ``--cluster-secret``). The password itself is never stored."""
    pad = _mac_key_pad(cluster_secret, ledger_id)
    return base64.b64encode(bytes(a ^ b for a, b in zip(key, pad, strict=True))).decode()


def unseal_mac_key(sealed: str, cluster_secret: str | None, ledger_id: int) -> bytes:
    """Inverse of ``seal_mac_key`` (a wrong cluster secret gives a wrong key: every
    digest then fails, nothing is copied)."""
    pad = _mac_key_pad(cluster_secret, ledger_id)
    raw = base64.b64decode(sealed)
    return bytes(a ^ b for a, b in zip(raw, pad, strict=True))


def compute(
    digest_type: str,
    key: bytes,
    ledger_id: int,
    entry_id: int,
    lac: int,
    payload: bytes | memoryview,
    *,
    length: int = 0,
) -> bytes:
    header = _HEADER.pack(ledger_id, entry_id, lac, length)
    if digest_type == "crc32c":
        return crc32c.crc32c(payload, crc32c.crc32c(header)).to_bytes(4, "big")
    if digest_type == "hmac-sha256":
        mac = hmac.new(key, header, hashlib.sha256)
        mac.update(payload)
        return mac.digest()
    if digest_type == "none":
        return b""
    raise ValueError(f"unknown digest type {digest_type!r}")


def verify(
    digest_type: str,
    key: bytes,
    ledger_id: int,
    entry_id: int,
    lac: int,
    payload: bytes | memoryview,
    digest: bytes,
    *,
    length: int = 0,
) -> bool:
    expected = compute(digest_type, key, ledger_id, entry_id, lac, payload, length=length)
    return hmac.compare_digest(expected, digest)


def seal(record: FramedRecord, key: bytes = b"") -> FramedRecord:
    """The record with its digest computed over its fields (the writer's side)."""
    digest = compute(
        record.digest_type,
        key,
        record.ledger_id,
        record.entry_id,
        record.lac,
        record.payload,
        length=record.length,
    )
    return record._replace(digest=digest)


def sealed(
    template: FramedRecord,
    entry_id: int,
    payload: bytes | memoryview,
    length: int,
    key: bytes = b"",
) -> FramedRecord:
    """``seal(template._replace(entry_id=..., payload=..., length=...), key)`` built as one
    record: the writer seals every entry it sends, and two ``_replace`` calls (each a
    keyword pass over the fields) cost more than the digest of a 1 KiB payload
    (benchmarks/README.md, "Measured choices")."""
    ledger_id, lac, digest_type = template.ledger_id, template.lac, template.digest_type
    digest = compute(digest_type, key, ledger_id, entry_id, lac, payload, length=length)
    return FramedRecord(
        ledger_id, entry_id, lac, payload, digest, template.recovery, digest_type, length
    )


def record_ok(record: FramedRecord, key: bytes = b"") -> bool:
    """True when the record's digest matches its fields (the reader's side) and it was not
    changed in transit (``FramedRecord.transit_ok``: the framing's record checksum).

    A bookie calls this with an empty key for crc32c and none digests; it
    cannot check an HMAC (it has no key), only the record checksum."""
    if record.digest_type == "crc32c":  # the common case, inline: a range read checks
        # a thousand records a page (a CRC is no secret: no constant-time compare needed)
        ledger_id, entry_id, lac, payload, digest, _, _, length, transit_ok = record
        expected = crc32c.crc32c(
            payload, crc32c.crc32c(_HEADER.pack(ledger_id, entry_id, lac, length))
        )
        return transit_ok and len(digest) == 4 and expected == int.from_bytes(digest)
    return record.transit_ok and verify(
        record.digest_type,
        key,
        record.ledger_id,
        record.entry_id,
        record.lac,
        record.payload,
        record.digest,
        length=record.length,
    )
