"""Oracles and strategies shared by the unit fuzzing of the decoders (tests/unit/wire/
test_*_fuzz.py) and the end-to-end fuzzing against real processes (tests/integration/
test_decoder_fuzz.py): the bookie framing's reference parser and damaged bodies, and
JSON batch add documents with what the gateway makes of them."""

from __future__ import annotations

import base64

import crc32c
from hypothesis import strategies as st

from gateway.http.batches import decode_batch
from gateway.http.json_input import parse_json
from services.errors import InvalidArgument, PayloadTooLarge, QuireError
from services.limits import BATCH_ENTRIES_MAX, STORED_ENTRY_SIZE_MAX_BYTES
from services.wire.digest import seal
from services.wire.framing import CHECKSUM, DIGEST_LENGTHS, HEADER, FramedRecord, encode

I64_MAX = 2**63 - 1
U32_MAX = 2**32 - 1
Outcome = list[FramedRecord] | type[QuireError]
# The two errors a decoder may raise: 400 invalid_argument, 413 payload_too_large.
DOCUMENTED = (InvalidArgument, PayloadTooLarge)


def reference_decode(body: bytes, max_records: int = BATCH_ENTRIES_MAX) -> Outcome:
    """The records of ``body`` by the module docstring of services/wire/framing.py, or the
    class of the error it must raise (checks in the decoder's order: flags, ids, payload
    length, digest length, checksum present, digest and payload present, record count)."""
    names = {0: "none", 1: "crc32c", 2: "hmac-sha256"}
    records: list[FramedRecord] = []
    pos = 0
    while pos < len(body):
        if len(body) - pos < HEADER.size:
            return InvalidArgument
        flags, lid, eid, lac, length, payload_len, digest_len = HEADER.unpack_from(body, pos)
        digest_type = names.get((flags >> 1) & 0b11)
        if flags & 0xF0 or digest_type is None:
            return InvalidArgument
        if lid < 0 or eid < 0 or lac < -1 or length < 0:
            return InvalidArgument
        if payload_len > STORED_ENTRY_SIZE_MAX_BYTES:
            return PayloadTooLarge
        if digest_len != DIGEST_LENGTHS[digest_type]:
            return InvalidArgument
        header = body[pos : pos + HEADER.size]
        pos += HEADER.size
        checksum = None
        if flags & 0b1000:
            if len(body) - pos < CHECKSUM.size:
                return InvalidArgument
            checksum = int.from_bytes(body[pos : pos + CHECKSUM.size], "big")
            pos += CHECKSUM.size
        if len(body) - pos < digest_len + payload_len:
            return InvalidArgument
        digest = body[pos : pos + digest_len]
        payload = body[pos + digest_len : pos + digest_len + payload_len]
        pos += digest_len + payload_len
        intact = checksum is None or checksum == crc32c.crc32c(header + digest + payload)
        recovery = bool(flags & 1)
        records.append(
            FramedRecord(lid, eid, lac, payload, digest, recovery, digest_type, length, intact)
        )
        if len(records) > max_records:
            return PayloadTooLarge
    return records


@st.composite
def records(draw: st.DrawFn, max_size: int = 6) -> list[FramedRecord]:
    """Records as a writer sends them: sealed crc32c ones (a bookie verifies them), hmac
    ones with some 32-byte MAC, none ones; any ids, LACs and lengths."""
    out = []
    for _ in range(draw(st.integers(1, max_size))):
        digest_type = draw(st.sampled_from(sorted(DIGEST_LENGTHS)))
        record = FramedRecord(
            draw(st.integers(0, I64_MAX)),
            draw(st.integers(0, I64_MAX)),
            draw(st.integers(-1, I64_MAX)),
            draw(st.binary(max_size=200)),
            b"",
            draw(st.booleans()),
            digest_type,
            draw(st.integers(0, I64_MAX)),
        )
        if digest_type == "hmac-sha256":
            record = record._replace(digest=draw(st.binary(min_size=32, max_size=32)))
        out.append(seal(record) if digest_type == "crc32c" else record)
    return out


