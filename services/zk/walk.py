"""Walking a ledger-id hierarchy (``/ledgers/...`` and ``/underreplication/ledgers/...``).

Ids are stored as five path components (``services.zk.paths``): four levels of digits
and a leaf level of ``L``-prefixed names, at most 10,000 children per znode. A walk goes
depth first, in order, skipping subtrees that end before ``after``, so a page costs a
few ``children`` calls however many ids exist. Within a leaf the first id after
``after`` is found by bisection (the children are fixed-width names, sorted), not by
parsing every name before it.

``walk_ids`` answers one page (the API's paging: a page of N ids lists its leaf again, so
a full walk page by page lists each full leaf 10,000 / N times). ``walk_pages`` is the
full walk for the auditor: each leaf listed once, its ids handed out in pages.
"""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator

from services.errors import NodeNotFound
from services.zk import paths as zkpaths
from services.zk.store import MetadataStore

_LEAF_DEPTH = 4
_PREFIX = zkpaths.LEDGER_LEAF_PREFIX


async def walk_ids(store: MetadataStore, base: str, after: int, want: int) -> list[int]:
    """Up to ``want`` ids greater than ``after`` under ``base``, ascending."""
    out: list[int] = []
    async for leaf in _leaves(store, base, [], after):
        out += leaf[: want - len(out)]
        if len(out) >= want:
            break
    return out


async def walk_pages(store: MetadataStore, base: str, page: int) -> AsyncIterator[list[int]]:
    """Every id under ``base``, ascending, in lists of ``page`` ids (the last one
    shorter). Each leaf is listed once; the walk holds at most one leaf's ids
    (10,000) and one page. Ids created or deleted during the walk may be seen or not,
    as with paging."""
    pending: list[int] = []
    async for leaf in _leaves(store, base, [], -1):
        pending += leaf
        while len(pending) >= page:
            yield pending[:page]
            del pending[:page]
    if pending:
        yield pending


async def _leaves(
    store: MetadataStore, path: str, parts: list[str], after: int
) -> AsyncIterator[list[int]]:
    """The ids greater than ``after`` of each leaf under ``path``, leaf by leaf in order."""
    try:
        children = await store.children(path)
    except NodeNotFound:
        return
    prefix = "".join(parts)
    if len(parts) == _LEAF_DEPTH:
        start = 0
        digits = f"{after:0{zkpaths.LEDGER_ID_DIGITS}d}" if after >= 0 else ""
        if digits.startswith(prefix):  # ``after`` is in this leaf: skip up to it
            start = bisect.bisect_right(children, _PREFIX + digits[len(prefix) :])
        ids = [int(prefix + child[1:]) for child in children[start:] if child.startswith(_PREFIX)]
        if ids:
            yield ids
        return
    for child in children:
        if not child.isdigit():
            continue
        # The largest id in this subtree; skip it when it ends before ``after``.
        if int((prefix + child).ljust(zkpaths.LEDGER_ID_DIGITS, "9")) <= after:
            continue
        async for leaf in _leaves(store, f"{path}/{child}", [*parts, child], after):
            yield leaf
