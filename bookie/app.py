"""The bookie's FastAPI application.

``create_app`` only builds the application: no file, socket or ZooKeeper is
touched until the lifespan starts (so the OpenAPI document can be exported
anywhere). The lifespan starts a ``BookieNode`` (data-dir lock at once; then,
in the background, ZooKeeper, cookie, store, group-commit writer,
registration, disk watch) and stops it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from bookie.fastpath import (
    INSTANCE_HEADER_RAW,
    SECRET_HEADER,
    SECRET_HEADER_RAW,
    AddFastPath,
    AddLane,
    with_headers,
)
from bookie.metrics import BookieMetrics
from bookie.node import BookieNode
from bookie.routes import admin, entries, ledgers, storage, stored
from services.errors import Unauthorized
from services.settings import BookieSettings
from services.web.app import new_app
from services.web.auth import secret_matches
from services.web.errors import error_json, install_error_handlers
from services.web.openapi import install_openapi
from services.web.routes import add_health_route, add_metrics_route
from services.web.serve import on_shutdown

SECRET_SCHEME = {
    "type": "apiKey",
    "in": "header",
    "name": SECRET_HEADER,
    "description": "Required on /v1 calls when the bookie runs with --cluster-secret "
    "(optional otherwise; the served document says which)",
}

DESCRIPTION = """The internal HTTP API of a Quire bookie (see docs/api.md "Bookie").

Every `/v1/...` call needs the header `X-Cluster-Secret` when the bookie runs with
`--cluster-secret` (missing or wrong: 401 `unauthorized`, nothing changes). `/health`,
`/metrics`, `/openapi.json` and `/docs` are public. Errors are
`{"error": CODE, "message": TEXT}`. Every `/v1` answer carries
`X-Quire-Bookie-Instance`, the bookie's instance id (a reformatted bookie has a new
one). Entries travel in the binary framing `application/x-quire-entries`."""


class ClusterSecretMiddleware:
    """Refuses every ``/v1`` request without the right secret, before routing, so an
    unknown ``/v1`` route without it is 401 too and nothing runs."""

    def __init__(self, app: ASGIApp, secret: str) -> None:
        self.app = app
        self.secret = secret

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            if path == "/v1" or path.startswith("/v1/"):
                given = None
                for name, value in scope["headers"]:
                    if name == SECRET_HEADER_RAW:
                        given = value.decode("latin-1")
                        break
                if not secret_matches(given, self.secret):
                    response = error_json(Unauthorized(f"missing or wrong {SECRET_HEADER}"))
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)


class InstanceHeaderMiddleware:
    """Adds ``X-Quire-Bookie-Instance: <instance id>`` to every ``/v1`` answer once the
    cookie is known (errors such as ``ledger_not_found`` included), so a client can tell
    a reformatted bookie (a new instance) from the one that answered before."""

    def __init__(self, app: ASGIApp, node: Callable[[], Any]) -> None:
        self.app = app
        self.node = node

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        node = self.node() if scope["type"] == "http" else None
        instance = node.instance_id if node is not None else ""
        if not instance or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        header = (INSTANCE_HEADER_RAW, instance.encode("latin-1"))
        await self.app(scope, receive, with_headers(send, [header]))


def _stop_serving() -> None:
    """The bookie refused to start after the server began (e.g. its cookie does not match):
    stop the server as SIGTERM would; ``bookie.__main__`` then exits 3."""
    if threading.current_thread() is threading.main_thread():
        signal.raise_signal(signal.SIGTERM)


def create_app(settings: BookieSettings) -> FastAPI:
    """Build the bookie's application for ``settings``; does no I/O."""
    metrics = BookieMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        node = BookieNode(settings, metrics)
        node.on_refused = _stop_serving
        await node.start()  # returns at once; the node opens in the background
        app.state.node = node
        remove = on_shutdown(app, node.closing)
        try:
            yield
        finally:
            remove()
            app.state.node = None
            await node.stop()
            app.state.refusal = node.refusal

    app = new_app(
        title="Quire bookie",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        openapi_tags=[
            {"name": "entries", "description": "The data path: adds and reads"},
            {"name": "ledgers", "description": "LAC, fencing, deletion, listing"},
            {"name": "bookie", "description": "The bookie's identity and state"},
            {"name": "ops", "description": "Health and metrics (public)"},
        ],
    )
    app.state.node = None
    app.state.refusal = None
    app.state.metrics = metrics
    install_error_handlers(app)

    def ready() -> bool:
        node = app.state.node
        return node is not None and node.ready

    add_health_route(app, ready)
    add_metrics_route(app, metrics.registry)
    app.include_router(entries.router)
    app.include_router(ledgers.router)
    app.include_router(ledgers.batch_router)
    app.include_router(stored.router)
    app.include_router(admin.router)
    app.include_router(storage.router)
    # The last middleware added is the outermost: the secret is checked first.
    app.add_middleware(InstanceHeaderMiddleware, node=lambda: app.state.node)
    if settings.cluster_secret:
        app.add_middleware(ClusterSecretMiddleware, secret=settings.cluster_secret)
    # Adds before the stack, with the same secret check and instance header.
    app.front = AddFastPath(app.stack, lambda: app.state.node, settings.cluster_secret or None)
    # And below ASGI, a plain add with a small body (bookie.fastpath.AddLane).
    app.lane = AddLane(
        lambda: app.state.node,
        settings.cluster_secret or None,
        settings.body_read_timeout_ms / 1000,
    )
    install_openapi(app, "clusterSecret", SECRET_SCHEME, lambda path: bool(settings.cluster_secret))
    return app
