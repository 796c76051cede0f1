"""Spark jobs through faults on hosts (issue 38, sections 1 and 2): a Spark master, a
worker and a driver each on a host of its own beside a three-server ZooKeeper
ensemble, three bookies and two gateways; a batch write and a streaming query run
through a gateway's kill and the ZooKeeper leader's, and every record lands once.

The connector's ``gateway`` option names both gateways (docs/spark.md "Through
faults"); one layout and one Spark start serve the module."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import wait_for
from tests.integration.gateway_support import Gateway, ok, wait_writable
from tests.multihost.layout import HostService, Layout, start_layout
from tests.multihost.network import HostTransport, Network
from tests.multihost.spark_hosts import SparkHosts, start_spark
from tests.shared import unique_name
from tests.spark.write_support import get_log, ledgers_of_log, read_log

JOB_DEADLINE_S = 120.0
# A batch write long enough for both faults to land in it: eight tasks of a hundred
# records, each held 10 ms by the job, ten appends a task, on two executor cores.
BATCH_RECORDS = 800
BATCH_PARTITIONS = 8
BATCH_ROW_DELAY_MS = 10
BATCH_REQUEST_RECORDS = 10
# Between the two faults: the gateway's, then the ZooKeeper leader's.
FAULT_GAP_S = 1.0
# A streaming query: a micro-batch every half second; four rounds of source records,
# before the faults, after each and after the repairs.
TRIGGER_MS = 500
ROUND_RECORDS = 40
APPEND_RECORDS = 10
CAUGHT_UP_S = 60.0
REPAIRED_S = 60.0


@pytest.fixture(scope="module")
def layout(network: Network, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layout]:
    """Three ZooKeeper servers, three bookies and two gateways, each on its own host."""
    base: Path = tmp_path_factory.mktemp("hosts")
    started = start_layout(network, base, zookeepers=3, bookies=3, gateways=2)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def spark(
    network: Network, layout: Layout, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SparkHosts]:
    """A Spark master, worker and driver on hosts of their own; the connector is given
    both gateways."""
    started = start_spark(
        network, tmp_path_factory.mktemp("spark"), [g.url for g in layout.gateways]
    )
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def logs_on_failure(
    layout: Layout, spark: SparkHosts, request: pytest.FixtureRequest
) -> Iterator[None]:
    """The tail of every log of the layout and of Spark when the test failed."""
    yield
    if getattr(getattr(request.node, "rep_call", None), "failed", False):
        print(layout.log_tails())
        print(spark.log_tails())


def client_of(layout: Layout, gateway: HostService) -> Gateway:
    """The gateway as the test's client host reaches it."""
    return Gateway(gateway, transport=HostTransport(layout.client))


@pytest.fixture
def repaired(layout: Layout) -> Iterator[None]:
    """Every ZooKeeper server and gateway a test killed started again afterwards (the
    next test needs the whole layout), each waited for."""
    yield
    for server in layout.zookeepers:
        if not server.alive():
            server.start()
            server.wait_ready(REPAIRED_S)
    for gateway in layout.gateways:
        if not gateway.alive():
            gateway.start()
            gateway.wait_healthy(REPAIRED_S)


def kill_zookeeper_leader(layout: Layout) -> None:
    """SIGKILL the ensemble's leader (by pid); the other two elect a new one."""
    layout.zookeeper_leader().kill()


def records(prefix: str, first: int, count: int) -> list[bytes]:
    return [f"{prefix}-{i:06d}".encode() for i in range(first, first + count)]


def append(g: Gateway, log: str, payloads: list[bytes]) -> None:
    """Append ``payloads`` to ``log`` as its writer, in requests of APPEND_RECORDS."""
    for at in range(0, len(payloads), APPEND_RECORDS):
        batch = payloads[at : at + APPEND_RECORDS]
        body = {"entries": [base64.b64encode(p).decode() for p in batch]}
        ok(g.request("POST", f"/v1/logs/{log}/records", json=body))


