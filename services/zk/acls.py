"""Setting the ACL of a whole tree: how a cluster's znodes, made before it had
credentials, are locked to its principal (or opened again) by ``quire zk lock`` and
``quire zk unlock`` (docs/security.md, "ZooKeeper authentication").

The services with credentials give what they create the right ACL themselves
(``services/zk/store.py``); this is for what exists already. It goes a level at a time,
parents before children, each level's requests pipelined in bounded batches: setting a
node's ACL needs the ADMIN right on it, listing its children the READ right, and once a
parent is locked the store's principal still holds both. A znode that went meanwhile
(an ephemeral registration, a transient id node) is skipped. The root's own ACL is set,
but who may delete the root is its parent's ACL, which is not the cluster's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Sequence
from typing import TypeVar

from kazoo.security import ACL

from services.errors import NodeNotFound
from services.zk.limits import ACL_BATCH_NODES_MAX
from services.zk.store import MetadataStore

T = TypeVar("T")


async def set_tree_acl(store: MetadataStore, root: str, acl: Sequence[ACL]) -> int:
    """Give ``root`` and every znode below it ``acl``; return how many were set. Raises
    the first failure (``MetadataUnavailable``, naming the path and the principal when
    ZooKeeper denied it), what was set before it staying set."""
    count = 0
    level = [root]
    while level:
        below: list[str] = []
        for start in range(0, len(level), ACL_BATCH_NODES_MAX):
            batch = level[start : start + ACL_BATCH_NODES_MAX]
            count += sum(await _all(_set(store, path, acl) for path in batch))
            listings = await _all(_children(store, path) for path in batch)
            for path, children in zip(batch, listings, strict=True):
                base = path.rstrip("/")
                below.extend(f"{base}/{child}" for child in children)
        level = below
    return count


async def _set(store: MetadataStore, path: str, acl: Sequence[ACL]) -> int:
    try:
        await store.set_acls(path, acl)
    except NodeNotFound:
        return 0
    return 1


async def _children(store: MetadataStore, path: str) -> list[str]:
    try:
        return await store.children(path)
    except NodeNotFound:
        return []


async def _all(calls: Iterable[Awaitable[T]]) -> list[T]:
    """Every call's result, all in flight together; the first failure raised once all
    answered (none left unretrieved)."""
    results: list[T | BaseException] = await asyncio.gather(*calls, return_exceptions=True)
    values: list[T] = []
    for result in results:
        if isinstance(result, BaseException):
            raise result
        values.append(result)
    return values
