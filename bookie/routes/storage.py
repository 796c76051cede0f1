"""The bookie's space: the storage report, its ledgers with their bytes a page at a time,
and garbage-collection passes on demand (bookie/collector.py; docs/operations.md, "Space
given back")."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from bookie.models import SECRET_REFUSED, GcPassResult, StorageLedgerPage, StorageReport
from bookie.routes.deps import NodeDep
from services.errors import InvalidArgument
from services.limits import ID_MAX, LIST_LIMIT_MAX
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


@router.get(
    "/storage/ledgers",
    summary="Every ledger stored here with its bytes, a page at a time",
    description=(
        "Ascending ids after `after`, each with its payload bytes as the storage report "
        "counts them: live, orphaned and pending-delete ledgers alike, so the pages add up "
        f"to all the bytes the report accounts for. `limit` defaults to and is clamped to "
        f"{LIST_LIMIT_MAX}. A gateway counts them by log "
        "(`GET /v1/admin/bookies/{id}/storage?by_log=true`)."
    ),
    response_model=StorageLedgerPage,
    responses=error_responses(explained(InvalidArgument, "bad after or limit"), SECRET_REFUSED),
)
async def storage_ledgers(
    node: NodeDep,
    after: Annotated[int, Query(ge=-1, le=ID_MAX, description="List ids greater than this")] = -1,
    limit: Annotated[int, Query(ge=1, le=ID_MAX, description="Most ledgers to return")] = (
        LIST_LIMIT_MAX
    ),
) -> JSONResponse:
    limit = min(limit, LIST_LIMIT_MAX)
    reader = node.open_reader()
    page = await asyncio.get_running_loop().run_in_executor(
        reader.executor, reader.ledger_bytes_page, after, limit
    )
    return JSONResponse(
        {
            "ledgers": [{"ledger_id": lid, "bytes": size} for lid, size in page],
            "next": page[-1][0] if len(page) == limit else None,
        }
    )


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
