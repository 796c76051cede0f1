"""The binary framing of the data path: exact round trips, and every malformed body refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.errors import InvalidArgument, PayloadTooLarge
from services.wire import framing
from services.wire.digest import record_ok, seal
from services.wire.framing import (
    BATCH_ENTRIES_MAX,
    DIGEST_LENGTHS,
    HEADER,
    STORED_ENTRY_SIZE_MAX_BYTES,
    FramedRecord,
    decode,
    encode,
)

I64_MAX = 2**63 - 1


def rec(**kw) -> FramedRecord:
    fields = dict(
        ledger_id=7,
        entry_id=3,
        lac=2,
        payload=b"payload",
        digest=b"\x01\x02\x03\x04",
        recovery=False,
        digest_type="crc32c",
        length=100,
    )
    fields.update(kw)
    return FramedRecord(**fields)


def header(flags=0x02, ledger_id=7, entry_id=3, lac=2, length=100, payload_len=0, digest_len=4):
    return HEADER.pack(flags, ledger_id, entry_id, lac, length, payload_len, digest_len)


records_strategy = st.lists(
    st.builds(
        lambda lid, eid, lac, length, payload, recovery, dtype, seed: FramedRecord(
            lid, eid, lac, payload, (seed * 32)[: DIGEST_LENGTHS[dtype]], recovery, dtype, length
        ),
        st.integers(0, I64_MAX),
        st.integers(0, I64_MAX),
        st.integers(-1, I64_MAX),
        st.integers(0, I64_MAX),
        st.binary(max_size=300),
        st.booleans(),
        st.sampled_from(sorted(DIGEST_LENGTHS)),
        st.binary(min_size=1, max_size=1),
    ),
    max_size=20,
)


@given(records_strategy)
def test_round_trip_is_exact(records):
    """decode(encode(records)) gives back the same records, field for field, each with its
    record checksum (if any) matching."""
    body = encode(records)
    decoded = decode(body)
    assert decoded == records
    assert all(r.transit_ok for r in decoded)
    assert all(type(r.payload) is bytes and type(r.digest) is bytes for r in decoded)
    assert decode(bytearray(body)) == records  # any bytes-like body, not only bytes


def test_round_trip_extremes():
    """Largest ids, LAC -1, empty payload, every digest type and the recovery flag survive."""
    records = [
        rec(ledger_id=I64_MAX, entry_id=I64_MAX, lac=I64_MAX, length=I64_MAX),
        rec(lac=-1, payload=b"", digest=b"", digest_type="none", recovery=True),
        rec(digest=bytes(range(32)), digest_type="hmac-sha256"),
        rec(ledger_id=0, entry_id=0, length=0),
    ]
    assert decode(encode(records)) == records


def test_entry_of_exactly_the_limit_is_accepted():
    """A payload of exactly STORED_ENTRY_SIZE_MAX_BYTES (5 MiB and a log envelope) parses;
    the limit is inclusive."""
    big = rec(payload=b"x" * STORED_ENTRY_SIZE_MAX_BYTES)
    assert decode(encode([big])) == [big]


def test_empty_body_is_no_records():
    """An empty body decodes to no records (the bookie refuses it separately)."""
    assert decode(b"") == []


@pytest.mark.parametrize(
    "body, error, fragment",
    [
        (header()[:-1], InvalidArgument, "truncated record header"),
        (b"\x00" * 5, InvalidArgument, "truncated record header"),
        (header(payload_len=10) + b"\x00" * 4 + b"short", InvalidArgument, "truncated record"),
        (header(digest_len=4), InvalidArgument, "truncated record"),
        (header(flags=0x10), InvalidArgument, "unknown flags"),
        (header(flags=0x80), InvalidArgument, "unknown flags"),
        (header(flags=0x06), InvalidArgument, "unknown flags"),  # digest type 3
        (header(ledger_id=-1) + b"\x00" * 4, InvalidArgument, "negative"),
        (header(entry_id=-5) + b"\x00" * 4, InvalidArgument, "negative"),
        (header(lac=-2) + b"\x00" * 4, InvalidArgument, "negative"),
        (header(length=-1) + b"\x00" * 4, InvalidArgument, "negative"),
        (header(digest_len=3) + b"\x00" * 3, InvalidArgument, "does not fit type crc32c"),
        (header(flags=0x00, digest_len=4) + b"\x00" * 4, InvalidArgument, "type none"),
        (header(flags=0x04, digest_len=4) + b"\x00" * 4, InvalidArgument, "hmac-sha256"),
        (header(payload_len=STORED_ENTRY_SIZE_MAX_BYTES + 1), PayloadTooLarge, "over the limit"),
    ],
    ids=[
        "header-one-byte-short",
        "five-bytes",
        "payload-short",
        "digest-missing",
        "flag-bit-4",
        "flag-bit-7",
        "digest-type-3",
        "negative-ledger",
        "negative-entry",
        "lac-below-minus-one",
        "negative-length",
        "crc32c-digest-3-bytes",
        "none-digest-4-bytes",
        "hmac-digest-4-bytes",
        "entry-over-5MiB",
    ],
)
def test_malformed_bodies_are_refused(body, error, fragment):
    """Every malformed record is refused with the right error and a message saying why."""
    with pytest.raises(error) as info:
        decode(body)
    assert fragment in info.value.message


def test_a_bad_record_after_good_ones_refuses_the_whole_body():
    """A body that does not parse is rejected whole: good records before the bad one do not
    come back."""
    good = encode([rec(entry_id=i) for i in range(3)])
    with pytest.raises(InvalidArgument):
        decode(good + header(flags=0x10))
    with pytest.raises(InvalidArgument):
        decode(good + b"\x01")


def test_too_many_records():
    """More than BATCH_ENTRIES_MAX records is 413; exactly the limit is fine."""
    one = encode([rec(payload=b"", digest=b"", digest_type="none")])
    assert len(decode(one * BATCH_ENTRIES_MAX)) == BATCH_ENTRIES_MAX
    with pytest.raises(PayloadTooLarge):
        decode(one * (BATCH_ENTRIES_MAX + 1))


def test_flags_carry_recovery_and_digest_type():
    """Bit 0 is the recovery flag and bits 1-2 the digest type, as docs/api.md "Bookie" says."""
    body = encode([rec(recovery=True, digest_type="hmac-sha256", digest=b"\x00" * 32)])
    assert body[0] == 0x01 | (2 << 1) | framing.FLAG_CHECKSUM
    body = encode([rec(recovery=False, digest_type="crc32c")])
    assert body[0] == 1 << 1
    assert framing.MEDIA_TYPE == "application/x-quire-entries"


def test_decode_without_copy_gives_views_of_the_body():
    """decode(copy=False) returns the same records, payloads as views into the body."""
    records = [rec(entry_id=i, payload=bytes([i]) * 50) for i in range(3)]
    body = encode(records)
    views = decode(body, copy=False)
    assert all(isinstance(r.payload, memoryview) for r in views)
    assert [bytes(r.payload) for r in views] == [r.payload for r in records]
    assert views == records  # a memoryview compares equal to the same bytes


# ---------------------------------------------------------------------- record checksum

KEY = b"k" * 32


def hmac_record(payload: bytes = b"an hmac entry", entry_id: int = 3) -> FramedRecord:
    return seal(rec(entry_id=entry_id, payload=payload, digest_type="hmac-sha256"), KEY)


def test_records_a_bookie_cannot_verify_carry_a_checksum_crc32c_ones_do_not():
    """hmac-sha256 and none records get flag bit 3 and 4 checksum bytes after the header;
    a crc32c record (whose digest the bookie verifies) is framed as before."""
    for record, digest_len in ((hmac_record(), 32), (rec(digest=b"", digest_type="none"), 0)):
        body = encode([record])
        assert body[0] & framing.FLAG_CHECKSUM
        assert len(body) == HEADER.size + framing.CHECKSUM.size + digest_len + len(record.payload)
    crc = encode([rec()])
    assert not crc[0] & framing.FLAG_CHECKSUM
    assert len(crc) == HEADER.size + 4 + len(b"payload")


@pytest.mark.parametrize("digest_type", ["hmac-sha256", "none"])
def test_every_flipped_bit_of_a_checksummed_record_is_caught(digest_type):
    """Flip each bit of an hmac-sha256 (or none) record in turn, between two good records:
    the body is refused whole (a header that no longer parses) or the flipped record
    decodes with transit_ok False and record_ok False, while the good records stay good.
    No flip ever yields an intact record with other bytes."""
    if digest_type == "none":
        target = rec(entry_id=3, payload=b"an unsigned entry", digest=b"", digest_type="none")
    else:
        target = hmac_record()
    before, after = hmac_record(b"before", 2), hmac_record(b"after", 4)
    prefix = encode([before])
    body = bytearray(encode([before, target, after]))
    size = len(encode([target]))
    caught_as_record = 0
    for bit in range(size * 8):
        flipped = bytearray(body)
        flipped[len(prefix) + bit // 8] ^= 1 << (bit % 8)
        try:
            records = decode(bytes(flipped))
        except (InvalidArgument, PayloadTooLarge):
            continue
        assert len(records) == 3, bit
        assert records[0] == before and records[0].transit_ok
        assert not records[1].transit_ok, f"bit {bit} flipped unnoticed"
        assert not record_ok(records[1], KEY)
        caught_as_record += 1
    # Flips in the payload, digest, ids, LAC, length and checksum are caught per record.
    assert caught_as_record >= (size - HEADER.size) * 8


def test_a_flipped_payload_bit_in_an_hmac_record_is_caught_without_the_key():
    """The bookie's view (no HMAC key): a payload bit flipped in transit shows as
    transit_ok False; the same bytes unflipped are intact."""
    body = bytearray(encode([hmac_record()]))
    assert decode(bytes(body))[0].transit_ok
    body[-1] ^= 0x01
    (record,) = decode(bytes(body))
    assert not record.transit_ok
    assert record.payload != hmac_record().payload


def test_framing_without_the_checksum_still_parses():
    """A record framed before the checksum existed (flag bit 3 clear) decodes as before:
    intact, nothing to check but its digest."""
    record = hmac_record()
    old = HEADER.pack(0x04, 7, 3, 2, 100, len(record.payload), 32) + record.digest + record.payload
    (decoded,) = decode(old)
    assert decoded == record and decoded.transit_ok
    assert record_ok(decoded, KEY)


def test_a_checksum_cut_short_refuses_the_body():
    """A record whose flag announces a checksum but whose body ends first is malformed."""
    body = header(flags=0x04 | framing.FLAG_CHECKSUM, digest_len=32) + b"\x00\x01"
    with pytest.raises(InvalidArgument, match="no checksum"):
        decode(body)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(framing.DIGEST_CODES)),
            st.binary(max_size=300),
            st.integers(min_value=-1, max_value=2**40),
        ),
        max_size=20,
    )
)
def test_a_bookie_answer_from_stored_rows_is_the_encoding_of_their_records(
    entries: list[tuple[str, bytes, int]],
) -> None:
    """``encode_stored`` (the bookie's range read, straight from its rows) gives exactly
    the bytes ``encode`` gives for the same records, checksums included, and they decode
    back to them."""
    records = [
        seal(framing.FramedRecord(9, i, lac, payload, digest_type=dt, length=i * 3), b"k" * 32)
        for i, (dt, payload, lac) in enumerate(entries)
    ]
    rows = [
        (r.entry_id, r.lac, r.length, framing.DIGEST_CODES[r.digest_type], r.digest, r.payload)
        for r in records
    ]
    body = framing.encode_stored(9, rows)
    assert body == framing.encode(records)
    assert framing.decode(body, max_records=100) == records
