"""The bulk binary range-read form: frames round-trip, whatever the chunking."""

from __future__ import annotations

import random

import pytest

from services.errors import InvalidArgument
from services.limits import STORED_ENTRY_SIZE_MAX_BYTES
from services.wire.entries_stream import FrameDecoder, encode_frames


def test_frames_round_trip_across_any_chunking() -> None:
    """Entries (empty ones included) come back whole and in order however the stream is
    cut into chunks, and nothing is left pending at the end."""
    rng = random.Random(7)
    entries = [(n * 3, rng.randbytes(rng.choice([0, 1, 100, 5000]))) for n in range(200)]
    data = encode_frames(entries)
    for _ in range(20):
        decoder, got, at = FrameDecoder(), [], 0
        while at < len(data):
            step = rng.randint(1, 9000)
            got += decoder.feed(data[at : at + step])
            at += step
        assert got == entries and decoder.pending == 0


def test_a_cut_stream_leaves_bytes_pending_and_a_huge_length_is_refused() -> None:
    """A stream cut inside a frame keeps the partial frame pending (a reader can tell the
    answer was cut short); a frame claiming more than an entry may hold is refused."""
    data = encode_frames([(1, b"abc"), (2, b"defg")])
    decoder = FrameDecoder()
    assert decoder.feed(data[:-2]) == [(1, b"abc")]
    assert decoder.pending > 0
    bad = (5).to_bytes(8, "big") + (STORED_ENTRY_SIZE_MAX_BYTES + 1).to_bytes(4, "big")
    with pytest.raises(InvalidArgument):
        FrameDecoder().feed(bad)


def test_feed_spans_are_the_frames_feed_cuts() -> None:
    """``feed_spans`` gives the bytes and spans ``feed`` cuts its payloads from, for any
    chunking; an unfinished frame waits for the next chunk."""
    entries = [(i, bytes([i]) * (i * 3)) for i in range(20)]
    body = encode_frames(entries)
    for size in (1, 5, 13, len(body)):
        decoder = FrameDecoder()
        got: list[tuple[int, bytes]] = []
        for at in range(0, len(body), size):
            data, spans = decoder.feed_spans(body[at : at + size])
            got += [(entry_id, data[start:end]) for entry_id, start, end in spans]
        assert got == entries and decoder.pending == 0


def test_feed_spans_takes_several_chunks_and_holds_an_unfinished_frame() -> None:
    """Chunks given together decode as if given one by one; a frame still unfinished
    gives no bytes and no spans until its last byte comes, then comes whole; the bytes
    given back may run past the last span (the next frame's start, also held)."""
    entries = [(0, b"a" * 10), (1, b"b" * 70_000), (2, b"c" * 3)]
    body = encode_frames(entries)
    pieces = [body[at : at + 1000] for at in range(0, len(body), 1000)]
    together = FrameDecoder()
    data, spans = together.feed_spans(*pieces)
    assert [(i, data[s:e]) for i, s, e in spans] == entries and together.pending == 0

    decoder = FrameDecoder()
    data, spans = decoder.feed_spans(pieces[0])
    assert [(i, data[s:e]) for i, s, e in spans] == entries[:1]
    assert len(data) == 1000 and decoder.pending == 1000 - spans[0][2]
    middle = pieces[1:-1]
    for piece in middle:  # entry 1 is not complete before the last piece
        assert decoder.feed_spans(piece) == (b"", [])
    data, spans = decoder.feed_spans(pieces[-1])
    assert [(i, data[s:e]) for i, s, e in spans] == entries[1:] and decoder.pending == 0
