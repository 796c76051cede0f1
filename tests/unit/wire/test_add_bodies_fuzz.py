"""Fuzzing the other parsers of add bodies: the gateway's JSON batch (``parse_json`` then
``decode_batch``, for ledger adds and log appends), the declared Content-Length (bookie
and gateway), and the log envelope every log read decodes (``log_records.decode``). For
any input each returns its value or raises ``InvalidArgument`` / ``PayloadTooLarge``
(the log envelope: never raises), nothing else.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bookie.fastpath import declared_length
from services.errors import InvalidArgument, PayloadTooLarge, QuireError
from services.limits import BATCH_ENTRIES_MAX, BODY_SIZE_MAX_BYTES
from services.protocol import log_records
from services.web.body import content_length
from tests.unit.wire.fuzz_support import DOCUMENTED, batch_docs, parse_add_body

PRINTABLE_ASCII = st.characters(min_codepoint=32, max_codepoint=126)


@given(st.binary(max_size=300))
def test_any_bytes_as_a_json_add_are_payloads_or_a_4xx(raw: bytes) -> None:
    """Arbitrary bytes sent as a JSON add: InvalidArgument (or, for a valid batch, its
    payloads); never UnicodeDecodeError, RecursionError or another exception."""
    got = parse_add_body(raw)
    assert got is InvalidArgument or isinstance(got, tuple)


@given(batch_docs, st.sampled_from(["compact", "spaced", "cut"]))
def test_json_add_documents_decode_exactly_or_a_4xx(doc: Any, form: str) -> None:
    """Any JSON document (or one cut short) as a batch add: a batch of strict base64
    strings decodes to exactly those payloads; anything else is InvalidArgument."""
    raw = json.dumps(doc, separators=(",", ":") if form == "compact" else None).encode()
    if form == "cut":
        raw = raw[: len(raw) // 2]
    got = parse_add_body(raw)
    items = doc.get("entries") if isinstance(doc, dict) and form != "cut" else None
    if isinstance(items, list) and items and all(isinstance(i, str) for i in items):
        expected = []
        for item in items:
            try:
                expected.append(base64.b64decode(item, validate=True))
            except ValueError:
                break
        if len(expected) == len(items):
            assert got == tuple(expected)
            return
    assert got is InvalidArgument


def test_an_oversized_batch_is_413_before_any_item_is_decoded() -> None:
    """A batch of more than BATCH_ENTRIES_MAX items is 413 whatever its items are."""
    assert parse_add_body(json.dumps({"entries": [5] * (BATCH_ENTRIES_MAX + 1)}).encode()) is (
        PayloadTooLarge
    )


@given(st.text(max_size=30) | st.from_regex(r"\A0*[0-9]{1,30}\Z"))
def test_any_content_length_is_a_size_or_a_4xx(declared: str) -> None:
    """Any Content-Length text: its value when it is ASCII digits within the limit, 413
    past it, 400 otherwise; never ValueError (int() of "²", or of 5,000 digits)."""
    limit = BODY_SIZE_MAX_BYTES
    if declared.isascii() and declared.isdigit():
        want: int | type[QuireError] = int(declared) if int(declared) <= limit else PayloadTooLarge
    else:
        want = InvalidArgument
    for parse in (content_length, declared_length):
        try:
            got: int | type[QuireError] = parse(declared, limit)
        except DOCUMENTED as exc:
            got = type(exc)
        assert got == want


@pytest.mark.parametrize(
    ("declared", "error"),
    [("²", InvalidArgument), ("٣", InvalidArgument), ("9" * 5000, PayloadTooLarge)],
    ids=["superscript-two", "arabic-indic-three", "5000-digits"],
)
def test_content_length_that_crashed_int_is_a_4xx(declared: str, error: type) -> None:
    """Regression (found by this fuzzing): "²" passed str.isdigit and int() raised
    ValueError, a 500; so did 5,000 digits (int()'s 4,300-digit limit); "٣" was read
    as 3. Now 400 and 413. (llhttp refuses such headers first; this is the second line.)"""
    for parse in (content_length, declared_length):
        with pytest.raises(error):
            parse(declared, BODY_SIZE_MAX_BYTES)
    assert content_length("0" * 5000 + "7", BODY_SIZE_MAX_BYTES) == 7


@given(st.binary(max_size=300))
def test_the_log_envelope_decodes_any_bytes(entry: bytes) -> None:
    """Any stored entry decodes as a log record without raising: a valid envelope gives
    its parts, anything else is a record of its own, all data."""
    record = log_records.decode(entry)
    assert record.remaining >= 0
    assert record.data == entry or entry.endswith(record.data)


@given(
    st.lists(st.binary(max_size=80), min_size=1, max_size=5),
    st.integers(0, 2**64 - 1),
    st.none() | st.text(PRINTABLE_ASCII, min_size=1, max_size=128),
)
def test_the_log_envelope_round_trips(payloads: list[bytes], time_ms: int, key: str | None) -> None:
    """log_records.encode then decode gives every record's data, what remains of its
    request, and the head's time, count, key and digest."""
    digest = log_records.records_digest(payloads) if key is not None else None
    entries = log_records.encode(payloads, time_ms, key, digest)
    decoded = [log_records.decode(entry) for entry in entries]
    assert [r.data for r in decoded] == payloads
    assert [r.remaining for r in decoded] == list(range(len(payloads) - 1, -1, -1))
    assert decoded[0].head == log_records.Head(time_ms, len(payloads), key, digest)
    assert all(r.head is None for r in decoded[1:])
