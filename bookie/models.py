"""Request and response bodies of the bookie's JSON endpoints (for validation and OpenAPI).

The data path does not build these models: handlers answer with small JSON
documents or framed bytes directly; the models describe them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, WithJsonSchema

from services.errors import LedgerNotFound, Unauthorized
from services.limits import (
    BATCH_ENTRIES_MAX,
    BODY_SIZE_MAX_BYTES,
    ID_MAX,
    LAC_BATCH_MAX,
    STORED_BATCH_MAX,
    STORED_ENTRY_SIZE_MAX_BYTES,
    STORED_RUNS_MAX,
    STORED_SAMPLE_ENTRIES_MAX,
)
from services.web.errors import explained
from services.web.json_types import JsonInt, integral_number
from services.wire.framing import MEDIA_TYPE

# A run [first, last] of entry ids: two integers, written as a pair of array items rather
# than the `prefixItems` pydantic writes for a tuple (the same values). Schemathesis 4.32
# rewrites a response's `prefixItems` into draft-4 `items: [...]` and then cannot validate
# any answer against it; the plain form is read alike by every tool.
Run = Annotated[
    tuple[int, int],
    WithJsonSchema({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}),
]

LedgerIdPath = Annotated[
    int, Path(ge=0, le=ID_MAX, description="Ledger id, 0 .. 2^63-1", examples=[7])
]
EntryIdPath = Annotated[int, Path(ge=0, le=ID_MAX, description="Entry id, 0 .. 2^63-1")]


class LedgerState(BaseModel):
    """What this bookie knows of one ledger."""

    ledger_id: int = Field(description="The ledger's id")
    lac: int = Field(
        description="Highest last-add-confirmed seen in stored entries or LAC updates (-1: none)"
    )
    last_entry_id: int = Field(description="Highest entry id stored here (-1: none)")
    fenced: bool = Field(description="True once the ledger was fenced on this bookie")
    length: int = Field(
        description=(
            "The ledger's length (total payload bytes) up to and including the last entry "
            "stored here: that entry's `length` field; 0 when none, -1 if unknown"
        )
    )
    lac_length: int = Field(
        description=(
            "The ledger's length up to and including the LAC entry; 0 when lac is -1, "
            "-1 when this bookie does not store the LAC entry"
        )
    )
    instance_id: str = Field(
        description="This bookie's instance (cookie); a reformatted bookie has a new one"
    )


class RejectedEntry(BaseModel):
    ledger_id: int = Field(description="Ledger of the refused entry")
    entry_id: int = Field(description="The refused entry")
    error: Literal["ledger_fenced", "entry_exists", "invalid_argument"] = Field(
        description=(
            "Why it was refused: ledger_fenced (a normal add to a fenced ledger), "
            "entry_exists (the entry is stored with different bytes; nothing changed), "
            "invalid_argument (its crc32c digest does not match)"
        )
    )


class AddResult(BaseModel):
    """Outcome of a batch add: stored entries are durable before this answer."""

    stored: int = Field(description="Number of entries stored")
    rejected: list[RejectedEntry] = Field(
        description="Entries refused one by one; the others of the request were stored"
    )


class LacUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lac: JsonInt = Field(ge=-1, le=ID_MAX, description="A LAC the writer has reached")


class LacEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ledger_id: JsonInt = Field(ge=0, le=ID_MAX)
    lac: JsonInt = Field(ge=-1, le=ID_MAX, description="A LAC the writer has reached")


class LacBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lacs: list[LacEntry] = Field(min_length=1, max_length=LAC_BATCH_MAX)


class LacBatchResult(BaseModel):
    updated: int = Field(description="Ledgers whose LAC record was written")


class LedgerList(BaseModel):
    ledgers: list[int] = Field(description="Ledger ids stored here, ascending")
    next: int | None = Field(description="Pass as `after` for the next page; null at the end")


class DiskThreshold(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Strict: a number, as documented (pydantic alone would read false as 0.0, "0.5" as
    # 0.5); an integer is a number.
    readonly_free_ratio: Annotated[float, Strict()] = Field(
        ge=0.0, le=1.0, description="Go read-only when the free disk ratio falls under this"
    )


class BookieInfo(BaseModel):
    bookie_id: str = Field(description="The bookie's id: its advertised host:port")
    address: str = Field(description="Base URL of the bookie, http://host:port")
    state: Literal["writable", "readonly"] = Field(description="Whether it takes normal adds")
    instance_id: str = Field(description="The cookie's instance id (bound to the data dir)")
    rack: str | None = Field(
        description="The rack it registered (--rack); null: none, the default rack"
    )
    free_ratio: float = Field(description="Free fraction of the data dir's disk at the last check")
    readonly_free_ratio: float = Field(description="The read-only threshold in force")
    journal_sync: bool = Field(description="Whether adds are fsynced before the answer")
    ledgers: int = Field(description="Ledgers this bookie knows (with entries or flags)")
    free_bytes: int = Field(description="Free bytes of the data dir's disk at the last check")
    total_bytes: int = Field(description="Size in bytes of the data dir's disk")
    entries_added: int = Field(
        description="Entries stored since this process started (quire_bookie_adds_total): "
        "a rate over two readings is the bookie's adds per second"
    )


class StorageLedger(BaseModel):
    ledger_id: int = Field(description="The ledger's id")
    bytes: int = Field(description="Payload bytes this bookie stores for it")
    reason: str = Field(description="Why it is listed, and what happens to it next")


class StorageLive(BaseModel):
    ledgers: int = Field(description="Ledgers stored here whose metadata was not found missing")
    bytes: int = Field(description="Their payload bytes")


class StoragePurging(BaseModel):
    ledgers: int = Field(
        description="Deleted ledgers whose entries the bookie is still removing in the "
        "background (unknown to the API since their delete; not live)"
    )
    bytes: int = Field(description="Payload bytes of their entries not removed yet")


class GcSettingsView(BaseModel):
    interval_s: float = Field(description="Seconds between passes (--gc-interval-s; 0: never)")
    grace_s: float = Field(description="Seconds between the two looks (--gc-grace-s)")
    deletes_per_pass: int = Field(description="Ledgers one pass deletes at most")


class GcLastPass(BaseModel):
    at: str = Field(description="When the pass ended (ISO 8601, UTC)")
    freed_ledgers: int = Field(description="Ledgers it deleted")
    freed_bytes: int = Field(description="Their payload bytes")
    took_ms: int = Field(description="How long it ran")
    error: str | None = Field(description="Why it stopped early (a ZooKeeper error), or null")


class StorageReport(BaseModel):
    """Where a bookie's space goes (docs/operations.md, "Space given back")."""

    bookie: str = Field(description="The bookie's id")
    file_bytes: int = Field(description="Size of the database (its pages, committed)")
    free_pages_bytes: int = Field(
        description="Bytes of its free pages (the next incremental vacuum gives them back); "
        "file_bytes - free_pages_bytes is what the data uses"
    )
    live: StorageLive
    purging: StoragePurging
    orphaned: list[StorageLedger] = Field(
        description="Ledgers whose metadata one look found missing, waiting for the second "
        "look after the grace (the first ones; the count covers all)"
    )
    orphaned_count: int
    orphaned_bytes: int
    pending_delete: list[StorageLedger] = Field(
        description="Ledgers found missing and past the grace: the next pass deletes them "
        "if its look finds them missing too (the first ones; the count covers all)"
    )
    pending_delete_count: int
    pending_delete_bytes: int
    gc: GcSettingsView
    last_pass: GcLastPass | None = Field(description="The last pass (not a dry run), or null")
    bytes_counted_at: str = Field(
        description="When the bytes were read (ISO 8601, UTC): the payload bytes the bookie "
        "keeps per ledger with its entries, summed for this report"
    )
    bytes_count_ms: int = Field(description="How long that sum over the ledgers took")


