"""The gateway's FastAPI application.

``create_app`` builds the application without I/O but the token file's first read
(the OpenAPI document is exported from it anywhere, with no token file); the lifespan
builds the gateway, reloads the token file when it changes, serves at once and connects
to ZooKeeper and starts the bookie registry view in the background
(``/health`` says 503 and ``/v1/`` calls 503 ``unavailable`` until then), and on
shutdown fails what is still waiting and closes everything.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from gateway.admin import page as admin_page
from gateway.admin import routes as admin
from gateway.admin.service import AdminService
from gateway.fastpath import AddFastPath, AddRoutes
from gateway.http.auth import TokenMiddleware, TokenPolicy, document_forbidden, token_required
from gateway.http.openapi_examples import add_examples
from gateway.http.openapi_links import LINKS
from gateway.http.token_file import TokenFile
from gateway.ledgers import routes as ledgers
from gateway.limits import REGISTRY_RETRY_DELAY_S
from gateway.logs import cursor_routes, cursors
from gateway.logs import routes as logs
from gateway.logs.writers import serve_logs
from gateway.metrics import GatewayMetrics
from gateway.service import Gateway
from gateway.streams import routes as stream
from services import native
from services.bookie_client import BookieClientPool
from services.budget import ByteBudget
from services.errors import MetadataUnavailable
from services.ledger_client.context import LedgerClientContext
from services.settings import GatewaySettings
from services.web.app import new_app
from services.web.errors import install_error_handlers
from services.web.openapi import install_openapi
from services.web.routes import add_health_route, add_metrics_route
from services.web.serve import on_shutdown
from services.zk.cursor_store import CursorStore
from services.zk.ledger_store import LedgerStore
from services.zk.log_store import LogStore
from services.zk.registry import BookieRegistry
from services.zk.store import MetadataStore
from services.zk.underreplication import UnderReplicationStore

log = logging.getLogger(__name__)


DESCRIPTION = """The public API of a Quire gateway: ledgers (quorum writes, fencing, recovery,
reads) and the Admin API (cluster, bookies, under-replication, decommission) — see
docs/api.md. Errors are `{"error": CODE, "message": TEXT}`. When the gateway runs
with `--api-token`, every `/v1/` call needs `Authorization: Bearer <token>`; `/v1/admin/`
calls need the admin token when `--admin-token` is set. With `--token-file`, scoped tokens
(read, write or admin over ledger ids and log-name prefixes) are accepted too; a known
token whose scope does not cover a call is 403 `forbidden`.

## Streaming appends (WebSocket)

`GET /v1/ledgers/{ledger_id}/stream` and `GET /v1/logs/{name}/stream`, upgraded to a
WebSocket (a plain GET is 400), append many records over one connection; they feed the
same write handle as `POST .../entries` and `POST .../records`. Authorization: the
`Authorization: Bearer` and `X-Ledger-Password` headers, or (browsers cannot set them)
a first text message `{"token": "...", "password": "..."}`; never the URL.

1. The gateway sends `{"credits": N}`: the client may have N records sent and not yet
   acknowledged; each acknowledgement gives one credit back (a later `{"credits": k}`
   grants k more). A record past the credits is a protocol error.
2. The client sends each record (at most 5 MiB) as one binary message; on a log, a text
   message `{"key": "..."}` is the Idempotency-Key of the next record (1-128 printable
   ASCII; a retry with the same key and bytes answers the first position).
3. The gateway acknowledges every record in order once it has its ack quorum:
   `{"seq", "entry_id", "last_add_confirmed"}` (ledger) or
   `{"seq", "position": {"ledger_id", "entry_id"}}` (log); `seq` counts from 0.
4. `{"end": true}`: the gateway acknowledges what it has and closes with 1000.
5. On any error the gateway sends `{"error": CODE, "message": TEXT}` (the codes above:
   `unauthorized`, `ledger_fenced`, `not_writer`, `payload_too_large`,
   `invalid_argument`...) and closes with 4000 + the HTTP status (4401, 4409, 4413,
   4400...). Records not acknowledged by then have an unknown outcome.
