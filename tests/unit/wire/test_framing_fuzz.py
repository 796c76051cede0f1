"""Fuzzing the bookie's binary framing decoder (``services.wire.framing.decode``): for any
bytes, valid bodies cut short, bit-flipped, or with wrong lengths, counts and flags, it
returns exactly the records the format defines or raises one of its two documented
errors (``InvalidArgument`` 400, ``PayloadTooLarge`` 413), never anything else, and
never allocates by a length it has not checked.

The oracle is ``reference_decode``: the module docstring's format, written plainly and
slowly, independent of the fast decoder. Examples: deterministic and bounded by default,
many more with HYPOTHESIS_PROFILE=fuzz (``make fuzz-decoders``; tests/conftest.py).
"""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from services.errors import InvalidArgument, PayloadTooLarge
from services.limits import BATCH_ENTRIES_MAX, STORED_ENTRY_SIZE_MAX_BYTES
from services.wire.digest import record_ok
from services.wire.framing import HEADER, FramedRecord, decode, encode
from tests.unit.wire.fuzz_support import (
    DOCUMENTED,
    U32_MAX,
    Outcome,
    frame_starts,
    mutated_bodies,
    records,
    reference_decode,
)


def outcome(body: bytes, max_records: int = BATCH_ENTRIES_MAX, *, copy: bool = True) -> Outcome:
    """What ``decode`` does with ``body``: its records, or the class of its error. Any
    other exception propagates and fails the test."""
    try:
        return decode(body, max_records, copy=copy)
    except DOCUMENTED as exc:
        assert 400 <= exc.http_status < 500 and exc.message
        return type(exc)


def assert_same(got: Outcome, want: Outcome) -> None:
    """Equal outcomes, field for field (``transit_ok`` included: NamedTuple equality)."""
    if isinstance(want, list):
        assert isinstance(got, list), got
        assert [tuple(r) for r in got] == [tuple(r) for r in want]
    else:
        assert got is want


# ----------------------------------------------------------------------------- properties


@given(st.binary(max_size=600))
def test_any_bytes_decode_exactly_or_raise_a_documented_error(body: bytes) -> None:
    """Arbitrary bytes: decode gives exactly what the format defines (the reference
    parser), or InvalidArgument / PayloadTooLarge; never IndexError, struct.error or any
    other exception."""
    assert_same(outcome(body), reference_decode(body))


@given(mutated_bodies())
def test_damaged_bodies_decode_exactly_or_raise_a_documented_error(body: bytes) -> None:
    """Valid bodies cut, flipped, overwritten, with extreme lengths, flags and ids, junk
    or repeats: the same outcome as the reference parser, with copies and with views."""
    want = reference_decode(body)
    assert_same(outcome(body), want)
    assert_same(outcome(body, copy=False), want)


@given(records(max_size=8), st.integers(0, 10))
def test_record_count_limit_is_exact(recs: list[FramedRecord], max_records: int) -> None:
    """More records than ``max_records`` is 413 payload_too_large; up to it, all of them."""
    got = outcome(encode(recs), max_records)
    assert_same(got, recs if len(recs) <= max_records else PayloadTooLarge)


@given(records(max_size=8))
def test_round_trip_is_identity(recs: list[FramedRecord]) -> None:
    """decode(encode(records)) == records (checksums intact), with copies and with views
    into the body."""
    body = encode(recs)
    assert_same(outcome(body), recs)
    assert_same(outcome(body, copy=False), recs)
    assert all(r.transit_ok and record_ok(r) for r in decode(body) if r.digest_type == "crc32c")


@given(records(), st.data())
def test_a_cut_body_is_its_whole_records_or_refused(
    recs: list[FramedRecord], data: st.DataObject
) -> None:
    """A body cut at a frame boundary decodes to exactly the records before the cut; cut
    anywhere else it is refused whole (InvalidArgument): a truncated add never stores a
    partial record."""
    body = encode(recs)
    cut = data.draw(st.integers(0, len(body)))
    starts = frame_starts(recs)
    want: Outcome = recs[: starts.index(cut)] if cut in starts else InvalidArgument
    assert_same(outcome(body[:cut]), want)


@given(records(max_size=4), st.data())
def test_one_flipped_bit_is_refused_or_caught_by_a_check(
    recs: list[FramedRecord], data: st.DataObject
) -> None:
    """One bit flipped in transit: the body is refused whole, or at least one record it
    holds fails the bookie's checks (crc32c digest, or the record checksum of the other
    digest types), so the bookie refuses it. Two flips are documented as unprotected and
    left out: the recovery flag of a crc32c record (its digest does not cover the flags),
    and clearing flag bit 3 of a checksummed record (the framing before the checksum still
    parses; the body then almost always stops parsing, but not always)."""
    body = bytearray(encode(recs))
    starts = frame_starts(recs)
    bit = data.draw(st.integers(0, len(body) * 8 - 1))
    at, mask = bit // 8, 1 << (bit % 8)
    if at in starts:
        record = recs[starts.index(at)]
        assume(not (mask == 0x01 and record.digest_type == "crc32c"))
        assume(not (mask == 0x08 and record.digest_type != "crc32c"))
    body[at] ^= mask
    got = outcome(bytes(body))
    if isinstance(got, list):
        # The bookie's checks (bookie.fastpath.check_records): it has no HMAC key.
        caught = [
            r for r in got if not r.transit_ok or (r.digest_type == "crc32c" and not record_ok(r))
        ]
        assert caught, f"bit {bit} flipped unnoticed"


# ----------------------------------------------------------------------------- allocation


@pytest.mark.parametrize("payload_len", [STORED_ENTRY_SIZE_MAX_BYTES, U32_MAX])
def test_a_huge_length_prefix_allocates_nothing(payload_len: int) -> None:
    """A header claiming up to 4 GiB of payload, with a few bytes after it: refused
    (InvalidArgument: truncated; PayloadTooLarge: over the limit) before anything the
    size of the claim is allocated. Peak allocation stays under 64 KiB."""
    body = HEADER.pack(0x02, 1, 1, 0, 0, payload_len, 4) + bytes(100)
    tracemalloc.start()
    try:
        got = outcome(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    want = InvalidArgument if payload_len <= STORED_ENTRY_SIZE_MAX_BYTES else PayloadTooLarge
    assert got is want
    assert peak < 64 * 1024, peak
