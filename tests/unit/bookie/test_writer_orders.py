"""The group-commit writer answers the same whatever carries its operations.

An add may be committed by the event loop, or by the thread alone or in a batch with
others (bookie/writer.py, "Commits on the event loop"). Which one depends on timing,
but the answers and what ends up on disk must not: every operation is applied in the
order it was submitted. Each seed below makes one random sequence of adds (single
records and batches over three ledgers, repeats with the same or other bytes,
recovery adds), fences, LAC updates and deletes. It runs twice on a real SQLite file:

- one operation at a time, each answered before the next is submitted;
- submitted in bursts, between random yields of the loop (one turn, or until every
  answer is in), so loop commits, thread batches and hand-overs between them mix.

Both runs must give the same answers and leave the same rows, with the journal synced
on every commit or not (fences are then synced alone).
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path

import pytest

import bookie.limits
from bookie.operations import AddOp, DeleteOp, FenceOp, SetLacOp
from bookie.storage import DB_FILE
from tests.bookie_bytes import assert_kept_equals_scan
from tests.unit.bookie.writers import Started, metric, sealed

LEDGERS = (1, 2, 3)
OPERATIONS = 80
SEEDS = range(24)
ANSWER_WAIT_S = 10

# One step of a sequence: an operation to submit, or (interleaved run only) a yield.
Step = tuple


def sequence(rng: random.Random) -> list[Step]:
    """A random sequence of operations with yields between them. It starts with a
    settled writer and a lone add given a turn of the loop, so the loop commits at
    least once; fences and LAC updates always go to the thread."""
    next_entry = dict.fromkeys(LEDGERS, 0)
    written: dict[tuple[int, int], bytes] = {}
    steps: list[Step] = [("settle",), ("add", ((1, 0, b"first", False),)), ("turn",)]
    next_entry[1] = 1
    written[(1, 0)] = b"first"
    for _ in range(OPERATIONS):
        roll = rng.random()
        if roll < 0.15:
            steps.append((rng.choice(("turn", "turn", "settle")),))
            continue
        lid = rng.choice(LEDGERS)
        if roll < 0.22:
            steps.append(("fence", lid))
        elif roll < 0.27:
            steps.append(("lac", lid, rng.randrange(-1, next_entry[lid] + 1)))
        elif roll < 0.30:
            steps.append(("delete", lid))
        else:
            count = rng.choice((1, 1, 1, 2, 5, bookie.limits.INLINE_ENTRIES_MAX + 3))
            records = []
            for _ in range(count):
                lid = rng.choice(LEDGERS)
                kind = rng.random()
                if kind < 0.1 and written:
                    (lid, eid), payload = rng.choice(sorted(written.items()))
                    if rng.random() < 0.5:
                        payload = payload + b"!"  # other bytes: entry_exists
                else:
                    eid = next_entry[lid]
                    next_entry[lid] += 1
                    payload = b"%d/%d/%d" % (lid, eid, rng.randrange(1 << 30))
                    written.setdefault((lid, eid), payload)
                records.append((lid, eid, payload, rng.random() < 0.1))
            steps.append(("add", tuple(records)))
    return steps


def submit(started: Started, step: Step) -> asyncio.Future:
    loop = started.loop
    kind = step[0]
    op: AddOp | FenceOp | SetLacOp | DeleteOp
    if kind == "add":
        records = [sealed(lid, eid, payload, recovery) for lid, eid, payload, recovery in step[1]]
        op = AddOp(records, loop.create_future(), sum(len(r.payload) for r in records))
    elif kind == "fence":
        op = FenceOp(step[1], loop.create_future())
    elif kind == "lac":
        op = SetLacOp(step[1], step[2], loop.create_future())
    else:
        op = DeleteOp(step[1], loop.create_future())
    started.writer.submit(op)
    return op.future


def comparable(answer: object) -> object:
    """An answer as a value: errors come back as exception objects."""
    if isinstance(answer, Exception):
        return type(answer).__name__, str(answer)
    return answer


def rows(data_dir: Path) -> tuple[list, list]:
    """The entries and ledgers rows, less the entries of deleted ledgers still being
    purged (how far the background purge got depends on timing)."""
    db = sqlite3.connect(data_dir / DB_FILE)
    try:
        entries = db.execute(
            "SELECT ledger_id, entry_id, lac, length, digest_type, digest, payload "
            "FROM entries WHERE ledger_id NOT IN (SELECT ledger_id FROM purging) "
            "ORDER BY ledger_id, entry_id"
        ).fetchall()
        ledgers = db.execute(
            "SELECT ledger_id, fenced, lac, last_entry_id, bytes FROM ledgers ORDER BY ledger_id"
        ).fetchall()
    finally:
        db.close()
    return entries, ledgers


async def one_at_a_time(data_dir: Path, steps: list[Step], sync: bool) -> list:
    started = Started(data_dir, sync)
    try:
        answers = []
        for step in steps:
            if step[0] not in ("turn", "settle"):
                answers.append(await asyncio.wait_for(submit(started, step), ANSWER_WAIT_S))
    finally:
        await started.stop()
    return answers


async def interleaved(data_dir: Path, steps: list[Step], sync: bool) -> tuple[list, dict]:
    started = Started(data_dir, sync)
    futures: list[asyncio.Future] = []
    try:
        for step in steps:
            if step[0] == "turn":
                await asyncio.sleep(0)
            elif step[0] == "settle":
                await asyncio.wait_for(asyncio.gather(*futures), ANSWER_WAIT_S)
            else:
                futures.append(submit(started, step))
        answers = await asyncio.wait_for(asyncio.gather(*futures), ANSWER_WAIT_S)
    finally:
        await started.stop()
    counts = {
        name: metric(started.metrics, name)
        for name in ("quire_bookie_commits_total", "quire_bookie_loop_commits_total")
    }
    return answers, counts


@pytest.mark.parametrize("sync", [True, False], ids=["journal-sync", "no-journal-sync"])
@pytest.mark.parametrize("seed", SEEDS)
def test_answers_and_rows_do_not_depend_on_who_commits(tmp_path, monkeypatch, seed, sync):
    # Loop commits are decided by the disk's speed too (INLINE_COMMIT_S_MAX): not here.
    monkeypatch.setattr(bookie.limits, "INLINE_COMMIT_S_MAX", float("inf"))
    steps = sequence(random.Random(seed))
    alone, mixed = tmp_path / "alone", tmp_path / "mixed"
    alone.mkdir()
    mixed.mkdir()

    expected = asyncio.run(one_at_a_time(alone, steps, sync))
    got, counts = asyncio.run(interleaved(mixed, steps, sync))

    assert [comparable(a) for a in got] == [comparable(a) for a in expected]
    assert rows(mixed) == rows(alone)
    # The kept byte counts too, and they are what a scan of the rows counts.
    assert_kept_equals_scan(alone)
    assert_kept_equals_scan(mixed)
    loop_commits = counts["quire_bookie_loop_commits_total"]
    assert 1 <= loop_commits < counts["quire_bookie_commits_total"]
