"""Durable cursors in ZooKeeper (docs/logs.md "Durable cursors"): create, versioned read,
compare-and-set, delete, list.

One znode per cursor below its log's (``services.zk.paths.cursor``), so a cursor lives
and dies with its log: ``LogStore.delete`` removes the cursors and the log in one
transaction. The znode's version is the compare-and-set token of acks
(gateway/logs/cursors.py). A cursor is only created while its log's znode exists (the
``cursors`` parent is made without its parents), so a log deleted meanwhile is never
brought back as an empty znode.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

from services.errors import (
    CursorNotFound,
    InvalidArgument,
    LogNotFound,
    NodeExists,
    NodeNotFound,
)
from services.protocol.cursors import CURSORS_PER_LOG_MAX, CursorState
from services.zk import paths as zkpaths
from services.zk.store import MetadataStore


@dataclass(frozen=True, slots=True)
class VersionedCursor:
    cursor: CursorState
    version: int


class CursorStore:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def create(
        self, log: str, name: str, cursor: CursorState
    ) -> tuple[VersionedCursor, bool]:
        """Create cursor ``name`` of ``log`` unless it exists: (the cursor as stored,
        whether it was created). ``LogNotFound`` when the log does not exist;
        ``InvalidArgument`` when the log holds ``CURSORS_PER_LOG_MAX`` cursors."""
        parent = zkpaths.cursors(log)
        try:
            await self.store.create(parent, makepath=False)
        except NodeExists:
            pass
        except NodeNotFound as exc:
            raise LogNotFound(f"no log {log!r}") from exc
        try:
            return await self.get(log, name), False
        except CursorNotFound:
            pass
        if len(await self.list(log)) >= CURSORS_PER_LOG_MAX:
            raise InvalidArgument(
                f"log {log} has {CURSORS_PER_LOG_MAX} cursors, the most one log holds: "
                "delete one first"
            )
        try:
            await self.store.create(zkpaths.cursor(log, name), cursor.to_json(), makepath=False)
        except NodeExists:
            return await self.get(log, name), False
        except NodeNotFound as exc:  # the log (and its cursors) deleted meanwhile
            raise LogNotFound(f"log {log!r} was deleted") from exc
        return VersionedCursor(cursor, 0), True

    async def get(self, log: str, name: str) -> VersionedCursor:
        try:
            node = await self.store.get(zkpaths.cursor(log, name))
        except NodeNotFound as exc:
            raise await self._missing(log, name) from exc
        return VersionedCursor(CursorState.from_json(node.data), node.version)

    async def compare_and_set(
        self, log: str, name: str, cursor: CursorState, version: int
    ) -> VersionedCursor:
        """Write ``cursor`` only if its znode is still at ``version`` (``MetadataConflict``
        otherwise; ``CursorNotFound`` or ``LogNotFound`` when it was deleted)."""
        try:
            new_version = await self.store.set(zkpaths.cursor(log, name), cursor.to_json(), version)
        except NodeNotFound as exc:
            raise await self._missing(log, name) from exc
        return VersionedCursor(cursor, new_version)

    async def delete(self, log: str, name: str) -> None:
        try:
            await self.store.delete(zkpaths.cursor(log, name))
        except NodeNotFound as exc:
            raise await self._missing(log, name) from exc

    async def list(self, log: str) -> builtins.list[str]:
        """The names of the log's cursors in byte order (at most ``CURSORS_PER_LOG_MAX``
        but for creates racing each other); ``LogNotFound``."""
        try:
            children = await self.store.children(zkpaths.cursors(log))
        except NodeNotFound:
            if not await self.store.exists(zkpaths.log(log)):
                raise LogNotFound(f"no log {log!r}") from None
            return []
        names = (n for n in map(zkpaths.cursor_name, children) if n is not None)
        return sorted(names, key=lambda n: n.encode())

    async def get_all(self, log: str) -> builtins.list[tuple[str, CursorState]]:
        """Every cursor of the log in name order, read at once (one gone meanwhile is
        left out); ``LogNotFound``."""
        names = await self.list(log)
        found = await self.store.get_many([zkpaths.cursor(log, name) for name in names])
        return [
            (name, CursorState.from_json(node.data))
            for name, node in zip(names, found, strict=True)
            if node is not None
        ]

    async def _missing(self, log: str, name: str) -> CursorNotFound | LogNotFound:
        """The error for a cursor znode that is not there: its log's, when the log is gone."""
        if not await self.store.exists(zkpaths.log(log)):
            return LogNotFound(f"no log {log!r}")
        return CursorNotFound(f"log {log} has no cursor {name!r}")
