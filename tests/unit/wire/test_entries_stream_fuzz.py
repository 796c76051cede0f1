"""Fuzzing the bulk range-read decoder (``services.wire.entries_stream.FrameDecoder``, the
client side of ``application/vnd.quire.entries`` that services/spark reads with): for any
byte stream, cut into chunks anywhere, it yields exactly the frames the format defines,
in order, the same whatever the chunking, or raises ``InvalidArgument``; never another
exception, and it holds no more memory than the bytes it was given.

The oracle is ``reference_frames``, the module docstring's format written plainly.
"""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.errors import InvalidArgument
from services.limits import ID_MAX, STORED_ENTRY_SIZE_MAX_BYTES
from services.wire.entries_stream import HEADER_BYTES, FrameDecoder, encode_frames
from tests.unit.wire.fuzz_support import damage_bytes

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
Frames = list[tuple[int, bytes]]


def reference_frames(data: bytes) -> tuple[Frames, bool, int]:
    """The frames of a stream by the module docstring of services/wire/entries_stream.py:
    (the whole frames before the first bad header, whether there is a bad header, the
    bytes of an unfinished last frame). A header is bad when its length is over
    STORED_ENTRY_SIZE_MAX_BYTES or its entry id is not an id (over 2^63 - 1)."""
    frames: Frames = []
    at = 0
    while len(data) - at >= HEADER_BYTES:
        entry_id = int.from_bytes(data[at : at + 8], "big")
        length = int.from_bytes(data[at + 8 : at + 12], "big")
        if length > STORED_ENTRY_SIZE_MAX_BYTES or entry_id > ID_MAX:
            return frames, True, 0
        if len(data) - at - HEADER_BYTES < length:
            break
        frames.append((entry_id, data[at + HEADER_BYTES : at + HEADER_BYTES + length]))
        at += HEADER_BYTES + length
    return frames, False, len(data) - at


def feed_all(data: bytes, cuts: list[int]) -> tuple[Frames, bool, int]:
    """Feed ``data`` to one decoder in chunks cut at ``cuts``: (every frame it returned,
    whether it raised InvalidArgument, its pending bytes). It stops at the error, as a
    reader does; any other exception fails the test."""
    decoder, frames = FrameDecoder(), []
    bounds = [0, *sorted(set(cuts)), len(data)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        try:
            frames += decoder.feed(data[start:end])
        except InvalidArgument as exc:
            assert exc.http_status == 400 and exc.message
            return frames, True, 0
    return frames, False, decoder.pending


entries = st.lists(st.tuples(st.integers(0, ID_MAX), st.binary(max_size=300)), max_size=12)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    """Valid streams damaged: cut, bits flipped, bytes overwritten, a length or an entry
    id set to an extreme, junk appended; or plain random bytes."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=400))
    data = bytearray(encode_frames(draw(entries)))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["cut", "flip", "byte", "length", "entry_id", "junk"]))
        if damage_bytes(draw, data, kind):
            continue
        if kind in ("length", "entry_id") and len(data) >= HEADER_BYTES:
            # Overwrite a header at a frame boundary found by the reference parser.
            frames, _, _ = reference_frames(bytes(data))
            starts = [0]
            for _, payload in frames:
                starts.append(starts[-1] + HEADER_BYTES + len(payload))
            at = draw(st.sampled_from([s for s in starts if len(data) - s >= HEADER_BYTES] or [0]))
            if kind == "length":
                value = draw(
                    st.sampled_from([STORED_ENTRY_SIZE_MAX_BYTES + 1, U32_MAX, 2**31])
                    | st.integers(0, U32_MAX)
                )
                data[at + 8 : at + 12] = value.to_bytes(4, "big")
            else:
                value = draw(
                    st.sampled_from([ID_MAX, ID_MAX + 1, U64_MAX]) | st.integers(0, U64_MAX)
                )
                data[at : at + 8] = value.to_bytes(8, "big")
        elif kind == "junk":
            data += draw(st.binary(max_size=HEADER_BYTES + 4))
    return bytes(data)


@given(entries, st.lists(st.integers(0, 10_000), max_size=20))
def test_round_trip_is_identity_under_any_chunking(frames: Frames, cuts: list[int]) -> None:
    """encode_frames then feeding the stream in any chunks gives back the entries, in
    order, with nothing pending."""
    data = encode_frames(frames)
    cuts = [c % (len(data) + 1) for c in cuts]
    assert feed_all(data, cuts) == (frames, False, 0)


@given(streams(), st.lists(st.integers(0, 10_000), max_size=20))
def test_any_stream_decodes_exactly_whatever_the_chunking(data: bytes, cuts: list[int]) -> None:
    """Any stream, in one chunk or cut anywhere: exactly the reference frames and pending
    bytes; a bad header raises InvalidArgument, and the frames returned before it are
    the ones before the bad header (all of them when they came in earlier chunks)."""
    want_frames, want_error, want_pending = reference_frames(data)
    whole = feed_all(data, [])
    assert whole == ([] if want_error else want_frames, want_error, want_pending)
    got_frames, got_error, got_pending = feed_all(data, [c % (len(data) + 1) for c in cuts])
    assert got_error == want_error and got_pending == want_pending
    if want_error:
        assert got_frames == want_frames[: len(got_frames)]
    else:
        assert got_frames == want_frames


@given(st.lists(st.binary(max_size=50), max_size=60))
def test_random_chunks_never_raise_anything_but_invalid_argument(chunks: list[bytes]) -> None:
    """Random chunks, fed as they come: only InvalidArgument, and the same frames as the
    stream they make (the decoder keeps no state but its buffer)."""
    data = b"".join(chunks)
    cuts, at = [], 0
    for chunk in chunks:
        at += len(chunk)
        cuts.append(at)
    want_frames, want_error, want_pending = reference_frames(data)
    got_frames, got_error, got_pending = feed_all(data, cuts)
    assert (got_error, got_pending) == (want_error, want_pending)
    assert got_frames == (want_frames[: len(got_frames)] if want_error else want_frames)


def test_an_entry_id_past_the_largest_id_is_refused() -> None:
    """Regression (found by this fuzzing): a frame whose u64 entry id is over 2^63 - 1
    (no entry has one) came back as an entry; it is refused like a bad length."""
    for entry_id in (ID_MAX + 1, U64_MAX):
        bad = entry_id.to_bytes(8, "big") + (3).to_bytes(4, "big") + b"abc"
        with pytest.raises(InvalidArgument, match="entry id"):
            FrameDecoder().feed(bad)
    assert FrameDecoder().feed(encode_frames([(ID_MAX, b"abc")])) == [(ID_MAX, b"abc")]


@pytest.mark.parametrize("length", [STORED_ENTRY_SIZE_MAX_BYTES, U32_MAX])
def test_a_huge_length_prefix_allocates_nothing(length: int) -> None:
    """A frame claiming up to 4 GiB, followed by 1 KiB fed a byte at a time: the decoder
    waits (length at the limit) or refuses (over it) and never allocates for the claim:
    peak allocation stays under 64 KiB."""
    decoder = FrameDecoder()
    header = (7).to_bytes(8, "big") + length.to_bytes(4, "big")
    tracemalloc.start()
    try:
        if length > STORED_ENTRY_SIZE_MAX_BYTES:
            with pytest.raises(InvalidArgument):
                decoder.feed(header)
        else:
            assert decoder.feed(header) == []
            for _ in range(1024):
                assert decoder.feed(b"x") == []
            assert decoder.pending == HEADER_BYTES + 1024
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak
