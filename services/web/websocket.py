"""The WebSocket protocol of the services that speak it (the gateway's streaming appends):
uvicorn's websockets-sansio protocol, plus one ASGI extension.

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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect
from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.exceptions import InvalidState
from websockets.http11 import Request

SEND_TEXTS = "quire.websocket.send_texts"


class QuireWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's websockets-sansio protocol with ``quire.websocket.send_texts``."""

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)  # none when the handshake was refused
        if scope is not None:
            scope["extensions"][SEND_TEXTS] = {}

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
