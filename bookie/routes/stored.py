"""Which entries the bookie stores, for one ledger or many (bookie.stored)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from bookie.models import (
    SECRET_REFUSED,
    UNKNOWN_HERE,
    LedgerIdPath,
    StoredBatch,
    StoredBatchResult,
    StoredLedger,
)
from bookie.routes.deps import NodeDep
from bookie.stored import stored_reports
from services.errors import InvalidArgument, LedgerNotFound, present
from services.limits import (
    STORED_BATCH_MAX,
    STORED_BATCH_RUNS_MAX,
    STORED_RUNS_MAX,
    STORED_SAMPLE_ENTRIES_MAX,
)
from services.web.errors import error_responses, explained

router = APIRouter(prefix="/v1", tags=["ledgers"])

_CHECKS = (
    "A crc32c entry is checked against its digest; an hmac-sha256 or none entry only for "
    "its shape (the bookie has no HMAC key and keeps no record checksum): `checked` counts "
    "the entries checked, `corrupt` lists those that fail."
)


@router.get(
    "/ledgers/{ledger_id}/stored",
    summary="The runs of entry ids this bookie stores for a ledger; optionally check digests",
    description=(
        "`ranges` are the maximal runs [first, last] of consecutive entry ids stored, "
        f"ascending (at most {STORED_RUNS_MAX}; then `truncated: true`), `entries` how many. "
        f"verify=sample checks at most {STORED_SAMPLE_ENTRIES_MAX} entries (first, last, "
        "evenly spaced between), verify=all every entry (read in bounded chunks). " + _CHECKS
    ),
    response_model=StoredLedger,
    response_model_exclude_none=True,
    responses=error_responses(
        explained(InvalidArgument, "bad ledger id or verify"), UNKNOWN_HERE, SECRET_REFUSED
    ),
)
async def stored(
    ledger_id: LedgerIdPath,
    node: NodeDep,
    verify: Annotated[
        Literal["none", "sample", "all"], Query(description="Which entries to digest-check")
    ] = "none",
) -> JSONResponse:
    reader = present(node.reader, "the reader exists while the store is open")
    (report,) = await stored_reports(reader, node.index, [ledger_id], verify)
    if not report.known:
        raise LedgerNotFound(f"ledger {ledger_id} is not stored on this bookie")
    return JSONResponse(report.to_json(with_known=False))


@router.post(
    "/stored",
    summary="The runs of entry ids stored for many ledgers in one request",
    description=(
        f"1 to {STORED_BATCH_MAX} ledger ids; the answers come in the order asked. One "
        "query computes the runs of all of them. An unknown ledger answers `known: false` "
        "with no ranges. Each ledger lists at most "
        f"{STORED_RUNS_MAX} runs, and the whole answer at most {STORED_BATCH_RUNS_MAX} (the "
        "lowest ledger ids first); "
        "a ledger whose list was cut says `truncated: true` (ask it alone). " + _CHECKS
    ),
    response_model=StoredBatchResult,
    response_model_exclude_none=True,
    responses=error_responses(
        explained(InvalidArgument, "empty or oversized list, bad id or verify"), SECRET_REFUSED
    ),
)
async def stored_many(body: StoredBatch, node: NodeDep) -> JSONResponse:
    reader = present(node.reader, "the reader exists while the store is open")
    reports = await stored_reports(reader, node.index, body.ledger_ids, body.verify)
    return JSONResponse({"ledgers": [r.to_json(with_known=True) for r in reports]})
