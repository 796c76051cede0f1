"""The bulk binary form of a range read (``Accept: application/vnd.quire.entries``).

The answer streams one frame per entry, in entry order, nothing else:

    entry_id  u64  big-endian, <= 2^63 - 1 (ids are non-negative signed 64-bit integers)
    length    u32  big-endian, <= STORED_ENTRY_SIZE_MAX_BYTES
    payload   length bytes

No base64, no JSON: a reader copies the payloads out of the byte stream. The gateway
sends the readable end it used in the ``X-Last-Add-Confirmed`` header.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from services.errors import InvalidArgument
from services.limits import ID_MAX, STORED_ENTRY_SIZE_MAX_BYTES

MEDIA_TYPE = "application/vnd.quire.entries"
_HEADER = struct.Struct(">QI")
HEADER_BYTES = _HEADER.size


def encode_frames(entries: Iterable[tuple[int, bytes]]) -> bytes:
    """The frames of ``entries`` ((entry id, payload) pairs), concatenated."""
    parts: list[bytes] = []
    for entry_id, payload in entries:
        parts.append(_HEADER.pack(entry_id, len(payload)))
        parts.append(payload)
    return b"".join(parts)


class FrameDecoder:
    """Decodes frames from chunks of a byte stream as they arrive."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[tuple[int, bytes]]:
        """The whole frames completed by ``chunk`` (a frame may span chunks) as
        ``(entry id, payload)``, or ``InvalidArgument`` at a header no frame may have (a
        length over the entry limit, an entry id past ``ID_MAX``). Nothing is allocated
        by a header's length: a frame waits in the buffer until its bytes have come."""
        data, spans = self.feed_spans(chunk)
        return [(entry_id, data[start:end]) for entry_id, start, end in spans]

    def feed_spans(self, *chunks: bytes) -> tuple[bytes, list[tuple[int, int, int]]]:
        """``feed`` without cutting the payloads out: bytes holding the frames completed
        by ``chunks`` (received in that order) and each one's ``(entry id, payload
        start, payload end)`` in them. A reader that keeps only part of each payload (the
        Spark reader drops the log envelope) then copies each payload once, and only what
        it keeps. The bytes may go on past the last span: that is the start of a frame
        not yet complete, also kept for the next call. Each byte received is copied at
        most twice (the frame held back, then joined to what completes it), none when
        one chunk comes with nothing held back."""
        held = self._buffer
        if held and len(held) >= HEADER_BYTES:
            _, length = _HEADER.unpack_from(held)  # checked when it was held back
            if len(held) + sum(map(len, chunks)) < HEADER_BYTES + length:
                for chunk in chunks:  # still unfinished: no copy of what is held
                    held += chunk
                return b"", []
        if held or len(chunks) != 1:
            data = b"".join((held, *chunks))
            held.clear()
        else:
            data = bytes(chunks[0])  # no copy for bytes
        spans: list[tuple[int, int, int]] = []
        at = 0
        end = len(data)
        unpack, append = _HEADER.unpack_from, spans.append
        while end - at >= HEADER_BYTES:
            entry_id, length = unpack(data, at)
            if length > STORED_ENTRY_SIZE_MAX_BYTES or entry_id > ID_MAX:
                raise InvalidArgument(_bad_header(entry_id, length))
            start = at + HEADER_BYTES
            if end - start < length:
                break
            at = start + length
            append((entry_id, start, at))
        if at < end:
            with memoryview(data) as view:
                held += view[at:]
        return data, spans

    @property
    def pending(self) -> int:
        """Bytes of an unfinished frame held back (0 at a clean end of stream)."""
        return len(self._buffer)


def _bad_header(entry_id: int, length: int) -> str:
    if entry_id > ID_MAX:
        return f"frame header with entry id {entry_id}, past the largest id {ID_MAX}"
    return f"frame of entry {entry_id} claims {length} bytes, over {STORED_ENTRY_SIZE_MAX_BYTES}"
