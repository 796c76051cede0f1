"""The Admin API's answer models (docs/api.md "Admin"), for ``openapi/gateway.json``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from services.errors import MetadataUnavailable, Unauthorized, Unavailable
from services.web.errors import explained

# The errors of the Admin API's routes, by status.
ADMIN_UNAUTHORIZED = explained(
    Unauthorized,
    "missing or wrong token (the admin token when the gateway runs with --admin-token; "
    "the API token is not enough then)",
)
ADMIN_UNAVAILABLE = (Unavailable, MetadataUnavailable)


class BookieCounts(BaseModel):
    writable: int = Field(description="registered bookies new ensembles may choose")
    readonly: int = Field(
        description="registered bookies new ensembles may not choose: read-only, or "
        "decommissioning / decommissioned while still running"
    )
    unavailable: int = Field(
        description="bookies with a cookie that are not registered (down), "
        "decommissioned ones left out"
    )


class Cluster(BaseModel):
    auditor_elected: bool
    auditor_id: str | None = Field(description="the elected auditor's host:port")
    replication_enabled: bool
    under_replicated_ledgers: int = Field(
        description="the number of marks now (placement moves included)"
    )
    bookies: BookieCounts
    racks: dict[str, int] = Field(
        description="registered bookies per rack (/default-rack: those that registered none)"
    )
    placement_violations: int | None = Field(
        description="ledgers whose write quorums span fewer racks than the rack policy wants, "
        "as the auditor's last complete check found them; null before its first"
    )


BookieState = Literal["writable", "readonly", "down", "decommissioning", "decommissioned"]


class AdminBookie(BaseModel):
    id: str = Field(description="the bookie's id, its advertised host:port")
    address: str
    state: BookieState = Field(
        description="decommissioning/decommissioned (a decommission was requested) win "
        "over writable/readonly (registered) and down (a cookie but not registered)"
    )
    ledgers: int | None = Field(description="ledgers stored; null when the bookie is down "
                                "or did not answer in time")  # fmt: skip
    free_bytes: int | None = Field(description="free disk bytes of its data dir, or null")
    total_bytes: int | None = Field(description="disk size of its data dir, or null")
    free_ratio: float | None = Field(description="free_bytes / total_bytes, or null")
    instance_id: str | None = Field(description="the instance id of its cookie")
    rack: str | None = Field(
        description="the rack it registered (--rack); null when it registered none (the "
        "default rack) or is not registered"
    )
    entries_added: int | None = Field(
        description="entries the bookie stored since it started (a rate over two readings "
        "is its adds per second), or null"
    )


class BookieList(BaseModel):
    bookies: list[AdminBookie] = Field(description="in id order")


class UnderReplicatedLedger(BaseModel):
    ledger_id: int
    missing_bookies: list[str] = Field(description="may be empty when only a move is asked")
    misplaced: bool = Field(
        description="a placement move is asked for too: a fragment's write quorums span too "
        "few racks, and a bookie on another rack can fix it"
    )
    marked_at: int = Field(description="when it was first marked, ms since the Unix epoch")
    progress: dict[str, Any] | None = Field(
        description="the repair progress the worker holding its lock reports, or null when "
        "no worker holds it"
    )
    worker: str | None = Field(description="the id of the worker repairing it, or null")


class UnderReplicatedList(BaseModel):
    ledgers: list[UnderReplicatedLedger] = Field(description="in ledger id order")
    next: int | None = Field(description="pass as ?after= for the next page; null on the last page")


class MisplacedLedger(BaseModel):
    ledger_id: int
    fragments: list[int] = Field(
        description="the first entry ids of its fragments whose write quorums span too few racks"
    )
    movable: bool = Field(
        description="a move to a bookie on another rack can fix a settled one: the ledger is "
        "marked for it, and a replication worker moves it"
    )


class PlacementReport(BaseModel):
    checked_at: int | None = Field(
        description="when the auditor's last complete check ended, ms since the Unix epoch; "
        "null before its first"
    )
    racks: dict[str, int] = Field(description="registered bookies per rack, as that check saw")
    violations: int = Field(
        description="ledgers whose write quorums span fewer racks than min(Qw, racks)"
    )
    movable: int = Field(description="of those, the ones a placement move can fix now")
    ledgers: list[MisplacedLedger] = Field(description="the first 100 of them, in id order")
    truncated: bool = Field(description="true when there are more than listed")


class AuditRequested(BaseModel):
    requested: bool
    auditor_id: str | None = Field(
        description="the elected auditor that will run the check; null when none runs "
        "(the request waits for one)"
    )


class GatewayEntry(BaseModel):
    address: str = Field(description="host:port: the id a log's writer names")
    scheme: str = Field(description="http or https")
    draining: bool


class GatewayList(BaseModel):
    gateways: list[GatewayEntry]


class DrainFailure(BaseModel):
    log: str
    gateway: str = Field(description="the gateway that was to take it")
    error: str


class Drained(BaseModel):
    gateway: str
    draining: bool
    handed_over: int = Field(description="logs another gateway writes now")
    failed: list[DrainFailure] = Field(
        description="logs still written here (drain again to retry them)"
    )


class StorageLedger(BaseModel):
    ledger_id: int
    bytes: int = Field(description="payload bytes the bookie stores for it")
    reason: str = Field(description="why it is listed, and what happens to it next")


class StorageLive(BaseModel):
    ledgers: int = Field(description="ledgers stored whose metadata was not found missing")
    bytes: int = Field(description="their payload bytes")


class StorageGcSettings(BaseModel):
    interval_s: float = Field(description="seconds between passes (0: never)")
    grace_s: float = Field(description="seconds between the two looks")
    deletes_per_pass: int = Field(description="ledgers one pass deletes at most")


class StorageLastPass(BaseModel):
    at: str = Field(description="when the pass ended (ISO 8601, UTC)")
    freed_ledgers: int
    freed_bytes: int
    took_ms: int
    error: str | None = Field(description="why it stopped early (a ZooKeeper error), or null")


class StorageBucket(BaseModel):
    ledgers: int = Field(description="ledgers stored on the bookie")
    bytes: int = Field(description="their payload bytes there")


class StorageLogTotal(BaseModel):
    log: str = Field(description="the log's name, as its ledgers' quire.log names it")
    ledgers: int = Field(description="ledgers made for the log and stored on the bookie")
    bytes: int = Field(description="their payload bytes there")


class StorageByLog(BaseModel):
    """A bookie's bytes counted by log (docs/operations.md, "Space given back")."""

    logs: list[StorageLogTotal] = Field(
        description="the largest first (ties by name), at most 100; logs_count covers all"
    )
    logs_count: int = Field(description="logs with a ledger on the bookie")
    not_in_a_log: StorageBucket = Field(
        description="ledgers whose metadata names no log (plain ledgers)"
    )
    metadata_missing: StorageBucket = Field(
        description="ledgers with no metadata: deleted while the bookie kept a copy "
        "(orphans; its garbage collection gives them back)"
    )
    metadata_unreadable: StorageBucket = Field(
        description="ledgers whose metadata could not be parsed"
    )
    ledgers_looked_at: int = Field(description="ledgers counted (all of them unless truncated)")
    truncated: bool = Field(
        description="true when the count stopped at its bound (ledgers or time): the totals "
        "cover the ledgers looked at, the lowest ids"
    )


