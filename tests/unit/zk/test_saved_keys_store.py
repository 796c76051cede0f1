"""Reading a log's saved keys (services/zk/saved_keys_store.py) over an in-memory store:
newest segments first, and with a cutoff no further back than the first segment holding
a ledger older than it (the window's rebuild stops in that ledger)."""

from __future__ import annotations

import asyncio
from typing import cast

from services.errors import NodeNotFound
from services.protocol.saved_keys import SavedHead, SavedLedger, encode_segment
from services.zk import paths as zkpaths
from services.zk.saved_keys_store import READ_SEGMENTS_AT_ONCE, SavedKeysStore
from services.zk.store import MetadataStore, Versioned

SEGMENTS = 10


class Segments:
    """Segment ``seq`` holds ledger ``100 + seq``, its appends stamped ``seq * 1000``."""

    def __init__(self) -> None:
        self.reads: list[list[str]] = []
        self.nodes = {
            zkpaths.saved_keys_segment("l", seq): encode_segment(
                [
                    SavedLedger(
                        100 + seq,
                        0,
                        seq * 1000,
                        seq * 1000,
                        (SavedHead(f"k{seq}", 0, 0, seq * 1000, bytes(16)),),
                    ),
                ]
            )  # fmt: skip
            for seq in range(SEGMENTS)
        }

    async def children(self, path: str) -> list[str]:
        if path != zkpaths.saved_keys("l"):
            raise NodeNotFound(path)
        return [p.rsplit("/", 1)[1] for p in self.nodes]

    async def get_many(self, paths: list[str]) -> list[Versioned | None]:
        self.reads.append(paths)
        return [Versioned(self.nodes[p], 0) if p in self.nodes else None for p in paths]


def read(cutoff_ms: int | None) -> tuple[set[int], list[list[str]]]:
    segments = Segments()
    store = SavedKeysStore(cast(MetadataStore, segments))
    found = asyncio.run(store.read("l", cutoff_ms))
    return set(found), segments.reads


def test_a_rebuild_reads_back_only_to_the_segment_older_than_its_cutoff() -> None:
    found, reads = read(7_500)
    assert found == {109, 108, 107}  # 107's appends (7,000) are older: the walk ends there
    assert len(reads) == 1 and len(reads[0]) == READ_SEGMENTS_AT_ONCE
    assert reads[0][0] == zkpaths.saved_keys_segment("l", SEGMENTS - 1)  # newest first


def test_without_a_cutoff_every_segment_is_read() -> None:
    found, reads = read(None)
    assert found == {100 + seq for seq in range(SEGMENTS)}
    assert [len(r) for r in reads] == [4, 4, 2]


def test_a_log_without_saved_keys_reads_nothing() -> None:
    store = SavedKeysStore(cast(MetadataStore, Segments()))
    assert asyncio.run(store.read("other", 0)) == {}
