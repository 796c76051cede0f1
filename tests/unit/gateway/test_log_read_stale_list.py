"""A log read from a position in a ledger the list this gateway read does not have: the
list may be behind the log (the copy kept while ZooKeeper does not answer, or the
writer's copy before its watch fired), and the position may have come from another
gateway that already has the ledger. The read asks ZooKeeper itself before it answers
400, and answers 503 (retry) when ZooKeeper cannot say. A chaos run (seed 28) saw a
reader given ``next`` by one gateway refused with 400 by another cut from ZooKeeper."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from gateway.logs import reads
from gateway.metadata_cache import MetadataCache
from gateway.metrics import GatewayMetrics
from gateway.stopping import Stopping
from services.errors import InvalidArgument, MetadataUnavailable
from services.protocol.logs import LogMetadata, Position
from tests.unit.gateway.test_log_tail_wait import SleepingRunner, ZooKeeperLogs, poll_gateway


def reader_gateway(zookeeper: ZooKeeperLogs) -> SimpleNamespace:
    """A gateway that is not the log's writer (reads go by ZooKeeper's list, or the
    kept one)."""
    metrics = GatewayMetrics()
    return SimpleNamespace(
        handles=SimpleNamespace(live=lambda lid: None),
        log_writers=[],
        logs=SimpleNamespace(get=lambda name: None, logs=zookeeper),
        metadata=MetadataCache(zookeeper, metrics.metadata_cache_hits),
        stopping=Stopping(),
    )


def test_a_position_past_the_kept_list_is_503_while_zookeeper_cannot_tell() -> None:
    zookeeper = ZooKeeperLogs(LogMetadata("tail", ledgers=()))
    gw = reader_gateway(zookeeper)
    # Read once while ZooKeeper answers: the (empty) list is kept.
    page = asyncio.run(reads.read(gw, "tail", None, 100, 0))
    assert page.records == [] and page.caught_up
    zookeeper.connected = False  # the gateway is cut from ZooKeeper; the log rolled on
    with pytest.raises(MetadataUnavailable) as raised:
        asyncio.run(reads.read(gw, "tail", Position(9, 0), 100, 0))
    assert "cannot tell" in raised.value.message and raised.value.http_status == 503


def test_a_position_zookeeper_does_not_list_is_400_after_asking_it() -> None:
    zookeeper = ZooKeeperLogs(LogMetadata("tail", ledgers=()))
    gw = reader_gateway(zookeeper)
    with pytest.raises(InvalidArgument, match="not in log tail"):
        asyncio.run(reads.read(gw, "tail", Position(9, 0), 100, 0))
    assert zookeeper.reads == 2  # the read's list, then ZooKeeper's own answer


def test_a_tail_read_past_the_writers_copy_reads_zookeepers_list() -> None:
    """The writer's copy of the list is behind (its watch has not fired): a tailing read
    from a ledger ZooKeeper lists reads it, where it answered 400."""
    runner = SleepingRunner()
    gw, zookeeper, _ = poll_gateway(runner, LogMetadata("tail", ledgers=()))
    page = asyncio.run(reads.read(gw, "tail", Position(7, 5), 100, 160))
    assert (page.records, page.next, page.caught_up) == ([], Position(7, 5), True)
    assert zookeeper.reads >= 1
