"""Entry digests: CRC32C and HMAC-SHA256 cover every field, and catch any change."""

from __future__ import annotations

import struct

import crc32c
import pytest

from services.wire import digest
from services.wire.framing import FramedRecord


def record(digest_type: str = "crc32c") -> FramedRecord:
    return FramedRecord(5, 9, 8, b"the payload", b"", False, digest_type, 1234)


def test_crc32c_is_over_ids_lac_length_and_payload():
    """The CRC32C digest is crc32c(>qqqq ledger, entry, lac, length ‖ payload), big-endian."""
    expected = crc32c.crc32c(struct.pack(">qqqq", 5, 9, 8, 1234) + b"the payload")
    got = digest.compute("crc32c", b"", 5, 9, 8, b"the payload", length=1234)
    assert got == expected.to_bytes(4, "big")


@pytest.mark.parametrize("digest_type", ["crc32c", "hmac-sha256"])
@pytest.mark.parametrize(
    "change",
    [
        {"ledger_id": 6},
        {"entry_id": 10},
        {"lac": 7},
        {"length": 1235},
        {"payload": b"the paylOad"},
        {"payload": b"the payload "},
        {"payload": b""},
    ],
    ids=["ledger", "entry", "lac", "length", "payload-byte", "payload-longer", "payload-empty"],
)
def test_any_changed_field_fails_verification(digest_type, change):
    """A sealed record verifies; changing any covered field makes it fail (docs/style.md §4)."""
    key = digest.mac_key(b"secret")
    sealed = digest.seal(record(digest_type), key)
    assert digest.record_ok(sealed, key)
    assert not digest.record_ok(sealed._replace(**change), key)


def test_hmac_needs_the_right_key():
    """An HMAC digest is 32 bytes and does not verify under another password's key."""
    sealed = digest.seal(record("hmac-sha256"), digest.mac_key(b"right"))
    assert len(sealed.digest) == 32
    assert digest.record_ok(sealed, digest.mac_key(b"right"))
    assert not digest.record_ok(sealed, digest.mac_key(b"wrong"))
    assert not digest.record_ok(sealed, b"")


def test_mac_key_is_derived_not_the_password():
    """The HMAC key is derived from the password and never equals it."""
    key = digest.mac_key(b"pw")
    assert key != b"pw" and len(key) == 32 and key == digest.mac_key(b"pw")
    assert key != digest.mac_key(b"pw2")


def test_none_digest_is_empty():
    """Digest type none is empty and only an empty digest verifies."""
    sealed = digest.seal(record("none"))
    assert sealed.digest == b""
    assert digest.record_ok(sealed)
    assert not digest.record_ok(sealed._replace(digest=b"\x00"))


def test_digest_lengths_match_the_framing():
    """crc32c digests are 4 bytes, as the framing expects for type 1."""
    assert len(digest.seal(record("crc32c")).digest) == 4


def test_unknown_type_is_a_programmer_error():
    """An unknown digest type raises ValueError."""
    with pytest.raises(ValueError):
        digest.compute("md5", b"", 1, 2, 3, b"")


@pytest.mark.parametrize("digest_type", ["crc32c", "hmac-sha256", "none"])
@pytest.mark.parametrize("recovery", [False, True])
def test_sealed_is_seal_of_the_template_with_the_entry_fields(digest_type, recovery):
    """``sealed`` builds in one step the record ``seal`` makes from the template with the
    entry's id, payload and length replaced: every field, the digest included."""
    template = FramedRecord(5, -1, 8, b"", b"", recovery, digest_type, 0)
    key = digest.mac_key(b"password") if digest_type == "hmac-sha256" else b""
    got = digest.sealed(template, 9, b"the payload", 1234, key)
    expected = digest.seal(template._replace(entry_id=9, payload=b"the payload", length=1234), key)
    assert got == expected
    assert type(got) is FramedRecord
    assert digest.record_ok(got, key)