def frame_starts(recs: list[FramedRecord]) -> list[int]:
    """Where each record's frame starts in ``encode(recs)``, and the end of the body."""
    starts = [0]
    for r in recs:
        starts.append(starts[-1] + len(encode([r])))
    return starts


# Header fields by offset: flags 0, ledger 1, entry 9, lac 17, length 25, payload_len 33,
# digest_len 37 (HEADER is ">BqqqqIH").
FIELDS = {"flags": (0, 1), "payload_len": (33, 4), "digest_len": (37, 2), "ledger_id": (1, 8)}
INTERESTING = [0, 1, 3, 4, 31, 32, 33, 0x7F, 0x80, 0xFF, 0xFFFF, 2**31, U32_MAX, 2**63]


def damage_bytes(draw: st.DrawFn, data: bytearray, kind: str) -> bool:
    """The byte-level damages the body fuzzers share, in place: ``cut`` the tail at a
    drawn offset, ``flip`` one bit, overwrite one ``byte``. False (nothing done) for any
    other kind, or an empty body: the caller's own kinds."""
    if kind == "cut" and data:
        del data[draw(st.integers(0, len(data) - 1)) :]
    elif kind == "flip" and data:
        bit = draw(st.integers(0, len(data) * 8 - 1))
        data[bit // 8] ^= 1 << (bit % 8)
    elif kind == "byte" and data:
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    else:
        return False
    return True


@st.composite
def mutated_bodies(draw: st.DrawFn) -> bytes:
    """A valid body damaged the ways a broken client, proxy or disk damages one: cut
    short, bits flipped, bytes overwritten or inserted, a header field (flags, lengths,
    ids) set to an extreme, junk appended, frames repeated."""
    recs = draw(records())
    body = bytearray(encode(recs))
    starts = frame_starts(recs)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["cut", "flip", "byte", "insert", "field", "junk", "repeat"]))
        if damage_bytes(draw, body, kind):
            continue
        if kind == "insert":
            at = draw(st.integers(0, len(body)))
            body[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "field":
            offset, size = FIELDS[draw(st.sampled_from(sorted(FIELDS)))]
            at = draw(st.sampled_from(starts[:-1])) + offset
            value = draw(st.sampled_from(INTERESTING) | st.integers(0, 2 ** (8 * size) - 1))
            body[at : at + size] = (value % 2 ** (8 * size)).to_bytes(size, "big")
        elif kind == "junk":
            body += draw(st.binary(max_size=HEADER.size + 8))
        elif kind == "repeat":
            body *= draw(st.integers(2, 3))
    return bytes(body)


# ----------------------------------------------------------------------------- JSON adds

# JSON values (no NaN or infinities: json.dumps writes them, but they are not JSON).
json_scalars = st.none() | st.booleans() | st.integers() | st.text()
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
base64_texts = st.binary(max_size=60).map(lambda b: base64.b64encode(b).decode())
# Strings that are base64 or nearly: wrong padding, stray characters, non-ASCII.
near_base64 = base64_texts | st.text(
    alphabet=st.sampled_from("ABCDabcd0123+/=\n -_é\x00"), max_size=12
)
batch_docs = st.one_of(
    json_values,
    st.fixed_dictionaries({"entries": st.lists(near_base64 | json_values, max_size=6)}),
    st.fixed_dictionaries(
        {"entries": st.lists(base64_texts, max_size=6)},
        optional={"extra": json_values},
    ),
)


def parse_add_body(raw: bytes) -> tuple[bytes, ...] | type[QuireError]:
    """What the gateway makes of a JSON add body: its payloads or the class of its error."""
    try:
        return decode_batch(parse_json(raw))
    except DOCUMENTED as exc:
        assert 400 <= exc.http_status < 500 and exc.message
        return type(exc)
