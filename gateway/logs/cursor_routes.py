"""The durable cursors of the Logs API (docs/api.md "Logs: cursors"); reads through a
cursor are ``GET /v1/logs/{name}/records?cursor=`` (gateway/logs/routes.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse, Response

from gateway.http.deps import GatewayDep, canonical_integer_queries
from gateway.http.json_input import parse_json
from gateway.logs import cursors
from gateway.logs.routes import LOG_INVALID, LOG_UNAVAILABLE, LogNamePath
from gateway.logs.schemas import AckCursor, CreateCursor, CursorAcked, CursorList, CursorModel
from services.errors import (
    CursorNotFound,
    InvalidArgument,
    LogNotFound,
    MetadataConflict,
    Unauthorized,
)
from services.protocol.cursors import CURSOR_NAME_MAX_CHARS, CursorStart, CursorState
from services.protocol.logs import Position
from services.web.body import read_small_body
from services.web.errors import error_responses

if TYPE_CHECKING:
    from gateway.service import Gateway

router = APIRouter(
    prefix="/v1/logs", tags=["logs"], dependencies=[Depends(canonical_integer_queries)]
)

# The pattern documents the name (checked again by ``check_cursor_name``, with the API's
# message).
CursorNamePath = Annotated[
    str,
    Path(
        description=f"1-{CURSOR_NAME_MAX_CHARS} characters of A-Za-z0-9._-",
        min_length=1,
        max_length=CURSOR_NAME_MAX_CHARS,
        pattern="^[A-Za-z0-9._-]+$",
    ),
]
CURSOR_ERRORS = (LOG_INVALID, Unauthorized, LogNotFound, CursorNotFound, *LOG_UNAVAILABLE)


async def _answer(gw: Gateway, log: str, name: str, cursor: CursorState) -> dict[str, Any]:
    [(records, size)] = await cursors.lags(gw, log, [cursor.position])
    return cursor.to_api(name, records, size)


async def _body(request: Request) -> dict[str, Any]:
    raw = await read_small_body(request)
    doc = parse_json(raw) if raw.strip() else {}
    if not isinstance(doc, dict):
        raise InvalidArgument("body must be a JSON object")
    return doc


@router.put(
    "/{name}/cursors/{cursor}",
    response_model=CursorModel,
    status_code=201,
    summary="Create a durable cursor (201), or answer the existing one unchanged (200)",
    responses={
        200: {"description": "the cursor exists", "model": CursorModel},
        **error_responses(*CURSOR_ERRORS),
    },
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": CreateCursor.model_json_schema()}},
        }
    },
)
async def create_cursor(
    name: LogNamePath, cursor: CursorNamePath, request: Request, gw: GatewayDep
) -> JSONResponse:
    doc = await _body(request)
    if set(doc) - {"start"}:
        raise InvalidArgument("the body takes start only")
    start = CursorStart.from_api(doc.get("start", "latest"))
    state, created = await cursors.create(gw, name, cursor, start)
    answer = await _answer(gw, name, cursor, state)
    return JSONResponse(answer, status_code=201 if created else 200)


@router.get(
    "/{name}/cursors",
    response_model=CursorList,
    summary="The log's durable cursors with their lag, by name",
    responses=error_responses(LOG_INVALID, Unauthorized, LogNotFound, *LOG_UNAVAILABLE),
)
async def list_cursors(name: LogNamePath, gw: GatewayDep) -> dict[str, Any]:
    found = await cursors.list_all(gw, name)
    lags = await cursors.lags(gw, name, [state.position for _, state in found])
    return {
        "cursors": [
            state.to_api(cursor, records, size)
            for (cursor, state), (records, size) in zip(found, lags, strict=True)
        ]
    }


@router.get(
    "/{name}/cursors/{cursor}",
    response_model=CursorModel,
    summary="A durable cursor with its lag",
    responses=error_responses(*CURSOR_ERRORS),
)
async def get_cursor(name: LogNamePath, cursor: CursorNamePath, gw: GatewayDep) -> dict[str, Any]:
    return await _answer(gw, name, cursor, await cursors.get(gw, name, cursor))


@router.delete(
    "/{name}/cursors/{cursor}",
    status_code=204,
    summary="Delete a durable cursor",
    responses=error_responses(*CURSOR_ERRORS),
)
async def delete_cursor(name: LogNamePath, cursor: CursorNamePath, gw: GatewayDep) -> Response:
    await cursors.delete(gw, name, cursor)
    return Response(status_code=204)


@router.post(
    "/{name}/cursors/{cursor}/ack",
    response_model=CursorAcked,
    summary="Move the cursor forward to a position (an older one changes nothing)",
    description="Answered once the position is stored in ZooKeeper; acks to one cursor "
    "are merged (the highest wins) and written at most every --cursor-flush-ms per "
    "gateway. moved: false when the position was at or before the cursor's.",
    responses=error_responses(*CURSOR_ERRORS, MetadataConflict),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": AckCursor.model_json_schema()}},
        }
    },
)
async def ack_cursor(
    name: LogNamePath, cursor: CursorNamePath, request: Request, gw: GatewayDep
) -> dict[str, Any]:
    doc = await _body(request)
    if set(doc) != {"position"}:
        raise InvalidArgument('the body is {"position": "LID:EID"}')
    position = Position.from_api(doc["position"], "position")
    state, moved = await gw.cursors.ack(name, cursor, position)
    return {**await _answer(gw, name, cursor, state), "moved": moved}
