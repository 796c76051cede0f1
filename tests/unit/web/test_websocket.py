"""The gateway's WebSocket protocol (services/web/websocket.py) against uvicorn's own:
the same frames, cut into the same pieces, give the application the same messages and
the client the same answers (pongs, closes), whatever the frames are (binary, text,
fragmented, control, masked or not, over the size limit) and wherever the pieces end."""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.frames import Close, Frame, Opcode

from services.web.websocket import QuireWebSocketProtocol
from tests.unit.web.test_server import FakeTransport

MAX_SIZE = 70_000  # above 65,535: both the 16-bit and the 64-bit lengths are in play
KEY = base64.b64encode(os.urandom(16))
UPGRADE = (
    b"GET /s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: " + KEY + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


async def feed(cls: type[WebSocketsSansIOProtocol], pieces: list[bytes]) -> Any:
    done = asyncio.Event()

    async def accept_only(scope: Any, receive: Any, send: Any) -> None:
        """Accepts, then reads nothing until the end: every message stays queued."""
        await receive()
        await send({"type": "websocket.accept"})
        await done.wait()

    config = uvicorn.Config(
        accept_only, ws=cls, ws_max_size=MAX_SIZE, ws_per_message_deflate=False, log_config=None
    )
    config.load()
    proto = cls(config=config, server_state=ServerState(), app_state={})
    transport = FakeTransport(("127.0.0.1", 5000))
    proto.connection_made(transport)  # type: ignore[arg-type]
    proto.data_received(UPGRADE)
    for _ in range(1_000):  # until the application accepted (bounded)
        if proto.handshake_complete:
            break
        await asyncio.sleep(0)
    assert proto.handshake_complete
    handshake = bytes(transport.written)
    for piece in pieces:
        proto.data_received(piece)
    messages = []
    while not proto.queue.empty():
        messages.append(proto.queue.get_nowait())
    answers = bytes(transport.written[len(handshake) :])
    result = messages, answers, proto.conn.state, transport.closed
    done.set()  # the application returns: its task ends, nothing left running
    await asyncio.gather(*proto.tasks)
    return result


def outcome(cls: type[WebSocketsSansIOProtocol], pieces: list[bytes]) -> Any:
    return asyncio.run(feed(cls, pieces))


def frame(opcode: Opcode, data: bytes, fin: bool = True, mask: bool = True) -> bytes:
    return Frame(opcode, data, fin).serialize(mask=mask, extensions=[])


payloads = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([125, 126, 127, 65_535, 65_536, MAX_SIZE, MAX_SIZE + 1]).map(
        lambda n: b"p" * n
    ),
)
frames = st.one_of(
    payloads.map(lambda p: frame(Opcode.BINARY, p)),
    payloads.map(lambda p: frame(Opcode.BINARY, p, fin=False)),
    payloads.map(lambda p: frame(Opcode.CONT, p)),
    payloads.map(lambda p: frame(Opcode.CONT, p, fin=False)),
    st.text(max_size=50).map(lambda t: frame(Opcode.TEXT, t.encode())),
    st.binary(max_size=20).map(lambda p: frame(Opcode.PING, p)),
    st.binary(max_size=20).map(lambda p: frame(Opcode.PONG, p)),
    st.binary(max_size=50).map(lambda p: frame(Opcode.BINARY, p, mask=False)),
    st.just(frame(Opcode.CLOSE, Close(1000, "bye").serialize())),
    st.just(b"\xff\x80\x00\x00\x00\x00"),  # a bad opcode
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(frames, max_size=12), st.lists(st.integers(0, 200_000), max_size=6))
def test_the_same_frames_give_the_same_messages_and_answers(
    sequence: list[bytes], cuts: list[int]
) -> None:
    data = b"".join(sequence)
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    pieces = [data[a:b] for a, b in zip(points, points[1:], strict=False)]
    ours = outcome(QuireWebSocketProtocol, pieces)
    theirs = outcome(WebSocketsSansIOProtocol, pieces)
    assert ours[1:] == theirs[1:]  # the answers written (pongs, closes) and the state
    if not any(m["type"] == "websocket.disconnect" for m in theirs[0]):
        assert ours[0] == theirs[0]  # the application's messages
        return

    # A protocol error: the application gets the same first disconnect (uvicorn may
    # queue more of them, one per later read); uvicorn drops the messages parsed in the
    # read that failed, ours has delivered the records before the bad frame.
    def split(messages: list[dict[str, Any]]) -> tuple[list[Any], Any]:
        ends = [i for i, m in enumerate(messages) if m["type"] == "websocket.disconnect"]
        return messages[: ends[0]], messages[ends[0]]

    (our_data, our_end), (their_data, their_end) = split(ours[0]), split(theirs[0])
    assert our_end == their_end
    assert our_data[: len(their_data)] == their_data


def test_records_in_one_read_are_delivered_in_order_without_the_parser() -> None:
    """The stream's case: whole binary frames, many per read, one split mid-frame."""
    records = [os.urandom(n) for n in (0, 1, 125, 126, 1024, 65_535, 65_536)]
    data = b"".join(frame(Opcode.BINARY, r) for r in records)
    messages, written, _, closed = outcome(QuireWebSocketProtocol, [data[:3000], data[3000:]])
    assert [m["bytes"] for m in messages] == records
    assert written == b"" and not closed
