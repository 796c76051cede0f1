"""Log writer hand-over with real processes: a second gateway takes the role under load,
the writer gateway is SIGKILLed mid-load, and the writer's ledger is fenced by someone
else while the role stays (docs/api.md "Logs"; gateway/logs/writer.py)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest

from services.cluster.processes import ZooKeeperProcess
from tests.harness import Cluster
from tests.integration.gateway_support import (
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.integration.log_support import (
    ACKED,
    NOT_WRITER,
    Appenders,
    LogClient,
    duplicates,
    in_log_order,
)


@pytest.fixture(scope="module")
def logs_cluster(
    zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Three bookies and two gateways (A and B) shared by this module's tests, both
    without forwarding: these tests hold the writer role's own rules (a gateway that lost
    it answers not_writer; tests/integration/test_logs_any_gateway.py forwards)."""
    with module_cluster(zookeeper, tmp_path_factory.mktemp("logs-handover")) as c:
        start_bookies(c, 3)
        for _ in range(2):
            gateway = start_gateway(c, ["--no-log-forwarding"])
            wait_writable(gateway, 3)  # a log's ledgers take all three bookies
            gateway.close_client()
        yield c


@pytest.fixture
def gateways(
    logs_cluster: Cluster, request: pytest.FixtureRequest
) -> Iterator[tuple[LogClient, LogClient]]:
    gateways = [p for p in logs_cluster.processes if p.name.startswith("gateway")][:2]
    a, b = (LogClient(p.url) for p in gateways)
    failed = request.session.testsfailed
    yield a, b
    a.close()
    b.close()
    if request.session.testsfailed > failed:
        print(logs_cluster.log_tails())


def test_handover_under_load_keeps_every_acknowledged_record_once_and_first(
    gateways: tuple[LogClient, LogClient],
) -> None:
    """Several clients append (single records and batches, unique payloads) through
    gateway A while gateway B takes the writer role: every record A acknowledged is in
    the log exactly once at its acknowledged position, before all of B's records; every
    append A received after B held the role is 409 not_writer; nothing answered
    not_writer is in the log; an append with an unknown outcome is in it at most once,
    and a batch is in it whole or not at all."""
    a, b = gateways
    name = "handover-load"
    a.create(name)
    epoch_a = a.take_writer(name)["epoch"]
    load = Appenders(a.url, name, threads=4, batch=3, await_move=True).start()
    try:
        load.wait_acked(40)
        taken = b.take_writer(name)
        taken_at = time.monotonic()
        load.role_moved(taken_at)
        assert taken["epoch"] > epoch_a
        # Every client of A learns it lost the role (each ends after 3 not_writer to
        # appends sent after the test saw B take it).
        load.wait_done(30)
    finally:
        load.stop()
    b_positions = [p for i in range(5) for p in b.append(name, [f"b-{i}".encode()])]
    b_positions += b.append(name, [b"b-batch-0", b"b-batch-1"])

    requests = load.snapshot()
    late = [r for r in requests if r.sent_at > taken_at]
    assert late and all(r.outcome == NOT_WRITER for r in late), [r.detail for r in late]
    records = b.read_all(name)
    log = b.show(name)
    assert log["writer"]["gateway"] == b.url.removeprefix("http://")
    assert in_log_order(records, log["ledgers"])
    where = {data: (index, position) for index, (position, data) in enumerate(records)}
    count = Counter(data for _, data in records)
    assert not duplicates(data for _, data in records)
    acked = [r for r in requests if r.outcome == ACKED]
    assert sum(len(r.payloads) for r in acked) >= 40
    last_of_a = -1
    for r in requests:
        present = [p in where for p in r.payloads]
        assert all(present) or not any(present), f"a batch only partly in the log: {r}"
        if r.outcome == ACKED:
            for payload, position in zip(r.payloads, r.positions, strict=True):
                assert count[payload] == 1 and where[payload][1] == position, (r, position)
                last_of_a = max(last_of_a, where[payload][0])
        elif r.outcome == NOT_WRITER:
            assert not any(present), f"an append answered not_writer is in the log: {r}"
    first_of_b = min(
        index for index, (position, _) in enumerate(records) if position in b_positions
    )
    assert last_of_a < first_of_b
    # Only payloads the clients sent are in the log.
    sent = {p for r in requests for p in r.payloads}
    sent |= {f"b-{i}".encode() for i in range(5)} | {b"b-batch-0", b"b-batch-1"}
    assert set(count) <= sent


