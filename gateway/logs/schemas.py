"""The log objects of docs/api.md ("Logs") as pydantic models, for the
OpenAPI document."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, Strict

from services.limits import ID_MAX
from services.protocol.logs import POSITION_PATTERN
from services.protocol.retention import MAX_AGE_S_MAX
from services.web.json_types import JsonInt, integral_number


class PositionModel(BaseModel):
    """A record's place in a log (``LID:EID`` in URLs)."""

    ledger_id: int = Field(ge=0, le=ID_MAX)
    entry_id: int = Field(ge=0, le=ID_MAX)


class WriterModel(BaseModel):
    gateway: str = Field(description="host:port of the gateway holding the writer role")
    epoch: int = Field(description="grows by one with every hand-over")


# Integers (an integral JSON number such as 10.0 counts), checked again by
# RetentionPolicy with the API's messages.
RetentionLimit = (
    Annotated[int, Field(ge=1, le=ID_MAX), BeforeValidator(integral_number), Strict()] | None
)
AgeLimit = (
    Annotated[int, Field(ge=1, le=MAX_AGE_S_MAX), BeforeValidator(integral_number), Strict()] | None
)


class RetentionModel(BaseModel):
    """A log's retention policy (docs/api.md "Retention"): each limit optional (null:
    none); applied in whole closed ledgers, never the log's last ledger."""

    model_config = {"extra": "forbid"}

    max_age_s: AgeLimit = Field(
        None, description="remove a closed ledger once it closed this many seconds ago"
    )
    max_bytes: RetentionLimit = Field(
        None, description="remove the oldest ledgers while the log holds more"
    )
    max_records: RetentionLimit = Field(
        None, description="remove the oldest ledgers while the log holds more"
    )
    retain_for_cursors: bool = Field(
        False, description="keep ledgers a durable cursor has not acknowledged to their end"
    )
    max_backlog_bytes: RetentionLimit = Field(
        None,
        description="with retain_for_cursors: the most bytes cursors hold back past the "
        "limits; past it the oldest go anyway and the cursors are told (skipped_records)",
    )


class UsageModel(BaseModel):
    """What a log holds (``GET /v1/logs/{name}?usage=true``)."""

    ledgers: int
    records: int
    bytes: int = Field(description="ledger lengths (the log layer's envelope counted)")
    oldest_ms: int | None = Field(
        description="ms since the Unix epoch when its oldest ledger was made (its records "
        "are no older); null for a log with no ledger"
    )


class LogModel(BaseModel):
    name: str
    ledgers: list[int] = Field(description="the log's ledgers, in log order")
    writer: WriterModel | None
    retention: RetentionModel | None = Field(description="its retention policy; null: none")
    usage: UsageModel | None = Field(None, description="only with ?usage=true")


class PatchLog(BaseModel):
    """Body of PATCH /v1/logs/{name} (a JSON merge patch, RFC 7396)."""

    model_config = {"extra": "forbid"}

    retention: RetentionModel | None = Field(
        description="fields given a value take it, fields given null are cleared, fields "
        "not named stay; null clears the whole policy"
    )


class LogList(BaseModel):
    logs: list[str]
    next: str | None = Field(description="pass as `after` for the next page; null at the end")


class WriterTaken(BaseModel):
    epoch: int
    ledger_id: int = Field(description="the new ledger this writer appends to")


class Appended(BaseModel):
    position: PositionModel


class BatchAppended(BaseModel):
    first_position: PositionModel
    last_position: PositionModel


class Rolled(BaseModel):
    ledger_id: int


class RecordModel(BaseModel):
    position: PositionModel
    data: str = Field(description="base64")
    time: int | None = Field(
        description="the append's stamp, ms since the Unix epoch (never smaller than the "
        "record before it in the log); null only for data written before records carried "
        "one on every entry"
    )


class RecordPage(BaseModel):
    records: list[RecordModel]
    next: str | None = Field(
        description="LID:EID to read from next (the same `from` when nothing was read); "
        "null only when the log has no ledger yet and no `from` was given"
    )
    caught_up: bool = Field(description="the read reached what is readable now")


