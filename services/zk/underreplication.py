"""Auto-recovery's shared state in ZooKeeper (docs/protocol.md, "Auto-recovery").

The auditor, the replication workers and the gateway's admin API coordinate only
through these znodes (paths in ``services.zk.paths``):

- a **mark** per under-replicated ledger, ``/underreplication/ledgers/<hierarchy>``,
  JSON ``{"missing_bookies": [ids], "marked_at": ms, "misplaced": bool}``; marking again
  merges the missing bookies (and ``misplaced``) by CAS. ``misplaced`` asks for
  placement moves: a settled fragment's write quorums span too few racks and a bookie
  on another rack can fix it (docs/operations.md "Racks"); such a mark may name no
  missing bookie at all; whoever makes the ledger whole deletes it, guarded by the
  version it read so that a bookie added to the mark meanwhile is not lost. The
  under-replicated count is always the number of marks now (a walk), never a counter;
- ``/underreplication/changed``, whose data the auditor bumps after marking, so
  workers wake at once (they also re-walk the marks periodically);
- a **lock** per ledger being repaired, ``/underreplication/locks/{id}``, ephemeral
  (a dead worker's lock frees itself), JSON ``{"worker", "since", "progress"}``; the
  holder updates ``progress`` as it copies;
- ``/underreplication/disabled``, present while replication is disabled;
- ``/decommission/{bookie}``, JSON ``{"state": "decommissioning"|"decommissioned",
  "requested_at"}``;
- ``/auditor/election/n_{seq}`` (ephemeral sequential, data: the candidate's id): the
  lowest sequence is the elected auditor; ``/auditor/audit-request``, whose data the
  gateway bumps to ask the auditor for a full check now; ``/auditor/placement``, the
  elected auditor's last placement report (JSON, ``auditor.audit.PlacementReport``),
  which the gateway's Admin API serves.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from services.errors import MetadataConflict, MetadataUnavailable, NodeExists, NodeNotFound
from services.zk import paths as zkpaths
from services.zk.limits import LOCK_ATTEMPTS_MAX, LOCK_RELEASE_ATTEMPTS_MAX, MARK_CAS_ATTEMPTS_MAX
from services.zk.store import Check, Delete, MetadataStore, Versioned
from services.zk.walk import walk_ids

ELECTION_PREFIX = "n_"
DECOMMISSIONING = "decommissioning"
DECOMMISSIONED = "decommissioned"


@dataclass(frozen=True, slots=True)
class Mark:
    ledger_id: int
    missing_bookies: tuple[str, ...]
    marked_at: int
    version: int
    misplaced: bool = False  # placement moves asked for (docs/operations.md "Racks")


@dataclass(frozen=True, slots=True)
class LockInfo:
    ledger_id: int
    worker: str
    since: int
    progress: dict[str, Any]


def _json(data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data or b"{}")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def _mark_from(ledger_id: int, node: Versioned) -> Mark:
    doc = _json(node.data)
    missing = tuple(sorted(str(b) for b in doc.get("missing_bookies") or []))
    misplaced = doc.get("misplaced") is True
    return Mark(ledger_id, missing, int(doc.get("marked_at") or 0), node.version, misplaced)


class UnderReplicationStore:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def ensure_paths(self) -> None:
        for path in (
            zkpaths.UNDER_REPLICATED_LEDGERS,
            zkpaths.REPLICATION_LOCKS,
            zkpaths.DECOMMISSION,
            zkpaths.AUDITOR_ELECTION,
        ):
            await self.store.ensure_path(path)
        for path in (zkpaths.MARKS_CHANGED, zkpaths.AUDIT_REQUEST):
            try:
                await self.store.create(path, b"0")
            except NodeExists:
                pass

    # ------------------------------------------------------------------ marks

    async def mark(
        self, ledger_id: int, missing: Iterable[str], now_ms: int, misplaced: bool = False
    ) -> Mark:
        """Mark ``ledger_id`` under-replicated, adding ``missing`` (and ``misplaced``:
        placement moves wanted) to an existing mark."""
        path = zkpaths.under_replicated(ledger_id)
        wanted = set(missing)
        for _ in range(MARK_CAS_ATTEMPTS_MAX):
            node = await self.store.get_or_none(path)
            if node is None:
                doc = {"missing_bookies": sorted(wanted), "marked_at": now_ms}
                if misplaced:
                    doc["misplaced"] = True
                try:
                    await self.store.create(path, _dump(doc))
                except NodeExists:
                    continue
                return Mark(ledger_id, tuple(sorted(wanted)), now_ms, 0, misplaced)
            current = _mark_from(ledger_id, node)
            if wanted <= set(current.missing_bookies) and current.misplaced >= misplaced:
                return current
            merged = sorted(wanted | set(current.missing_bookies))
            either = current.misplaced or misplaced
            doc = {"missing_bookies": merged, "marked_at": current.marked_at}
            if either:
                doc["misplaced"] = True
            try:
                version = await self.store.set(path, _dump(doc), node.version)
            except (MetadataConflict, NodeNotFound):
                continue
            return Mark(ledger_id, tuple(merged), current.marked_at, version, either)
        raise MetadataConflict(f"marking ledger {ledger_id} lost {MARK_CAS_ATTEMPTS_MAX} races")

    async def get_mark(self, ledger_id: int) -> Mark | None:
        node = await self.store.get_or_none(zkpaths.under_replicated(ledger_id))
        return None if node is None else _mark_from(ledger_id, node)

    async def get_marks(self, ledger_ids: Sequence[int]) -> list[Mark | None]:
        """Many marks in one pipelined read (``MetadataStore.get_many``), None for a
        ledger that has none."""
        nodes = await self.store.get_many([zkpaths.under_replicated(lid) for lid in ledger_ids])
        return [
            None if node is None else _mark_from(lid, node)
            for lid, node in zip(ledger_ids, nodes, strict=True)
        ]

    async def clear_mark(
        self, ledger_id: int, version: int = -1, *, ledger_version: int | None = None
    ) -> bool:
        """Delete the mark (only at ``version`` when given). False when the mark changed
        meanwhile (re-read it: a bookie was added) ; True when it is gone. With
        ``ledger_version``, only while the ledger's metadata is at that version too (one
        transaction): a repair that found nothing left decided on that metadata, and a
        close or an ensemble change since may have settled a fragment naming a bookie
        the mark names (False: plan again)."""
        if ledger_version is not None:
            mark = zkpaths.under_replicated(ledger_id)
            failed = await self.store.transaction(
                [Check(zkpaths.ledger(ledger_id), ledger_version), Delete(mark, version)]
            )
            if failed is None:
                return True
            index, error = failed
            if index == 1 and isinstance(error, NodeNotFound):
                return True
            if isinstance(error, MetadataConflict | NodeNotFound):
                return False
            raise error
        try:
            await self.store.delete(zkpaths.under_replicated(ledger_id), version)
        except NodeNotFound:
            return True
        except MetadataConflict:
            return False
        return True

    async def marked(self, after: int = -1, limit: int = 1 << 62) -> list[int]:
        """Ids of marked ledgers above ``after``, ascending (at most ``limit``)."""
        return await walk_ids(self.store, zkpaths.UNDER_REPLICATED_LEDGERS, after, limit)

    async def count(self) -> int:
        return len(await self.marked())

    async def notify_marked(self) -> None:
        """Wake the workers (they watch ``/underreplication/changed``)."""
        await self._bump(zkpaths.MARKS_CHANGED)

    def watch_marked(self, callback: Callable[[], None]) -> asyncio.Future[None]:
        return self.store.watch_data(zkpaths.MARKS_CHANGED, lambda _node: callback())

    # ------------------------------------------------------------------ locks

    # A lock is held by a ZooKeeper session (its ephemeral owner), not by a name: a
    # holder releases, updates or trusts its lock only while the znode's owner is the
    # session that took it (``try_lock``'s answer), and deletes it at the version read.
    # A session that ended took its lock with it, and the lock there now (at version 0
    # again) is somebody else's. A call that failed with the connection is decided by
    # reading the lock back once connected again (SUSPENDED: the session, and its lock,
    # may well survive), never by guessing: a create may have landed, a delete not.

    async def try_lock(self, ledger_id: int, worker: str, now_ms: int) -> int | None:
        """Take the ledger's lock for ``worker``: the id of the session that holds it now
        (this store's), to pass to ``unlock``; None when another holds it.

        A lock this session holds for ``worker`` already is ours: a create that landed
        but answered ConnectionLoss, or a release that gave up waiting for ZooKeeper.
        (Two holders sharing a session must use distinct ``worker`` names.)"""
        path = zkpaths.replication_lock(ledger_id)
        data = _dump({"worker": worker, "since": now_ms, "progress": {}})
        for _ in range(LOCK_ATTEMPTS_MAX):
            try:
                return await self.store.create_ephemeral(path, data)
            except NodeExists:
                pass
            except MetadataUnavailable:
                if not await self.store.wait_connected(self.store.session_timeout_s):
                    raise
            node = await self.store.get_or_none(path)
            if node is None:
                continue  # released meanwhile, or our create never landed: again
            mine = node.owner == self.store.session and _json(node.data).get("worker") == worker
            return node.owner if mine else None
        raise MetadataUnavailable(
            f"locking ledger {ledger_id}: no answer in {LOCK_ATTEMPTS_MAX} attempts"
        )

    async def holds(self, ledger_id: int, owner: int) -> bool:
        """Whether the session ``owner`` holds the ledger's lock now."""
        node = await self.store.get_or_none(zkpaths.replication_lock(ledger_id))
        return node is not None and node.owner == owner

    async def update_lock(self, lock: LockInfo, owner: int) -> None:
        """Write the lock's progress while the session ``owner`` holds it."""
        path = zkpaths.replication_lock(lock.ledger_id)
        node = await self.store.get_or_none(path)
        if node is None or node.owner != owner:
            return
        doc = {"worker": lock.worker, "since": lock.since, "progress": lock.progress}
        try:
            await self.store.set(path, _dump(doc), node.version)
        except (NodeNotFound, MetadataConflict):
            pass

    async def unlock(self, ledger_id: int, owner: int, wait_s: float | None = None) -> bool:
        """Release the lock the session ``owner`` took: True once that session holds it no
        more (deleted now, or gone with the session); a lock taken since by anybody else
        is left alone.

        A dropped connection is waited out for ``wait_s`` (default: the session
        time-out; a connection down longer has most likely lost the session, and the
        lock with it), since while the session lives so does its lock, and every other
        worker would find the ledger locked. False when ZooKeeper stayed unreachable
        that long: the holder's next ``try_lock`` of the ledger finds the lock its own."""
        path = zkpaths.replication_lock(ledger_id)
        wait_s = self.store.session_timeout_s if wait_s is None else wait_s
        deadline = time.monotonic() + wait_s
        for _ in range(LOCK_RELEASE_ATTEMPTS_MAX):
            if self.store.session != owner:
                return True  # the session ended: its ephemeral lock went with it
            try:
                node = await self.store.get_or_none(path)
                if node is None or node.owner != owner:
                    return True
                await self.store.delete(path, node.version)
                return True
            except NodeNotFound:
                return True
            except MetadataConflict:
                continue  # a progress write of ours landed meanwhile: read again
            except MetadataUnavailable:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not await self.store.wait_connected(remaining):
                    return False
        return False

    async def locks(self) -> dict[int, LockInfo]:
        out: dict[int, LockInfo] = {}
        try:
            names = await self.store.children(zkpaths.REPLICATION_LOCKS)
        except NodeNotFound:
            return out
        for name in names:
            if not name.isdigit():
                continue
            node = await self.store.get_or_none(f"{zkpaths.REPLICATION_LOCKS}/{name}")
            if node is None:
                continue
            doc = _json(node.data)
            out[int(name)] = LockInfo(
                int(name),
                str(doc.get("worker") or ""),
                int(doc.get("since") or 0),
                dict(doc.get("progress") or {}),
            )
        return out

    # ------------------------------------------------------------------ enable / disable

    async def replication_enabled(self) -> bool:
        return not await self.store.exists(zkpaths.REPLICATION_DISABLED)

    async def set_replication_enabled(self, enabled: bool) -> None:
        if enabled:
            try:
                await self.store.delete(zkpaths.REPLICATION_DISABLED)
            except NodeNotFound:
                pass
        else:
            try:
                await self.store.create(zkpaths.REPLICATION_DISABLED, b"")
            except NodeExists:
                pass

    def watch_enabled(self, callback: Callable[[bool], None]) -> asyncio.Future[None]:
        return self.store.watch_data(
            zkpaths.REPLICATION_DISABLED, lambda node: callback(node is None)
        )

    # ------------------------------------------------------------------ decommission

    async def decommissions(self) -> dict[str, str]:
        """Bookie id -> ``decommissioning`` | ``decommissioned``."""
        out: dict[str, str] = {}
        try:
            names = await self.store.children(zkpaths.DECOMMISSION)
        except NodeNotFound:
            return out
        for name in names:
            node = await self.store.get_or_none(zkpaths.decommission(name))
            if node is not None:
                out[name] = str(_json(node.data).get("state") or DECOMMISSIONING)
        return out

    async def request_decommission(self, bookie_id: str, now_ms: int) -> None:
        """Idempotent: a bookie already decommissioning or decommissioned stays so."""
        doc = {"state": DECOMMISSIONING, "requested_at": now_ms}
        try:
            await self.store.create(zkpaths.decommission(bookie_id), _dump(doc))
        except NodeExists:
            pass

    async def set_decommissioned(self, bookie_id: str) -> None:
        await self.set_decommission_state(bookie_id, DECOMMISSIONED)

    async def set_decommission_state(self, bookie_id: str, state: str) -> None:
        """``decommissioned`` once no fragment names the bookie; ``decommissioning`` again
        when one names it after that (a gateway that had not seen the request chose it)."""
        path = zkpaths.decommission(bookie_id)
        node = await self.store.get_or_none(path)
        if node is None:
            return
        doc = _json(node.data)
        if doc.get("state") == state:
            return
        doc["state"] = state
        try:
            await self.store.set(path, _dump(doc), node.version)
        except (MetadataConflict, NodeNotFound):
            pass

    def watch_decommissions(self, callback: Callable[[list[str]], None]) -> asyncio.Future[None]:
        """``callback(bookie ids)`` whenever a decommission node appears or goes."""
        return self.store.watch_children(zkpaths.DECOMMISSION, callback)

    # ------------------------------------------------------------------ auditor

    async def request_audit(self) -> None:
        await self._bump(zkpaths.AUDIT_REQUEST)

    def watch_audit_requests(self, callback: Callable[[], None]) -> asyncio.Future[None]:
        """``callback()`` on every request after the first call (which only arms it)."""
        seen: list[int] = []

        def on_data(node: Versioned | None) -> None:
            version = -1 if node is None else node.version
            if seen and version != seen[-1]:
                callback()
            seen[:] = [version]

        return self.store.watch_data(zkpaths.AUDIT_REQUEST, on_data)

    async def set_placement_report(self, report: dict[str, Any]) -> None:
        """Write the auditor's last placement report (created if missing)."""
        data = _dump(report)
        try:
            await self.store.set(zkpaths.PLACEMENT_REPORT, data, -1)
        except NodeNotFound:
            try:
                await self.store.create(zkpaths.PLACEMENT_REPORT, data)
            except NodeExists:
                await self.store.set(zkpaths.PLACEMENT_REPORT, data, -1)

    async def placement_report(self) -> dict[str, Any] | None:
        """The auditor's last placement report, or None before its first check."""
        node = await self.store.get_or_none(zkpaths.PLACEMENT_REPORT)
        return None if node is None else _json(node.data)

    async def candidates(self) -> list[tuple[str, str]]:
        """Election candidates ``(node name, id)``, the elected one (lowest) first."""
        try:
            names = await self.store.children(zkpaths.AUDITOR_ELECTION)
        except NodeNotFound:
            return []
        names = sorted(
            (n for n in names if n.startswith(ELECTION_PREFIX)), key=lambda n: n.rsplit("_", 1)[1]
        )
        out: list[tuple[str, str]] = []
        for name in names:
            node = await self.store.get_or_none(f"{zkpaths.AUDITOR_ELECTION}/{name}")
            if node is not None:
                out.append((name, node.data.decode(errors="replace")))
        return out

    async def auditor_id(self) -> str | None:
        """The elected auditor's ``host:port``, or None when no auditor runs."""
        candidates = await self.candidates()
        return candidates[0][1] if candidates else None

    # ------------------------------------------------------------------ helpers

    async def _bump(self, path: str) -> None:
        node = await self.store.get_or_none(path)
        value = int(node.data or b"0") + 1 if node is not None and node.data.isdigit() else 1
        try:
            await self.store.set(path, str(value).encode())
        except NodeNotFound:
            try:
                await self.store.create(path, str(value).encode())
            except NodeExists:
                await self.store.set(path, str(value).encode())
