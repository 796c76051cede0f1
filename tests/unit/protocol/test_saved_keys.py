"""The keys of a closed log ledger as saved for a new writer (services/protocol/
saved_keys.py): the summary holds exactly the whole keyed appends a scan of the ledger
finds, segments decode to what was encoded, and the bounds hold."""

from __future__ import annotations

import pytest

from services.errors import InvalidArgument, InvariantViolation
from services.protocol import log_records as lr
from services.protocol import saved_keys as sk


def keyed(key: str, payloads: list[bytes], at_ms: int) -> list[bytes]:
    return list(lr.encode(payloads, at_ms, key, lr.records_digest(payloads)))


def numbered(entries: list[bytes]) -> list[tuple[int, bytes]]:
    return list(enumerate(entries))


def test_a_summary_holds_the_whole_keyed_appends_and_the_stamps() -> None:
    """Keyed appends with their entry id, length and digest; unkeyed appends and entries
    without an envelope only count for the stamps (or not at all); a batch cut short
    at the ledger's end is left out, as a scan leaves it out."""
    entries = (
        keyed("a", [b"x"], 1000)
        + list(lr.encode([b"n"], 1001))
        + [b"not a log record"]
        + keyed("b", [b"p", b"q"], 1002)
        + keyed("cut", [b"r", b"s"], 1003)[:1]
    )
    summary = sk.summarise(7, len(entries) - 1, numbered(entries))
    assert [(h.key, h.entry_id, h.remaining, h.time_ms) for h in summary.heads] == [
        ("a", 0, 0, 1000),
        ("b", 3, 1, 1002),
    ]
    assert summary.heads[1].digest == lr.records_digest([b"p", b"q"])
    assert (summary.oldest_ms, summary.newest_ms) == (1000, 1003)
    empty = sk.summarise(8, -1, [])
    assert empty.heads == () and empty.oldest_ms is None and empty.newest_ms is None


def test_a_summary_needs_every_entry_of_the_ledger() -> None:
    """A summary made from fewer entries than the ledger holds would miss keys: refused."""
    entries = keyed("a", [b"x"], 1000) + keyed("b", [b"y"], 1000)
    with pytest.raises(InvariantViolation):
        sk.summarise(7, 1, numbered(entries[:1]))


def test_segments_decode_to_what_was_encoded_and_refuse_garbage() -> None:
    ledgers = [
        sk.summarise(1, 1, numbered(keyed("k" * 128, [b"x", b"y"], 5))),
        sk.summarise(2, -1, []),
        sk.summarise(3, 0, numbered(list(lr.encode([b"n"], 9)))),
    ]
    data = sk.encode_segment(ledgers)
    assert sk.decode_segment(data) == ledgers
    for bad in (b"", data[:-1], data + b"\0", b"\x02" + data[1:]):
        with pytest.raises(InvalidArgument):
            sk.decode_segment(bad)


def test_a_segment_stays_within_its_bounds() -> None:
    """A segment takes at most SEGMENT_LEDGERS_MAX ledgers and SEGMENT_BYTES_MAX bytes; a
    ledger whose keys alone exceed the bytes is not savable."""
    one = sk.summarise(1, 0, numbered(keyed("k", [b"x"], 5)))
    full = [one] * sk.SEGMENT_LEDGERS_MAX
    assert sk.fits(full[:-1], one) and not sk.fits(full, one)
    heads = tuple(sk.SavedHead("k" * 128, i, 0, 5, b"\0" * lr.DIGEST_BYTES) for i in range(2_000))
    huge = sk.SavedLedger(2, 1_999, 5, 5, heads)
    assert not sk.savable(huge) and sk.savable(one)
    assert len(sk.encode_segment(full)) == 3 + sum(s.encoded_size() for s in full)
