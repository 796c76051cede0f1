"""A bookie's space counted by log (``GET /v1/admin/bookies/{id}/storage?by_log=true``;
docs/operations.md "Space given back"): which logs the bytes stored on a bookie belong to.

A bookie knows ledger ids and bytes, not logs; a ledger made for a log names it in its
custom metadata (``quire.log``, gateway/logs/steps.py), and ledger metadata lives in
ZooKeeper. So the count pages through the bookie's ``GET /v1/storage/ledgers`` (every
ledger stored there with its bytes: live, orphaned and pending delete) and reads each
page's metadata in one pipelined read. The reader syncs its ZooKeeper server with the
leader first: a ledger's metadata is created before its first entry reaches a bookie, so
after the sync a listed ledger without metadata was deleted (garbage collection gives its
bytes back), never merely not visible yet.

Each ledger lands in exactly one bucket, by the rule ``DELETE /v1/ledgers/{id}`` uses to
find a ledger's log (gateway/logs/operations.py): a ledger with no password whose
``quire.log`` is a string counts for that log; any other ledger with metadata is
``not_in_a_log``; no znode is ``metadata_missing``; a znode that does not parse is
``metadata_unreadable``. The log a ledger names is not read: a ledger made for a log
and not (or no longer) listed by it still counts for it, since it is that log's writer
that left it there.

Bounded work: at most ``BY_LOG_LEDGERS_MAX`` ledgers looked at and ``BY_LOG_TIME_MAX_S``
of paging (checked between pages), then the answer says ``truncated`` and its totals
cover the ledgers looked at (the lowest ids). The largest ``BY_LOG_LOGS_LISTED_MAX`` logs
are listed; ``logs_count`` covers all. Memory is one counter per log seen.

The pages are read one after the other, and the storage report beside them at another
moment: a ledger written, deleted or collected meanwhile makes the totals differ from the
report's by its bytes.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.limits import (
    BY_LOG_LEDGERS_MAX,
    BY_LOG_LOGS_LISTED_MAX,
    BY_LOG_PAGE_LEDGERS,
    BY_LOG_TIME_MAX_S,
)
from gateway.logs.steps import LOG_METADATA_KEY
from services.errors import InvalidArgument
from services.zk.ledger_store import VersionedLedger

# One page of the bookie's ledgers with their bytes after an id, at most so many, and
# the ``after`` of the next page (None at the end): ``BookieClient.storage_ledgers``.
LedgerPages = Callable[[int, int], Awaitable[tuple[list[tuple[int, int]], int | None]]]
# The metadata of many ledgers, in order: None when there is none, the error when it
# does not parse (``LedgerStore.get_many``, after a sync).
MetadataReads = Callable[[list[int]], Awaitable[Sequence[VersionedLedger | InvalidArgument | None]]]


@dataclass(slots=True)
class Bucket:
    ledgers: int = 0
    bytes: int = 0

    def add(self, size: int) -> None:
        self.ledgers += 1
        self.bytes += size

    def to_json(self) -> dict[str, int]:
        return {"ledgers": self.ledgers, "bytes": self.bytes}


def log_of(found: VersionedLedger) -> str | None:
    """The log a ledger was made for, or None: a plain ledger."""
    metadata = found.metadata
    name = metadata.custom.get(LOG_METADATA_KEY) if metadata.password_hash is None else None
    return name if isinstance(name, str) else None


@dataclass(slots=True)
class LogTally:
    """The per-log totals of the ledgers looked at so far (pure: no I/O)."""

    logs: dict[str, Bucket] = field(default_factory=dict)
    not_in_a_log: Bucket = field(default_factory=Bucket)
    metadata_missing: Bucket = field(default_factory=Bucket)
    metadata_unreadable: Bucket = field(default_factory=Bucket)
    looked_at: int = 0

    def add(
        self,
        page: Sequence[tuple[int, int]],
        found: Sequence[VersionedLedger | InvalidArgument | None],
    ) -> None:
        """Count one page: its ``(ledger_id, bytes)`` and each ledger's metadata read."""
        for (_, size), metadata in zip(page, found, strict=True):
            self.looked_at += 1
            if metadata is None:
                self.metadata_missing.add(size)
            elif isinstance(metadata, InvalidArgument):
                self.metadata_unreadable.add(size)
            else:
                name = log_of(metadata)
                if name is None:
                    self.not_in_a_log.add(size)
                else:
                    self.logs.setdefault(name, Bucket()).add(size)

    def to_json(self, truncated: bool, listed_max: int = BY_LOG_LOGS_LISTED_MAX) -> dict[str, Any]:
        """The ``by_log`` object: the largest logs first (ties by name), at most
        ``listed_max`` of them."""
        largest = heapq.nsmallest(
            listed_max, self.logs.items(), key=lambda item: (-item[1].bytes, item[0])
        )
        return {
            "logs": [{"log": name, **bucket.to_json()} for name, bucket in largest],
            "logs_count": len(self.logs),
            "not_in_a_log": self.not_in_a_log.to_json(),
            "metadata_missing": self.metadata_missing.to_json(),
            "metadata_unreadable": self.metadata_unreadable.to_json(),
            "ledgers_looked_at": self.looked_at,
            "truncated": truncated,
        }


async def count_by_log(
    pages: LedgerPages,
    reads: MetadataReads,
    *,
    ledgers_max: int = BY_LOG_LEDGERS_MAX,
    time_max_s: float = BY_LOG_TIME_MAX_S,
    page_ledgers: int = BY_LOG_PAGE_LEDGERS,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Page through a bookie's ledgers and count them by log, within the bounds (module
    docstring); a bookie or ZooKeeper error ends the count with that error."""
    tally = LogTally()
    deadline = clock() + time_max_s
    after = -1
    while True:
        page, after_next = await pages(after, min(page_ledgers, ledgers_max - tally.looked_at))
        if page:
            tally.add(page, await reads([lid for lid, _ in page]))
        if after_next is None or not page:
            return tally.to_json(truncated=False)
        if tally.looked_at >= ledgers_max:
            # A full last page says nothing of what follows: one more id tells.
            more, _ = await pages(after_next, 1)
            return tally.to_json(truncated=bool(more))
        if clock() >= deadline:
            return tally.to_json(truncated=True)
        after = after_next
