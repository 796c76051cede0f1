"""The metadata store over a real ZooKeeper: CAS, watches, ids, session loss."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from services.errors import MetadataConflict, MetadataUnavailable
from services.zk import paths as zkpaths
from services.zk.store import MetadataStore, NodeExists, NodeNotFound
from tests.harness import expire_session

PAUSE_S = 2.0  # ZooKeeper paused while the watches are set (sessions last 30 s)


async def _store(zookeeper, zk_root) -> MetadataStore:
    store = MetadataStore(zookeeper.connect_string + zk_root, session_timeout_s=4)
    await store.start(10)
    return store


def test_versioned_get_and_cas(zookeeper, zk_root):
    """A set with a stale version loses with MetadataConflict and changes nothing."""

    async def main():
        store = await _store(zookeeper, zk_root)
        try:
            await store.create("/a/b", b"one")
            first = await store.get("/a/b")
            assert first.data == b"one"
            new_version = await store.set("/a/b", b"two", first.version)
            assert new_version == first.version + 1
            with pytest.raises(MetadataConflict):
                await store.set("/a/b", b"three", first.version)
            assert (await store.get("/a/b")).data == b"two"
            with pytest.raises(NodeExists):
                await store.create("/a/b", b"x")
            with pytest.raises(NodeNotFound):
                await store.get("/a/missing")
            assert await store.children("/a") == ["b"]
            await store.delete_recursive("/a")
            assert not await store.exists("/a")
        finally:
            await store.stop()

    asyncio.run(main())


def test_chroot_is_created(zookeeper, zk_client, zk_root):
    """Starting the store under a missing chroot creates it."""

    async def main():
        store = MetadataStore(f"{zookeeper.connect_string}{zk_root}/deeper/root")
        await store.start(10)
        await store.create("/x", b"1")
        await store.stop()

    asyncio.run(main())
    assert zk_client.exists("/deeper/root/x")


def test_ledger_ids_are_unique_and_rollover(zookeeper, zk_root):
    """Ids are unique under concurrency and move to the next 31-bit block near the end."""

    async def main():
        store = await _store(zookeeper, zk_root)
        try:
            ids = await asyncio.gather(*(store.generate_ledger_id() for _ in range(50)))
            assert len(set(ids)) == 50
            # Simulate an exhausted block: the next id comes from the next high-order block.
            await store.create(f"{zkpaths.IDGEN}/{7:010d}")
            high = await store.generate_ledger_id()
            assert high >> 31 == 7
            assert await store.children(f"{zkpaths.IDGEN}/{7:010d}") == []
        finally:
            await store.stop()

    asyncio.run(main())


def test_hierarchical_ledger_paths():
    """Ledger paths split the zero-padded 19-digit id so no znode has over 10,000 children."""
    assert zkpaths.ledger(1) == "/ledgers/000/0000/0000/0000/L0001"
    assert zkpaths.ledger(2**63 - 1) == "/ledgers/922/3372/0368/5477/L5807"
    parts = zkpaths.ledger(123456789012).split("/")[2:]
    assert zkpaths.ledger_id_from_parts(parts) == 123456789012


def test_watch_and_session_expiry(zookeeper, zk_root):
    """Watches fire on the loop; after a forced session expiry the store reports LOST, then
    CONNECTED with a new session, and its ephemeral nodes are gone."""

    async def main():
        store = await _store(zookeeper, zk_root)
        try:
            seen: list[list[str]] = []
            states: list[str] = []
            changed = asyncio.Event()
            reconnected = asyncio.Event()

            def on_children(children):
                seen.append(children)
                changed.set()

            def on_state(state):
                states.append(state)
                if state == "CONNECTED" and "LOST" in states:
                    reconnected.set()

            store.add_state_listener(on_state)
            await store.ensure_path("/w")
            store.watch_children("/w", on_children)
            await store.create("/w/eph", ephemeral=True)
            await asyncio.wait_for(_until(lambda: ["eph"] in seen, changed), 10)
            old_session = store.session_id
            sid, password = store.client.client_id
            await asyncio.to_thread(expire_session, zookeeper.connect_string, sid, password)
            await asyncio.wait_for(reconnected.wait(), 20)
            assert store.session_id != old_session
            assert not await store.exists("/w/eph")
        finally:
            await store.stop()

    asyncio.run(main())


async def _until(predicate, event: asyncio.Event):
    while not predicate():
        event.clear()
        await event.wait()


def test_unreachable_zookeeper_is_a_clear_error():
    """Starting against a port where nothing listens fails with MetadataUnavailable."""

    async def main():
        store = MetadataStore("127.0.0.1:1", session_timeout_s=2)
        with pytest.raises(MetadataUnavailable):
            await store.start(2)
        await store.stop()

    asyncio.run(main())


def test_get_many_reads_in_order_with_none_for_missing(zookeeper, zk_root):
    """get_many answers in the order asked, None for a missing znode, the versions too;
    LedgerStore.get_many parses metadata and flags unreadable metadata."""
    from services.errors import InvalidArgument
    from services.protocol.metadata import LedgerMetadata
    from services.zk.ledger_store import LedgerStore

    async def main():
        store = await _store(zookeeper, zk_root)
        try:
            paths = [f"/many/n{i}" for i in range(1500)]
            for i, path in enumerate(paths[::2]):
                await store.create(path, str(i).encode())
            await store.set(paths[2], b"changed")
            got = await store.get_many(paths)
            assert [g is None for g in got] == [i % 2 == 1 for i in range(1500)]
            assert got[0] is not None and got[0].data == b"0" and got[0].version == 0
            assert got[2] is not None and got[2].data == b"changed" and got[2].version == 1
            assert await store.get_many([]) == []
            ledgers = LedgerStore(store)
            created = await ledgers.create(LedgerMetadata.new(7, ["a:1"], 1, 1))
            await store.create(zkpaths.ledger(8), b"not json")
            many = await ledgers.get_many([7, 8, 9])
            assert many[0] is not None and not isinstance(many[0], InvalidArgument)
            assert many[0].metadata == created.metadata
            assert isinstance(many[1], InvalidArgument) and many[2] is None
        finally:
            await store.stop()

    asyncio.run(main())


def test_setting_a_watch_never_blocks_the_event_loop(zookeeper_of_its_own):
    """Setting a data or children watch reads the znode (kazoo's recipes read it when made,
    blocking their caller): with ZooKeeper paused for 2 s, well within the session, both
    calls return at once and the loop keeps running; the first calls come once it is back,
    and awaiting what the calls return waits for them."""
    zookeeper = zookeeper_of_its_own

    async def main():
        store = MetadataStore(zookeeper.connect_string, session_timeout_s=30)
        await store.start(10)
        try:
            await store.create("/watched/node", b"one")
            data: list[object] = []
            children: list[list[str]] = []
            zookeeper.pause()
            resume = threading.Timer(PAUSE_S, zookeeper.resume)
            resume.start()
            try:
                started = time.monotonic()
                installing = [
                    store.watch_data("/watched/node", data.append),
                    store.watch_children("/watched", children.append),
                ]
                returned_s = time.monotonic() - started
                await asyncio.sleep(0.05)
                ticked_s = time.monotonic() - started
            finally:
                resume.join()
            # A blocking call holds the loop until ZooKeeper is back (PAUSE_S, 2 s); 1.5 s
            # leaves a loaded machine room and still fails that.
            assert returned_s < 1.5, f"setting the watches blocked the loop {returned_s:.1f} s"
            assert ticked_s < 1.5, f"the loop stalled {ticked_s:.1f} s"
            await asyncio.wait_for(asyncio.gather(*installing), 20)
            assert [getattr(v, "data", None) for v in data] == [b"one"]
            assert children == [["node"]]
        finally:
            zookeeper.resume()
            await store.stop()

    asyncio.run(main())


def test_transactions_apply_all_or_nothing(zookeeper, zk_root):
    """A transaction applies every step or none and names the step that failed; the two
    guarded writes built on it (an attach's CAS listing only existing ledgers, a ledger's
    delete only while its log is unchanged) refuse without writing anything."""
    from services.errors import LedgerNotFound
    from services.protocol.logs import LogMetadata
    from services.protocol.metadata import LedgerMetadata
    from services.zk.ledger_store import LedgerStore
    from services.zk.log_store import LogStore
    from services.zk.store import Check, Delete, SetData

    async def main():
        store = await _store(zookeeper, zk_root)
        try:
            await store.create("/t/a", b"a")
            await store.create("/t/b", b"b")
            failed = await store.transaction(
                [SetData("/t/a", b"a2"), Check("/t/missing"), Delete("/t/b")]
            )
            assert failed is not None and failed[0] == 1
            assert isinstance(failed[1], NodeNotFound)
            assert (await store.get("/t/a")).data == b"a" and await store.exists("/t/b")
            assert await store.transaction([SetData("/t/a", b"a2", 0), Delete("/t/b")]) is None
            assert (await store.get("/t/a")).data == b"a2" and not await store.exists("/t/b")

            ledgers, logs = LedgerStore(store), LogStore(store)
            lid = await ledgers.new_ledger_id()
            meta = LedgerMetadata.new(lid, ["127.0.0.1:1"], 1, 1).closed(-1, 0)
            await ledgers.create(meta)
            log, _ = await logs.create(LogMetadata("txn-log", ensemble_size=1, write_quorum=1,
                                                   ack_quorum=1))  # fmt: skip
            with pytest.raises(LedgerNotFound):
                await logs.compare_and_set_listing(log.log.with_attached([lid + 1]), 0, [lid + 1])
            assert (await logs.get("txn-log")).log.ledgers == ()
            with pytest.raises(MetadataConflict):
                await ledgers.delete(lid, (zkpaths.log("txn-log"), 7))
            assert (await ledgers.get(lid)).metadata.ledger_id == lid
            attached = await logs.compare_and_set_listing(log.log.with_attached([lid]), 0, [lid])
            assert attached.version == (await logs.get("txn-log")).version == 1
            await ledgers.delete(lid, (zkpaths.log("txn-log"), 1))
            with pytest.raises(LedgerNotFound):
                await ledgers.get(lid)
        finally:
            await store.stop()

    asyncio.run(main())


def _count_requests(store: MetadataStore) -> dict[str, int]:
    """Count the requests the store's kazoo client sends, by request class name."""
    client = store.client
    sent: dict[str, int] = {}
    original = client._call

    def counting(request, async_object):
        sent[type(request).__name__] = sent.get(type(request).__name__, 0) + 1
        return original(request, async_object)

    client._call = counting
    return sent


