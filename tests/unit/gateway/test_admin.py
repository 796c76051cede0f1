"""gateway/admin/service.py and the registry's decommission view, over an in-memory metadata
store: a decommissioned bookie leaves ``writable`` at once and stays out whatever order
the watch reports in; bookie states and their precedence; a hung bookie's /v1/info
costs the short time-out and gives nulls; the under-replicated page and its ``next``."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from gateway.admin.service import AdminService
from services.errors import BookieNotFound, NodeExists, NodeNotFound
from services.zk import paths as zkpaths
from services.zk.registry import BookieRegistry
from services.zk.store import Versioned
from services.zk.underreplication import UnderReplicationStore


def _set() -> asyncio.Future[None]:
    """What a watch call answers: here the watch is set at once."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


class MemoryStore:
    """The part of ``MetadataStore`` the registry and the admin API use; watches fire
    when the test calls ``fire``."""

    def __init__(self) -> None:
        self.nodes: dict[str, Versioned] = {}
        self.child_watches: dict[str, list[Callable[[list[str]], None]]] = {}
        self.data_watches: dict[str, list[Callable[[Versioned | None], None]]] = {}

    async def ensure_path(self, path: str) -> None:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            self.nodes.setdefault("/" + "/".join(parts[:i]), Versioned(b"", 0))

    async def create(self, path: str, data: bytes = b"", ephemeral: bool = False) -> str:
        if path in self.nodes:
            raise NodeExists(path)
        await self.ensure_path(path.rsplit("/", 1)[0] or "/")
        self.nodes[path] = Versioned(data, 0)
        return path

    async def get_or_none(self, path: str) -> Versioned | None:
        return self.nodes.get(path)

    async def exists(self, path: str) -> bool:
        return path in self.nodes

    async def set(self, path: str, data: bytes, version: int = -1) -> int:
        node = self.nodes.get(path)
        if node is None:
            raise NodeNotFound(path)
        self.nodes[path] = Versioned(data, node.version + 1)
        return node.version + 1

    async def delete(self, path: str, version: int = -1) -> None:
        if self.nodes.pop(path, None) is None:
            raise NodeNotFound(path)

    async def children(self, path: str) -> list[str]:
        if path not in self.nodes:
            raise NodeNotFound(path)
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix) :].split("/")[0] for p in self.nodes if p.startswith(prefix)})

    def watch_children(
        self, path: str, callback: Callable[[list[str]], None]
    ) -> asyncio.Future[None]:
        self.child_watches.setdefault(path, []).append(callback)
        return _set()

    def watch_data(
        self, path: str, callback: Callable[[Versioned | None], None]
    ) -> asyncio.Future[None]:
        self.data_watches.setdefault(path, []).append(callback)
        callback(self.nodes.get(path))
        return _set()

    async def fire(self, path: str) -> None:
        names = await self.children(path)
        for callback in self.child_watches.get(path, []):
            callback(names)


class InfoBookie:
    def __init__(self, doc: dict[str, Any] | None) -> None:
        self.doc = doc

    async def info(self) -> dict[str, Any]:
        if self.doc is None:
            await asyncio.sleep(3600)  # hung
        return dict(self.doc or {})


A, B, C, D = "h:1", "h:2", "h:3", "h:4"


