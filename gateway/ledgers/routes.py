"""The Ledgers API of docs/api.md."""

from __future__ import annotations

from typing import Annotated, Any

import pybase64
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from gateway import operations as ops
from gateway.http.batches import ADD_BODY
from gateway.http.deps import (
    EntryIdPath,
    FirstEntryQuery,
    GatewayDep,
    LastEntryQuery,
    LedgerIdPath,
    PasswordHeader,
    canonical_integer_queries,
    remember_client,
)
from gateway.http.errors import TIMED_OUT
from gateway.http.json_input import parse_json, validated
from gateway.ledgers import answers, pages
from gateway.ledgers.schemas import (
    LEDGER_CONFLICT,
    LEDGER_NOT_FOUND,
    LEDGER_UNAUTHORIZED,
    LEDGER_UNAVAILABLE,
    AddResult,
    BatchAddResult,
    CreateLedger,
    EntryPage,
    Lac,
    Ledger,
    LedgerList,
)
from gateway.logs import operations as log_ops
from services.errors import (
    InvalidArgument,
    LedgerInLog,
    MetadataConflict,
    PayloadTooLarge,
)
from services.ledger_client.runners import read as reads
from services.limits import (
    BODY_SIZE_MAX_BYTES,
    ID_MAX,
    LAC_WAIT_MAX_MS,
    LIST_LIMIT_MAX,
)
from services.protocol import long_poll
from services.protocol.reads import digest_key
from services.web.body import body_share, is_json, read_body, read_small_body
from services.web.errors import error_responses, explained, noted
from services.wire import entries_stream

router = APIRouter(
    prefix="/v1/ledgers",
    tags=["ledgers"],
    dependencies=[Depends(canonical_integer_queries), Depends(remember_client)],
)


def _json_body(raw: bytes) -> Any:
    """The JSON document of a request body, bounded (``gateway.http.json_input``): 400 when it
    is not JSON, holds NaN or a lone surrogate, or nests too deeply."""
    return parse_json(raw)


@router.post(
    "",
    status_code=201,
    response_model=Ledger,
    summary="Create a ledger (this gateway holds its write handle)",
    responses=error_responses(InvalidArgument, LEDGER_UNAUTHORIZED, *LEDGER_UNAVAILABLE),
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": CreateLedger.model_json_schema()}}
        }
    },
)
async def create_ledger(request: Request, gw: GatewayDep) -> JSONResponse:
    raw = await read_small_body(request)
    doc = _json_body(raw) if raw.strip() else {}
    if not isinstance(doc, dict):
        raise InvalidArgument("body must be a JSON object")
    body = validated(CreateLedger, doc)
    runner = await ops.create_ledger(
        gw,
        body.ensemble_size,
        body.write_quorum,
        body.ack_quorum,
        body.digest,
        body.password,
        body.metadata,
    )
    return JSONResponse(ops.api_object(gw, runner.metadata), status_code=201)


@router.get(
    "",
    response_model=LedgerList,
    summary="List ledger ids",
    responses=error_responses(InvalidArgument, LEDGER_UNAUTHORIZED),
)
async def list_ledgers(
    gw: GatewayDep,
    limit: Annotated[int, Query(ge=1, le=ID_MAX, description="clamped to 1000")] = LIST_LIMIT_MAX,
    after: Annotated[int | None, Query(ge=-1, le=ID_MAX)] = None,
) -> dict[str, Any]:
    ids, next_after = await gw.ctx.ledgers.list(after, min(limit, LIST_LIMIT_MAX))
    return {"ledgers": ids, "next": next_after}


@router.get(
    "/{ledger_id}",
    response_model=Ledger,
    summary="A ledger's metadata (never checks or shows the password)",
    responses=error_responses(InvalidArgument, LEDGER_UNAUTHORIZED, *LEDGER_NOT_FOUND),
)
async def get_ledger(ledger_id: LedgerIdPath, gw: GatewayDep) -> dict[str, Any]:
    # ZooKeeper decides (the writer's view may trail it after a recovery elsewhere);
    # while it cannot answer, the copy this gateway read last (docs/operations.md).
    return ops.api_object(gw, await gw.metadata.current(ledger_id))