def test_get_many_reads_in_read_only_multis(zookeeper, zk_root):
    """get_many sends one ZooKeeper read-only multi per MULTI_READ_OPS_MAX znodes, not a
    get per znode: each answer in order, a deleted znode None, the others unharmed."""
    from services.zk.limits import MULTI_READ_OPS_MAX

    async def main():
        store = await _store(zookeeper, zk_root)
        try:
            count = MULTI_READ_OPS_MAX * 2 + 7
            paths = [f"/multi/n{i:04d}" for i in range(count)]
            for path in paths:
                await store.create(path, path.encode())
            await store.create("/multi/empty", b"")
            await store.delete(paths[5])
            sent = _count_requests(store)
            got = await store.get_many([*paths, "/multi/empty", "/multi/none"])
            assert sent == {"MultiGetData": 3}
            assert len(got) == count + 2
            assert got[5] is None and got[-1] is None
            assert got[-2] is not None and got[-2].data == b"" and got[-2].version == 0
            for path, node in zip(paths, got, strict=False):
                if path != paths[5]:
                    assert node is not None and node.data == path.encode()
            assert got[0] is not None and got[0].mtime > 0
            (root,) = await store.get_many(["/"])  # the chroot itself
            assert root is not None and root.version == 0
        finally:
            await store.stop()

    asyncio.run(main())


