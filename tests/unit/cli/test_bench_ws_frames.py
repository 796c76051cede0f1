"""The stream load generator's RFC 6455 client side (services/bench/ws_frames.py), checked
against the ``websockets`` library's own frame code: what we send, it reads as the
same masked messages; what it sends, we read back whole however the bytes are split."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.frames import Frame, Opcode
from websockets.streams import StreamReader
from websockets.utils import accept_key

from services.bench.ws_frames import (
    OP_BINARY,
    OP_PING,
    OP_TEXT,
    FrameError,
    FrameReader,
    check_handshake,
    encode_frame,
    handshake,
)


def _parse_client_frame(data: bytes) -> Frame:
    """``data`` read as the server reads a client's frame (mask required)."""
    reader = StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    parser = Frame.parse(reader.read_exact, mask=True)
    try:
        next(parser)
    except StopIteration as done:
        assert reader.at_eof()  # the frame used every byte
        return done.value
    raise AssertionError("frame incomplete")


@pytest.mark.parametrize("size", [0, 1, 125, 126, 1024, 65535, 65536, 200_000])
def test_our_frames_are_masked_frames_the_server_reads(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    frame = _parse_client_frame(encode_frame(OP_BINARY, payload))
    assert (frame.opcode, frame.fin, frame.data) == (Opcode.BINARY, True, payload)


def test_each_frame_has_its_own_mask() -> None:
    first, second = encode_frame(OP_TEXT, b"x" * 200), encode_frame(OP_TEXT, b"x" * 200)
    assert first[4:8] != second[4:8]  # the keys (after a 2-byte head and 16-bit length)


def _messages(draw_sizes: list[int]) -> tuple[bytes, list[tuple[int, bytes]]]:
    """Server frames: a text message per size, every third one in two fragments with a
    ping between them; the bytes and the messages a reader must return."""
    wire, expected = b"", []
    for i, size in enumerate(draw_sizes):
        payload = (b"%d:" % i + b"a" * size)[: max(size, 1)]
        if i % 3 == 2 and len(payload) > 1:
            half = len(payload) // 2
            wire += Frame(Opcode.TEXT, payload[:half], fin=False).serialize(mask=False)
            wire += Frame(Opcode.PING, b"p").serialize(mask=False)
            wire += Frame(Opcode.CONT, payload[half:]).serialize(mask=False)
            expected += [(OP_PING, b"p"), (OP_TEXT, payload)]
        else:
            wire += Frame(Opcode.TEXT, payload).serialize(mask=False)
            expected.append((OP_TEXT, payload))
    return wire, expected


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([1, 20, 125, 126, 127, 4000, 65535, 65536]), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=300_000), max_size=12),
)
def test_server_frames_come_back_whole_however_the_bytes_are_split(
    sizes: list[int], cuts: list[int]
) -> None:
    wire, expected = _messages(sizes)
    reader = FrameReader()
    got: list[tuple[int, bytes]] = []
    start = 0
    for cut in sorted({min(c, len(wire)) for c in cuts} | {len(wire)}):
        got += reader.feed(wire[start:cut])
        start = cut
    assert got == expected
    assert not reader.buffer and not reader.fragments


@pytest.mark.parametrize(
    ("wire", "problem"),
    [
        (Frame(Opcode.TEXT, b"hi").serialize(mask=True), "masked"),
        (bytes([0x81 | 0x40, 2]) + b"hi", "reserved"),
        (Frame(Opcode.CONT, b"hi").serialize(mask=False), "continuation"),
        (
            Frame(Opcode.TEXT, b"a", fin=False).serialize(mask=False)
            + Frame(Opcode.TEXT, b"b").serialize(mask=False),
            "before the last one ended",
        ),
        (bytes([0x81, 127]) + (1 << 40).to_bytes(8, "big"), "bytes"),
        (bytes([0x09, 0]), "control"),  # a fragmented ping
    ],
    ids=lambda v: v if isinstance(v, str) else "",  # a masked frame's bytes are random
)
def test_frames_a_server_must_not_send_are_refused(wire: bytes, problem: str) -> None:
    with pytest.raises(FrameError, match=problem):
        FrameReader().feed(wire)


def test_handshake_accepts_only_the_answer_to_its_key() -> None:
    request, key = handshake("127.0.0.1", 3200, "/v1/logs/a/stream", {"Authorization": "B x"})
    assert request.startswith(b"GET /v1/logs/a/stream HTTP/1.1\r\n")
    assert b"\r\nSec-WebSocket-Key: " + key + b"\r\n" in request
    assert b"\r\nAuthorization: B x\r\n" in request and request.endswith(b"\r\n\r\n")
    good = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: "
    check_handshake(good + accept_key(key.decode()).encode() + b"\r\n\r\n", key)
    with pytest.raises(FrameError, match="does not match"):
        check_handshake(good + accept_key("b3RoZXIga2V5IGhlcmUhIQ==").encode() + b"\r\n\r\n", key)
    with pytest.raises(FrameError, match="refused the stream.*401"):
        check_handshake(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n", key)
