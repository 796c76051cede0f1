"""The gateway's request and answer models, and the OpenAPI snippets its routes share."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from services.limits import BATCH_ENTRIES_MAX
from services.web.errors import error_response


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    text = {
        400: "invalid_argument",
        401: "unauthorized (token or ledger password)",
        404: "ledger_not_found / entry_not_found",
        409: "ledger_closed / ledger_fenced (outcome unknown) / not_writer / metadata_conflict",
        413: "payload_too_large",
        503: "not_enough_bookies / bookie_unavailable / unavailable",
        504: "quorum_timeout (outcome unknown)",
    }
    out: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        out.update(error_response(code, text[code]))
    return out


class Fragment(BaseModel):
    first_entry_id: int
    bookies: list[str]


class Ledger(BaseModel):
    ledger_id: int
    state: str = Field(description="OPEN, IN_RECOVERY or CLOSED")
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    digest: str
    last_entry_id: int | None = Field(description="null unless CLOSED")
    length: int = Field(description="total payload bytes; exact once CLOSED")
    fragments: list[Fragment]
    metadata: dict[str, Any]
    created_at: int = Field(description="milliseconds since the Unix epoch")


class CreateLedger(BaseModel):
    # Strict: JSON integers only ("3", 3.0 and true are not sizes).
    model_config = ConfigDict(extra="forbid", strict=True)
    ensemble_size: int = Field(3, ge=1, le=64)
    write_quorum: int = Field(2, ge=1, le=64)
    ack_quorum: int = Field(2, ge=1, le=64)
    digest: str = Field("crc32c", pattern="^(crc32c|hmac-sha256|none)$")
    password: str | None = Field(None, min_length=1, max_length=1024)
    metadata: dict[str, Any] = Field(default_factory=dict)


class AddResult(BaseModel):
    entry_id: int
    last_add_confirmed: int


class BatchAddResult(BaseModel):
    first_entry_id: int
    last_entry_id: int
    last_add_confirmed: int


class Lac(BaseModel):
    last_add_confirmed: int


class Entry(BaseModel):
    entry_id: int
    data: str = Field(description="base64")


class EntryPage(BaseModel):
    entries: list[Entry]
    last_add_confirmed: int
    next: int | None


class LedgerList(BaseModel):
    ledgers: list[int]
    next: int | None


ADD_BODY = {
    "requestBody": {
        "description": (
            "A raw body (any content type but application/json) is one entry. JSON "
            '`{"entries": ["<base64>", ...]}` is a batch, acknowledged as a whole, in order.'
        ),
        "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["entries"],
                    "properties": {
                        "entries": {
                            "type": "array",
                            "items": {"type": "string", "format": "byte"},
                            "minItems": 1,
                            "maxItems": BATCH_ENTRIES_MAX,
                        }
                    },
                }
            },
        },
    }
}
