"""Ledger metadata in ZooKeeper: create, versioned read, compare-and-set, delete, list.

One znode per ledger at the hierarchical path of ``services.zkpaths.ledger``;
the znode version is the CAS token and is kept beside the metadata value.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from dataclasses import dataclass

from services.clock import wall_ms
from services.errors import InvalidArgument, LedgerNotFound, MetadataConflict, NodeNotFound
from services.limits import LIST_LIMIT_MAX
from services.protocol.metadata import LedgerMetadata
from services.zk import paths as zkpaths
from services.zk.store import Check, Delete, MetadataStore
from services.zk.walk import walk_ids, walk_pages


@dataclass(frozen=True, slots=True)
class VersionedLedger:
    metadata: LedgerMetadata
    version: int
    mtime: int = 0  # the znode's last change (ms, ZooKeeper's clock; 0: not known)


class LedgerStore:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    @property
    def connected(self) -> bool:
        """Whether the ZooKeeper session is connected now (not SUSPENDED or LOST)."""
        return self.store.connected

    async def new_ledger_id(self) -> int:
        return await self.store.generate_ledger_id()

    async def create(self, metadata: LedgerMetadata) -> VersionedLedger:
        """Write a new ledger's znode (its id is fresh, so it cannot exist)."""
        await self.store.create(zkpaths.ledger(metadata.ledger_id), metadata.to_json())
        return VersionedLedger(metadata, 0)

    async def get(self, ledger_id: int) -> VersionedLedger:
        try:
            node = await self.store.get(zkpaths.ledger(ledger_id))
        except NodeNotFound as exc:
            raise LedgerNotFound(f"no ledger {ledger_id}") from exc
        return VersionedLedger(LedgerMetadata.from_json(node.data), node.version, node.mtime)

    async def get_many(
        self, ledger_ids: builtins.list[int]
    ) -> builtins.list[VersionedLedger | InvalidArgument | None]:
        """Many ledgers' metadata in one pipelined read (``MetadataStore.get_many``): None
        for a ledger that does not exist, the ``InvalidArgument`` for unreadable metadata."""
        nodes = await self.store.get_many([zkpaths.ledger(lid) for lid in ledger_ids])
        out: builtins.list[VersionedLedger | InvalidArgument | None] = []
        for node in nodes:
            if node is None:
                out.append(None)
                continue
            try:
                out.append(
                    VersionedLedger(LedgerMetadata.from_json(node.data), node.version, node.mtime)
                )
            except InvalidArgument as exc:
                out.append(exc)
        return out

    async def compare_and_set(self, metadata: LedgerMetadata, version: int) -> VersionedLedger:
        """Write ``metadata`` only if the znode is still at ``version``
        (``MetadataConflict`` otherwise, ``LedgerNotFound`` if it was deleted). The write
        that closes the ledger stamps its ``closed_at`` (retention by age counts from it,
        services/protocol/retention.py)."""
        metadata = metadata.stamped_closed(wall_ms())
        try:
            new_version = await self.store.set(
                zkpaths.ledger(metadata.ledger_id), metadata.to_json(), version
            )
        except NodeNotFound as exc:
            raise LedgerNotFound(f"ledger {metadata.ledger_id} was deleted") from exc
        return VersionedLedger(metadata, new_version)

    async def delete(self, ledger_id: int, unless_changed: tuple[str, int] | None = None) -> None:
        """Delete the ledger's znode; with ``unless_changed`` (a znode's path and version:
        a log's, read to check that the log does not list the ledger) only while that
        znode is still at that version, in one transaction (``MetadataConflict`` when it
        changed or is gone)."""
        path = zkpaths.ledger(ledger_id)
        if unless_changed is None:
            try:
                await self.store.delete(path)
            except NodeNotFound as exc:
                raise LedgerNotFound(f"no ledger {ledger_id}") from exc
            return
        failed = await self.store.transaction(
            [Check(unless_changed[0], unless_changed[1]), Delete(path)]
        )
        if failed is None:
            return
        index, error = failed
        if index == 0:
            raise MetadataConflict(f"{unless_changed[0]} changed") from error
        if isinstance(error, NodeNotFound):
            raise LedgerNotFound(f"no ledger {ledger_id}") from error
        raise error

    async def list(self, after: int | None, limit: int) -> tuple[list[int], int | None]:
        """Ledger ids in ascending order after ``after``; the next ``after`` or None.

        Walks the hierarchy depth first, in order, skipping subtrees that end
        before ``after``, so a page costs a few ``children`` calls however many
        ledgers exist."""
        limit = max(1, min(limit, LIST_LIMIT_MAX))
        start = -1 if after is None else after
        out = await walk_ids(self.store, zkpaths.LEDGERS, start, limit + 1)
        if len(out) > limit:
            return out[:limit], out[limit - 1]
        return out, None

    def pages(self, page: int) -> AsyncIterator[builtins.list[int]]:
        """Every ledger id, ascending, in lists of ``page`` ids: a full walk that lists
        each znode of the hierarchy once (``walk_pages``), where paging with ``list``
        lists a leaf again for every page of it (the auditor's walk)."""
        return walk_pages(self.store, zkpaths.LEDGERS, page)