def test_get_many_raises_an_operation_refused_by_acl(zookeeper, zk_root, zk_client):
    """A read the server refuses inside a multi (NoAuth on one znode) fails the call with
    MetadataUnavailable naming the znode; it is not taken for a missing znode."""
    from kazoo.security import make_acl

    async def main():
        store = await _store(zookeeper, zk_root)
        try:
            await store.create("/acl/readable", b"ok")
            await asyncio.to_thread(
                zk_client.create,
                "/acl/secret",
                b"no",
                acl=[make_acl("world", "anyone", write=True)],
            )
            with pytest.raises(MetadataUnavailable, match="/acl/secret"):
                await store.get_many(["/acl/readable", "/acl/secret"])
        finally:
            await store.stop()

    asyncio.run(main())


def test_get_many_falls_back_to_single_reads_on_a_server_without_the_multi(
    zookeeper, zk_root, monkeypatch
):
    """A server that does not know the read-only multi (ZooKeeper before 3.6: an op code
    it does not know, answered UNIMPLEMENTED and the connection dropped) gets the same
    answer through single reads, and no multi again from that store."""
    from services.zk import store as store_module
    from services.zk.multiread import MultiGetData

    class UnknownToTheServer(MultiGetData):
        type = 9_999  # what ZooKeeper 3.5 makes of op code 22

    monkeypatch.setattr(store_module, "MultiGetData", UnknownToTheServer)

    async def main():
        store = await _store(zookeeper, zk_root)
        try:
            paths = [f"/old/n{i}" for i in range(450)]
            for i, path in enumerate(paths):
                if i % 3:
                    await store.create(path, str(i).encode())
            sent = _count_requests(store)
            got = await store.get_many(paths)
            assert [g is None for g in got] == [i % 3 == 0 for i in range(450)]
            assert got[1] is not None and got[1].data == b"1"
            assert sent.get("UnknownToTheServer", 0) >= 1
            # Once each; or, when some went out on the connection the server was dropping
            # (ConnectionLoss), all once more after it is back: never more than twice.
            assert 450 <= sent.get("GetData", 0) <= 900
            sent.clear()
            again = await store.get_many(paths[:10])
            assert [g is None for g in again] == [i % 3 == 0 for i in range(10)]
            assert sent == {"GetData": 10}
        finally:
            await store.stop()

    asyncio.run(main())


