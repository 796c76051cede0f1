"""Fewer socket writes: one for an answer's head and its body; one per loop turn for a
WebSocket connection's frames.

Uvicorn writes an answer in two transport writes: the head when the application sends
``http.response.start``, the body when it sends ``http.response.body``. On loopback
each write is a ``send`` system call and a segment the peer wakes up for, so a small
JSON answer (an add's acknowledgement, a bookie's ``{"stored": 1, ...}``) costs two of
each. ``HeadHoldingTransport`` is the transport one request/answer cycle writes
through: it holds the head until the next write and sends both together.

The head is never held for long: if no body write follows in the same turn of the
event loop (a streamed answer that waits for its first chunk, an application that
fails after starting its answer), it goes out alone on the next turn. ``close`` sends
it first. A ``100 Continue`` interim answer is never held (the client waits for it
before sending its body). Bodies over ``COALESCE_JOIN_MAX_BYTES`` go in a second write rather
than being copied behind the head.

``CoalescingTransport`` is the transport a WebSocket connection writes through: every
frame written during one turn of the event loop goes out in one write at the end of
it. A streaming append acknowledges a whole group of records at once (one frame per
record, up to 256), which were as many ``send`` calls, and as many segments for the
client to wake up for. ``close`` sends what is buffered first.

Both save system calls and wake-ups: a bookie answering single adds writes twice per add
instead of three times (head, body, and the writer thread's wake-up of the loop), and a
stream's records cost the gateway less CPU (benchmarks/README.md, "Measured choices").
"""

from __future__ import annotations

import asyncio
from typing import Any

from services.web.limits import COALESCE_JOIN_MAX_BYTES

_INTERIM = b"HTTP/1.1 1"


class _HoldingTransport:
    """A transport that holds some writes back (``flush`` sends them): ``close`` sends
    them first, and everything but ``write`` and ``close`` goes to the wrapped transport
    unchanged."""

    __slots__ = ("_transport", "_loop")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop

    def flush(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class HeadHoldingTransport(_HoldingTransport):
    """Wraps a connection's transport for one request/answer cycle (module docstring)."""

    __slots__ = ("_head", "_sent_head")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(transport, loop)
        self._head: bytes | None = None
        self._sent_head = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        head = self._head
        if head is not None:
            self._head = None
            if len(data) <= COALESCE_JOIN_MAX_BYTES:
                self._transport.write(head + bytes(data))
            else:
                self._transport.write(head)
                self._transport.write(data)
            return
        if not self._sent_head and bytes(data[: len(_INTERIM)]) != _INTERIM:
            self._sent_head = True
            self._head = bytes(data)
            self._loop.call_soon(self.flush)
            return
        self._transport.write(data)

    def flush(self) -> None:
        """Send a held head now (nothing if there is none)."""
        head, self._head = self._head, None
        if head is not None and not self._transport.is_closing():
            self._transport.write(head)


class CoalescingTransport(_HoldingTransport):
    """Wraps a WebSocket connection's transport (module docstring): writes made in one
    loop turn leave together, on the next."""

    __slots__ = ("_buffer",)

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(transport, loop)
        self._buffer: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._buffer:
            self._loop.call_soon(self.flush)
        self._buffer.append(bytes(data))

    def flush(self) -> None:
        """Write what is buffered now, in one write."""
        if not self._buffer:
            return
        data = b"".join(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        self._buffer.clear()
        if not self._transport.is_closing():
            self._transport.write(data)
