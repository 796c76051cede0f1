"""Running a service: settings in, uvicorn out, with our logging and our server bounds.

The server is uvicorn with httptools and uvloop, but with ``BoundedHttpProtocol``
(services/web/server.py: head and body timers, head size and header count bounds,
connections per client address, JSON answers of its own), ``MethodsMiddleware``
(services/web/methods.py: ``HEAD`` of GET routes, ``Allow`` on 405) and, outermost,
``AccessMiddleware`` (services/web/access.py: ``X-Request-Id``, the access log, slow
requests) around the app.

With TLS (``tls_contexts``: the ``--tls-*`` flags, docs/security.md "TLS") the port
speaks HTTPS only, WebSocket included (wss): the server context of the service's
``TlsContexts`` is handed to uvicorn, and every listening socket is wrapped with it; a
client speaking plain HTTP fails the handshake and is closed without an answer. The
bounded protocol runs unchanged above TLS: a connection is admitted, timed and counted
once its handshake is done. SIGHUP re-reads the certificate, key and CA bundle into the
live contexts (``TlsContexts.reload``): new handshakes use them, connections in progress
go on with theirs.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import resource
import socket
import sys
from collections.abc import Callable
from typing import cast

import uvicorn
from fastapi import FastAPI

from services import gc_pauses
from services.settings import CommonSettings
from services.tls.contexts import TlsContexts, TlsError
from services.web import limits
from services.web.access import AccessMiddleware
from services.web.limits import ServerLimits
from services.web.methods import MethodsMiddleware
from services.web.server import protocol_class
from services.web.sighup import on_sighup
from services.web.websocket import QuireWebSocketProtocol

log = logging.getLogger(__name__)


def connections_allowed(wanted: int) -> int:
    """``wanted`` connections, or fewer if the file descriptor limit cannot hold them:
    the soft limit is raised towards the hard one first."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + limits.FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < need:
        allowed = max(1, soft - limits.FD_RESERVE)
        log.warning(
            "file descriptor limit %d holds only %d connections (connections_max %d)",
            soft,
            allowed,
            wanted,
        )
        return allowed
    return wanted


def tls_contexts(settings: CommonSettings, prog: str) -> TlsContexts | None:
    """The service's TLS contexts when its ``--tls-*`` flags turn TLS on, else None. A
    file that cannot be used ends the process at start-up with one line naming it
    (exit 2, as an impossible flag)."""
    files = settings.tls_files
    if files is None:
        return None
    try:
        return TlsContexts(files)
    except TlsError as exc:
        print(f"{prog}: error: TLS: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def server_config(
    app: FastAPI,
    settings: CommonSettings,
    websocket_message_max_bytes: int | None = None,
    tls: TlsContexts | None = None,
) -> uvicorn.Config:
    """The uvicorn configuration of a service: its app wrapped for request ids and the
    access log, HEAD and Allow, served by the bounded protocol. With
    ``websocket_message_max_bytes`` the service also speaks WebSocket (websockets'
    sans-I/O protocol, no compression), with messages up to that size; a larger one is
    refused by the protocol itself (close code 1009). With ``tls`` the port speaks
    HTTPS with its server context (the module docstring)."""
    server_limits = ServerLimits.from_settings(settings)
    allowed = connections_allowed(server_limits.connections_max)
    if allowed != server_limits.connections_max:
        server_limits = ServerLimits(**{**server_limits.__dict__, "connections_max": allowed})
    access = AccessMiddleware(
        MethodsMiddleware(app, app.router.routes), slow_request_ms=settings.slow_request_ms
    )
    return uvicorn.Config(
        access,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        loop="uvloop",
        # The app's lane, if it has one, is served by the protocol (services/web/lane.py).
        http=protocol_class(server_limits, getattr(app, "lane", None), access.access),
        # Without WebSocket, an Upgrade request is served as plain HTTP (and stays
        # bounded). The sans-I/O protocol reads one message at a time: it stops reading
        # the socket until the application took the last message (bounded memory).
        # No per-message compression: records are opaque, and a compressed message
        # costs CPU on the one core the gateway has.
        # (with one extension: many text messages in one send, services/web/websocket.py)
        ws=QuireWebSocketProtocol if websocket_message_max_bytes is not None else "none",
        ws_max_size=websocket_message_max_bytes or limits.WS_MAX_SIZE_UNUSED,
        ws_per_message_deflate=False,
        backlog=limits.HTTP_BACKLOG,
        # Typed int by uvicorn, used as a float delay (loop.call_later): ms precision.
        timeout_keep_alive=cast(int, server_limits.idle_timeout_s),
        # Admission is the protocol's (per client address, JSON answers), not uvicorn's.
        limit_concurrency=None,
        lifespan="on",
        # The live context itself, not one uvicorn builds: SIGHUP reloads it in place.
        ssl_context_factory=None if tls is None else (lambda _config, _default: tls.server),
    )


