"""A log's saved keys with real processes (docs/logs.md, "How a log behaves"; gateway/logs/
rebuild.py ``save_keys``, services/zk/saved_keys_store.py): a writer saves the keys of
each ledger it rolled and closed beside the log, and a new writer takes them from there
instead of reading those ledgers, while what was never saved (the crashed writer's last
ledger, saved keys lost) is still read from the ledgers: either way every retry within
the window is answered with its first position and appends nothing."""

from __future__ import annotations

import re

from kazoo.client import KazooClient

from services.protocol.saved_keys import SavedLedger, decode_segment
from services.zk import paths as zkpaths
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Gateway,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.integration.log_support import LogClient, Pos

ROLLS = 6


def saved(zk: KazooClient, name: str) -> dict[int, SavedLedger]:
    """The log's saved ledgers, read straight from ZooKeeper."""
    parent = zkpaths.saved_keys(name)
    if zk.exists(parent) is None:
        return {}
    out: dict[int, SavedLedger] = {}
    for child in zk.get_children(parent):
        for ledger in decode_segment(zk.get(f"{parent}/{child}")[0]):
            out[ledger.ledger_id] = ledger
    return out


def entries_read(g: LogClient) -> float:
    match = re.search(r"^quire_gateway_entries_read_total (\S+)$", g.metrics(), re.M)
    assert match is not None
    return float(match.group(1))


def build(
    cluster: Cluster, zk: KazooClient, name: str
) -> tuple[LogClient, LogClient, dict[str, list[Pos]], Gateway]:
    """Gateways A and B; A writes ``ROLLS`` ledgers of two keyed appends each (and an
    unkeyed one), rolling after each, then one keyed append into its current ledger;
    returns once every rolled-out ledger's keys are saved (with A's process)."""
    start_bookies(cluster, 3)
    gateways = [start_gateway(cluster), start_gateway(cluster)]
    for g in gateways:
        wait_writable(g, 3)
        g.close_client()
    a, b = (LogClient(g.proc.url) for g in gateways)
    a.create(name)
    a.take_writer(name)
    appended: dict[str, list[Pos]] = {}
    rolled: list[int] = []
    for i in range(ROLLS):
        appended[f"k{i}a"] = a.append(name, [f"r{i}a".encode()], key=f"k{i}a")
        a.append(name, [b"unkeyed"])
        appended[f"k{i}b"] = a.append(name, [f"r{i}b".encode(), b"x"], key=f"k{i}b")
        rolled.append(appended[f"k{i}b"][0][0])
        a.roll(name)
    appended["open"] = a.append(name, [b"in the open ledger"], key="open")
    wait_for(lambda: set(rolled) <= set(saved(zk, name)), 20.0, "the rolled ledgers' keys saved")
    keys = saved(zk, name)
    for lid in rolled:
        heads = keys[lid].heads
        assert [h.key for h in heads] == [k for k in appended if appended[k][0][0] == lid]
        assert keys[lid].last_entry_id == 3  # two keyed (one of two entries), one unkeyed
    return a, b, appended, gateways[0]


def retry_all(b: LogClient, name: str, appended: dict[str, list[Pos]]) -> None:
    """Every key retried through ``b`` (same records) answers its first positions; the
    log holds each record once."""
    for key, first in appended.items():
        i = key[1:-1]
        records = {
            "open": [b"in the open ledger"],
            f"k{i}a": [f"r{i}a".encode()],
            f"k{i}b": [f"r{i}b".encode(), b"x"],
        }[key]
        assert b.append(name, records, key=key) == first, key
    datas = [d for _, d in b.read_all(name)]
    for n in range(ROLLS):
        assert datas.count(f"r{n}a".encode()) == 1 and datas.count(f"r{n}b".encode()) == 1
    assert datas.count(b"in the open ledger") == 1


def test_a_new_writer_takes_saved_keys_and_reads_only_the_unsaved_ledger(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """A writer killed (-9) with a keyed append in its open ledger: the new writer answers
    every retry with its first position, the rolled ledgers' keys coming from the saved
    keys (it reads a few entries, not the six rolled ledgers' 24) and the open ledger's,
    never saved, from that ledger after fencing and recovering it."""
    name = "saved-keys"
    a, b, appended, writer_a = build(cluster, zk_client, name)
    a.close()
    writer_a.proc.kill()
    before = entries_read(b)
    b.take_writer(name)
    # The keyed retry waits for the rebuild; the last stamp read and the recovered open
    # ledger are all the new writer reads (the open ledger: 1 entry; the stamp: 1).
    assert b.append(name, [b"in the open ledger"], key="open") == appended["open"]
    assert entries_read(b) - before <= 4
    retry_all(b, name, appended)
    b.close()


def test_without_saved_keys_the_rebuild_reads_the_ledgers(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """The saved keys lost (deleted from ZooKeeper: as a writer that crashed before any
    save leaves them): the new writer reads every ledger of the window, and every retry
    is still answered with its first position."""
    name = "no-saved-keys"
    a, b, appended, _ = build(cluster, zk_client, name)
    zk_client.delete(zkpaths.saved_keys(name), recursive=True)
    before = entries_read(b)
    b.take_writer(name)
    assert b.append(name, [b"in the open ledger"], key="open") == appended["open"]
    assert entries_read(b) - before >= ROLLS * 4
    retry_all(b, name, appended)
    a.close()
    b.close()