6. When the gateway shuts down (SIGTERM) it takes no more records, acknowledges those it
   took, and closes with 1012 (service restart); after 5 s it closes whatever is left
   with 1012. Records after the last acknowledgement have an unknown outcome."""

TOKEN_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": "`Authorization: Bearer <token>`: required on /v1 calls when the gateway "
    "runs with --api-token (the admin token is accepted too), on /v1/admin calls when it runs "
    "with --admin-token (then only the admin token), on every /v1 call when it runs with "
    "--token-file (a scoped token of the file, or one of the two); optional otherwise. The "
    "document a gateway serves marks it required exactly where that gateway requires it.",
}


async def _connect(
    app: FastAPI,
    gateway: Gateway,
    store: MetadataStore,
    registry: BookieRegistry,
    admin_service: AdminService,
) -> None:
    """Connect to ZooKeeper (retrying with back-off), start the bookie registry view
    and create the auto-recovery znodes (retried too), then publish the gateway and
    the admin API to the routes."""
    try:
        await store.start_retrying()
        while True:
            try:
                await admin_service.replication.ensure_paths()
                await registry.start()
                await gateway.logs.owners.start()
                break
            except (MetadataUnavailable, TimeoutError) as exc:
                log.warning(
                    "cannot start the bookie registry view (%r); retrying in %.0f s",
                    exc,
                    REGISTRY_RETRY_DELAY_S,
                )
                await asyncio.sleep(REGISTRY_RETRY_DELAY_S)
    except Exception:
        log.exception("the gateway could not start; it stays unready")
        raise
    app.state.metadata_store = store
    app.state.admin = admin_service
    app.state.gateway = gateway
    log.info("gateway ready", extra={"fields": {"native": native.STATUS}})


def _finish_openapi(doc: dict[str, Any]) -> None:
    """The gateway's additions to its OpenAPI document: examples, and the 403 of scoped
    tokens on every /v1 operation."""
    add_examples(doc)
    document_forbidden(doc)


def create_app(settings: GatewaySettings, ssl_context: ssl.SSLContext | None = None) -> FastAPI:
    """The gateway's application; ``ssl_context`` (the client context of its TLS, None
    when TLS is off) is what it reaches the bookies with (docs/security.md, "TLS").
    ``TokenFileError`` when ``--token-file`` cannot be used."""
    # Read now: a gateway never serves a moment without its tokens.
    token_file = TokenFile(settings.token_file) if settings.token_file is not None else None
    metrics = GatewayMetrics()
    # The payload bytes in flight of all streams together (gateway/streams/session.py).
    stream_budget = ByteBudget(settings.streams_bytes_in_flight_max)
    metrics.watch_streams(stream_budget)
    # The bytes of all REST request bodies held at once (services/web/lane.py, body.py).
    body_budget = ByteBudget(settings.requests_bytes_in_flight_max)
    metrics.watch_bodies(body_budget)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = MetadataStore(
            settings.zk_hosts,
            session_timeout_s=settings.zk_session_timeout,
            credentials=settings.zk_credentials,
        )
        metrics.zookeeper.watch(store)
        registry = BookieRegistry(store)
        pool = BookieClientPool(
            settings.cluster_secret,
            connect_timeout_s=settings.bookie_connect_timeout_ms / 1000,
            request_timeout_s=settings.bookie_request_timeout_ms / 1000,
            ssl_context=ssl_context,
        )
        ctx = LedgerClientContext(
            settings=settings.ledger_client(),
            ledgers=LedgerStore(store),
            registry=registry,
            bookies=pool,
            metrics=metrics.client,
            rng=random.Random(),
        )
        gateway = serve_logs(Gateway.build(settings, metrics, ctx), LogStore(store), ssl_context)
        cursors.serve_cursors(gateway, CursorStore(store))
        admin_service = AdminService(
            store,
            UnderReplicationStore(store),
            registry,
            lambda bookie_id: pool.get(bookie_id, registry.address_of(bookie_id)),
        )
        # Serve at once (/health 503, /metrics) and connect in the background: the
        # routes see the gateway (and /health says 200) once ZooKeeper answered and the
        # registry view started; until then a /v1/ call is 503 unavailable.
        connecting = asyncio.create_task(
            _connect(app, gateway, store, registry, admin_service), name="gateway-connect"
        )
        tasks = [connecting]
        if token_file is not None:
            tasks.append(asyncio.create_task(token_file.watch(), name="gateway-token-file"))
        # SIGTERM/SIGINT: the long polls answer now, so the graceful shutdown (which
        # waits for them) is not held until they expire (gateway/stopping.py).
        remove = on_shutdown(app, gateway.stopping.begin)
        try:
            yield
        finally:
            remove()
            app.state.gateway = None
            app.state.admin = None
            app.state.metadata_store = None
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await gateway.aclose()
            await pool.aclose()
            await store.stop()

    app = new_app(
        title="Quire gateway",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        # docs/api.md: a path not listed is an unknown route (404 not_found with an error
        # body), also with a trailing slash; FastAPI would answer 307 with no body.
        redirect_slashes=False,
    )
    install_openapi(
        app,
        "bearerToken",
        TOKEN_SCHEME,
        lambda path: token_required(
            path, settings.api_token, settings.admin_token, token_file is not None
        ),
        LINKS,
        _finish_openapi,
    )
    app.state.gateway = None
    app.state.admin = None
    app.state.metadata_store = None
    app.state.token_required = bool(settings.api_token or settings.admin_token or token_file)
    app.state.stream_budget = stream_budget
    app.state.body_budget = body_budget
    install_error_handlers(app)

    def ready() -> bool:
        store = app.state.metadata_store
        return app.state.gateway is not None and store is not None and store.connected

    def draining() -> bool:
        gateway = app.state.gateway
        return gateway is not None and gateway.logs.owners.draining

    add_health_route(app, ready, draining)
    add_metrics_route(app, metrics.registry)
    # Before the others: the logs router ends with a catch-all route.
    app.include_router(stream.router)
    app.router.default = stream.websocket_fallback(app.router.default)
    app.include_router(ledgers.router)
    app.include_router(cursor_routes.router)
    app.include_router(logs.router)
    app.include_router(admin.router)
    app.include_router(admin_page.router)
    tokens = TokenPolicy(settings.api_token, settings.admin_token, token_file)
    app.add_middleware(TokenMiddleware, policy=tokens)
    if settings.fast_path:  # below FastAPI's stack, with the same token check
        routes = AddRoutes(lambda: app.state.gateway, tokens.allows, body_budget)
        app.lane = routes
        app.front = AddFastPath(app.stack, routes)
    return app
