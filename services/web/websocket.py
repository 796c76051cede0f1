"""The WebSocket protocol of the services that speak it (the gateway's streaming appends):
uvicorn's websockets-sansio protocol, with whole binary frames read without websockets'
parser (``QuireWebSocketProtocol.data_received``) and one ASGI extension.

``quire.websocket.send_texts`` (listed in the scope's ``extensions`` when the server
has it): the message ``{"type": "quire.websocket.send_texts", "texts": [...]}`` sends
each text as one text message, in order, in one socket write. A stream acknowledges a
whole group of records at once (up to 256 messages); each ``websocket.send`` went through
Starlette's and uvicorn's send in turn (state checks, an exception-handling wrapper, a
wait for the transport, a write), about an eighth of the gateway's CPU on a stream.
The frames are built by the websockets protocol object as for ``websocket.send``, so the
connection's state (open, closing) is checked the same way: after the close, or once
the client is gone, the message raises as ``websocket.send`` does (``ClientDisconnected``,
an ``OSError``).

``send_texts`` gives a Starlette WebSocket's sender for it, or None when the server has
no such extension (an in-process test client): then send one message at a time.

``quire.websocket.drain`` (also listed in ``extensions``): when the server shuts down
(SIGTERM), uvicorn's protocol sends close 1012 at once and drops the connection, so a
stream's records already taken lost their acknowledgements even when their adds then
succeeded (an HTTP request in progress, by contrast, is answered). Instead, an open
connection gets the message ``{"type": "websocket.receive", "quire.websocket.drain":
True}`` (a receive message, which Starlette passes on as it is), and the application
finishes and closes by itself; only if the connection is still open ``DRAIN_WAIT_S``
later does the protocol close it as uvicorn would (1012). The server's shutdown waits
for its connections, so this bounds a shutdown with open streams too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect
from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.exceptions import InvalidState
from websockets.http11 import Request
from websockets.protocol import State
from websockets.speedups import apply_mask

from services.web.limits import DRAIN_WAIT_S

SEND_TEXTS = "quire.websocket.send_texts"
DRAIN = "quire.websocket.drain"


# The first byte of a whole, unfragmented binary frame (FIN, no RSV bits, opcode 2).
_BINARY_WHOLE = 0x82


class QuireWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's websockets-sansio protocol with ``quire.websocket.send_texts`` and
    whole binary frames read without websockets' parser (see ``data_received``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Bytes after the upgrade request not yet handed on (at most one partial frame);
        # None before the request and once websockets failed the connection.
        self._framer: bytearray | None = None
        self._drain_timer: asyncio.TimerHandle | None = None  # once the shutdown began

    def data_received(self, data: bytes) -> None:
        """Frames as they arrive, cut at frame boundaries here: a whole binary message
        in one frame (a stream's record, nearly every frame a stream gets) goes to the
        application at once, unmasked; every other frame (text, control, fragments,
        one over the size limit, or any while the connection is not open) is handed
        whole, in order, to websockets' parser, which never sees a partial frame and so
        is at a frame boundary whenever the next one comes. Once websockets failed the
        connection (a protocol error), everything goes to it as before. websockets'
        generator parser cost about a fifth of the gateway's CPU on a stream."""
        framer = self._framer
        if framer is None:
            super().data_received(data)
            if self.handshake_initiated and self.conn.parser_exc is None:
                self._framer = bytearray()  # the upgrade request is read: frames follow
            return
        framer += data
        size = len(framer)
        conn = self.conn
        handed = pos = 0  # bytes before ``handed`` are handed on; ``pos``: the next frame
        while size - pos >= 2:
            head1 = framer[pos]
            head2 = framer[pos + 1]
            length = head2 & 0x7F
            start = pos + 2
            if length == 126:
                if size - pos < 4:
                    break
                length = int.from_bytes(framer[start : start + 2], "big")
                start += 2
            elif length == 127:
                if size - pos < 10:
                    break
                length = int.from_bytes(framer[start : start + 8], "big")
                start += 8
            limit = conn.max_message_size
            if limit is not None and length > limit:
                # websockets refuses it from its head (1009): nothing is buffered for it.
                if self._hand(bytes(framer[handed:])):
                    framer.clear()
                return
            masked = head2 & 0x80
            end = start + (4 if masked else 0) + length
            if end > size:
                break
            if (
                head1 == _BINARY_WHOLE
                and masked
                and conn.state is State.OPEN
                and conn.current_size is None
                and not conn.extensions
                and not self.close_sent
            ):
                if handed < pos:
                    if not self._hand(bytes(framer[handed:pos])):
                        return
                    handed = pos
                    continue  # websockets' frames may have changed the state: look again
                self._deliver(apply_mask(framer[start + 4 : end], framer[start : start + 4]))
                handed = end
            pos = end
        if handed < pos and not self._hand(bytes(framer[handed:pos])):
            return
        del framer[:pos]

    def _hand(self, frames: bytes) -> bool:
        """Hand whole frames to websockets (uvicorn's own path); False when they failed
        the connection: then the rest goes to websockets too, as it comes."""
        super().data_received(frames)
        if self.conn.parser_exc is None:
            return True
        self._framer = None
        return False

    def _deliver(self, data: bytes) -> None:
        """A whole binary message to the application, as uvicorn queues one."""
        self.queue.put_nowait({"type": "websocket.receive", "bytes": data})
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)  # none when the handshake was refused
        if scope is not None:
            scope["extensions"][SEND_TEXTS] = {}
            scope["extensions"][DRAIN] = {}

    def shutdown(self) -> None:
        """The server shuts down: ask an open connection's application to finish (the
        module docstring, ``quire.websocket.drain``); close it as uvicorn does (1012)
        when it has not closed within ``DRAIN_WAIT_S``, or at once when it is not open."""
        if self._drain_timer is not None or not self.handshake_complete or self.close_sent:
            super().shutdown()
            return
        self._drain_timer = self.loop.call_later(DRAIN_WAIT_S, self._drain_expired)
        drain: Any = {"type": "websocket.receive", DRAIN: True}  # a receive event plus our key
        self.queue.put_nowait(drain)

    def _drain_expired(self) -> None:
        if not self.transport.is_closing():
            super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        super().connection_lost(exc)

    async def send(self, message: Any) -> None:
        if message["type"] != SEND_TEXTS:
            await super().send(message)
            return
        await self.writable.wait()
        if self.disconnected:
            raise ClientDisconnected()
        if not self.handshake_complete or self.close_sent or self.initial_response is not None:
            raise RuntimeError(f"'{SEND_TEXTS}' is for an accepted, open connection")
        try:
            for text in message["texts"]:
                self.conn.send_text(text.encode())
        except InvalidState:
            raise ClientDisconnected() from None
        self.transport.write(b"".join(self.conn.data_to_send()))


def send_texts(ws: WebSocket) -> Callable[[list[str]], Awaitable[None]] | None:
    """A sender of many text messages in one go on ``ws`` (see the module docstring), or
    None when its server has no ``quire.websocket.send_texts``. Sent past Starlette's
    own ``send`` (which knows only the standard messages), on the ASGI ``send`` it
    holds: a gone client raises Starlette's ``WebSocketDisconnect`` (1006), as
    ``send_text`` does."""
    if SEND_TEXTS not in ws.scope.get("extensions", {}):
        return None
    send = ws._send  # noqa: SLF001 - the connection's ASGI send

    async def sender(texts: list[str]) -> None:
        try:
            await send({"type": SEND_TEXTS, "texts": texts})
        except OSError:
            raise WebSocketDisconnect(code=1006) from None

    return sender
