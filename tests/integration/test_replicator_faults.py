"""The replication worker under faults: killed mid-copy, a hanging bookie among the
sources and targets, a ZooKeeper session expiry of the worker, and a ZooKeeper
connection drop (the session survives) while it copies."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path

from kazoo.client import KazooClient

from replicator.app import create_app
from services.cluster.processes import ZooKeeperProcess, free_port
from services.protocol.metadata import LedgerMetadata
from services.settings import ReplicatorSettings
from services.zk import paths as zkpaths
from tests.harness import Cluster, expire_session, fresh_chroot, wait_for
from tests.integration.auto_support import (
    fragment_complete,
    ledger_metadata,
    mark_ledger,
    marked_ledgers,
    names,
    start_replicator,
)
from tests.integration.gateway_support import Gateway, payload_for, start_bookies, start_gateway

ENTRIES = 60
ENTRY_BYTES = 1_000
# The worker's session in the connection-drop test: kazoo drops a silent connection
# within 2/3 of it, and the server ends the session after all of it, so resuming
# ZooKeeper once the drop is seen leaves a third of it (4 s) to spare.
DROPPED_SESSION_TIMEOUT_S = 12


def _closed_ledger(
    gateway: Gateway, e: int, qw: int, qa: int, count: int = ENTRIES
) -> tuple[int, list[bytes]]:
    lid = gateway.create(ensemble_size=e, write_quorum=qw, ack_quorum=qa)["ledger_id"]
    payloads = [payload_for(i, ENTRY_BYTES) for i in range(count)]
    gateway.add_batch(lid, payloads)
    gateway.close(lid)
    return lid, payloads


def test_a_worker_killed_mid_copy_frees_its_lock_and_another_completes(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """A throttled worker is SIGKILLed while copying: its lock (ephemeral) frees, a second
    worker completes the repair, and at no moment does a fragment name a bookie that
    lacks its share of the entries."""
    procs = {p.address: p for p in start_bookies(cluster, 4)}
    gateway = start_gateway(cluster)
    wait_for(lambda: len(zk_client.get_children("/bookies")) == 4, 20, "4 bookies")
    lid, payloads = _closed_ledger(gateway, 3, 3, 2)
    dead = ledger_metadata(zk_client, lid).fragments[0].bookies[1]
    procs[dead].kill()
    slow = start_replicator(
        cluster,
        ["--rereplication-bytes-per-s-max", "10000", "--copy-batch-entries-max", "5"],
    )
    mark_ledger(zk_client, lid, [dead])
    lock = f"/underreplication/locks/{lid}"

    def copying() -> bool:
        data, _ = zk_client.get(lock)
        return b'"entries_copied":' in data and b'"entries_copied":0' not in data

    wait_for(copying, 20, "the slow worker copying")
    slow.kill()
    wait_for(lambda: not zk_client.exists(lock), 20, "the dead worker's lock freed")
    assert marked_ledgers(zk_client) == [lid]
    assert names(ledger_metadata(zk_client, lid), dead)
    start_replicator(cluster)
    seen: set[int] = set()
    deadline = time.monotonic() + 40
    while marked_ledgers(zk_client):
        assert time.monotonic() < deadline, "the second worker did not finish"
        data, stat = zk_client.get(zkpaths.ledger(lid))
        if stat.version not in seen:
            seen.add(stat.version)
            metadata = LedgerMetadata.from_json(data)
            assert fragment_complete(metadata, skip={dead}) == [], stat.version
        time.sleep(0.05)
    metadata = ledger_metadata(zk_client, lid)
    assert not names(metadata, dead)
    assert fragment_complete(metadata) == []
    assert [d for _, d in gateway.read_all(lid)] == payloads


def test_a_hanging_source_and_target_cost_a_timeout_not_the_repair(
    cluster: Cluster, zk_client: KazooClient
) -> None:
    """5 bookies, E=3 Qw=3 on a, b, c: a is SIGKILLed, b (a source) and d (a candidate
    target) are SIGSTOPped. Each costs at most --bookie-request-timeout-ms: entries come
    from c, the copy lands on e, and the repair finishes in bounded time.

    The paused bookies keep their ZooKeeper sessions for the whole test (30 s, not the
    harness's 4): a hung bookie is still registered, which is the case under test. With
    4 s sessions b left the registry about when the repair (three 1 s time-outs) ended, so
    under a loaded machine the worker rightly went on to replace b too and found no
    target (d hung, a dead): the test raced the session expiry."""
    procs = {p.address: p for p in start_bookies(cluster, 5, ["--zk-session-timeout", "30"])}
    gateway = start_gateway(cluster)
    wait_for(lambda: len(zk_client.get_children("/bookies")) == 5, 20, "5 bookies")
    lid, payloads = _closed_ledger(gateway, 3, 3, 2)
    a, b, c = ledger_metadata(zk_client, lid).fragments[0].bookies
    d, e = sorted(set(procs) - {a, b, c})
    procs[a].kill()
    worker = start_replicator(cluster, ["--bookie-request-timeout-ms", "1000"])
    hung = [procs[b], procs[d]]
    try:
        for proc in hung:
            proc.pause()
        started = time.monotonic()
        mark_ledger(zk_client, lid, [a])
        wait_for(lambda: not marked_ledgers(zk_client), 30, "the repair around hung bookies")
        elapsed = time.monotonic() - started
        metadata = ledger_metadata(zk_client, lid)
        assert metadata.fragments[0].bookies == tuple(e if x == a else x for x in (a, b, c))
        # Bounded, and well within the hung bookies' 30 s sessions: the repair did not
        # wait for them to leave the registry (nominally a few seconds; 25 s is room for
        # a loaded machine). Each hung call cost the 1 s time-out given, not the 5 s
        # default: the worker's log names the time-outs it met.
        assert elapsed < 25, elapsed
        timeouts = re.findall(r"no answer within (\S+)s", worker.log_path.read_text())
        assert timeouts and set(timeouts) == {"1"}, timeouts
        assert fragment_complete(metadata, skip={b}) == []
    finally:
        for proc in hung:
            proc.resume()
    assert [x for _, x in gateway.read_all(lid)] == payloads


def test_a_worker_survives_the_expiry_of_its_zookeeper_session(
    cluster: Cluster, zookeeper: ZooKeeperProcess, zk_client: KazooClient
) -> None:
    """A worker (run in this process to reach its session) whose session is ended on the
    server (``expire_session``) while it copies a throttled ledger: the repair in flight is
    abandoned (its lock is gone) and taken again after reconnecting, and a ledger marked
    after the expiry is repaired too: no silent stall."""
    procs = {p.address: p for p in start_bookies(cluster, 4)}
    gateway = start_gateway(cluster)
    wait_for(lambda: len(zk_client.get_children("/bookies")) == 4, 20, "4 bookies")
    first, first_payloads = _closed_ledger(gateway, 3, 3, 2)
    second, second_payloads = _closed_ledger(gateway, 3, 3, 2, count=5)
    ensembles = [ledger_metadata(zk_client, lid).fragments[0].bookies for lid in (first, second)]
    dead = next(x for x in ensembles[0] if x in ensembles[1])
    procs[dead].kill()
    settings = ReplicatorSettings(
        zk=zookeeper.connect_string,
        zk_root=cluster.zk_root,
        port=free_port(),
        zk_session_timeout=4,
        rereplication_bytes_per_s_max=15_000,
        copy_batch_entries_max=5,
        marks_poll_interval=0.5,
    )

    async def main() -> None:
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            await _until(lambda: app.state.worker is not None, "the worker to start")
            store = app.state.store
            await asyncio.to_thread(mark_ledger, zk_client, first, [dead])
            lock = f"/underreplication/locks/{first}"
            await _until(lambda: zk_client.exists(lock), "the worker to take the lock")
            old_session = store.session_id
            sid, password = store.client.client_id
            await asyncio.to_thread(expire_session, zookeeper.connect_string, sid, password)
            deadline = time.monotonic() + 30
            while not (store.connected and store.session_id != old_session):
                assert time.monotonic() < deadline, "no new session"
                await asyncio.sleep(0.05)
            await asyncio.to_thread(mark_ledger, zk_client, second, [dead])
            while await asyncio.to_thread(marked_ledgers, zk_client):
                assert time.monotonic() < deadline + 30, "the worker stalled after the expiry"
                await asyncio.sleep(0.1)
            # The repair in flight was interrupted: cancelled when the session was lost,
            # or, when a ZooKeeper write of it was in flight as the connection dropped
            # (before the client learns of the expiry), failed with ConnectionLoss.
            failures = app.state.worker.ctx.metrics.failures
            interrupted = sum(
                failures.labels(code)._value.get()
                for code in ("session_lost", "metadata_unavailable")
            )
            assert interrupted >= 1

    asyncio.run(main())
    for lid, payloads in ((first, first_payloads), (second, second_payloads)):
        metadata = ledger_metadata(zk_client, lid)
        assert not names(metadata, dead)
        assert fragment_complete(metadata) == []
        assert [x for _, x in gateway.read_all(lid)] == payloads


async def _until(predicate: Callable[[], object], what: str, deadline_s: float = 30.0) -> None:
    """Poll ``predicate`` (in a thread: it may call ZooKeeper) until true, or fail."""
    deadline = time.monotonic() + deadline_s
    while not await asyncio.to_thread(predicate):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def test_a_repair_ending_during_a_zookeeper_connection_drop_releases_its_lock(
    zookeeper_of_its_own: ZooKeeperProcess, tmp_path: Path
) -> None:
    """ZooKeeper is paused (SIGSTOP) while a worker copies a throttled ledger, until the
    worker's connection drops, then resumed, well within the worker's session time-out:
    the progress write in flight fails, so the repair ends while the session is
    SUSPENDED. The session survives and so would its ephemeral lock: the worker releases
    it once reconnected, takes it again, and the ledger ends fully replicated."""
    zookeeper = zookeeper_of_its_own
    cluster = Cluster(zookeeper.connect_string, fresh_chroot(), tmp_path)
    long_session = ["--zk-session-timeout", "60"]  # only the worker's session is at stake
    zk_client = KazooClient(hosts=zookeeper.connect_string, timeout=60.0)
    try:
        procs = {p.address: p for p in start_bookies(cluster, 4, long_session)}
        gateway = start_gateway(cluster, long_session)
        zk_client.start(30.0)
        zk_client.chroot = cluster.zk_root
        wait_for(lambda: len(zk_client.get_children("/bookies")) == 4, 20, "4 bookies")
        lid, payloads = _closed_ledger(gateway, 3, 3, 2)
        dead = ledger_metadata(zk_client, lid).fragments[0].bookies[1]
        procs[dead].kill()
        settings = ReplicatorSettings(
            zk=zookeeper.connect_string,
            zk_root=cluster.zk_root,
            port=free_port(),
            zk_session_timeout=DROPPED_SESSION_TIMEOUT_S,
            rereplication_bytes_per_s_max=10_000,
            copy_batch_entries_max=5,
            marks_poll_interval=0.5,
        )

        async def main() -> None:
            app = create_app(settings)
            async with app.router.lifespan_context(app):
                await _until(lambda: app.state.worker is not None, "the worker to start")
                store = app.state.store
                session = store.session_id
                await asyncio.to_thread(mark_ledger, zk_client, lid, [dead])
                lock = f"/underreplication/locks/{lid}"

                def copying() -> bool:
                    found = zk_client.exists(lock)
                    return found is not None and b'"entries_copied":0' not in zk_client.get(lock)[0]

                await _until(copying, "the worker copying")
                zookeeper.pause()
                try:
                    await _until(lambda: not store.connected, "the worker's connection to drop")
                finally:
                    zookeeper.resume()
                deadline = time.monotonic() + 60
                while await asyncio.to_thread(marked_ledgers, zk_client):
                    assert time.monotonic() < deadline, (
                        "the ledger stayed marked (its lock: "
                        f"{await asyncio.to_thread(zk_client.exists, lock)})"
                    )
                    await asyncio.sleep(0.1)
                assert store.session_id == session  # the session survived the drop
                metrics = app.state.worker.ctx.metrics  # the repair ended during the drop
                assert metrics.failures.labels("metadata_unavailable")._value.get() >= 1
                assert not await asyncio.to_thread(zk_client.exists, lock)

        asyncio.run(main())
        metadata = ledger_metadata(zk_client, lid)
        assert not names(metadata, dead)
        assert fragment_complete(metadata) == []
        assert [x for _, x in gateway.read_all(lid)] == payloads
    finally:
        zookeeper.resume()
        zk_client.stop()
        zk_client.close()
        cluster.stop_all()