def synchronous(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """Run an async test on its own event loop (the suite has no async plugin)."""

    @functools.wraps(test)
    def run() -> None:
        asyncio.run(test())

    return run


async def _setup(
    infos: dict[str, dict[str, Any] | None] | None = None,
) -> tuple[MemoryStore, BookieRegistry, AdminService]:
    store = MemoryStore()
    for bookie_id in (A, B, C):
        doc = {
            "address": f"http://{bookie_id}",
            "state": "readonly" if bookie_id == C else "writable",
            "rack": "r1" if bookie_id == A else None,
        }
        await store.create(zkpaths.bookie(bookie_id), json.dumps(doc).encode())
    for bookie_id in (A, B, C, D):
        await store.create(
            zkpaths.cookie(bookie_id), json.dumps({"instance_id": f"i{bookie_id}"}).encode()
        )
    registry = BookieRegistry(store)  # type: ignore[arg-type]
    start = asyncio.create_task(registry.start())
    await asyncio.sleep(0)
    await store.fire(zkpaths.BOOKIES)
    await store.fire(zkpaths.DECOMMISSION)
    await start
    replication = UnderReplicationStore(store)  # type: ignore[arg-type]
    await replication.ensure_paths()
    given = infos or {}
    admin = AdminService(
        store,  # type: ignore[arg-type]
        replication,
        registry,
        lambda bookie_id: InfoBookie(given.get(bookie_id, {"free_ratio": 0.5, "ledgers": 3})),
        clock=lambda: 42,
        info_timeout_s=0.2,
    )
    return store, registry, admin


@synchronous
async def test_decommission_leaves_writable_at_once_and_for_good() -> None:
    """The answering gateway's registry drops the bookie before the watch reports it; a
    stale watch report (from before the node) does not bring it back; another gateway's
    registry drops it when its watch reports the node."""
    store, registry, admin = await _setup()
    assert registry.writable == [A, B]
    row = await admin.decommission(A)
    assert row["state"] == "decommissioning" and row["id"] == A
    assert registry.writable == [B]
    registry._on_decommissions([])  # a report from before the node existed
    assert registry.writable == [B]
    await store.fire(zkpaths.DECOMMISSION)
    assert registry.writable == [B] and registry.decommissioned == {A}

    other = BookieRegistry(store)  # type: ignore[arg-type]
    start = asyncio.create_task(other.start())
    await asyncio.sleep(0)
    await store.fire(zkpaths.BOOKIES)
    await store.fire(zkpaths.DECOMMISSION)
    await start
    assert other.writable == [B]


@synchronous
async def test_states_and_precedence() -> None:
    """Registered bookies are writable/readonly, a cookie alone is down, a decommission
    node wins over both; unknown ids are BookieNotFound and create nothing."""
    store, registry, admin = await _setup()
    states = {b["id"]: b["state"] for b in await admin.bookies()}
    assert states == {A: "writable", B: "writable", C: "readonly", D: "down"}
    await admin.decommission(D)
    await admin.replication.set_decommissioned(D)
    await admin.decommission(C)
    states = {b["id"]: b["state"] for b in await admin.bookies()}
    assert states == {A: "writable", B: "writable", C: "decommissioning", D: "decommissioned"}
    cluster = await admin.cluster()
    assert cluster["bookies"] == {"writable": 2, "readonly": 1, "unavailable": 0}
    with pytest.raises(BookieNotFound):
        await admin.decommission("h:9")
    assert not await store.exists(zkpaths.decommission("h:9"))


@synchronous
async def test_a_hung_bookie_gives_nulls_within_the_time_out() -> None:
    """A bookie whose /v1/info never answers shows null figures after the short
    time-out, while the others show theirs; the listing does not hang."""
    _, _, admin = await _setup(infos={B: None})
    rows = await asyncio.wait_for(admin.bookies(), 2.0)
    by_id = {r["id"]: r for r in rows}
    assert by_id[A]["ledgers"] == 3 and by_id[A]["free_ratio"] == 0.5
    assert by_id[B]["ledgers"] is None and by_id[B]["free_ratio"] is None
    assert by_id[B]["instance_id"] == f"i{B}"  # from the cookie
    assert by_id[D]["ledgers"] is None and by_id[D]["state"] == "down"


@synchronous
async def test_under_replicated_page_next_and_count() -> None:
    """A page of ``limit`` marks says where the next one starts; the last page says
    null; the cluster count is the number of marks."""
    _, _, admin = await _setup()
    for ledger_id in (2, 4, 6):
        await admin.replication.mark(ledger_id, [D], 1000 + ledger_id)
    rows, nxt = await admin.under_replicated(-1, 2)
    assert [r["ledger_id"] for r in rows] == [2, 4] and nxt == 4
    rows, nxt = await admin.under_replicated(4, 2)
    assert [r["ledger_id"] for r in rows] == [6] and nxt is None
    assert rows[0] == {
        "ledger_id": 6,
        "missing_bookies": [D],
        "misplaced": False,
        "marked_at": 1006,
        "progress": None,
        "worker": None,
    }
    assert (await admin.cluster())["under_replicated_ledgers"] == 3


@synchronous
async def test_racks_and_the_placement_report() -> None:
    """docs/api.md Admin: each bookie shows the rack it registered (null: none), the
    cluster counts bookies per rack, a placement move shows in the mark, and the placement
    report is the auditor's (an empty one with today's racks before its first check)."""
    _, _, admin = await _setup()
    racks = {b["id"]: b["rack"] for b in await admin.bookies()}
    assert racks == {A: "r1", B: None, C: None, D: None}
    cluster = await admin.cluster()
    assert cluster["racks"] == {"/default-rack": 2, "r1": 1}
    assert cluster["placement_violations"] is None
    report = await admin.placement()
    assert (report["checked_at"], report["violations"], report["racks"]) == (
        None,
        0,
        {"/default-rack": 2, "r1": 1},
    )
    written = {"checked_at": 5, "racks": {"r1": 3}, "violations": 1, "movable": 1,
               "ledgers": [{"ledger_id": 7, "fragments": [0], "movable": True}],
               "truncated": False}  # fmt: skip
    await admin.replication.set_placement_report(written)
    assert await admin.placement() == written
    assert (await admin.cluster())["placement_violations"] == 1
    await admin.replication.mark(7, [], 10, misplaced=True)
    await admin.replication.mark(7, [D], 11)
    rows, _ = await admin.under_replicated(-1, 10)
    assert (rows[0]["missing_bookies"], rows[0]["misplaced"]) == ([D], True)
