"""Per-ledger operations: LAC (with long-poll), explicit LAC update, fence, delete, list."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, Response

from bookie.models import (
    SECRET_REFUSED,
    UNKNOWN_HERE,
    LacBatch,
    LacBatchResult,
    LacUpdate,
    LedgerIdPath,
    LedgerList,
    LedgerState,
)
from bookie.routes.deps import NodeDep
from services.errors import InvalidArgument, LedgerNotFound
from services.limits import ID_MAX, LAC_WAIT_MAX_MS, LIST_LIMIT_MAX
from services.web.errors import error_responses, explained

router = APIRouter(prefix="/v1/ledgers", tags=["ledgers"])
batch_router = APIRouter(prefix="/v1", tags=["ledgers"])


@batch_router.post(
    "/lacs",
    summary="Record the LACs a writer has reached, for many ledgers in one request",
    description=(
        "The same as `POST /v1/ledgers/{id}/lac` for each listed ledger (keeps the maximum, "
        "creates unknown ledger records), all durable before the answer, in one group "
        "commit. A writer of many ledgers sends its idle LAC updates to a bookie this way."
    ),
    response_model=LacBatchResult,
    responses=error_responses(
        explained(InvalidArgument, "bad ids, empty or oversized list"), SECRET_REFUSED
    ),
)
async def update_lacs(body: LacBatch, node: NodeDep) -> JSONResponse:
    latest: dict[int, int] = {}
    for item in body.lacs:
        latest[item.ledger_id] = max(item.lac, latest.get(item.ledger_id, -1))
    await asyncio.gather(*(node.update_lac(lid, lac) for lid, lac in latest.items()))
    return JSONResponse({"updated": len(latest)})


def _not_here(ledger_id: int) -> LedgerNotFound:
    return LedgerNotFound(f"ledger {ledger_id} is not stored on this bookie")


@router.get(
    "/{ledger_id}/lac",
    summary="Read the ledger's LAC, last entry and fenced flag (optionally long-poll)",
    description=(
        "`lac` is the highest LAC seen (in entries or explicit updates), `last_entry_id` "
        "the highest entry id stored (-1 if none), `length` and `lac_length` the ledger's "
        "length at them (-1: that entry is not stored here), `instance_id` this bookie's "
        "instance. With `after`, waits up to `wait_ms` "
        f"(clamped to {LAC_WAIT_MAX_MS}) until lac > after or last_entry_id > after, also "
        "for a ledger not known yet, then answers with what it has (404 if the ledger is "
        "still unknown)."
    ),
    response_model=LedgerState,
    responses=error_responses(
        explained(InvalidArgument, "bad ledger id, after or wait_ms"), UNKNOWN_HERE, SECRET_REFUSED
    ),
)
async def read_lac(
    ledger_id: LedgerIdPath,
    node: NodeDep,
    after: Annotated[
        int | None, Query(ge=-1, le=ID_MAX, description="Wait until lac or last entry > this")
    ] = None,
    wait_ms: Annotated[int, Query(ge=0, le=ID_MAX, description="Longest wait in milliseconds")] = 0,
) -> JSONResponse:
    if after is None:
        view = node.index.get(ledger_id)
    else:
        view = await node.index.wait_past(ledger_id, after, min(wait_ms, LAC_WAIT_MAX_MS) / 1000)
    if view is None:
        raise _not_here(ledger_id)
    return JSONResponse(await node.ledger_answer(view))


@router.post(
    "/{ledger_id}/lac",
    summary="Record a LAC the writer has reached (keeps the maximum)",
    description="Durable before the answer. Creates the ledger record if unknown.",
    response_model=LedgerState,
    responses=error_responses(explained(InvalidArgument, "bad ledger id or body"), SECRET_REFUSED),
)
async def update_lac(ledger_id: LedgerIdPath, body: LacUpdate, node: NodeDep) -> JSONResponse:
    view = await node.update_lac(ledger_id, body.lac)
    return JSONResponse(await node.ledger_answer(view))


@router.post(
    "/{ledger_id}/fence",
    summary="Fence the ledger: later normal adds are rejected, recovery adds accepted",
    description=(
        "The fenced flag is on disk before the answer. Creates the ledger record if "
        "unknown (a recovery must fence bookies that never saw an entry). Idempotent."
    ),
    response_model=LedgerState,
    responses=error_responses(explained(InvalidArgument, "bad ledger id"), SECRET_REFUSED),
)
async def fence(ledger_id: LedgerIdPath, node: NodeDep) -> JSONResponse:
    view = await node.fence(ledger_id)
    return JSONResponse(await node.ledger_answer(view))


@router.delete(
    "/{ledger_id}",
    summary="Delete the ledger's entries and flags; reclaim the space",
    status_code=204,
    response_class=Response,
    responses={
        204: {"description": "Deleted"},
        **error_responses(
            explained(InvalidArgument, "bad ledger id"), UNKNOWN_HERE, SECRET_REFUSED
        ),
    },
)
async def delete_ledger(ledger_id: LedgerIdPath, node: NodeDep) -> Response:
    await node.delete(ledger_id)
    return Response(status_code=204)


@router.get(
    "",
    summary="List the ledgers stored here",
    description=f"Ascending ids after `after`; `limit` defaults to and is clamped to "
    f"{LIST_LIMIT_MAX}.",
    response_model=LedgerList,
    responses=error_responses(explained(InvalidArgument, "bad after or limit"), SECRET_REFUSED),
)
async def list_ledgers(
    node: NodeDep,
    after: Annotated[int, Query(ge=-1, le=ID_MAX, description="List ids greater than this")] = -1,
    limit: Annotated[int, Query(ge=1, le=ID_MAX, description="Most ids to return")] = (
        LIST_LIMIT_MAX
    ),
) -> JSONResponse:
    limit = min(limit, LIST_LIMIT_MAX)
    reader = node.open_reader()
    ids = await asyncio.get_running_loop().run_in_executor(
        reader.executor, reader.list_ledgers, after, limit
    )
    return JSONResponse({"ledgers": ids, "next": ids[-1] if len(ids) == limit else None})