class GcFreed(BaseModel):
    ledger_id: int
    bytes: int = Field(description="Payload bytes freed (a dry run: that would be freed)")


class StoredLedgerBytes(BaseModel):
    ledger_id: int = Field(description="The ledger's id")
    bytes: int = Field(description="Payload bytes this bookie stores for it (0: no entry)")


class StorageLedgerPage(BaseModel):
    """One page of every ledger this bookie stores, with its bytes (the gateway counts
    them by log: docs/operations.md, "Space given back")."""

    ledgers: list[StoredLedgerBytes] = Field(
        description="Ledgers stored here, ascending ids: live, orphaned and pending delete"
    )
    next: int | None = Field(description="Pass as `after` for the next page; null at the end")


class GcPassResult(BaseModel):
    """What one garbage-collection pass did (a dry run: would do, deleting nothing)."""

    dry_run: bool
    at: str = Field(description="When the pass ended (ISO 8601, UTC)")
    freed_ledgers: int
    freed_bytes: int
    freed: list[GcFreed] = Field(description="The first ledgers freed; the count covers all")
    waiting_ledgers: int = Field(description="Ledgers found missing, within the grace")
    pending_ledgers: int = Field(description="Ledgers past the grace beyond deletes_per_pass")
    error: str | None = Field(description="Why the looks stopped early, or null")
    took_ms: int


