"""The streaming append routes: ``GET /v1/ledgers/{id}/stream`` and
``GET /v1/logs/{name}/stream``, upgraded to WebSocket (``gateway/streams/session.py`` has the
protocol). A plain GET of these paths (no upgrade) is 400 ``invalid_argument``.

Each connection is accepted first, so that every refusal is a message with docs/api.md's
error code and a close code a browser can read (4000 + the HTTP status), never a
failed handshake: the token (``gateway/http/auth.py``: 401, or 403 for a scope that does
not allow appending there), then the target (400 bad id or name,
404, the ledger password: 401, this gateway not the writer: 409), then the credits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request, WebSocket
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect

from gateway import operations as ops
from gateway.http.auth import websocket_authorization
from gateway.http.deps import _is_canonical
from gateway.logs.answers import writer_for_stream
from gateway.passwords import client_address
from gateway.service import Gateway
from gateway.streams.session import (
    CLOSE_SERVICE_RESTART,
    Draining,
    StreamSession,
    Target,
    receive_auth,
    send_error,
)
from gateway.streams.targets import LedgerTarget, LogTarget
from services.errors import (
    Forbidden,
    InvalidArgument,
    NotFound,
    QuireError,
    Unauthorized,
    Unavailable,
)
from services.protocol.logs import check_log_name
from services.web.errors import error_body

router = APIRouter(tags=["streams"])

PASSWORD_HEADER = "x-ledger-password"


def _gateway(ws: WebSocket) -> Gateway:
    gateway: Gateway | None = ws.app.state.gateway
    if gateway is None:
        raise Unavailable("the gateway is not ready: it is not connected to ZooKeeper yet")
    return gateway


class _Auth:
    """The connection's credentials: the headers', and the auth message's when the
    headers were not enough (awaited once, when needed)."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.refusal, self.check_token = websocket_authorization(ws.scope)
        self.password = ws.headers.get(PASSWORD_HEADER)
        self.message: dict[str, str] | None = None

    async def token(self) -> None:
        """Return once a token allows the stream: the headers', or (when they carried
        none the gateway knows) the auth message's; raise the refusal otherwise. A known
        token whose scope is short is refused at once (403)."""
        if self.refusal is None:
            return
        if isinstance(self.refusal, Forbidden):
            raise self.refusal
        doc = await self._message()
        token = doc.get("token")
        if token is None:
            raise Unauthorized("missing or wrong token")
        refusal = self.check_token(token)
        if refusal is not None:
            raise refusal
        self.refusal = None

    async def ledger_password(self, needed: bool) -> str | None:
        if needed and self.password is None:
            self.password = (await self._message()).get("password")
        return self.password

    async def _message(self) -> dict[str, str]:
        if self.message is None:
            self.message = await receive_auth(self.ws)
        return self.message

    @property
    def consumed(self) -> bool:
        """Whether the auth message was read (the stream must not take it again)."""
        return self.message is not None


OpenTarget = Callable[[Gateway, _Auth], Awaitable[Target]]


async def _serve(ws: WebSocket, open_target: OpenTarget) -> None:
    """Accept, authorize, open the target and run the stream; any error is sent as a
    message and closes the connection with its code."""
    await ws.accept()
    # The ledger password checks count wrong passwords per client address.
    client_address.set(ws.client.host if ws.client else None)
    auth = _Auth(ws)
    try:
        await auth.token()
        gw = _gateway(ws)
        target = await open_target(gw, auth)
        settings = gw.settings
        session = StreamSession(
            ws,
            target,
            settings.stream_credits,
            settings.stream_bytes_in_flight_max,
            ws.app.state.stream_budget,
        )
        if auth.consumed:
            session.controls_seen = 1  # the auth message was the first
        await session.run()
    except WebSocketDisconnect:
        return
    except Draining:
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):  # gone already
            await ws.close(CLOSE_SERVICE_RESTART, "service restart")
    except QuireError as exc:
        await send_error(ws, exc)


@router.websocket("/v1/ledgers/{ledger_id}/stream")
async def stream_ledger(ws: WebSocket, ledger_id: str) -> None:
    async def open_target(gw: Gateway, auth: _Auth) -> Target:
        if not _is_canonical(ledger_id) or ledger_id.startswith("-"):
            raise InvalidArgument("ledger_id: not a canonical decimal integer >= 0")
        lid = int(ledger_id)
        metadata = await ops.metadata_for(gw, lid, None, check=False)
        password = await auth.ledger_password(metadata.password_hash is not None)
        runner = await ops.writer_for(gw, lid, password)
        return LedgerTarget(gw, runner, auth.check_token)

    await _serve(ws, open_target)


@router.websocket("/v1/logs/{name}/stream")
async def stream_log(ws: WebSocket, name: str) -> None:
    async def open_target(gw: Gateway, auth: _Auth) -> Target:
        check_log_name(name)
        writer = await writer_for_stream(gw, name)
        return LogTarget(gw, name, writer, auth.check_token)

    await _serve(ws, open_target)


_PLAIN_GET = "this path is a WebSocket: connect with Upgrade: websocket (docs/streaming.md)"


@router.get("/v1/ledgers/{ledger_id}/stream", include_in_schema=False)
async def stream_ledger_plain(ledger_id: str, request: Request) -> None:
    raise InvalidArgument(_PLAIN_GET)


@router.get("/v1/logs/{name}/stream", include_in_schema=False)
async def stream_log_plain(name: str, request: Request) -> None:
    raise InvalidArgument(_PLAIN_GET)


def websocket_fallback(default: ASGIApp) -> ASGIApp:
    """The router's default for what no route matched: a WebSocket upgrade there gets an
    HTTP answer with a docs/api.md error (401 or 403 first when the headers lack a token
    allowed there, as unknown /v1 routes do; else 404 not_found) rather than Starlette's bare 403;
    anything else goes to ``default``."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await default(scope, receive, send)
            return
        refused, _ = websocket_authorization(scope)
        v1 = scope["path"] == "/v1" or scope["path"].startswith("/v1/")
        refusal: QuireError = NotFound("no WebSocket at this path")
        if v1 and refused is not None:
            refusal = refused
        body = error_body(refusal)
        await send(
            {
                "type": "websocket.http.response.start",
                "status": refusal.http_status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "websocket.http.response.body", "body": body})

    return app
