"""The auditor's FastAPI application.

``create_app`` builds the application without I/O (the OpenAPI document is exported
from it anywhere). The lifespan serves at once and connects to ZooKeeper in the
background (``MetadataStore.start_retrying``): ``/health`` is 503 until connected and
the auditor started (watches, election), 200 while connected. On shutdown the auditor
leaves the election (a standby takes over at once) and closes its clients.

Routes: ``GET /v1/status``, ``POST /v1/audit`` (202; asks the elected auditor for a
full check through ZooKeeper, so it works on any auditor), ``/health``, ``/metrics``
(the under-replicated count is read from the marks at each scrape), ``/openapi.json``.
With ``--cluster-secret`` the ``/v1`` calls need the ``X-Cluster-Secret`` header.

For tests only: with ``QUIRE_AUDITOR_EXPOSE_SESSION=1`` in the environment,
``/v1/status`` also shows the ZooKeeper session id and password, so that a test can
force the session to expire (``tests.harness.expire_session``). Never set it
elsewhere.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from auditor.limits import START_RETRY_DELAY_S
from auditor.metrics import AuditorMetrics
from auditor.service import Auditor
from services.errors import MetadataUnavailable, Unauthorized, Unavailable
from services.settings import AuditorSettings
from services.web.app import new_app
from services.web.auth import secret_matches
from services.web.errors import DocumentedError, error_responses, install_error_handlers
from services.web.openapi import install_openapi
from services.web.routes import add_health_route
from services.zk.store import MetadataStore

log = logging.getLogger(__name__)

EXPOSE_SESSION_ENV = "QUIRE_AUDITOR_EXPOSE_SESSION"
SECRET_HEADER = "X-Cluster-Secret"
SECRET_SCHEME = {
    "type": "apiKey",
    "in": "header",
    "name": SECRET_HEADER,
    "description": "Required on /v1 calls when the auditor runs with --cluster-secret "
    "(optional otherwise; the served document says which)",
}

DESCRIPTION = """The auditor of a Quire cluster (docs/protocol.md, "Auto-recovery"): one of the
running auditors is elected; it marks the ledgers of lost or decommissioning bookies
under-replicated and runs full checks (placement and replicas) every `--audit-interval`
and on demand. Errors are `{"error": CODE, "message": TEXT}`."""

SecretHeader = Annotated[str | None, Header(alias=SECRET_HEADER, include_in_schema=False)]


class LastAudit(BaseModel):
    kind: str = Field(description="full (placement and replicas) or placement")
    started_at: int = Field(description="ms since the epoch")
    finished_at: int = Field(description="ms since the epoch")
    duration_s: float
    ledgers: int = Field(description="ledgers checked")
    marked: int = Field(description="marks written (new, or naming a new bookie)")
    cleared: int = Field(description="stale marks deleted")
    bookies_skipped: list[str] = Field(description="bookies that did not answer in time")
    complete: bool
    placement_violations: int = Field(
        description="ledgers whose write quorums span fewer racks than the rack policy "
        "wants (GET /v1/admin/placement of a gateway lists them)"
    )


class LastRetention(BaseModel):
    started_at: int = Field(description="ms since the epoch")
    duration_s: float
    logs: int = Field(description="logs looked at")
    ledgers_removed: int
    bytes_removed: int
    records_skipped: int = Field(
        description="records removed before a durable cursor acknowledged them"
    )
    ledgers_held_for_cursors: int = Field(
        description="ledgers past their log's limits kept for durable cursors"
    )
    conflicts: int = Field(description="logs that changed during the pass (the next one decides)")


class Status(BaseModel):
    id: str = Field(description="this auditor's id, host:port")
    elected: bool
    last_audit: LastAudit | None = Field(description="the last check this auditor completed")
    audit_running: bool
    last_retention: LastRetention | None = Field(
        description="the last retention pass this auditor completed"
    )


class AuditRequested(BaseModel):
    requested: bool = True
    auditor_id: str | None = Field(description="the elected auditor (null: none now)")


async def _connect(app: FastAPI, auditor: Auditor, store: MetadataStore) -> None:
    await store.start_retrying()
    while True:
        try:
            await auditor.start()
            break
        except (MetadataUnavailable, TimeoutError) as exc:
            log.warning("cannot start the auditor (%r); retrying", exc)
            await asyncio.sleep(START_RETRY_DELAY_S)
    app.state.auditor = auditor
    log.info("auditor %s ready", auditor.id)


def create_app(settings: AuditorSettings, ssl_context: ssl.SSLContext | None = None) -> FastAPI:
    """The auditor's application; ``ssl_context`` (the client context of its TLS, None
    when TLS is off) is what it reaches the bookies with (docs/security.md, "TLS")."""
    metrics = AuditorMetrics()
    secret = settings.cluster_secret

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = MetadataStore(
            settings.zk_hosts,
            session_timeout_s=settings.zk_session_timeout,
            credentials=settings.zk_credentials,
        )
        metrics.zookeeper.watch(store)
        auditor = Auditor(settings, store, metrics, ssl_context)
        app.state.store = store
        connecting = asyncio.create_task(_connect(app, auditor, store), name="auditor-connect")
        try:
            yield
        finally:
            app.state.auditor = None
            connecting.cancel()
            await asyncio.gather(connecting, return_exceptions=True)
            await auditor.aclose()
            await store.stop()

    app = new_app(
        title="Quire auditor",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        redirect_slashes=False,
    )
    install_openapi(app, "clusterSecret", SECRET_SCHEME, lambda path: bool(settings.cluster_secret))
    app.state.auditor = None
    app.state.store = None
    install_error_handlers(app)

    def ready() -> bool:
        store = app.state.store
        return app.state.auditor is not None and store is not None and store.connected

    def running(request: Request, given: str | None) -> Auditor:
        if secret and not secret_matches(given, secret):
            raise Unauthorized(f"missing or wrong {SECRET_HEADER}")
        auditor: Auditor | None = request.app.state.auditor
        if auditor is None:
            raise Unavailable("the auditor is not connected to ZooKeeper yet")
        return auditor

    @app.get(
        "/v1/status",
        tags=["auditor"],
        summary="This auditor's state",
        response_model=Status,
        responses=error_responses(
            DocumentedError(Unauthorized, "wrong secret"), DocumentedError(Unavailable, "not ready")
        ),
    )
    async def status(request: Request, x_cluster_secret: SecretHeader = None) -> Any:
        auditor = running(request, x_cluster_secret)
        doc = auditor.status()
        if os.environ.get(EXPOSE_SESSION_ENV) == "1":
            # Tests only (not in the documented model, so answered as is).
            client_id = auditor.store.client.client_id
            if client_id:
                doc["session"] = {"id": client_id[0], "password": client_id[1].hex()}
            return JSONResponse(doc)
        return doc

    @app.post(
        "/v1/audit",
        tags=["auditor"],
        status_code=202,
        summary="Ask the elected auditor for a full check now",
        response_model=AuditRequested,
        responses=error_responses(
            DocumentedError(Unauthorized, "wrong secret"), DocumentedError(Unavailable, "not ready")
        ),
    )
    async def audit(request: Request, x_cluster_secret: SecretHeader = None) -> dict[str, Any]:
        auditor = running(request, x_cluster_secret)
        # Through ZooKeeper only: the elected auditor (this one or another) watches it.
        await auditor.underreplication.request_audit()
        return {"requested": True, "auditor_id": await auditor.underreplication.auditor_id()}

    @app.post(
        "/v1/retention",
        tags=["auditor"],
        summary="Run a retention pass now (the elected auditor only) and answer its report",
        response_model=LastRetention,
        responses=error_responses(
            DocumentedError(Unauthorized, "wrong secret"),
            DocumentedError(Unavailable, "not ready, or not the elected auditor"),
        ),
    )
    async def retention_now(request: Request, x_cluster_secret: SecretHeader = None) -> Any:
        auditor = running(request, x_cluster_secret)
        return (await auditor.retention_now()).to_api()

    add_health_route(app, ready)

    @app.get(
        "/metrics",
        tags=["ops"],
        response_class=Response,
        summary="Prometheus metrics",
        responses={
            200: {
                "description": "Prometheus text exposition format",
                "content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
            }
        },
    )
    async def metrics_route(request: Request) -> Response:
        auditor: Auditor | None = request.app.state.auditor
        if auditor is not None:
            await auditor.refresh_gauges()
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app
