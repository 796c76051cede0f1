"""The keys of a log's closed ledgers saved in ZooKeeper for a new writer's idempotency
window (services/protocol/saved_keys.py says what is saved and why a rebuild may trust
it): segments ``/logs/L{name}/keys/S{seq}``, each a few dozen ledgers.

A writer appends each ledger it closed to the newest segment by compare-and-set, or
starts the next segment when the newest is full; it keeps the newest segment it wrote
(``Tail``) so that a roll costs one write, and reads it again only when the write lost
(another writer saved meanwhile). Old segments go: beyond ``SEGMENTS_MAX``, and those
whose newest append is older than ``kept_ms`` (the longest window any gateway may have).
The segments live below the log's znode, so ``LogStore.delete`` removes them with the
log; the ``keys`` parent is made without its parents, so a log deleted meanwhile is not
brought back. Saving is best effort: what is not saved is read from the ledgers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from services.errors import (
    InvalidArgument,
    MetadataConflict,
    NodeExists,
    NodeNotFound,
    QuireError,
)
from services.protocol.saved_keys import (
    SavedLedger,
    decode_segment,
    encode_segment,
    fits,
    savable,
)
from services.zk import paths as zkpaths
from services.zk.store import MetadataStore

log = logging.getLogger(__name__)

# At most this many segments per log (64 ledgers each: the newest 8,192 small ledgers).
SEGMENTS_MAX = 128
# Segments read by one pipelined read of a rebuild (``read``), newest first: the window's
# ledgers are nearly always in the newest few.
READ_SEGMENTS_AT_ONCE = 4
# A save that keeps losing its compare-and-set gives up after this many attempts.
SAVE_ATTEMPTS_MAX = 3


@dataclass(slots=True)
class Tail:
    """The newest segment as this writer last wrote it."""

    seq: int
    version: int
    ledgers: list[SavedLedger]


class SavedKeysStore:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def read(self, name: str, cutoff_ms: int | None = None) -> dict[int, SavedLedger]:
        """The saved ledgers of log ``name`` by id, newest segments first,
        ``READ_SEGMENTS_AT_ONCE`` to a pipelined read. With ``cutoff_ms`` (the window's
        rebuild: now less the window and the clock skew allowance) the reads end with the
        first segment holding a ledger whose oldest append is older: the walk stops in
        that ledger, so what was saved before it is never needed (a segment's ledgers are
        saved in log order, and stamps never go backwards along the log). A segment that
        does not decode is passed over (its ledgers are read from the bookies instead)."""
        try:
            children = await self.store.children(zkpaths.saved_keys(name))
        except NodeNotFound:
            return {}
        seqs = sorted((s for s in map(zkpaths.segment_seq, children) if s is not None),
                      reverse=True)  # fmt: skip
        found: dict[int, SavedLedger] = {}
        for at in range(0, len(seqs), READ_SEGMENTS_AT_ONCE):
            group = seqs[at : at + READ_SEGMENTS_AT_ONCE]
            nodes = await self.store.get_many([zkpaths.saved_keys_segment(name, s) for s in group])
            for seq, node in zip(group, nodes, strict=True):
                if node is None:
                    continue  # trimmed meanwhile
                try:
                    ledgers = decode_segment(node.data)
                except InvalidArgument as exc:
                    log.warning(
                        "a segment of saved keys does not decode; its ledgers are read instead",
                        extra={"fields": {"log": name, "segment": seq, "error": exc.message}},
                    )
                    continue
                for ledger in ledgers:
                    found[ledger.ledger_id] = ledger
                if cutoff_ms is not None and any(
                    ledger.oldest_ms is not None and ledger.oldest_ms < cutoff_ms
                    for ledger in ledgers
                ):
                    return found
        return found

    async def save(
        self, name: str, ledger: SavedLedger, now_ms: int, kept_ms: int, tail: Tail | None
    ) -> Tail | None:
        """Add ``ledger`` to log ``name``'s saved keys; the tail to pass next time (None
        when nothing was saved: too large, the log gone, or the compare-and-set kept
        losing). ``MetadataUnavailable`` passes through (ZooKeeper trouble)."""
        if not savable(ledger):
            return tail
        for _ in range(SAVE_ATTEMPTS_MAX):
            if tail is None:
                tail = await self._read_tail(name)
                if tail is None:
                    return None  # the log was deleted
            try:
                if tail.version >= 0 and fits(tail.ledgers, ledger):
                    ledgers = [*tail.ledgers, ledger]
                    version = await self.store.set(
                        zkpaths.saved_keys_segment(name, tail.seq),
                        encode_segment(ledgers),
                        tail.version,
                    )
                    return Tail(tail.seq, version, ledgers)
                seq = tail.seq + 1
                await self.store.create(
                    zkpaths.saved_keys_segment(name, seq), encode_segment([ledger]),
                    makepath=False,
                )  # fmt: skip
            except (MetadataConflict, NodeExists, NodeNotFound):
                tail = None  # another writer saved meanwhile (or trimmed): read again
                continue
            # Saved. Trimming the old segments is best effort: the next save trims again.
            try:
                await self._trim(name, seq, now_ms, kept_ms)
            except QuireError as exc:
                log.info(
                    "could not trim a log's old saved keys (the next save tries again)",
                    extra={"fields": {"log": name, "error": exc.code}},
                )
            return Tail(seq, 0, [ledger])
        return None

    async def _read_tail(self, name: str) -> Tail | None:
        """The newest segment (seq -1 when there is none yet, the parent made); None when
        the log does not exist."""
        parent = zkpaths.saved_keys(name)
        try:
            await self.store.create(parent, makepath=False)
        except NodeExists:
            pass
        except NodeNotFound:
            return None
        children = await self.store.children(parent)
        seqs = sorted(s for s in map(zkpaths.segment_seq, children) if s is not None)
        if not seqs:
            return Tail(-1, -1, [])
        try:
            node = await self.store.get(zkpaths.saved_keys_segment(name, seqs[-1]))
            ledgers = decode_segment(node.data)
        except (NodeNotFound, InvalidArgument):
            return Tail(seqs[-1], -1, [])  # full for our purpose: the next one is made
        return Tail(seqs[-1], node.version, ledgers)

    async def _trim(self, name: str, newest_seq: int, now_ms: int, kept_ms: int) -> None:
        """Delete the segments beyond ``SEGMENTS_MAX`` and those holding only appends
        older than ``kept_ms``, oldest first, never the newest."""
        children = await self.store.children(zkpaths.saved_keys(name))
        seqs = sorted(s for s in map(zkpaths.segment_seq, children) if s is not None)
        seqs = [s for s in seqs if s < newest_seq]
        excess = len(seqs) + 1 - SEGMENTS_MAX
        for index, seq in enumerate(seqs):
            path = zkpaths.saved_keys_segment(name, seq)
            if index >= excess:
                try:
                    ledgers = decode_segment((await self.store.get(path)).data)
                except NodeNotFound:
                    continue
                except InvalidArgument:
                    ledgers = []
                newest = max((lg.newest_ms or 0 for lg in ledgers), default=0)
                if newest >= now_ms - kept_ms:
                    return  # segments only get newer from here
            try:
                await self.store.delete(path)
            except NodeNotFound:
                pass
