"""The replicator's FastAPI application.

``create_app`` builds the application without I/O (the OpenAPI document is exported
from it anywhere). The lifespan serves at once (``/health`` 503) and connects to
ZooKeeper in the background (``MetadataStore.start_retrying``), starts the bookie
registry view and the worker; ``/health`` is 200 while connected. ``/v1/status``
shows the worker's id (``host:port``), whether replication is enabled, and the
ledgers in flight with their progress.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel, Field

from replicator.copy import CopyLimits, FragmentCopier
from replicator.limits import BOOKIE_CONNECT_TIMEOUT_MS_MAX, START_RETRY_DELAY_S
from replicator.metrics import ReplicatorMetrics
from replicator.openledger import OpenLedgers
from replicator.repair import RepairContext
from replicator.throttle import ByteThrottle
from replicator.worker import Worker
from services.bookie_client import BookieClientPool
from services.errors import MetadataUnavailable, Unauthorized, Unavailable
from services.settings import ReplicatorSettings
from services.web.app import new_app
from services.web.auth import secret_matches
from services.web.errors import DocumentedError, error_responses, install_error_handlers
from services.web.openapi import install_openapi
from services.web.routes import add_health_route, add_metrics_route
from services.zk.ledger_store import LedgerStore
from services.zk.registry import BookieRegistry
from services.zk.store import MetadataStore
from services.zk.underreplication import UnderReplicationStore

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Cluster-Secret"
SECRET_SCHEME = {
    "type": "apiKey",
    "in": "header",
    "name": SECRET_HEADER,
    "description": "Required on /v1 calls when the replicator runs with --cluster-secret "
    "(optional otherwise; the served document says which)",
}

DESCRIPTION = """A Quire replication worker (auto-recovery, docs/api.md): it takes the lock of one
under-replicated ledger at a time (up to `--ledgers-in-flight-max` at once), copies the
entries of each fragment on a missing bookie to a healthy one, swaps the bookie in the
metadata by compare-and-set, deletes the mark and releases the lock. HMAC ledgers: the
metadata keeps the ledger's MAC key sealed with the cluster secret (never the password),
so the worker verifies every copied entry; `GET /v1/ledgers/{id}` on a gateway never shows
it. Errors are `{"error": CODE, "message": TEXT}`."""


class LedgerProgress(BaseModel):
    ledger_id: int
    progress: dict[str, int] = Field(
        description="fragments_done, fragments_total, entries_copied, bytes_copied"
    )


class WorkerStatus(BaseModel):
    id: str = Field(description="the worker's host:port")
    enabled: bool = Field(description="replication is enabled cluster-wide")
    in_flight: list[LedgerProgress]


def _build(
    settings: ReplicatorSettings, metrics: ReplicatorMetrics, ssl_context: ssl.SSLContext | None
) -> tuple[Any, ...]:
    store = MetadataStore(
        settings.zk_hosts,
        session_timeout_s=settings.zk_session_timeout,
        credentials=settings.zk_credentials,
    )
    registry = BookieRegistry(store)
    timeout_ms = settings.bookie_request_timeout_ms
    pool = BookieClientPool(
        settings.cluster_secret,
        connect_timeout_s=min(timeout_ms, BOOKIE_CONNECT_TIMEOUT_MS_MAX) / 1000,
        request_timeout_s=timeout_ms / 1000,
        ssl_context=ssl_context,
    )
    ledgers = LedgerStore(store)
    rng = random.Random()
    throttle = ByteThrottle(settings.rereplication_bytes_per_s_max)
    copier = FragmentCopier(
        lambda bookie: pool.get(bookie, registry.address_of(bookie)),
        CopyLimits(
            settings.copy_batch_entries_max, settings.copy_batch_bytes_max, timeout_ms / 1000
        ),
        throttle.acquire,
        lambda: True,
    )
    ctx = RepairContext(
        settings=settings,
        marks=UnderReplicationStore(store),
        ledgers=ledgers,
        registry=registry,
        bookies=pool,
        copier=copier,
        open_ledgers=OpenLedgers(settings, ledgers, registry, pool, rng),
        metrics=metrics,
        enabled=lambda: True,
        rng=rng,
    )
    worker = Worker(ctx, store, settings.address)
    copier.keep_going = lambda: worker.enabled
    return store, registry, pool, worker


async def _start(
    app: FastAPI, store: MetadataStore, registry: BookieRegistry, worker: Worker
) -> None:
    """Connect (retrying), start the registry view and the worker, then serve /v1/status."""
    await store.start_retrying()
    while True:
        try:
            await worker.ctx.marks.ensure_paths()
            await registry.start()
            worker.enabled = await worker.ctx.marks.replication_enabled()
            break
        except (MetadataUnavailable, TimeoutError) as exc:
            log.warning("cannot start (%r); retrying in %.0f s", exc, START_RETRY_DELAY_S)
            await asyncio.sleep(START_RETRY_DELAY_S)
    worker.start_watching()
    app.state.worker = worker
    log.info("replicator %s ready", worker.worker_id)
    await worker.run()


def create_app(settings: ReplicatorSettings, ssl_context: ssl.SSLContext | None = None) -> FastAPI:
    """The worker's application; ``ssl_context`` (the client context of its TLS, None
    when TLS is off) is what it reaches the bookies with (docs/security.md, "TLS")."""
    metrics = ReplicatorMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store, registry, pool, worker = _build(settings, metrics, ssl_context)
        metrics.zookeeper.watch(store)
        app.state.store = store
        running = asyncio.create_task(_start(app, store, registry, worker), name="replicator")
        try:
            yield
        finally:
            app.state.worker = None
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await worker.aclose()
            await pool.aclose()
            await store.stop()

    app = new_app(
        title="Quire replicator",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        redirect_slashes=False,
    )
    install_openapi(app, "clusterSecret", SECRET_SCHEME, lambda path: bool(settings.cluster_secret))
    app.state.worker = None
    app.state.store = None
    install_error_handlers(app)

    def ready() -> bool:
        store = app.state.store
        return app.state.worker is not None and store is not None and store.connected

    add_health_route(app, ready)
    add_metrics_route(app, metrics.registry)

    @app.get(
        "/v1/status",
        tags=["replicator"],
        summary="The worker's id, whether replication is enabled, and its ledgers in flight",
        response_model=WorkerStatus,
        responses=error_responses(
            DocumentedError(
                Unauthorized, f"missing or wrong {SECRET_HEADER} (with --cluster-secret)"
            ),
            DocumentedError(Unavailable, "not connected to ZooKeeper yet"),
        ),
    )
    async def status(request: Request) -> dict[str, Any]:
        secret = settings.cluster_secret
        if secret and not secret_matches(request.headers.get(SECRET_HEADER), secret):
            raise Unauthorized(f"missing or wrong {SECRET_HEADER}")
        worker: Worker | None = request.app.state.worker
        if worker is None:
            raise Unavailable("the replicator is not connected to ZooKeeper yet")
        return worker.status()

    return app
