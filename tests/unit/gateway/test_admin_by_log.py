"""gateway/admin/by_log.py: a bookie's bytes counted by log. Each ledger lands in one
bucket (its log, a plain ledger, a password-protected ledger naming a log, metadata
missing, metadata unreadable); the logs are listed largest first, at most the bound;
the count pages through the bookie's listing and stops, saying truncated, at the ledger
bound or the time bound, and not when the listing ends exactly at the bound."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from gateway.admin.by_log import LogTally, count_by_log
from gateway.logs.steps import LOG_METADATA_KEY
from services.errors import InvalidArgument
from services.protocol.metadata import LedgerMetadata
from services.zk.ledger_store import VersionedLedger

Found = VersionedLedger | InvalidArgument | None


def ledger(lid: int, custom: dict[str, object], password_hash: str | None = None) -> Found:
    meta = LedgerMetadata.new(
        lid, ["b1", "b2", "b3"], 2, 2, custom=custom, password_hash=password_hash
    )
    return VersionedLedger(meta, 0)


def test_each_ledger_lands_in_one_bucket() -> None:
    """Ledgers naming a log count for it; plain ones, those naming a log with a password
    (never a log's: the rule of DELETE /v1/ledgers) and a non-string quire.log are not in
    a log; no znode is metadata_missing, a bad one metadata_unreadable."""
    tally = LogTally()
    page = [(1, 100), (2, 50), (3, 7), (4, 9), (5, 11), (6, 13), (7, 17), (8, 0)]
    found: list[Found] = [
        ledger(1, {LOG_METADATA_KEY: "a"}),
        ledger(2, {LOG_METADATA_KEY: "a", "quire.writer": "g:1"}),
        ledger(3, {}),
        ledger(4, {LOG_METADATA_KEY: "b"}, password_hash="x"),
        ledger(5, {LOG_METADATA_KEY: 5}),
        None,
        InvalidArgument("bad metadata"),
        ledger(8, {LOG_METADATA_KEY: "b"}),
    ]
    tally.add(page, found)
    out = tally.to_json(truncated=False)
    assert out == {
        "logs": [{"log": "a", "ledgers": 2, "bytes": 150}, {"log": "b", "ledgers": 1, "bytes": 0}],
        "logs_count": 2,
        "not_in_a_log": {"ledgers": 3, "bytes": 7 + 9 + 11},
        "metadata_missing": {"ledgers": 1, "bytes": 13},
        "metadata_unreadable": {"ledgers": 1, "bytes": 17},
        "ledgers_looked_at": 8,
        "truncated": False,
    }


def test_logs_listed_largest_first_within_the_bound() -> None:
    """The largest logs are listed (ties by name), at most the bound; logs_count covers
    all of them."""
    tally = LogTally()
    sizes = {"x": 5, "y": 30, "z": 30, "w": 1, "v": 20}
    page = [(n, size) for n, size in enumerate(sizes.values())]
    tally.add(page, [ledger(n, {LOG_METADATA_KEY: name}) for n, name in enumerate(sizes)])
    out = tally.to_json(truncated=False, listed_max=3)
    assert [(row["log"], row["bytes"]) for row in out["logs"]] == [("y", 30), ("z", 30), ("v", 20)]
    assert out["logs_count"] == 5


class Bookie:
    """A bookie's paged listing of ``count`` ledgers, each of 10 bytes in log "l"."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.calls: list[tuple[int, int]] = []

    async def pages(self, after: int, limit: int) -> tuple[list[tuple[int, int]], int | None]:
        self.calls.append((after, limit))
        ids = [i for i in range(self.count) if i > after][:limit]
        return [(i, 10) for i in ids], (ids[-1] if len(ids) == limit else None)

    async def reads(self, ids: list[int]) -> Sequence[Found]:
        return [ledger(i, {LOG_METADATA_KEY: "l"}) for i in ids]


def test_pages_until_the_end_or_the_ledger_bound() -> None:
    """All ledgers are counted over several pages; a bound below the count stops there
    and says truncated (the last page asks only for what is left of the bound); a
    listing that ends exactly at the bound is not truncated."""
    bookie = Bookie(25)
    whole = asyncio.run(count_by_log(bookie.pages, bookie.reads, page_ledgers=10))
    assert whole["truncated"] is False and whole["ledgers_looked_at"] == 25
    assert whole["logs"] == [{"log": "l", "ledgers": 25, "bytes": 250}]
    assert [after for after, _ in bookie.calls] == [-1, 9, 19]

    bookie = Bookie(25)
    cut = asyncio.run(count_by_log(bookie.pages, bookie.reads, ledgers_max=15, page_ledgers=10))
    assert cut["truncated"] is True and cut["ledgers_looked_at"] == 15
    assert bookie.calls == [(-1, 10), (9, 5), (14, 1)]  # the last: is there one more?

    bookie = Bookie(20)
    exact = asyncio.run(count_by_log(bookie.pages, bookie.reads, ledgers_max=30, page_ledgers=10))
    assert exact["truncated"] is False and exact["ledgers_looked_at"] == 20

    bookie = Bookie(20)  # the bound reached by the listing's last ledger
    at_bound = asyncio.run(
        count_by_log(bookie.pages, bookie.reads, ledgers_max=20, page_ledgers=10)
    )
    assert at_bound["truncated"] is False and at_bound["ledgers_looked_at"] == 20


def test_stops_at_the_time_bound() -> None:
    """Past the time bound the count stops after the page in hand, truncated."""
    bookie = Bookie(100)
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0  # each look at the clock is a second later
        return now[0]

    out = asyncio.run(
        count_by_log(bookie.pages, bookie.reads, time_max_s=2.5, page_ledgers=10, clock=clock)
    )
    # The deadline is 1 + 2.5; the clock reads 2, 3, then 4 after the third page.
    assert out["truncated"] is True
    assert out["ledgers_looked_at"] == 30