class StoredLedger(BaseModel):
    """Which entries of one ledger this bookie stores, and the digest checks asked for."""

    ledger_id: int = Field(description="The ledger's id")
    known: bool | None = Field(
        default=None,
        description="Only in bulk answers: false when this bookie knows nothing of the ledger",
    )
    ranges: list[Run] = Field(
        description=(
            "Maximal runs [first, last] of consecutive entry ids stored, ascending; at most "
            f"{STORED_RUNS_MAX} (then `truncated`)"
        )
    )
    entries: int = Field(description="Entries stored (all of them, also when truncated)")
    last_entry_id: int = Field(description="Highest entry id stored (-1: none)")
    fenced: bool = Field(description="True once the ledger was fenced on this bookie")
    checked: int = Field(description="Entries re-checked against their digests")
    corrupt: list[int] = Field(description="Ids of checked entries that fail their check")
    truncated: bool | None = Field(
        default=None, description="Present (true) only when `ranges` or `corrupt` was cut"
    )


class StoredBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ledger_ids: list[
        Annotated[int, Field(ge=0, le=ID_MAX), BeforeValidator(integral_number), Strict()]
    ] = Field(min_length=1, max_length=STORED_BATCH_MAX, description="The ledgers asked about")
    verify: Literal["none", "sample"] = Field(
        default="none",
        description=(
            f"sample: digest-check at most {STORED_SAMPLE_ENTRIES_MAX} entries of each "
            "ledger (first, last, evenly spaced between)"
        ),
    )


class StoredBatchResult(BaseModel):
    ledgers: list[StoredLedger] = Field(description="One answer per id asked, in that order")


BINARY_SCHEMA = {"type": "string", "format": "binary"}

FRAMING_DESCRIPTION = (
    "A sequence of records (`services/wire/framing.py`): header `>BqqqqIH` = flags u8, "
    "ledger_id i64, entry_id i64, lac i64, length i64 (the ledger's total payload bytes "
    "up to and including the entry), payload_len u32, digest_len u16; then, with flags "
    "bit 3, checksum u32; then the digest bytes, then the payload bytes. Flags bit 0 = "
    "recovery add; bits 1-2 = digest type (0 none / 0 bytes, 1 crc32c / 4 bytes, "
    "2 hmac-sha256 / 32 bytes); bit 3 = a record checksum follows the header: CRC32C of "
    "the header bytes, digest and payload, set on every record whose digest type is not "
    "crc32c (a bookie cannot verify an HMAC). A record whose crc32c digest or checksum "
    "does not match is refused alone. "
    f"Limits: payload <= {STORED_ENTRY_SIZE_MAX_BYTES} bytes, <= {BATCH_ENTRIES_MAX} records, "
    f"body <= {BODY_SIZE_MAX_BYTES} bytes."
)

ADD_REQUEST_BODY = {
    "requestBody": {
        "required": True,
        "description": FRAMING_DESCRIPTION,
        "content": {MEDIA_TYPE: {"schema": BINARY_SCHEMA}},
    }
}


def framed_response(
    description: str, headers: dict[str, Any] | None = None
) -> dict[int | str, Any]:
    out: dict[str, Any] = {
        "description": description,
        "content": {MEDIA_TYPE: {"schema": BINARY_SCHEMA}},
    }
    if headers:
        out["headers"] = headers
    return {200: out}


# Every /v1 route of the bookie can answer 401 (docs/api.md "Bookie").
SECRET_REFUSED = explained(Unauthorized, "missing or wrong X-Cluster-Secret")
# A route about one ledger answers 404 for a ledger this bookie does not store.
UNKNOWN_HERE = explained(LedgerNotFound, "the ledger is unknown here")