@router.post(
    "/{ledger_id}/entries",
    summary="Add one entry (raw body) or a batch (JSON)",
    responses={
        200: {
            "description": "acknowledged by an ack quorum, with every lower entry",
            "content": {
                "application/json": {
                    "schema": {
                        "oneOf": [
                            AddResult.model_json_schema(),
                            BatchAddResult.model_json_schema(),
                        ]
                    }
                }
            },
        },
        **error_responses(
            InvalidArgument,
            LEDGER_UNAUTHORIZED,
            *LEDGER_NOT_FOUND,
            *LEDGER_CONFLICT,
            PayloadTooLarge,
            *LEDGER_UNAVAILABLE,
            TIMED_OUT,
        ),
    },
    openapi_extra=ADD_BODY,
)
async def add_entries(
    ledger_id: LedgerIdPath, request: Request, gw: GatewayDep, password: PasswordHeader = None
) -> dict[str, int]:
    with body_share(request) as share:
        raw = await read_body(request, BODY_SIZE_MAX_BYTES, share)
        return await answers.add_answer(gw, ledger_id, password, raw, is_json(request))


@router.post(
    "/{ledger_id}/close",
    response_model=Ledger,
    summary="Close as the writer (closing again returns the same object)",
    responses=error_responses(
        InvalidArgument,
        LEDGER_UNAUTHORIZED,
        *LEDGER_NOT_FOUND,
        *LEDGER_CONFLICT,
        *LEDGER_UNAVAILABLE,
    ),
)
async def close_ledger(
    ledger_id: LedgerIdPath, gw: GatewayDep, password: PasswordHeader = None
) -> dict[str, Any]:
    return await ops.close(gw, ledger_id, password)


@router.post(
    "/{ledger_id}/recover",
    response_model=Ledger,
    summary="Fence, recover and close an OPEN ledger (any gateway); a CLOSED one is unchanged",
    responses=error_responses(
        InvalidArgument, LEDGER_UNAUTHORIZED, *LEDGER_NOT_FOUND, *LEDGER_UNAVAILABLE, TIMED_OUT
    ),
)
async def recover_ledger(
    ledger_id: LedgerIdPath, gw: GatewayDep, password: PasswordHeader = None
) -> dict[str, Any]:
    return await ops.recover(gw, ledger_id, password)


@router.delete(
    "/{ledger_id}",
    status_code=204,
    summary="Delete a ledger and its entries",
    description="A ledger that a log lists is not deleted (409 ledger_in_log): truncate "
    "the log past it, or delete the log.",
    responses={
        **error_responses(
            InvalidArgument,
            LEDGER_UNAUTHORIZED,
            *LEDGER_NOT_FOUND,
            noted(LedgerInLog, "a log lists it"),
            MetadataConflict,
        ),
    },
)
async def delete_ledger(
    ledger_id: LedgerIdPath, gw: GatewayDep, password: PasswordHeader = None
) -> Response:
    await log_ops.delete_ledger(gw, ledger_id, password)
    reads.forget_lac(gw.ctx, ledger_id)
    return Response(status_code=204)


@router.get(
    "/{ledger_id}/lac",
    response_model=Lac,
    summary="Last add confirmed, optionally long-polling for a newer one (never fences)",
    responses=error_responses(
        InvalidArgument, LEDGER_UNAUTHORIZED, *LEDGER_NOT_FOUND, *LEDGER_UNAVAILABLE
    ),
)
async def get_lac(
    ledger_id: LedgerIdPath,
    gw: GatewayDep,
    password: PasswordHeader = None,
    after: Annotated[int | None, Query(ge=-1, le=ID_MAX)] = None,
    wait_ms: Annotated[int, Query(ge=0, le=ID_MAX, description="clamped to 30000")] = 0,
) -> dict[str, int]:
    metadata = await ops.metadata_for(gw, ledger_id, password)
    # Up to a sixteenth early, drawn per poll: pollers that started together spread out.
    wait_ms = long_poll.wait_ms(min(wait_ms, LAC_WAIT_MAX_MS))
    return {"last_add_confirmed": await ops.lac(gw, metadata, after, wait_ms)}