def test_writer_killed_mid_load_retries_with_keys_land_exactly_once(
    logs_cluster: Cluster, gateways: tuple[LogClient, LogClient]
) -> None:
    """The writer gateway is SIGKILLed while clients append with Idempotency-Keys;
    another gateway takes the role. Nothing acknowledged is lost; the client retries
    every append (with its key) at the new writer: the retries of acknowledged appends
    answer their original positions, the appends that got no answer land, and in the
    whole log every key's records appear exactly once."""
    a, _ = gateways
    victim_gateway = start_gateway(logs_cluster)
    wait_writable(victim_gateway, 3)
    victim_gateway.close_client()
    victim_proc = victim_gateway.proc
    victim = LogClient(victim_proc.url)
    name = "writer-killed"
    try:
        victim.create(name)
        victim.take_writer(name)
        load = Appenders(victim.url, name, threads=4, batch=3, keys=True).start()
        try:
            load.wait_acked(40)
            victim_proc.kill()
            load.wait_done(30)  # each client ends on its connection error
        finally:
            load.stop()
    finally:
        victim.close()
    a.take_writer(name)
    requests = load.snapshot()
    unanswered = [r for r in requests if r.outcome != ACKED]
    assert unanswered, "the kill left no append without an answer"
    for r in requests:
        retried = a.append(name, r.payloads, r.key)
        if r.outcome == ACKED:
            assert retried == r.positions, (r, retried)
        # A second retry answers the same positions (the key is known now in any case).
        assert a.append(name, r.payloads, r.key) == retried
    records = a.read_all(name)
    assert in_log_order(records, a.show(name)["ledgers"])
    count = Counter(data for _, data in records)
    for r in requests:
        assert all(count[p] == 1 for p in r.payloads), r
    assert sum(count.values()) == sum(len(r.payloads) for r in requests)


def test_fenced_ledger_with_the_role_unchanged_rolls_and_keeps_appending(
    gateways: tuple[LogClient, LogClient],
) -> None:
    """Someone else fences the writer's current ledger (POST /v1/ledgers/{id}/recover
    through the other gateway, as a replication worker would) while the role is
    unchanged: the next append still succeeds on a new ledger, which the log lists,
    with the writer and its epoch unchanged, and every record is readable once."""
    a, b = gateways
    name = "fenced-in-place"
    a.create(name)
    epoch = a.take_writer(name)["epoch"]
    before = [p for i in range(3) for p in a.append(name, [f"before-{i}".encode()])]
    ledger = a.show(name)["ledgers"][-1]
    assert {p[0] for p in before} == {ledger}
    r = b.http.post(f"/v1/ledgers/{ledger}/recover")
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "CLOSED"
    after = a.append(name, [b"after-0"])
    after += a.append(name, [b"after-1", b"after-2"])
    log = a.show(name)
    assert after[0][0] != ledger and after[0][0] in log["ledgers"]
    assert log["ledgers"].index(after[0][0]) > log["ledgers"].index(ledger)
    assert log["writer"] == {"gateway": a.url.removeprefix("http://"), "epoch": epoch}
    records = a.read_all(name)
    assert [p for p, _ in records] == before + after
    assert [d for _, d in records] == [b"before-0", b"before-1", b"before-2"] + [
        b"after-0",
        b"after-1",
        b"after-2",
    ]
