"""Log metadata in ZooKeeper: create, versioned read, compare-and-set, delete, list.

One znode per log at ``services.zk.paths.log(name)``; its version is the CAS token
(docs/protocol.md: "a log is a named, ordered list of ledgers, stored with a version").
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.errors import LedgerNotFound, LogNotFound, MetadataConflict, NodeExists, NodeNotFound
from services.limits import LIST_LIMIT_MAX
from services.protocol.logs import LogMetadata
from services.zk import paths as zkpaths
from services.zk.store import Check, Delete, MetadataStore, SetData, Step


@dataclass(frozen=True, slots=True)
class VersionedLog:
    log: LogMetadata
    version: int


class LogStore:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        # Told (log name, new version) after each write of a log's znode through this
        # store: the gateway's writer of the log then serves its reads no older copy of
        # the list (gateway/logs/writers.py).
        self.on_written: Callable[[str, int], None] | None = None

    def _written(self, written: VersionedLog) -> VersionedLog:
        if self.on_written is not None:
            self.on_written(written.log.name, written.version)
        return written

    async def create(self, log: LogMetadata) -> tuple[VersionedLog, bool]:
        """Create the log unless it exists; (the log as stored, whether it was created)."""
        try:
            await self.store.create(zkpaths.log(log.name), log.to_json())
        except NodeExists:
            return await self.get(log.name), False
        return VersionedLog(log, 0), True

    async def get(self, name: str) -> VersionedLog:
        try:
            node = await self.store.get(zkpaths.log(name))
        except NodeNotFound as exc:
            raise LogNotFound(f"no log {name!r}") from exc
        return VersionedLog(LogMetadata.from_json(node.data), node.version)

    async def compare_and_set(self, log: LogMetadata, version: int) -> VersionedLog:
        """Write ``log`` only if its znode is still at ``version`` (``MetadataConflict``
        otherwise, ``LogNotFound`` when it was deleted)."""
        try:
            new_version = await self.store.set(zkpaths.log(log.name), log.to_json(), version)
        except NodeNotFound as exc:
            raise LogNotFound(f"log {log.name!r} was deleted") from exc
        return self._written(VersionedLog(log, new_version))

    async def compare_and_set_listing(
        self, log: LogMetadata, version: int, ledger_ids: Sequence[int]
    ) -> VersionedLog:
        """``compare_and_set`` only while every ledger of ``ledger_ids`` exists, in one
        transaction: ``LedgerNotFound`` naming the first that is gone (nothing written).
        A ledger deleted at any time before the write is never listed by it (the
        ledger's delete checks the log's version the same way)."""
        path = zkpaths.log(log.name)
        steps: list[Step] = [Check(zkpaths.ledger(lid)) for lid in ledger_ids]
        steps.append(SetData(path, log.to_json(), version))
        failed = await self.store.transaction(steps)
        if failed is None:  # a set at ``version`` makes the znode's version + 1
            return self._written(VersionedLog(log, version + 1))
        index, error = failed
        if index < len(ledger_ids):
            raise LedgerNotFound(f"ledger {ledger_ids[index]} was deleted") from error
        if isinstance(error, NodeNotFound):
            raise LogNotFound(f"log {log.name!r} was deleted") from error
        raise error

    async def delete(self, name: str, version: int = -1) -> None:
        """Delete the log's znode (at ``version`` unless -1) with its cursors and its saved
        keys (services/zk/saved_keys_store.py), in one transaction: ``LogNotFound`` when
        gone, ``MetadataConflict`` when it changed or a cursor or a segment of saved keys
        was made or deleted meanwhile (read it again and retry)."""
        path = zkpaths.log(name)
        steps: list[Step] = []
        for parent in (zkpaths.cursors(name), zkpaths.saved_keys(name)):
            try:
                children = await self.store.children(parent)
            except NodeNotFound:
                continue
            steps.extend(Delete(f"{parent}/{child}") for child in children)
            steps.append(Delete(parent))
        steps.append(Delete(path, version))
        failed = await self.store.transaction(steps)
        if failed is None:
            return
        index, error = failed
        if index == len(steps) - 1 and isinstance(error, NodeNotFound):
            raise LogNotFound(f"no log {name!r}") from error
        raise MetadataConflict(f"log {name!r} or its cursors changed meanwhile") from error

    async def list(
        self, after: str | None, limit: int, prefix: str = ""
    ) -> tuple[builtins.list[str], str | None]:
        """Log names starting with ``prefix`` in byte order after ``after``; the next
        ``after`` or None."""
        limit = max(1, min(limit, LIST_LIMIT_MAX))
        try:
            children = await self.store.children(zkpaths.LOGS)
        except NodeNotFound:
            return [], None
        names = sorted(
            (n for n in map(zkpaths.log_name, children) if n is not None and n.startswith(prefix)),
            key=lambda n: n.encode(),
        )
        if after is not None:
            names = [n for n in names if n.encode() > after.encode()]
        if len(names) > limit:
            return names[:limit], names[limit - 1]
        return names, None