class StoragePurging(BaseModel):
    ledgers: int = Field(
        description="deleted ledgers whose entries the bookie is still removing in the "
        "background (not live)"
    )
    bytes: int = Field(description="payload bytes of their entries not removed yet")


class StorageReport(BaseModel):
    """A bookie's storage report, as the bookie answers it (docs/operations.md, "Space
    given back")."""

    bookie: str = Field(description="the bookie's id")
    file_bytes: int = Field(description="size of its database")
    free_pages_bytes: int = Field(
        description="bytes of free pages in it; file_bytes - free_pages_bytes is what the data uses"
    )
    live: StorageLive
    purging: StoragePurging | None = Field(
        default=None,
        description="deleted ledgers not yet purged (absent from bookies of older versions)",
    )
    orphaned: list[StorageLedger] = Field(
        description="metadata found missing once, waiting for the second look after the "
        "grace (the first 100; the count covers all)"
    )
    orphaned_count: int
    orphaned_bytes: int
    pending_delete: list[StorageLedger] = Field(
        description="metadata found missing and past the grace: the next pass deletes them "
        "(the first 100; the count covers all)"
    )
    pending_delete_count: int
    pending_delete_bytes: int
    gc: StorageGcSettings
    last_pass: StorageLastPass | None = Field(description="the last pass (not a dry run)")
    bytes_counted_at: str = Field(
        description="when the bookie read its bytes per ledger (ISO 8601, UTC): the counts "
        "it keeps with its entries, summed for this report"
    )
    bytes_count_ms: int = Field(description="how long that sum over the ledgers took")
    by_log: StorageByLog | None = Field(
        default=None, description="only with by_log=true: the bookie's bytes counted by log"
    )


class GcFreedLedger(BaseModel):
    ledger_id: int
    bytes: int


class GcPass(BaseModel):
    """What a garbage-collection pass on a bookie did (a dry run: would do)."""

    dry_run: bool
    at: str = Field(description="when the pass ended (ISO 8601, UTC)")
    freed_ledgers: int
    freed_bytes: int
    freed: list[GcFreedLedger] = Field(description="the first 100 ledgers freed")
    waiting_ledgers: int = Field(description="found missing, within the grace")
    pending_ledgers: int = Field(description="past the grace, beyond deletes_per_pass")
    error: str | None = Field(description="why the looks stopped early, or null")
    took_ms: int
