"""The logic of the gateway's Admin API (docs/api.md "Admin"; routes in
``gateway/admin/routes.py``).

Everything is read from ZooKeeper as it is now (``services.zk.underreplication``) and
from the gateway's bookie registry view; nothing is cached or counted here, so the
under-replicated count is the number of marks at the time of the call.

Bookie states, from the strongest: ``decommissioned`` / ``decommissioning`` (a node
under ``/decommission``), then ``writable`` / ``readonly`` (registered), then ``down``
(a cookie under ``/cookies`` but not registered). A bookie that has neither a cookie,
a registration nor a decommission node is unknown: ``BookieNotFound``.

Racks come from the registry (each bookie registers its own); the placement report is
the elected auditor's, as its last complete check wrote it (``/auditor/placement``).

Per-bookie figures (ledger count, disk space, instance id) come from each registered
bookie's ``GET /v1/info``, asked of all bookies at once with a short time-out, so a
hung or dead bookie shows nulls instead of holding the answer up. A bookie's storage
report and its garbage-collection passes are the bookie's own answers (``GET
/v1/storage``, ``POST /v1/gc``; docs/operations.md "Space given back"), asked of a
registered bookie only; its space counted by log pages through the bookie's ledgers and
reads their metadata (gateway/admin/by_log.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.admin.by_log import count_by_log
from gateway.limits import (
    BOOKIE_INFO_TIMEOUT_S,
    BOOKIE_STORAGE_TIMEOUT_S,
    MARK_READS_CONCURRENT_MAX,
)
from services.clock import wall_ms
from services.errors import (
    BookieNotFound,
    BookieUnavailable,
    InvalidArgument,
    NodeNotFound,
    QuireError,
)
from services.protocol.placement import rack_counts
from services.zk import paths as zkpaths
from services.zk.ledger_store import LedgerStore, VersionedLedger
from services.zk.registry import BookieRegistry
from services.zk.store import MetadataStore
from services.zk.underreplication import (
    DECOMMISSIONED,
    DECOMMISSIONING,
    LockInfo,
    Mark,
    UnderReplicationStore,
)

log = logging.getLogger(__name__)


WRITABLE = "writable"
READONLY = "readonly"
DOWN = "down"


class InfoSource(Protocol):
    """What the admin API asks of one bookie (``BookieClient``'s methods)."""

    async def info(self) -> dict[str, Any]: ...

    async def storage(self, timeout_s: float | None = None) -> dict[str, Any]: ...

    async def gc(self, dry_run: bool, timeout_s: float | None = None) -> dict[str, Any]: ...

    async def storage_ledgers(
        self, after: int = -1, limit: int | None = None, timeout_s: float | None = None
    ) -> tuple[list[tuple[int, int]], int | None]: ...


@dataclass(frozen=True, slots=True)
class KnownBookie:
    bookie_id: str
    address: str
    state: str
    registered: bool
    cookie_instance_id: str | None
    rack: str | None = None


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


class AdminService:
    """Answers of the Admin API, built once in the gateway's lifespan."""

    def __init__(
        self,
        store: MetadataStore,
        replication: UnderReplicationStore,
        registry: BookieRegistry,
        bookie: Callable[[str], InfoSource],
        clock: Callable[[], int] = wall_ms,
        info_timeout_s: float = BOOKIE_INFO_TIMEOUT_S,
    ) -> None:
        self.store = store
        self.ledgers = LedgerStore(store)
        self.replication = replication
        self.registry = registry
        self.bookie = bookie
        self.clock = clock
        self.info_timeout_s = info_timeout_s

    # ------------------------------------------------------------------ cluster

    async def cluster(self) -> dict[str, Any]:
        auditor_id, enabled, marks, known, report = await asyncio.gather(
            self.replication.auditor_id(),
            self.replication.replication_enabled(),
            self.replication.count(),
            self.known_bookies(),
            self.replication.placement_report(),
        )
        writable = set(self.registry.writable)
        counts = {"writable": 0, "readonly": 0, "unavailable": 0}
        for bookie in known:
            if bookie.registered:
                counts["writable" if bookie.bookie_id in writable else "readonly"] += 1
            elif bookie.state != DECOMMISSIONED:
                counts["unavailable"] += 1
        return {
            "auditor_elected": auditor_id is not None,
            "auditor_id": auditor_id,
            "replication_enabled": enabled,
            "under_replicated_ledgers": marks,
            "bookies": counts,
            "racks": rack_counts(self.registry.racks),
            "placement_violations": report.get("violations") if report else None,
        }

    async def placement(self) -> dict[str, Any]:
        """The auditor's last placement report; before its first check, an empty one
        with the racks registered now."""
        report = await self.replication.placement_report()
        if not report:
            return {
                "checked_at": None,
                "racks": rack_counts(self.registry.racks),
                "violations": 0,
                "movable": 0,
                "ledgers": [],
                "truncated": False,
            }
        return report

    async def set_replication(self, enabled: bool) -> dict[str, Any]:
        await self.replication.set_replication_enabled(enabled)
        return await self.cluster()

    async def request_audit(self) -> dict[str, Any]:
        await self.replication.request_audit()
        return {"requested": True, "auditor_id": await self.replication.auditor_id()}

    # ------------------------------------------------------------------ bookies

    async def _cookies(self) -> dict[str, str | None]:
        try:
            names = await self.store.children(zkpaths.COOKIES)
        except NodeNotFound:
            return {}
        nodes = await asyncio.gather(*(self.store.get_or_none(zkpaths.cookie(n)) for n in names))
        out: dict[str, str | None] = {}
        for name, node in zip(names, nodes, strict=True):
            if node is None:
                continue
            try:
                doc = json.loads(node.data)
                instance = doc.get("instance_id") if isinstance(doc, dict) else None
            except ValueError:
                instance = None
            out[name] = str(instance) if instance else None
        return out

    async def known_bookies(self) -> list[KnownBookie]:
        """Every bookie the cluster knows (registered, with a cookie, or decommissioned),
        in id order, with its state."""
        cookies, decommissions = await asyncio.gather(
            self._cookies(), self.replication.decommissions()
        )
        registered = dict(self.registry.bookies)
        out: list[KnownBookie] = []
        for bookie_id in sorted(set(registered) | set(cookies) | set(decommissions)):
            info = registered.get(bookie_id)
            if bookie_id in decommissions:
                state = decommissions[bookie_id]
                if state not in (DECOMMISSIONING, DECOMMISSIONED):
                    state = DECOMMISSIONING
            elif info is not None:
                state = READONLY if info.state == READONLY else WRITABLE
            else:
                state = DOWN
            address = info.address if info is not None else bookie_id
            rack = info.rack if info is not None else None
            out.append(
                KnownBookie(
                    bookie_id, address, state, info is not None, cookies.get(bookie_id), rack
                )
            )
        return out

    async def _info(self, bookie: KnownBookie) -> dict[str, Any] | None:
        if not bookie.registered:
            return None
        try:
            async with asyncio.timeout(self.info_timeout_s):
                return await self.bookie(bookie.bookie_id).info()
        except (QuireError, TimeoutError, OSError) as exc:
            log.debug("no /v1/info from bookie %s: %r", bookie.bookie_id, exc)
            return None

    async def bookies(self) -> list[dict[str, Any]]:
        known = await self.known_bookies()
        infos = await asyncio.gather(*(self._info(b) for b in known))
        return [_bookie_object(b, i) for b, i in zip(known, infos, strict=True)]

    async def bookie_object(self, bookie_id: str) -> dict[str, Any]:
        for bookie in await self.known_bookies():
            if bookie.bookie_id == bookie_id:
                return _bookie_object(bookie, await self._info(bookie))
        raise BookieNotFound(f"no bookie {bookie_id!r}: not registered and no cookie")

    async def decommission(self, bookie_id: str) -> dict[str, Any]:
        """Mark ``bookie_id`` decommissioning (idempotent) and leave it out of new
        ensembles at once; ask the auditor for a full check so it is re-replicated."""
        if bookie_id not in {b.bookie_id for b in await self.known_bookies()}:
            raise BookieNotFound(f"no bookie {bookie_id!r}: not registered and no cookie")
        await self.replication.request_decommission(bookie_id, self.clock())
        self.registry.exclude(bookie_id)
        await self.replication.request_audit()
        return await self.bookie_object(bookie_id)

    async def _registered(self, bookie_id: str) -> KnownBookie:
        """The bookie, known and registered (running): ``BookieNotFound`` when unknown,
        ``BookieUnavailable`` when it is down (its store cannot be asked)."""
        for bookie in await self.known_bookies():
            if bookie.bookie_id == bookie_id:
                if not bookie.registered:
                    raise BookieUnavailable(
                        f"bookie {bookie_id!r} is not running (state {bookie.state}): its "
                        "storage is reported, and collected, once it is back"
                    )
                return bookie
        raise BookieNotFound(f"no bookie {bookie_id!r}: not registered and no cookie")

    async def storage(self, bookie_id: str, by_log: bool = False) -> dict[str, Any]:
        """The bookie's storage report (bookie/collector.py), as it answered; with
        ``by_log``, and its bytes counted by log (gateway/admin/by_log.py), read after it."""
        bookie = await self._registered(bookie_id)
        client = self.bookie(bookie.bookie_id)
        report = await client.storage(timeout_s=BOOKIE_STORAGE_TIMEOUT_S)
        if by_log:
            report["by_log"] = await count_by_log(client.storage_ledgers, self._ledger_reads)
        return report

    async def _ledger_reads(
        self, ledger_ids: list[int]
    ) -> list[VersionedLedger | InvalidArgument | None]:
        """Many ledgers' metadata in one pipelined read, after a sync of the server with
        the leader (so a ledger created before the bookie listed it is seen)."""
        await self.store.sync(zkpaths.LEDGERS)
        return await self.ledgers.get_many(ledger_ids)

    async def gc(self, bookie_id: str, dry_run: bool) -> dict[str, Any]:
        """Run a garbage-collection pass on the bookie now, as it answered."""
        bookie = await self._registered(bookie_id)
        return await self.bookie(bookie.bookie_id).gc(dry_run, timeout_s=BOOKIE_STORAGE_TIMEOUT_S)

    # ------------------------------------------------------------------ under-replication

    async def under_replicated(
        self, after: int, limit: int
    ) -> tuple[list[dict[str, Any]], int | None]:
        """One page of marks above ``after`` (ascending) and the ``after`` of the next page
        (None at the end), each with the progress of the worker holding its lock."""
        ids = await self.replication.marked(after, limit + 1)
        more = len(ids) > limit
        ids = ids[:limit]
        gate = asyncio.Semaphore(MARK_READS_CONCURRENT_MAX)

        async def read(ledger_id: int) -> Mark | None:
            async with gate:
                return await self.replication.get_mark(ledger_id)

        marks, locks = await asyncio.gather(
            asyncio.gather(*(read(i) for i in ids)), self.replication.locks()
        )
        out = [_mark_object(m, locks.get(m.ledger_id)) for m in marks if m is not None]
        return out, (ids[-1] if more and ids else None)


def _bookie_object(bookie: KnownBookie, info: dict[str, Any] | None) -> dict[str, Any]:
    info = info or {}
    instance = info.get("instance_id") or bookie.cookie_instance_id
    return {
        "id": bookie.bookie_id,
        "address": bookie.address,
        "state": bookie.state,
        "ledgers": _number(info.get("ledgers")),
        "free_bytes": _number(info.get("free_bytes")),
        "total_bytes": _number(info.get("total_bytes")),
        "free_ratio": _number(info.get("free_ratio")),
        "instance_id": str(instance) if instance else None,
        "rack": bookie.rack,
        "entries_added": _number(info.get("entries_added")),
    }


def _mark_object(mark: Mark, lock: LockInfo | None) -> dict[str, Any]:
    return {
        "ledger_id": mark.ledger_id,
        "missing_bookies": list(mark.missing_bookies),
        "misplaced": mark.misplaced,
        "marked_at": mark.marked_at,
        "progress": dict(lock.progress) if lock is not None else None,
        "worker": lock.worker if lock is not None and lock.worker else None,
    }
