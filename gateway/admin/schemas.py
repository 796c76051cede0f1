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
    under_replicated_ledgers: int = Field(description="the number of marks now")
    bookies: BookieCounts


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
    entries_added: int | None = Field(
        description="entries the bookie stored since it started (a rate over two readings "
        "is its adds per second), or null"
    )


class BookieList(BaseModel):
    bookies: list[AdminBookie] = Field(description="in id order")


class UnderReplicatedLedger(BaseModel):
    ledger_id: int
    missing_bookies: list[str]
    marked_at: int = Field(description="when it was first marked, ms since the Unix epoch")
    progress: dict[str, Any] | None = Field(
        description="the repair progress the worker holding its lock reports, or null when "
        "no worker holds it"
    )
    worker: str | None = Field(description="the id of the worker repairing it, or null")


class UnderReplicatedList(BaseModel):
    ledgers: list[UnderReplicatedLedger] = Field(description="in ledger id order")
    next: int | None = Field(description="pass as ?after= for the next page; null on the last page")


class AuditRequested(BaseModel):
    requested: bool
    auditor_id: str | None = Field(
        description="the elected auditor that will run the check; null when none runs "
        "(the request waits for one)"
    )
