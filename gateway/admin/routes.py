"""The Admin API of docs/api.md (``/v1/admin/...``); the logic is ``gateway.admin.service``.

The admin token rules are applied before routing (``gateway.http.auth``). Extensions to
docs/api.md's objects: per-bookie figures in the bookie listing, ``marked_at``, ``progress``
and ``worker`` of an under-replicated ledger with ``?limit=&after=`` paging, the answer
of ``POST /v1/admin/audit``, ``GET /v1/admin/bookies/{id}``, and racks: each bookie's,
the cluster's, and the auditor's placement report (``GET /v1/admin/placement``).
A bookie's storage report and garbage-collection passes are the bookie's answers
(docs/operations.md "Space given back"); ``?by_log=true`` adds its bytes counted by log.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse

from gateway.admin.schemas import (
    ADMIN_UNAUTHORIZED,
    ADMIN_UNAVAILABLE,
    AdminBookie,
    AuditRequested,
    BookieList,
    Cluster,
    Drained,
    GatewayList,
    GcPass,
    PlacementReport,
    StorageReport,
    UnderReplicatedList,
)
from gateway.admin.service import AdminService
from gateway.http.deps import GatewayDep, canonical_integer_queries
from gateway.limits import BY_LOG_LEDGERS_MAX, BY_LOG_TIME_MAX_S
from services.errors import (
    BookieNotFound,
    BookieUnavailable,
    InvalidArgument,
    NotFound,
    Unavailable,
)
from services.limits import ID_MAX, LIST_LIMIT_MAX
from services.web.errors import error_responses, explained

router = APIRouter(
    prefix="/v1/admin",
    tags=["admin"],
    dependencies=[Depends(canonical_integer_queries)],
)


async def get_admin(request: Request) -> AdminService:
    admin = getattr(request.app.state, "admin", None)
    if admin is None or request.app.state.gateway is None:
        raise Unavailable("the gateway is not ready: it is not connected to ZooKeeper yet")
    return admin  # type: ignore[no-any-return]


AdminDep = Annotated[AdminService, Depends(get_admin)]
GatewayIdPath = Annotated[
    str, Path(min_length=1, max_length=255, description="the gateway's id (host:port)")
]
BookieIdPath = Annotated[
    str, Path(min_length=1, max_length=255, description="the bookie's id (host:port)")
]


@router.get(
    "/cluster",
    response_model=Cluster,
    summary="The cluster: auditor, replication switch, under-replicated count, bookies",
    responses=error_responses(ADMIN_UNAUTHORIZED, *ADMIN_UNAVAILABLE),
)
async def get_cluster(admin: AdminDep) -> dict[str, Any]:
    return await admin.cluster()


@router.get(
    "/bookies",
    response_model=BookieList,
    summary="Every known bookie with its state, ledger count and free disk",
    responses=error_responses(ADMIN_UNAUTHORIZED, *ADMIN_UNAVAILABLE),
)
async def list_bookies(admin: AdminDep) -> dict[str, Any]:
    return {"bookies": await admin.bookies()}


@router.get(
    "/bookies/{bookie_id}",
    response_model=AdminBookie,
    summary="One bookie (extension)",
    responses=error_responses(
        InvalidArgument, ADMIN_UNAUTHORIZED, BookieNotFound, *ADMIN_UNAVAILABLE
    ),
)
async def get_bookie(admin: AdminDep, bookie_id: BookieIdPath) -> dict[str, Any]:
    return await admin.bookie_object(bookie_id)


@router.post(
    "/bookies/{bookie_id}/decommission",
    status_code=202,
    response_model=AdminBookie,
    summary="Decommission a bookie (up or down): its state is decommissioning from this "
    "answer on, so no new ensemble chooses it; everything on it is re-replicated, then it "
    "is decommissioned. Idempotent.",
    responses=error_responses(
        InvalidArgument, ADMIN_UNAUTHORIZED, BookieNotFound, *ADMIN_UNAVAILABLE
    ),
)
async def decommission_bookie(admin: AdminDep, bookie_id: BookieIdPath) -> JSONResponse:
    return JSONResponse(await admin.decommission(bookie_id), status_code=202)


@router.get(
    "/bookies/{bookie_id}/storage",
    response_model=StorageReport,
    # ``by_log`` is in the answer only when asked for.
    response_model_exclude_unset=True,
    summary="A bookie's space: its file, live ledgers, and the ledgers garbage collection "
    "found orphaned or will delete, each with its reason; with by_log=true, its bytes by log",
    description="With `by_log=true` the answer adds `by_log`: every ledger the bookie "
    "stores, counted by the log its metadata names (the largest 100 logs listed), by plain "
    "ledgers, and by ledgers whose metadata is gone. It pages through the bookie's ledgers "
    f"and reads their metadata from ZooKeeper, so it stops after {BY_LOG_LEDGERS_MAX:,} "
    f"ledgers or {BY_LOG_TIME_MAX_S:g} s and then says `truncated`.",
    responses=error_responses(
        explained(InvalidArgument, "bad by_log"),
        ADMIN_UNAUTHORIZED,
        BookieNotFound,
        BookieUnavailable,
        *ADMIN_UNAVAILABLE,
    ),
)
async def get_bookie_storage(
    admin: AdminDep,
    bookie_id: BookieIdPath,
    by_log: Annotated[
        bool, Query(description="also count the bookie's bytes by log (costly: see above)")
    ] = False,
) -> dict[str, Any]:
    return await admin.storage(bookie_id, by_log)


@router.post(
    "/bookies/{bookie_id}/gc",
    response_model=GcPass,
    summary="Run a garbage-collection pass on a bookie now (dry_run: only say what it "
    "would free, deleting nothing and starting no ledger's grace)",
    responses=error_responses(
        InvalidArgument, ADMIN_UNAUTHORIZED, BookieNotFound, BookieUnavailable, *ADMIN_UNAVAILABLE
    ),
)
async def run_bookie_gc(
    admin: AdminDep,
    bookie_id: BookieIdPath,
    dry_run: Annotated[bool, Query(description="only answer what would be freed")] = False,
) -> dict[str, Any]:
    return await admin.gc(bookie_id, dry_run)


@router.get(
    "/under-replicated",
    response_model=UnderReplicatedList,
    summary="Under-replicated ledgers in id order, with missing bookies and repair progress",
    responses=error_responses(InvalidArgument, ADMIN_UNAUTHORIZED, *ADMIN_UNAVAILABLE),
)
async def list_under_replicated(
    admin: AdminDep,
    limit: Annotated[int, Query(ge=1, le=ID_MAX, description="clamped to 1000")] = LIST_LIMIT_MAX,
    after: Annotated[int | None, Query(ge=-1, le=ID_MAX)] = None,
) -> dict[str, Any]:
    ledgers, next_after = await admin.under_replicated(
        -1 if after is None else after, min(limit, LIST_LIMIT_MAX)
    )
    return {"ledgers": ledgers, "next": next_after}


@router.get(
    "/placement",
    response_model=PlacementReport,
    summary="Ledgers whose write quorums span too few racks, as the auditor last found them",
    description="The elected auditor's placement report of its last complete check "
    '(docs/operations.md "Racks"): bookies per rack, how many ledgers break the rack '
    "policy, how many a placement move can fix now (they are marked, and the replication "
    "workers move them), and the first 100 with their fragments.",
    responses=error_responses(ADMIN_UNAUTHORIZED, *ADMIN_UNAVAILABLE),
)
async def get_placement(admin: AdminDep) -> dict[str, Any]:
    return await admin.placement()


@router.post(
    "/replication/enable",
    response_model=Cluster,
    summary="Enable re-replication cluster-wide",
    responses=error_responses(ADMIN_UNAUTHORIZED, *ADMIN_UNAVAILABLE),
)
async def enable_replication(admin: AdminDep) -> dict[str, Any]:
    return await admin.set_replication(True)


@router.post(
    "/replication/disable",
    response_model=Cluster,
    summary="Disable re-replication cluster-wide (workers start nothing new; marks stay)",
    responses=error_responses(ADMIN_UNAUTHORIZED, *ADMIN_UNAVAILABLE),
)
async def disable_replication(admin: AdminDep) -> dict[str, Any]:
    return await admin.set_replication(False)


@router.post(
    "/audit",
    status_code=202,
    response_model=AuditRequested,
    summary="Ask the elected auditor for a full check now",
    responses=error_responses(ADMIN_UNAUTHORIZED, *ADMIN_UNAVAILABLE),
)
async def request_audit(admin: AdminDep) -> JSONResponse:
    return JSONResponse(await admin.request_audit(), status_code=202)


@router.get(
    "/gateways",
    response_model=GatewayList,
    summary="The live gateways (registered in ZooKeeper), and which are draining",
    responses=error_responses(ADMIN_UNAUTHORIZED, *ADMIN_UNAVAILABLE),
)
async def list_gateways(gw: GatewayDep) -> dict[str, Any]:
    return {"gateways": await gw.logs.owners.gateways()}


@router.post(
    "/gateways/{gateway_id}/drain",
    response_model=Drained,
    summary="Drain a gateway: it takes no log any more and hands the logs it writes to "
    "the other gateways; its /health says 503 from then on (any gateway takes the call)",
    responses=error_responses(InvalidArgument, ADMIN_UNAUTHORIZED, NotFound, *ADMIN_UNAVAILABLE),
)
async def drain_gateway(gateway_id: GatewayIdPath, request: Request, gw: GatewayDep) -> Any:
    return await gw.logs.owners.drain_gateway(gateway_id, request.headers.get("authorization"))