def stray_ledgers(g: Gateway, log: str) -> set[int]:
    """Ledgers made for ``log`` (quire.log) that it does not list."""
    return set(ledgers_of_log(g, log)) - set(get_log(g, log)["ledgers"])


def test_a_batch_write_through_a_gateway_kill_and_a_zookeeper_election_lands_once(
    layout: Layout, spark: SparkHosts, logs_on_failure: None, repaired: None
) -> None:
    """Batch writes (docs/spark.md "Reads, writes and streams", "Through faults"): a job
    writing eight task ledgers while the first gateway of its list is killed and then
    the ZooKeeper leader is: the tasks cut off are run again by Spark against the other
    gateway, the commit lands through the election, and the log holds every record
    exactly once, in partition order; no task ledger of the job is left behind."""
    first, other = layout.gateways
    g = client_of(layout, other)
    wait_writable(g, 3)
    log = unique_name("spark-batch-faults")
    job = spark.driver.send(
        "write",
        log=log,
        records=BATCH_RECORDS,
        partitions=BATCH_PARTITIONS,
        row_delay_ms=BATCH_ROW_DELAY_MS,
        request_records=BATCH_REQUEST_RECORDS,
    )
    wait_for(lambda: ledgers_of_log(g, log), JOB_DEADLINE_S, "the job's first task ledger")
    first.kill()
    time.sleep(FAULT_GAP_S)
    kill_zookeeper_leader(layout)
    spark.driver.answer(job, JOB_DEADLINE_S)
    assert read_log(g, log) == [f"rec-{i:06d}".encode() for i in range(BATCH_RECORDS)]
    wait_for(lambda: not stray_ledgers(g, log), REPAIRED_S, "no task ledger left behind")


def test_a_streaming_query_through_a_gateway_kill_and_a_zookeeper_election_is_exactly_once(
    layout: Layout, spark: SparkHosts, logs_on_failure: None, repaired: None
) -> None:
    """Streams (docs/spark.md "Through faults"): a query reading one log and writing
    each record to another runs on while the first gateway of its list is killed, then
    the ZooKeeper leader, then both come back; records appended before, between and
    after the faults all reach the sink, each exactly once and in the source's order,
    and the query never fails."""
    first, other = layout.gateways
    g = client_of(layout, other)
    wait_writable(g, 3)
    source, sink = unique_name("spark-src"), unique_name("spark-dst")
    ok(g.request("PUT", f"/v1/logs/{source}"), 201)
    ok(g.request("POST", f"/v1/logs/{source}/writer"))
    sent: list[bytes] = []

    def feed(n: int) -> None:
        batch = records(f"round{n}", 0, ROUND_RECORDS)
        append(g, source, batch)
        sent.extend(batch)

    def caught_up() -> None:
        wait_for(lambda: len(read_log(g, sink)) >= len(sent), CAUGHT_UP_S, "the sink to catch up")

    def round_of(n: int) -> None:
        feed(n)
        caught_up()

    feed(0)  # before the query: its first batch reads them
    spark.driver.call(
        "stream_start",
        JOB_DEADLINE_S,
        source=source,
        sink=sink,
        checkpoint=str(spark.base_dir / "checkpoints" / sink),
        trigger_ms=TRIGGER_MS,
    )
    caught_up()
    round_of(1)
    first.kill()
    round_of(2)
    kill_zookeeper_leader(layout)
    round_of(3)
    for server in layout.zookeepers:
        if not server.alive():
            server.start()
            server.wait_ready(REPAIRED_S)
    first.start()
    first.wait_healthy(REPAIRED_S)
    round_of(4)
    stopped = spark.driver.call("stream_stop", JOB_DEADLINE_S, sink=sink)
    assert stopped["exception"] is None, stopped["exception"]
    assert read_log(g, sink) == sent