@router.get(
    "/{ledger_id}/entries",
    response_model=EntryPage,
    summary="Read a range (paged; NDJSON stream with Accept: application/x-ndjson)",
    responses={
        200: {
            "description": "a page; with Accept: application/x-ndjson the whole range as "
            "lines; with Accept: application/vnd.quire.entries the whole range as binary "
            "frames (entry_id u64 big-endian, length u32 big-endian, payload), the readable "
            "end used in the X-Last-Add-Confirmed header",
            "content": {
                "application/x-ndjson": {
                    "schema": {"type": "string", "description": '{"entry_id", "data"} lines'}
                },
                entries_stream.MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}},
            },
        },
        **error_responses(
            explained(InvalidArgument, "a bad id, or from > to (both given)"),
            LEDGER_UNAUTHORIZED,
            *LEDGER_NOT_FOUND,
            *LEDGER_UNAVAILABLE,
        ),
    },
)
async def read_entries(
    ledger_id: LedgerIdPath,
    request: Request,
    gw: GatewayDep,
    password: PasswordHeader = None,
    first: FirstEntryQuery = None,
    last: LastEntryQuery = None,
) -> Any:
    if first is not None and last is not None and first > last:
        raise InvalidArgument(f"from ({first}) > to ({last})")
    metadata = await ops.metadata_for(gw, ledger_id, password)
    key = digest_key(metadata, password)
    end = await pages.last_readable(gw, metadata)
    start = 0 if first is None else first
    stop = end if last is None else min(last, end)
    # The first page is read before answering, so that an error there (no replica)
    # is still an {"error", "message"} answer and not a 200 with a broken stream.
    page = await pages.timed_read(
        gw, metadata, lambda current: reads.read_page(gw.ctx, current, start, stop, key)
    )
    accept = request.headers.get("accept", "")
    if entries_stream.MEDIA_TYPE in accept:
        return StreamingResponse(
            pages.frames(gw, metadata, page, stop, key),
            media_type=entries_stream.MEDIA_TYPE,
            headers={"X-Last-Add-Confirmed": str(end)},
        )
    if "application/x-ndjson" in accept:
        return StreamingResponse(
            pages.ndjson(gw, metadata, page, stop, key), media_type="application/x-ndjson"
        )
    next_id = page.next_entry_id if page.next_entry_id is not None else None
    if next_id is not None and next_id > stop:
        next_id = None
    return {
        "entries": [
            {"entry_id": eid, "data": pybase64.b64encode_as_string(data)}
            for eid, data in page.entries
        ],
        "last_add_confirmed": end,
        "next": next_id,
    }


@router.get(
    "/{ledger_id}/entries/{entry_id}",
    response_class=Response,
    summary="One entry's raw bytes",
    responses={
        200: {"content": {"application/octet-stream": {"schema": {"type": "string",
                                                                  "format": "binary"}}}},
        **error_responses(
            InvalidArgument, LEDGER_UNAUTHORIZED, *LEDGER_NOT_FOUND, *LEDGER_UNAVAILABLE
        ),
    },
)  # fmt: skip
async def read_entry(
    ledger_id: LedgerIdPath,
    entry_id: EntryIdPath,
    gw: GatewayDep,
    password: PasswordHeader = None,
) -> Response:
    metadata = await ops.metadata_for(gw, ledger_id, password)
    end = await pages.last_readable(gw, metadata)
    key = digest_key(metadata, password)
    data = await pages.timed_read(
        gw, metadata, lambda current: reads.read_single(gw.ctx, current, entry_id, end, key)
    )
    return Response(data, media_type="application/octet-stream")
