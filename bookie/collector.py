"""Garbage collection on a bookie: passes that read ZooKeeper and delete the local data
of ledgers whose metadata is gone, by the rule of bookie/gc.py, and the storage report
that explains the bookie's space (docs/operations.md, "Space given back").

A pass takes the ledgers the bookie stores (their committed states), then, per chunk of
``GC_LOOKS_PER_READ`` ledgers: checks the session is connected, syncs its server with
the leader, reads the chunk's metadata znodes in one pipelined read, and checks the
session is still the same and connected. Listing before the sync matters: every listed
ledger got its first write before the listing, so its metadata was created before the
sync and the read sees it. Any failure ends the looks there (the rest are kept). The
rule then plans the deletes; each is a conditional ``DeleteOp`` through the group-commit
writer (kept if the ledger changed since it was looked at), and the writer's incremental
vacuum after the batch gives the pages back to the file system. One pass runs at a time;
``POST /v1/gc`` waits for a running one.

What it will not do: delete anything while ZooKeeper cannot be read, or guess about a
ledger it cannot read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from bookie import limits
from bookie.gc import Found, GcRules, Look, Plan
from bookie.ledgers import LedgerIndex
from bookie.metrics import BookieMetrics
from bookie.operations import Snapshot
from bookie.storage import Reader
from services.errors import LedgerNotFound, MetadataUnavailable, QuireError
from services.zk import paths as zkpaths
from services.zk.store import MetadataStore

log = logging.getLogger(__name__)

# Deletes a ledger if its state is still the given one: True when deleted.
DeleteIf = Callable[[int, Snapshot], Awaitable[bool]]


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _iso(wall_ms: int) -> str:
    return datetime.fromtimestamp(wall_ms / 1000, UTC).isoformat(timespec="seconds")


class GarbageCollector:
    """The passes (scheduled and asked for) and the storage report of one bookie."""

    def __init__(
        self,
        *,
        grace_s: float,
        interval_s: float,
        deletes_per_pass: int,
        index: LedgerIndex,
        store: MetadataStore,
        reader: Reader,
        delete_if: DeleteIf,
        metrics: BookieMetrics,
    ) -> None:
        self.rules = GcRules(int(grace_s * 1000))
        self.grace_s = grace_s
        self.interval_s = interval_s
        self.deletes_per_pass = deletes_per_pass
        self._index = index
        self._store = store
        self._reader = reader
        self._delete_if = delete_if
        self._metrics = metrics
        self._lock = asyncio.Lock()
        self.last_pass: dict[str, Any] | None = None

    async def run_forever(self) -> None:
        """A pass every ``interval_s``; a failed pass is logged and the next one runs."""
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.run_pass(dry_run=False)
            except Exception:  # noqa: BLE001 - the next pass tries again
                log.exception("garbage-collection pass failed")

    async def _look(self, states: dict[int, Snapshot]) -> list[Look]:
        """Read the metadata of the listed ledgers, in chunks; the looks end with an
        ``ERROR`` look at the first chunk that could not be read (module docstring)."""
        ids = sorted(states)
        looks: list[Look] = []
        store = self._store
        for at in range(0, len(ids), limits.GC_LOOKS_PER_READ):
            chunk = ids[at : at + limits.GC_LOOKS_PER_READ]
            started = _now_ms()
            try:
                session = store.session_id
                if not store.connected or session is None:
                    raise MetadataUnavailable("the ZooKeeper session is not connected")
                await store.sync(zkpaths.LEDGERS)
                nodes = await store.get_many([zkpaths.ledger(lid) for lid in chunk])
                if not store.connected or store.session_id != session:
                    raise MetadataUnavailable("the ZooKeeper session changed during the read")
            except QuireError as exc:
                log.warning(
                    "garbage collection: cannot read ledger metadata, keeping the rest: %s",
                    exc.message,
                )
                first = chunk[0]
                looks.append(Look(first, states[first], Found.ERROR, started, _now_ms(), 0))
                return looks
            answered, wall = _now_ms(), _wall_ms()
            for lid, node in zip(chunk, nodes, strict=True):
                found = Found.MISSING if node is None else Found.PRESENT
                looks.append(Look(lid, states[lid], found, started, answered, wall))
        return looks

    async def run_pass(self, *, dry_run: bool) -> dict[str, Any]:
        """One pass: look, plan, and (unless ``dry_run``) delete. Answers what it freed
        (a dry run: what it would free now), what waits and why it stopped, if it did."""
        async with self._lock:
            started = time.monotonic()
            states = self._index.states()
            if not dry_run:
                self.rules.retain(states)
            looks = await self._look(states)
            plan = self.rules.plan(looks, self.deletes_per_pass, dry_run=dry_run)
            sizes = await self._sizes([lid for lid, _ in plan.delete])
            freed: list[dict[str, Any]] = []
            for lid, state in plan.delete:
                if dry_run or await self._delete(lid, state):
                    freed.append({"ledger_id": lid, "bytes": sizes.get(lid, 0)})
            took_ms = int((time.monotonic() - started) * 1000)
            answer = self._answer(plan, freed, dry_run, took_ms)
            if not dry_run:
                self._account(plan, answer)
            return answer

    async def _delete(self, ledger_id: int, state: Snapshot) -> bool:
        try:
            deleted = await self._delete_if(ledger_id, state)
        except LedgerNotFound:
            deleted = False  # a gateway's delete came first: nothing of it is left here
        if deleted:
            log.info(
                "garbage collection deleted a ledger whose metadata is gone",
                extra={"fields": {"ledger_id": ledger_id}},
            )
        # Deleted, or kept because it was written since: either way its first look is
        # spent (a kept ledger's clock starts again at the next pass).
        self.rules.deleted(ledger_id)
        return deleted

    async def _sizes(self, ledger_ids: list[int]) -> dict[int, int]:
        if not ledger_ids:
            return {}
        reader = self._reader
        return await asyncio.get_running_loop().run_in_executor(
            reader.executor, reader.ledger_bytes, ledger_ids
        )

    def _answer(
        self, plan: Plan, freed: list[dict[str, Any]], dry_run: bool, took_ms: int
    ) -> dict[str, Any]:
        return {
            "dry_run": dry_run,
            "at": _iso(_wall_ms()),
            "freed_ledgers": len(freed),
            "freed_bytes": sum(item["bytes"] for item in freed),
            "freed": freed[: limits.GC_LISTED_MAX],
            "waiting_ledgers": len(plan.waiting),
            "pending_ledgers": len(plan.pending),
            "error": None
            if plan.error_at is None
            else f"ZooKeeper could not be read at ledger {plan.error_at}: it and the ledgers "
            "after it were kept",
            "took_ms": took_ms,
        }

    def _account(self, plan: Plan, answer: dict[str, Any]) -> None:
        m = self._metrics
        m.gc_passes.labels("ok" if plan.error_at is None else "zookeeper_error").inc()
        m.gc_freed_ledgers.inc(answer["freed_ledgers"])
        m.gc_freed_bytes.inc(answer["freed_bytes"])
        m.gc_pending.set(len(self.rules.missing()))
        self.last_pass = {
            key: answer[key] for key in ("at", "freed_ledgers", "freed_bytes", "took_ms", "error")
        }

    async def report(self, bookie_id: str) -> dict[str, Any]:
        """The storage report (docs/api.md, "Bookie": ``GET /v1/storage``): the file and
        its free pages, live ledgers, deleted ones whose entries are still being purged
        (not live: bookie/writer.py, "The purge"), orphaned ones (metadata found missing
        once, waiting for the grace) and those pending delete (past the grace), each with
        its reason. The bytes are the counts the writer keeps with each ledger
        (bookie/storage.py, "Kept byte counts"), summed in one read: O(ledgers), so
        every report reads them afresh (``bytes_counted_at``: when, ``bytes_count_ms``:
        how long the read took)."""
        reader = self._reader
        loop = asyncio.get_running_loop()
        states = self._index.states()
        now = _now_ms()
        missing = sorted(
            (lid, self.rules.due(first, now), first)
            for lid, first in self.rules.missing().items()
            if lid in states
        )
        started, wall = time.monotonic(), _wall_ms()
        counts = await loop.run_in_executor(
            reader.executor, reader.storage_counts, [lid for lid, _, _ in missing]
        )
        took_s = time.monotonic() - started
        space = await loop.run_in_executor(reader.executor, reader.file_space)
        sizes = counts.sizes
        orphaned: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []
        for lid, due, first in missing:
            since = _iso(first.wall_ms)
            if due:
                reason = (
                    f"metadata missing since {since} and still past the grace: deleted by "
                    f"the next pass (at most {self.deletes_per_pass} a pass) if still missing"
                )
                pending.append({"ledger_id": lid, "bytes": sizes.get(lid, 0), "reason": reason})
            else:
                reason = (
                    f"metadata missing since {since}, deleted after the grace "
                    f"({self.grace_s:g} s) if a second look finds it missing too"
                )
                orphaned.append({"ledger_id": lid, "bytes": sizes.get(lid, 0), "reason": reason})
        # Live: every ledger the read found stored, less the orphaned and pending ones it
        # found (one deleted since the index was read is in neither figure).
        listed = limits.GC_LISTED_MAX
        return {
            "bookie": bookie_id,
            "file_bytes": space.file_bytes,
            "free_pages_bytes": space.free_pages_bytes,
            "live": {
                "ledgers": counts.ledgers - len(sizes),
                "bytes": counts.bytes - sum(sizes.values()),
            },
            "purging": {"ledgers": counts.purging_ledgers, "bytes": counts.purging_bytes},
            "orphaned": orphaned[:listed],
            "orphaned_count": len(orphaned),
            "orphaned_bytes": sum(item["bytes"] for item in orphaned),
            "pending_delete": pending[:listed],
            "pending_delete_count": len(pending),
            "pending_delete_bytes": sum(item["bytes"] for item in pending),
            "gc": {
                "interval_s": self.interval_s,
                "grace_s": self.grace_s,
                "deletes_per_pass": self.deletes_per_pass,
            },
            "last_pass": self.last_pass,
            "bytes_counted_at": _iso(wall),
            "bytes_count_ms": round(took_s * 1000),
        }
