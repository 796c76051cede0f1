"""Entry digests: CRC32C, or HMAC-SHA256 keyed from the ledger password.

The digest covers the ledger id, the entry id, the writer's LAC at send time
and the payload, so a replica moved to the wrong place or a torn payload is
caught. Writers compute it once; readers verify it again (STYLE.md §4).
"""

from __future__ import annotations

import hashlib
import hmac
import struct

import crc32c

DIGEST_TYPES = ("crc32c", "hmac-sha256", "none")
_HEADER = struct.Struct(">qqq")


def mac_key(password: bytes) -> bytes:
    """The HMAC key of a ledger: derived from its password, never the password itself."""
    return hashlib.sha256(b"quire-ledger-mac:" + password).digest()


def compute(
    digest_type: str, key: bytes, ledger_id: int, entry_id: int, lac: int, payload: bytes
) -> bytes:
    header = _HEADER.pack(ledger_id, entry_id, lac)
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
    payload: bytes,
    digest: bytes,
) -> bool:
    expected = compute(digest_type, key, ledger_id, entry_id, lac, payload)
    return hmac.compare_digest(expected, digest)
