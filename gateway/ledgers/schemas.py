"""The Ledgers API's request and answer models, and the error answers its routes list."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.http.errors import FENCED
from gateway.limits import (
    METADATA_KEY_MAX_BYTES,
    METADATA_KEYS_MAX,
    METADATA_TOTAL_MAX_BYTES,
    METADATA_VALUE_MAX_BYTES,
    PASSWORD_LENGTH_MAX,
)
from services.errors import (
    BookieUnavailable,
    EntryNotFound,
    LedgerClosed,
    LedgerNotFound,
    MetadataConflict,
    NotEnoughBookies,
    NotWriter,
    Unauthorized,
    Unavailable,
)
from services.web.errors import noted
from services.web.json_types import JsonInt

# The errors of the ledger routes (docs/api.md "Ledgers"), by status.
LEDGER_UNAUTHORIZED = noted(Unauthorized, "token or ledger password")
LEDGER_NOT_FOUND = (LedgerNotFound, EntryNotFound)
LEDGER_CONFLICT = (LedgerClosed, FENCED, NotWriter, MetadataConflict)
LEDGER_UNAVAILABLE = (
    noted(NotEnoughBookies, "on an add: outcome unknown"),
    BookieUnavailable,
    Unavailable,
)


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
    closed_at: int | None = Field(
        None,
        description="milliseconds since the Unix epoch when it was closed; null while open "
        "(and for a ledger closed before this field existed)",
    )


PASSWORD_PATTERN = r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$"


class CreateLedger(BaseModel):
    # Strict: JSON integers (or integral numbers: 3.0 is the integer 3, as in JSON Schema),
    # never "3" or true; strings only in metadata.
    model_config = ConfigDict(extra="forbid", strict=True)
    ensemble_size: JsonInt = Field(3, ge=1, le=64)
    write_quorum: JsonInt = Field(2, ge=1, le=64)
    ack_quorum: JsonInt = Field(2, ge=1, le=64)
    digest: str = Field("crc32c", pattern="^(crc32c|hmac-sha256|none)$")
    password: str | None = Field(
        None,
        min_length=1,
        max_length=PASSWORD_LENGTH_MAX,
        pattern=PASSWORD_PATTERN,
        description="1-256 printable ASCII characters, not starting or ending with a space; "
        "required with digest hmac-sha256",
    )
    metadata: dict[str, str] = Field(
        default_factory=dict,
        max_length=METADATA_KEYS_MAX,
        description=f"string keys of at most {METADATA_KEY_MAX_BYTES} bytes to string values "
        f"of at most {METADATA_VALUE_MAX_BYTES} bytes, {METADATA_TOTAL_MAX_BYTES} bytes in all "
        "(UTF-8)",
    )

    @field_validator("metadata")
    @classmethod
    def _bounded_metadata(cls, metadata: dict[str, str]) -> dict[str, str]:
        total = 0
        for key, value in metadata.items():
            key_bytes, value_bytes = _utf8_size(key), _utf8_size(value)
            if key_bytes > METADATA_KEY_MAX_BYTES:
                raise ValueError(f"a key of {key_bytes} bytes is over {METADATA_KEY_MAX_BYTES}")
            if value_bytes > METADATA_VALUE_MAX_BYTES:
                raise ValueError(
                    f"a value of {value_bytes} bytes is over {METADATA_VALUE_MAX_BYTES}"
                )
            total += key_bytes + value_bytes
        if total > METADATA_TOTAL_MAX_BYTES:
            raise ValueError(f"{total} bytes of keys and values, over {METADATA_TOTAL_MAX_BYTES}")
        return metadata

    @model_validator(mode="after")
    def _hmac_needs_a_password(self) -> CreateLedger:
        # Without one the MAC key would be derived from the empty string: no authentication.
        if self.digest == "hmac-sha256" and self.password is None:
            raise ValueError("an hmac-sha256 ledger needs a password")
        return self


def _utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8; a lone surrogate (not text) is refused."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("keys and values must be valid Unicode text") from None


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
