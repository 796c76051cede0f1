"""The bookie's space: the storage report and garbage-collection passes on demand
(bookie/collector.py; docs/operations.md, "Space given back")."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from bookie.models import SECRET_REFUSED, GcPassResult, StorageReport
from bookie.routes.deps import NodeDep
from services.errors import InvalidArgument
from services.web.errors import error_responses, explained

router = APIRouter(prefix="/v1", tags=["bookie"])


@router.get(
    "/storage",
    summary="Where this bookie's space goes: live, orphaned and pending-delete ledgers",
    description=(
        "The database's size and free pages, the live ledgers, and the ledgers whose "
        "metadata garbage collection found missing, each with its bytes and the reason it "
        "is listed (lists bounded; the counts cover all)."
    ),
    response_model=StorageReport,
    responses=error_responses(SECRET_REFUSED),
)
async def storage(node: NodeDep) -> JSONResponse:
    return JSONResponse(await node.open_collector().report(node.bookie_id))


@router.post(
    "/gc",
    summary="Run a garbage-collection pass now",
    description=(
        "Waits for a pass already running, then runs one. With `dry_run=true` it reads "
        "ZooKeeper and answers what a pass would free now, deleting nothing and starting "
        "or clearing no ledger's grace."
    ),
    response_model=GcPassResult,
    responses=error_responses(explained(InvalidArgument, "bad dry_run"), SECRET_REFUSED),
)
async def run_gc(
    node: NodeDep,
    dry_run: Annotated[bool, Query(description="Only answer what would be freed")] = False,
) -> JSONResponse:
    return JSONResponse(await node.open_collector().run_pass(dry_run=dry_run))
