"""The Logs API of docs/api.md ("Logs")."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import unquote

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from fastapi.responses import JSONResponse, Response

from gateway.http.batches import ADD_BODY
from gateway.http.deps import GatewayDep, canonical_integer_queries
from gateway.http.errors import FENCED, TIMED_OUT
from gateway.http.json_input import parse_json, validated
from gateway.logs import answers, cursors
from gateway.logs import operations as log_ops
from gateway.logs import reads as log_reads
from gateway.logs.owners import FORWARDED_BY, Caller
from gateway.logs.schemas import (
    TIME_TEXT_SCHEMA,
    Appended,
    AttachLedgers,
    AttachResult,
    BatchAppended,
    CommitModel,
    CreateLog,
    LogList,
    LogModel,
    PatchLog,
    RecordPage,
    Rolled,
    WriterTaken,
)
from services.bookie_client.client import SECRET_HEADER
from services.errors import (
    BookieUnavailable,
    CursorNotFound,
    IdempotencyKeyReused,
    InvalidArgument,
    LogNotFound,
    MetadataConflict,
    MetadataUnavailable,
    MethodNotAllowed,
    NotEnoughBookies,
    NotFound,
    NotWriter,
    PayloadTooLarge,
    PositionMismatch,
    Unauthorized,
    Unavailable,
)
from services.limits import (
    BODY_SIZE_MAX_BYTES,
    ID_MAX,
    LIST_LIMIT_MAX,
)
from services.protocol import log_records
from services.protocol.log_records import KEY_MAX_CHARS
from services.protocol.logs import (
    LOG_NAME_MAX_CHARS,
    POSITION_PATTERN,
    ExpectedLast,
    Position,
    check_log_name,
    parse_time,
)
from services.protocol.retention import RetentionPolicy
from services.web.body import body_share, is_json, read_body, read_small_body
from services.web.errors import error_responses, noted
from services.web.methods import allowed_methods, fallback_route

# Positions in queries: the pattern documented, not checked by FastAPI (Position.parse
# does, with its own message), and the bound a pattern cannot say in the description.
POSITION_DESCRIPTION = "LID:EID, each a decimal id of at most 2^63-1"
POSITION_SCHEMA: dict[str, Any] = {"json_schema_extra": {"pattern": POSITION_PATTERN}}

router = APIRouter(
    prefix="/v1/logs", tags=["logs"], dependencies=[Depends(canonical_integer_queries)]
)

# The errors of the log routes (docs/api.md "Logs"), by status.
LOG_INVALID = noted(InvalidArgument, "a bad name, position or body; a position outside the log")
LOG_CONFLICT = (NotWriter, IdempotencyKeyReused, FENCED, MetadataConflict)
LOG_UNAVAILABLE = (NotEnoughBookies, BookieUnavailable, Unavailable, MetadataUnavailable)


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="1-128 printable ASCII characters: a retry with the same key and body "
        "within the dedup window answers the original positions and appends nothing",
        min_length=1,
        max_length=KEY_MAX_CHARS,
        pattern="^[ -~]+$",
    ),
]
ExpectedLastPosition = Annotated[
    str | None,
    Header(
        alias="Expected-Last-Position",
        description="LID:EID, or `none` for a log with no record: append only if the log's "
        "last record is there, else 412 position_mismatch (with the actual last_position) "
        "and nothing is appended",
        # Documented, checked by ``ExpectedLast.parse`` (with the API's message).
        json_schema_extra={"pattern": f"^(none|{POSITION_PATTERN[1:-1]})$"},
    ),
]
# The pattern documents the name (checked again by ``_name``, with the API's message).
LogNamePath = Annotated[
    str,
    Path(
        description=f"1-{LOG_NAME_MAX_CHARS} characters of A-Za-z0-9._-",
        min_length=1,
        max_length=LOG_NAME_MAX_CHARS,
        pattern="^[A-Za-z0-9._-]+$",
    ),
]


def _name(name: str) -> str:
    return check_log_name(name)


@router.put(
    "/{name}",
    response_model=LogModel,
    status_code=201,
    summary="Create a log (201), or answer the existing one (200)",
    description=f"Log names: 1-{LOG_NAME_MAX_CHARS} characters of A-Za-z0-9._-. An optional "
    "JSON body sets the ensemble of the log's ledgers (default 3/2/2) and its retention "
    "policy (default none).",
    responses={
        200: {"description": "the log exists", "model": LogModel},
        **error_responses(LOG_INVALID, Unauthorized),
    },
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": CreateLog.model_json_schema()}},
        }
    },
)
async def create_log(name: LogNamePath, request: Request, gw: GatewayDep) -> JSONResponse:
    _name(name)
    raw = await read_small_body(request)
    doc = parse_json(raw) if raw.strip() else {}
    if not isinstance(doc, dict):
        raise InvalidArgument("body must be a JSON object")
    # The policy is read by RetentionPolicy (its own messages); the model documents it.
    policy = RetentionPolicy.from_api(doc.pop("retention", None))
    body = validated(CreateLog, doc, "invalid log settings: ")
    log, created = await log_ops.create(
        gw, name, body.ensemble_size, body.write_quorum, body.ack_quorum, policy
    )
    return JSONResponse(log.to_api(), status_code=201 if created else 200)


@router.patch(
    "/{name}",
    response_model=LogModel,
    response_model_exclude_unset=True,
    summary="Change a log's retention policy (a JSON merge patch)",
    description="The body names `retention`: fields given a value take it, fields given "
    'null are cleared, fields not named stay; `"retention": null` clears the policy. '
    "Needs the admin scope (a policy removes data). The next retention pass of the auditor "
    "applies it.",
    responses=error_responses(
        LOG_INVALID, Unauthorized, LogNotFound, MetadataConflict, *LOG_UNAVAILABLE
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": PatchLog.model_json_schema()},
                "application/merge-patch+json": {"schema": PatchLog.model_json_schema()},
            },
        }
    },
)
async def patch_log(name: LogNamePath, request: Request, gw: GatewayDep) -> dict[str, Any]:
    _name(name)
    doc = parse_json(await read_small_body(request))
    if not isinstance(doc, dict) or set(doc) != {"retention"}:
        raise InvalidArgument('body must be a JSON object naming "retention" (and nothing else)')
    return (await log_ops.set_retention(gw, name, doc["retention"])).to_api()


@router.get(
    "",
    response_model=LogList,
    summary="List log names",
    responses=error_responses(LOG_INVALID, Unauthorized),
)
async def list_logs(
    gw: GatewayDep,
    limit: Annotated[int, Query(ge=1, le=ID_MAX, description="clamped to 1000")] = LIST_LIMIT_MAX,
    after: Annotated[str | None, Query(max_length=LOG_NAME_MAX_CHARS)] = None,
    prefix: Annotated[
        str, Query(max_length=LOG_NAME_MAX_CHARS, description="only names starting with it")
    ] = "",
) -> dict[str, Any]:
    names, next_after = await log_ops.list_names(gw, after, min(limit, LIST_LIMIT_MAX), prefix)
    return {"logs": names, "next": next_after}


@router.get(
    "/{name}",
    response_model=LogModel,
    # ``usage`` only when asked for (the other fields are always in the answer).
    response_model_exclude_unset=True,
    summary="A log",
    responses=error_responses(LOG_INVALID, Unauthorized, LogNotFound),
)
async def get_log(
    name: LogNamePath,
    gw: GatewayDep,
    usage: Annotated[
        bool,
        Query(
            description="add `usage`: its ledgers, records and bytes (a metadata look-up "
            "per ledger, closed ones cached)"
        ),
    ] = False,
) -> dict[str, Any]:
    log = await log_ops.get_for_read(gw, _name(name))
    answer = log.to_api()
    if usage:
        answer["usage"] = (await log_reads.usage(gw, log)).to_api()
    return answer


@router.delete(
    "/{name}",
    status_code=204,
    summary="Delete a log and its ledgers (its writer, wherever it runs, is fenced)",
    responses=error_responses(LOG_INVALID, Unauthorized, LogNotFound, *LOG_UNAVAILABLE),
)
async def delete_log(name: LogNamePath, gw: GatewayDep) -> Response:
    await log_ops.delete(gw, _name(name))
    return Response(status_code=204)


@router.post(
    "/{name}/writer",
    response_model=WriterTaken,
    summary="Take the log's writer role (fences the last two ledgers, creates one, CAS)",
    responses=error_responses(
        LOG_INVALID, Unauthorized, LogNotFound, *LOG_CONFLICT, *LOG_UNAVAILABLE, TIMED_OUT
    ),
)
async def take_writer(name: LogNamePath, gw: GatewayDep) -> dict[str, int]:
    writer = await gw.logs.acquire(_name(name))
    return {"epoch": writer.epoch, "ledger_id": writer.ledger_id}


@router.post(
    "/{name}/records",
    summary="Append one record (raw body) or a batch (JSON); any gateway takes it",
    description="The gateway writing the log appends it; any other gateway forwards it "
    "there and answers what that gateway answered, or takes the writer role first when "
    "the log has no live writer (a gateway run with --no-log-forwarding answers 409 "
    "not_writer instead). With Expected-Last-Position the append happens only if the "
    "log's last record is there (412 position_mismatch otherwise).",
    responses={
        200: {
            "description": "appended (or, for a known Idempotency-Key, appended before)",
            "content": {
                "application/json": {
                    "schema": {
                        "oneOf": [
                            Appended.model_json_schema(),
                            BatchAppended.model_json_schema(),
                        ]
                    }
                }
            },
        },
        **error_responses(
            LOG_INVALID,
            Unauthorized,
            LogNotFound,
            *LOG_CONFLICT,
            PositionMismatch,
            PayloadTooLarge,
            *LOG_UNAVAILABLE,
            TIMED_OUT,
        ),
    },
    openapi_extra=ADD_BODY,
)
async def append_records(
    name: LogNamePath,
    request: Request,
    gw: GatewayDep,
    key: IdempotencyKey = None,
    expected: ExpectedLastPosition = None,
) -> dict[str, Any]:
    _name(name)
    if key is not None:
        log_records.check_key(key)
    if expected is not None:
        ExpectedLast.parse(expected)  # a bad header is 400 before the body is read
    headers = request.headers
    caller = Caller(
        headers.get("authorization"), headers.get(FORWARDED_BY), headers.get(SECRET_HEADER)
    )
    with body_share(request) as share:
        raw = await read_body(request, BODY_SIZE_MAX_BYTES, share)
        return await answers.append_answer(gw, name, key, raw, is_json(request), expected, caller)


@router.post(
    "/{name}/roll",
    response_model=Rolled,
    summary="Roll the log to a new ledger (create, CAS into the list, close the old one)",
    responses=error_responses(
        LOG_INVALID, Unauthorized, LogNotFound, *LOG_CONFLICT, *LOG_UNAVAILABLE
    ),
)
async def roll_log(name: LogNamePath, gw: GatewayDep) -> dict[str, int]:
    writer = await log_ops.writer_of(gw, _name(name))
    try:
        return {"ledger_id": await writer.roll()}
    except NotWriter as exc:
        raise await log_ops.not_writer(gw, name, exc) from None


@router.post(
    "/{name}/truncate",
    response_model=LogModel,
    response_model_exclude_unset=True,
    summary="Remove the whole ledgers that end before a position",
    responses=error_responses(
        LOG_INVALID, Unauthorized, LogNotFound, *LOG_CONFLICT, *LOG_UNAVAILABLE
    ),
)
async def truncate_log(
    name: LogNamePath,
    gw: GatewayDep,
    before: Annotated[str, Query(description=POSITION_DESCRIPTION, **POSITION_SCHEMA)],
) -> dict[str, Any]:
    _name(name)
    position = Position.parse(before, "before")
    return (await log_ops.truncate(gw, name, position)).to_api()


@router.get(
    "/{name}/records",
    response_model=RecordPage,
    summary="Read records in log order from a position (never fences; tail with wait_ms)",
    responses=error_responses(
        LOG_INVALID, Unauthorized, LogNotFound, CursorNotFound, *LOG_UNAVAILABLE
    ),
)
async def read_records(
    name: LogNamePath,
    gw: GatewayDep,
    first: Annotated[
        str | None, Query(alias="from", description=POSITION_DESCRIPTION, **POSITION_SCHEMA)
    ] = None,
    limit: Annotated[int, Query(ge=1, le=ID_MAX, description="clamped to 1000")] = LIST_LIMIT_MAX,
    wait_ms: Annotated[int, Query(ge=0, le=ID_MAX, description="clamped to 30000")] = 0,
    from_time: Annotated[
        str | None,
        Query(
            description="start at the first record stamped at or after this time: ms since "
            "the Unix epoch or RFC 3339 (2026-11-29T10:00:00Z); not with `from`",
            json_schema_extra=TIME_TEXT_SCHEMA,
        ),
    ] = None,
    cursor: Annotated[
        str | None,
        Query(
            max_length=LOG_NAME_MAX_CHARS,
            description="start just after this durable cursor's position (its first record "
            "when it has none); not with `from` or `from_time`. The read does not move it: "
            "ack what was processed (POST .../cursors/{cursor}/ack)",
        ),
    ] = None,
) -> dict[str, Any]:
    _name(name)
    start = Position.parse(first, "from") if first is not None else None
    if cursor is not None:
        if first is not None or from_time is not None:
            raise InvalidArgument("give one of from, from_time and cursor")
        start = await cursors.read_start(gw, name, cursor)
    if from_time is not None:
        if first is not None:
            raise InvalidArgument("give from or from_time, not both")
        start = await log_reads.start_at_time(gw, name, parse_time(from_time))
    return await answers.records_answer(gw, name, start, limit, wait_ms)


@router.post(
    "/{name}/ledgers",
    summary="Attach CLOSED ledgers to the log in one CAS (a batch or streaming commit)",
    description="Takes the writer role as POST /writer does (the last two ledgers fenced), "
    "appends the ledgers in the given order and leaves the role free (writer null, the "
    "epoch grows). Each ledger must exist, be CLOSED, have no password, not be in the log "
    "and carry custom metadata quire.log = the log's name. With commit {id, sequence} the "
    "log records the sequence under the id; a sequence at or below the one recorded "
    "changes nothing and answers committed: false (exactly-once commits). The same "
    "attach again (the log lists these ledgers, in this order: an earlier attempt landed) "
    "answers committed: true and changes nothing, so a retry after a lost answer is safe.",
    responses={
        200: {
            "description": "the log after the commit",
            "content": {"application/json": {"schema": AttachResult.model_json_schema()}},
        },
        **error_responses(LOG_INVALID, Unauthorized, LogNotFound, *LOG_CONFLICT, *LOG_UNAVAILABLE),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": AttachLedgers.model_json_schema()}},
        }
    },
)
async def attach_ledgers(name: LogNamePath, request: Request, gw: GatewayDep) -> dict[str, Any]:
    _name(name)
    doc = parse_json(await read_small_body(request))
    if not isinstance(doc, dict):
        raise InvalidArgument("body must be a JSON object")
    body = validated(AttachLedgers, doc, "invalid body: ")
    commit = (body.commit.id, body.commit.sequence) if body.commit is not None else None
    log, committed = await log_ops.attach(gw, name, body.ledgers, commit)
    return {"log": log.to_api(), "epoch": log.epoch, "committed": committed}


@router.get(
    "/{name}/commits/{commit_id}",
    response_model=CommitModel,
    summary="The last sequence committed under a commit id (POST /ledgers)",
    responses=error_responses(LOG_INVALID, Unauthorized, LogNotFound),
)
async def get_commit(name: LogNamePath, commit_id: str, gw: GatewayDep) -> dict[str, Any]:
    current = (await log_ops.get(gw, _name(name))).log
    sequence = current.committed(commit_id)
    if sequence is None:
        raise NotFound(f"log {name} has no commit {commit_id!r}")
    return {"id": commit_id, "sequence": sequence}


@router.api_route("/{rest:path}", methods=["GET", "PUT", "POST", "DELETE"], include_in_schema=False)
@fallback_route
async def no_such_log_route(rest: str, request: Request) -> None:
    """What no route above matched: a name that is not one path segment (empty, or with
    an encoded slash) is 400 like any bad name; else the usual 404 / 405."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    raw_rest = raw.decode("ascii", "replace").split("?", 1)[0]
    prefix = router.prefix + "/"
    raw_name = raw_rest[len(prefix) :].split("/", 1)[0] if raw_rest.startswith(prefix) else ""
    name = unquote(raw_name)
    if "/" in name or not name:
        check_log_name(name)  # raises
    # Any route of the app at this path, the cursors' too (gateway/logs/cursor_routes.py).
    if allowed_methods(request.app.routes, request.scope["path"]):
        raise MethodNotAllowed("method not allowed on this route")
    raise NotFound("no such route")
