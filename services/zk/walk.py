"""Walking a ledger-id hierarchy (``/ledgers/...`` and ``/underreplication/ledgers/...``).

Ids are stored as five path components (``services.zk.paths``). A walk goes depth
first, in order, skipping subtrees that end before ``after``, so a page costs a few
``children`` calls however many ids exist, and a full walk of N ids costs about
N / 10,000 calls at the leaf level.
"""

from __future__ import annotations

from services.errors import NodeNotFound
from services.zk import paths as zkpaths
from services.zk.store import MetadataStore

_LEAF_DEPTH = 4


async def walk_ids(store: MetadataStore, base: str, after: int, want: int) -> list[int]:
    """Up to ``want`` ids greater than ``after`` under ``base``, ascending."""
    out: list[int] = []
    await _walk(store, base, [], after, want, out)
    return out


async def _walk(
    store: MetadataStore, path: str, parts: list[str], after: int, want: int, out: list[int]
) -> None:
    try:
        children = await store.children(path)
    except NodeNotFound:
        return
    depth = len(parts)
    for child in children:
        if len(out) >= want:
            return
        if depth == _LEAF_DEPTH:
            if not child.startswith("L"):
                continue
            ledger_id = zkpaths.ledger_id_from_parts([*parts, child])
            if ledger_id > after:
                out.append(ledger_id)
            continue
        if not child.isdigit():
            continue
        # The largest id in this subtree; skip it when it ends before ``after``.
        prefix = "".join([*parts, child])
        if int(prefix.ljust(19, "9")) <= after:
            continue
        await _walk(store, f"{path}/{child}", [*parts, child], after, want, out)