class CreateLog(BaseModel):
    """Optional body of PUT /v1/logs/{name}: the ensemble of the log's ledgers."""

    model_config = {"extra": "forbid"}

    ensemble_size: JsonInt = Field(3, ge=1, le=64)
    write_quorum: JsonInt = Field(2, ge=1, le=64)
    ack_quorum: JsonInt = Field(2, ge=1, le=64)
    retention: RetentionModel | None = Field(None, description="its retention policy")


class CommitModel(BaseModel):
    id: str = Field(description="1-200 characters of A-Za-z0-9._:-")
    sequence: JsonInt = Field(ge=0, le=ID_MAX)


class AttachLedgers(BaseModel):
    """Body of POST /v1/logs/{name}/ledgers."""

    model_config = {"extra": "forbid"}

    ledgers: list[
        Annotated[int, Field(ge=0, le=ID_MAX), BeforeValidator(integral_number), Strict()]
    ] = Field(min_length=1, max_length=10_000, description="in log order")
    commit: CommitModel | None = None


class AttachResult(BaseModel):
    log: LogModel
    epoch: int
    committed: bool = Field(description="false: the commit's sequence was recorded already")


def position_json(ledger_id: int, entry_id: int) -> dict[str, Any]:
    return {"ledger_id": ledger_id, "entry_id": entry_id}


class CursorModel(BaseModel):
    """A durable cursor (docs/api.md "Logs: cursors")."""

    name: str
    position: str | None = Field(
        description="LID:EID of the last record acknowledged; null before any (a read "
        "through the cursor starts at the log's first record)"
    )
    lag_records: int = Field(description="records after the position, to the log's end")
    lag_bytes: int = Field(
        description="their bytes, from ledger lengths (the log layer's envelope counted; "
        "estimated within a ledger from its mean entry size)"
    )
    acked_at: int | None = Field(
        description="ms since the Unix epoch of the last ack that moved it; null before any"
    )
    skipped_records: int = Field(
        description="records retention removed before this cursor acknowledged them, in all "
        "(a read through it goes on at the log's first record)"
    )
    skipped_at: int | None = Field(
        description="ms since the Unix epoch when retention last removed records it had not "
        "acknowledged; null: never"
    )


class CursorAcked(CursorModel):
    moved: bool = Field(
        description="false: the position was at or before the cursor's, which did not move"
    )


class CursorList(BaseModel):
    cursors: list[CursorModel]


# A time in the API, as documented (services/protocol/logs.py ``parse_time`` checks it):
# ms since the Unix epoch, or an RFC 3339 date-time.
EPOCH_MS_PATTERN = "^(0|[1-9][0-9]{0,15})$"
TIME_TEXT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "pattern": EPOCH_MS_PATTERN},
        {"type": "string", "format": "date-time"},
    ]
}


TIME_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "integer", "minimum": 0, "maximum": 10**16 - 1}, *TIME_TEXT_SCHEMA["anyOf"]]
}


class CursorTime(BaseModel):
    model_config = {"extra": "forbid"}

    time: int | str = Field(
        description="ms since the Unix epoch or RFC 3339", json_schema_extra=TIME_SCHEMA
    )


START_PATTERN = rf"^(earliest|latest|{POSITION_PATTERN[1:-1]})$"


class CreateCursor(BaseModel):
    """Optional body of PUT /v1/logs/{name}/cursors/{cursor}."""

    model_config = {"extra": "forbid"}

    start: str | CursorTime = Field(
        "latest",
        json_schema_extra={
            "anyOf": [
                {"type": "string", "pattern": START_PATTERN},
                {
                    "type": "object",
                    "properties": {"time": TIME_SCHEMA},
                    "required": ["time"],
                    "additionalProperties": False,
                },
            ]
        },
        description='"earliest" (before the first record), "latest" (at the last record), '
        '"LID:EID" (at that record) or {"time": T} (at the record before the first stamped '
        ">= T)",
    )


class AckCursor(BaseModel):
    """Body of POST /v1/logs/{name}/cursors/{cursor}/ack."""

    model_config = {"extra": "forbid"}

    position: str = Field(
        description="LID:EID of the last record processed",
        json_schema_extra={"pattern": POSITION_PATTERN},
    )
