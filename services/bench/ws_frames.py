"""The client side of RFC 6455 for the stream load generator (services/bench/stream_load.py):
the opening handshake, masked frames out and frames in, as plain functions over bytes.

The generator sends thousands of records a second on one connection; through the
``websockets`` library's asyncio client each record cost it about 40 us of CPU (a send
coroutine and its lock, the receiving task's queue, a semaphore), about a sixth of this
2-core machine at 8,000 records/s, taken from the gateway and bookies it measures. Here
a record is one ``encode_frame`` (the mask applied by ``websockets``' own C speedup) and
an acknowledgement one slice of the read buffer.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from dataclasses import dataclass, field

from websockets.speedups import apply_mask

from services.bench.limits import MESSAGE_MAX_BYTES

OP_CONTINUATION = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA
CLOSE_NORMAL = 1000
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class FrameError(Exception):
    """The server sent something that is not RFC 6455 as a client must accept it."""


def handshake(host: str, port: int, path: str, headers: dict[str, str]) -> tuple[bytes, bytes]:
    """The opening handshake's request, and the key its answer must accept."""
    key = base64.b64encode(os.urandom(16))
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key.decode()}\r\n"
        f"Sec-WebSocket-Version: 13\r\n{extra}\r\n"
    ).encode("latin-1")
    return request, key


def check_handshake(head: bytes, key: bytes) -> None:
    """Raise ``FrameError`` unless ``head`` (the answer through its blank line) switches
    protocols for ``key``."""
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 101"):
        raise FrameError(f"the server refused the stream: {lines[0][:80]!r}")
    accept = base64.b64encode(hashlib.sha1(key + _GUID).digest())
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"sec-websocket-accept" and value.strip() == accept:
            return
    raise FrameError("the server's Sec-WebSocket-Accept does not match our key")


def encode_frame(opcode: int, payload: bytes) -> bytes:
    """One final, masked frame (a client's frames are masked, each with a new key)."""
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    return head + mask + apply_mask(payload, mask)


@dataclass(slots=True)
class FrameReader:
    """Messages out of the bytes a server sends: ``feed`` returns the complete ones as
    (opcode, payload), fragments joined, control frames as they come."""

    buffer: bytearray = field(default_factory=bytearray)
    fragments: list[bytes] = field(default_factory=list)
    fragment_opcode: int = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        buffer = self.buffer
        buffer += data
        messages: list[tuple[int, bytes]] = []
        pos, end = 0, len(buffer)
        while end - pos >= 2:
            first, second = buffer[pos], buffer[pos + 1]
            if second & 0x80:
                raise FrameError("a server's frame is masked")
            if first & 0x70:
                raise FrameError("reserved bits set (no extension was agreed)")
            length, at = second & 0x7F, pos + 2
            if length == 126:
                if end - at < 2:
                    break
                (length,) = struct.unpack_from("!H", buffer, at)
                at += 2
            elif length == 127:
                if end - at < 8:
                    break
                (length,) = struct.unpack_from("!Q", buffer, at)
                at += 8
            if length > MESSAGE_MAX_BYTES:
                raise FrameError(f"a frame of {length} bytes")
            if end - at < length:
                break
            payload = bytes(buffer[at : at + length])
            pos = at + length
            self._frame(first & 0x80 != 0, first & 0x0F, payload, messages)
        del buffer[:pos]
        return messages

    def _frame(self, final: bool, opcode: int, payload: bytes, out: list) -> None:
        if opcode >= OP_CLOSE:
            if not final or len(payload) > 125:
                raise FrameError("a fragmented or long control frame")
            out.append((opcode, payload))
        elif opcode == OP_CONTINUATION:
            if not self.fragments:
                raise FrameError("a continuation frame with no message to continue")
            self.fragments.append(payload)
            if sum(map(len, self.fragments)) > MESSAGE_MAX_BYTES:
                raise FrameError(f"a message over {MESSAGE_MAX_BYTES} bytes")
            if final:
                out.append((self.fragment_opcode, b"".join(self.fragments)))
                self.fragments = []
        elif self.fragments:
            raise FrameError("a new message before the last one ended")
        elif final:
            out.append((opcode, payload))
        else:
            self.fragment_opcode = opcode
            self.fragments = [payload]