class FrozenHeapServer(uvicorn.Server):
    """uvicorn's server that moves everything alive after start-up (modules, the app,
    its clients) out of the garbage collector's reach, and accepts new connections up to
    ``ACCEPT_WATCHERS`` a turn of the event loop.

    The heap: with thousands of slow sockets open, full collections over the whole heap
    paused the event loop for a second or more (benchmarks/README.md, "Measured
    choices"); frozen objects are never traversed again. From then on the survivors of
    each full collection are frozen too, and thawed every ``--gc-thorough-interval-s``
    for one full collection of everything (services/gc_pauses.py).

    The accepts: uvloop (its libuv) accepts one connection per listening socket per turn
    of the loop, where asyncio's own loop takes the whole queue. Under load a turn of the
    gateway's loop takes milliseconds, so of many clients connecting at once the last
    waited far longer for their first answer than any add took (benchmarks/README.md,
    "Measured choices"). Each
    listening socket is therefore watched ``ACCEPT_WATCHERS`` times, through duplicates
    of its descriptor: one socket and one accept queue, served by that many uvloop
    servers with the same protocol factory (closed with the others by uvicorn's
    shutdown). The price: every new connection also wakes the other watchers, whose
    ``accept`` finds nothing; 8 watchers cost little loop CPU per connection, 16 more
    (same section).

    With ``tls``, SIGHUP reloads the TLS files into the live contexts (module
    docstring)."""

    def __init__(
        self,
        config: uvicorn.Config,
        tls: TlsContexts | None = None,
        gc_thorough_interval_s: float = 0,
        shutdown_began: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self.tls = tls
        self.gc_thorough_interval_s = gc_thorough_interval_s
        self.shutdown_began = shutdown_began

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """``shutdown_began`` first (the app's long polls answer now: ``on_shutdown``),
        then uvicorn's shutdown, which closes the listeners and tells every connection
        to close after its answer before any answer can be written, and then waits for
        the requests in progress."""
        if self.shutdown_began is not None:
            self.shutdown_began()
        await super().shutdown(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            await self._watch_accepts(limits.ACCEPT_WATCHERS)
            if self.tls is not None:
                on_sighup(self.tls.reload_logged)
        gc.collect()
        gc.freeze()
        gc_pauses.keep_survivors_frozen(self.gc_thorough_interval_s)

    async def _watch_accepts(self, watchers: int) -> None:
        config = self.config

        def create_protocol(_loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Protocol:
            # As uvicorn's own factory in ``Server.startup``.
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config,
                server_state=self.server_state,
                app_state=self.lifespan.state,
                _loop=_loop,
            )

        loop = asyncio.get_running_loop()
        for server in list(self.servers):
            for listening in server.sockets:
                for _ in range(watchers - 1):
                    duplicate = socket.socket(fileno=os.dup(listening.fileno()))
                    self.servers.append(
                        await loop.create_server(
                            create_protocol, sock=duplicate, ssl=config.ssl, backlog=config.backlog
                        )
                    )


# The app's state attribute listing what ``on_shutdown`` registered.
_SHUTDOWN_HOOKS = "shutdown_hooks"


def on_shutdown(app: FastAPI, hook: Callable[[], None]) -> Callable[[], None]:
    """Call ``hook`` when the server's shutdown begins (SIGINT/SIGTERM), before it waits
    for the requests in progress: long polls answer now instead of holding the shutdown
    until they end (up to 30 s). Returns a function that removes it (a lifespan's
    exit)."""
    hooks: list[Callable[[], None]] = getattr(app.state, _SHUTDOWN_HOOKS, None) or []
    hooks.append(hook)
    setattr(app.state, _SHUTDOWN_HOOKS, hooks)

    def remove() -> None:
        if hook in hooks:
            hooks.remove(hook)

    return remove


def _shutdown_began(app: FastAPI) -> None:
    for hook in list(getattr(app.state, _SHUTDOWN_HOOKS, None) or []):
        try:
            hook()
        except Exception:  # noqa: BLE001 - the shutdown must go on
            log.exception("a shutdown hook failed")


def serve(
    app: FastAPI,
    settings: CommonSettings,
    websocket_message_max_bytes: int | None = None,
    tls: TlsContexts | None = None,
) -> None:
    """Serve ``app`` on the settings' host and port until SIGINT/SIGTERM (with WebSocket
    when ``websocket_message_max_bytes`` is given, over TLS with ``tls``:
    ``server_config``)."""
    config = server_config(app, settings, websocket_message_max_bytes, tls)
    server = FrozenHeapServer(
        config, tls, settings.gc_thorough_interval_s, lambda: _shutdown_began(app)
    )
    server.run()
    if not server.started:
        # Start-up failed (the lifespan raised): uvicorn has logged why.
        raise SystemExit(3)
