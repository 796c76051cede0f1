"""The record envelope (services/protocol/log_records.py): round trips, batches, foreign
entries, batch visibility and the size bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.errors import InvalidArgument, InvariantViolation
from services.limits import ENTRY_SIZE_MAX_BYTES, STORED_ENTRY_SIZE_MAX_BYTES
from services.protocol import log_records as lr


def test_single_record_round_trip_without_key() -> None:
    """One record: its head carries the time, count 1, no key; data comes back exactly."""
    (entry,) = lr.encode([b"hello"], 1234)
    record = lr.decode(entry)
    assert record.data == b"hello" and record.remaining == 0
    assert record.head == lr.Head(1234, 1, None, None)
    assert record.time_ms == 1234
    assert len(entry) == lr.envelope_size(1, None) + 5


def test_batch_round_trip_with_key() -> None:
    """A batch: the head says the count, key and digest; every entry says how many of
    its request follow; payloads (empty ones too) come back in order."""
    payloads = [b"a", b"", b"ccc"]
    digest = lr.records_digest(payloads)
    entries = lr.encode(payloads, 99, "key-1", digest)
    decoded = [lr.decode(e) for e in entries]
    assert [r.data for r in decoded] == payloads
    assert [r.remaining for r in decoded] == [2, 1, 0]
    assert decoded[0].head == lr.Head(99, 3, "key-1", digest)
    assert decoded[1].head is None and decoded[2].head is None
    assert [e[1] for e in entries] == [lr.KIND_HEAD, *[lr.KIND_TIMED_CONTINUATION] * 2]
    assert [r.time_ms for r in decoded] == [99, 99, 99]
    assert sum(map(len, entries)) == lr.envelope_size(3, "key-1") + 4


def test_an_old_untimed_continuation_still_decodes() -> None:
    """A kind-0 continuation (written before entries carried their time) decodes to its
    data and ``remaining``, its time unknown (None)."""
    old = bytes([lr.MAGIC, lr.KIND_CONTINUATION, 0, 0, 0, 1]) + b"payload"
    assert lr.decode(old) == lr.LogEntry(b"payload", 1, None, None)
    assert lr.data_span(old, 0, len(old)) == (6, 1)


def test_a_timed_continuation_cut_short_is_one_record() -> None:
    """A kind-2 entry too short to hold its time is not an envelope."""
    cut = bytes([lr.MAGIC, lr.KIND_TIMED_CONTINUATION, 0, 0, 0, 0, 1, 2, 3])
    assert lr.decode(cut) == lr.LogEntry(cut, 0, None)
    assert lr.data_span(cut, 0, len(cut)) == (0, 0)


@pytest.mark.parametrize(
    "entry", [b"", b"plain data", bytes([lr.MAGIC]), bytes([lr.MAGIC, 7, 0, 0, 0, 0]),
              bytes([lr.MAGIC, lr.KIND_HEAD, 0, 0, 0, 0, 1, 2])],
)  # fmt: skip
def test_an_entry_without_an_envelope_is_one_record(entry: bytes) -> None:
    """Entries not written by the log layer (or cut short) decode as one whole record."""
    record = lr.decode(entry)
    assert record == lr.LogEntry(entry, 0, None)


def test_a_head_with_a_key_cut_short_is_one_record() -> None:
    """A head whose key and digest do not fit the entry is not an envelope."""
    (entry,) = lr.encode([b""], 1, "k" * 10, bytes(16))
    cut = entry[:-3]
    assert lr.decode(cut) == lr.LogEntry(cut, 0, None)


def test_visible_only_once_the_whole_batch_is() -> None:
    """An entry shows when entry_id + remaining <= end (batches are atomic)."""
    entries = lr.encode([b"0", b"1", b"2"], 5)
    records = [lr.decode(e) for e in entries]
    assert not any(lr.visible(i, r, 1) for i, r in enumerate(records[:2]))
    assert all(lr.visible(i, r, 2) for i, r in enumerate(records))
    plain = lr.decode(b"x")
    assert lr.visible(4, plain, 4) and not lr.visible(4, plain, 3)


def test_digest_is_the_records_in_order() -> None:
    """Same records, same digest (a raw single and a batch of one alike); order and
    boundaries matter."""
    assert lr.records_digest([b"ab"]) == lr.records_digest([b"ab"])
    assert lr.records_digest([b"a", b"b"]) != lr.records_digest([b"b", b"a"])
    assert lr.records_digest([b"a", b"b"]) != lr.records_digest([b"ab"])
    assert len(lr.records_digest([b""])) == lr.DIGEST_BYTES


@pytest.mark.parametrize("key", ["a", "k" * 128, " ~!", "Z-9_."])
def test_valid_keys(key: str) -> None:
    assert lr.check_key(key) == key


@pytest.mark.parametrize("key", ["", "k" * 129, "é", "a\tb", "a\x7f", "\x00"])
def test_invalid_keys(key: str) -> None:
    """Keys are 1-128 printable ASCII characters."""
    with pytest.raises(InvalidArgument):
        lr.check_key(key)


def test_envelope_bound_keeps_stored_entries_in_their_limit() -> None:
    """The largest header (a head with a 128-character key) is at most 256 bytes, so a
    5 MiB record in its envelope fits STORED_ENTRY_SIZE_MAX_BYTES."""
    assert lr.ENVELOPE_MAX_BYTES <= 256
    (entry,) = lr.encode([b"x" * ENTRY_SIZE_MAX_BYTES], 1, "k" * 128, bytes(16))
    assert len(entry) == ENTRY_SIZE_MAX_BYTES + lr.ENVELOPE_MAX_BYTES
    assert len(entry) <= STORED_ENTRY_SIZE_MAX_BYTES


def test_encode_invariants() -> None:
    """At least one record; a key goes with a digest."""
    with pytest.raises(InvariantViolation):
        lr.encode([], 1)
    with pytest.raises(InvariantViolation):
        lr.encode([b"a"], 1, "k", None)


def test_visible_records_stop_at_the_first_batch_not_readable_whole() -> None:
    """visible_records gives the data of whole appends only and stops at the first
    entry whose batch goes past ``end`` (nothing after it can show)."""
    entries = list(
        enumerate([*lr.encode([b"a"], 1), *lr.encode([b"b", b"c", b"d"], 2), *lr.encode([b"e"], 3)])
    )
    assert list(lr.visible_records(entries, 4)) == [
        (0, b"a"),
        (1, b"b"),
        (2, b"c"),
        (3, b"d"),
        (4, b"e"),
    ]
    assert list(lr.visible_records(entries, 2)) == [(0, b"a")]
    assert list(lr.visible_records(entries, 3)) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]


_entries = st.one_of(
    st.binary(max_size=64),  # anything, envelopes or not
    st.builds(  # an old kind-0 continuation, or one cut short
        lambda remaining, data: bytes([lr.MAGIC, lr.KIND_CONTINUATION]) + remaining + data,
        st.binary(min_size=0, max_size=4),
        st.binary(max_size=16),
    ),
    st.builds(
        lambda payloads, key: lr.encode(
            payloads, 1234, key, None if key is None else lr.records_digest(payloads)
        ),
        st.lists(st.binary(max_size=16), min_size=1, max_size=4),
        st.one_of(st.none(), st.text("abc-_.", min_size=1, max_size=8)),
    ).flatmap(st.sampled_from),
    st.builds(  # a timed continuation cut anywhere
        lambda payloads, cut: lr.encode(payloads, 77)[1][:cut],
        st.lists(st.binary(max_size=16), min_size=2, max_size=3),
        st.integers(0, 30),
    ),
)


@given(entry=_entries, before=st.binary(max_size=8), after=st.binary(max_size=8))
def test_data_span_agrees_with_decode(entry: bytes, before: bytes, after: bytes) -> None:
    """The bulk reader's ``data_span`` finds the same data and ``remaining`` as
    ``decode``, wherever the entry sits in a larger buffer."""
    buffer = before + entry + after
    start, end = len(before), len(before) + len(entry)
    data_start, remaining = lr.data_span(buffer, start, end)
    record = lr.decode(entry)
    assert buffer[data_start:end] == record.data
    assert remaining == record.remaining