def test_ledger_walk_lists_each_leaf_once_and_pages_in_order(zookeeper, zk_root):
    """LedgerStore.pages yields every ledger id ascending in pages of the size asked,
    across leaves of the id hierarchy, listing each znode once; LedgerStore.list (the
    API's paging) finds the ids after ``after`` inside a leaf and across leaves."""
    from services.zk.ledger_store import LedgerStore

    ids = [*range(9_990, 10_012), 25_000, 123_456_789_012, 123_456_789_013]

    async def main():
        store = await _store(zookeeper, zk_root)
        ledgers = LedgerStore(store)
        try:
            for lid in ids:
                await store.create(zkpaths.ledger(lid), b"{}")
            await store.create(zkpaths.LEDGERS + "/000/0000/0000/0000/other", b"")
            sent = _count_requests(store)
            pages = [page async for page in ledgers.pages(7)]
            assert [lid for page in pages for lid in page] == ids
            assert [len(page) for page in pages] == [7, 7, 7, 4]
            # /ledgers, /000, /000/0000, its children 0000 and 1234, then 4 leaves
            # (0000/0000, 0000/0001, 0000/0002, 1234/5678): each znode once.
            assert sent == {"GetChildren": 1 + 1 + 1 + 2 + 4}
            assert await ledgers.list(None, 3) == ([9_990, 9_991, 9_992], 9_992)
            assert await ledgers.list(9_995, 3) == ([9_996, 9_997, 9_998], 9_998)
            assert await ledgers.list(10_010, 3) == (
                [10_011, 25_000, 123_456_789_012],
                123_456_789_012,
            )
            assert await ledgers.list(25_000, 5) == ([123_456_789_012, 123_456_789_013], None)
            assert await ledgers.list(123_456_789_013, 5) == ([], None)
            assert [p async for p in LedgerStore(store).pages(100)] == [ids]
        finally:
            await store.stop()

    asyncio.run(main())
