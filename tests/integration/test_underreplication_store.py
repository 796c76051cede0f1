"""UnderReplicationStore over a real ZooKeeper: marks merged by CAS, clearing guarded by
the version read, marks walked in id order, ephemeral locks, election order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from services.errors import MetadataUnavailable
from services.zk import paths as zkpaths
from services.zk.store import MetadataStore
from services.zk.underreplication import (
    DECOMMISSIONED,
    DECOMMISSIONING,
    LockInfo,
    UnderReplicationStore,
)
from tests.harness import renew_session


def _run(zookeeper, zk_root, body: Callable[[UnderReplicationStore], Awaitable[None]]) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        store = MetadataStore(zookeeper.connect_string + zk_root, session_timeout_s=4)
        await store.start(10)
        try:
            urs = UnderReplicationStore(store)
            await urs.ensure_paths()
            await body(urs)
        finally:
            await store.stop()

    asyncio.run(main())


def test_marks_merge_missing_bookies_by_cas(zookeeper, zk_root) -> None:  # type: ignore[no-untyped-def]
    """Marking a marked ledger adds the new bookies and keeps the first marked_at; marking
    concurrently from many tasks loses no bookie."""

    async def body(urs: UnderReplicationStore) -> None:
        first = await urs.mark(7, ["b1:1"], 1000)
        assert first.missing_bookies == ("b1:1",)
        merged = await urs.mark(7, ["b2:2"], 2000)
        assert merged.missing_bookies == ("b1:1", "b2:2")
        assert merged.marked_at == 1000
        same = await urs.mark(7, ["b2:2"], 3000)
        assert same.version == merged.version  # nothing new: nothing written
        await asyncio.gather(*(urs.mark(8, [f"c{i}:1"], 10) for i in range(12)))
        mark = await urs.get_mark(8)
        assert mark is not None and mark.missing_bookies == tuple(
            sorted(f"c{i}:1" for i in range(12))
        )

    _run(zookeeper, zk_root, body)


def test_clear_with_a_stale_version_fails(zookeeper, zk_root) -> None:  # type: ignore[no-untyped-def]
    """A mark changed since it was read (a bookie added) is not deleted by a clear at the
    version read; at the current version it is, and clearing a missing mark is fine."""

    async def body(urs: UnderReplicationStore) -> None:
        read = await urs.mark(5, ["b1:1"], 1)
        await urs.mark(5, ["b2:2"], 2)
        assert await urs.clear_mark(5, read.version) is False
        current = await urs.get_mark(5)
        assert current is not None and current.missing_bookies == ("b1:1", "b2:2")
        assert await urs.clear_mark(5, current.version) is True
        assert await urs.get_mark(5) is None
        assert await urs.clear_mark(5) is True

    _run(zookeeper, zk_root, body)


def test_clear_guarded_by_the_ledger_version(zookeeper, zk_root) -> None:  # type: ignore[no-untyped-def]
    """A clear guarded by the ledger's metadata version deletes nothing once the metadata
    moved on (the repair planned on older metadata), nor for a ledger deleted since; at
    the current version it deletes the mark, and a mark already gone is fine."""

    async def body(urs: UnderReplicationStore) -> None:
        store, path = urs.store, zkpaths.ledger(5)
        await store.create(path, b"{}")
        moved = await store.set(path, b"{}", 0)
        mark = await urs.mark(5, ["b1:1"], 1)
        assert await urs.clear_mark(5, mark.version, ledger_version=0) is False
        assert await urs.get_mark(5) is not None
        assert await urs.clear_mark(5, mark.version, ledger_version=moved) is True
        assert await urs.get_mark(5) is None
        assert await urs.clear_mark(5, mark.version, ledger_version=moved) is True
        await urs.mark(6, ["b1:1"], 1)
        assert await urs.clear_mark(6, ledger_version=0) is False  # no ledger 6

    _run(zookeeper, zk_root, body)


def test_marks_are_walked_in_id_order(zookeeper, zk_root) -> None:  # type: ignore[no-untyped-def]
    """Marks spread over the hierarchy come back ascending, paged by ``after``; the count
    is the number of marks now."""

    async def body(urs: UnderReplicationStore) -> None:
        ids = [3, 10_000, 1, (1 << 40) + 5, 99_999_999, 2]
        for lid in ids:
            await urs.mark(lid, ["b:1"], 1)
        assert await urs.marked() == sorted(ids)
        assert await urs.marked(after=3, limit=2) == [10_000, 99_999_999]
        assert await urs.count() == len(ids)
        await urs.clear_mark(10_000)
        assert await urs.count() == len(ids) - 1

    _run(zookeeper, zk_root, body)


def test_locks_are_ephemeral(zookeeper, zk_root) -> None:  # type: ignore[no-untyped-def]
    """A lock is exclusive, and a closed session frees it (a dead worker's lock)."""

    async def main() -> None:
        one = MetadataStore(zookeeper.connect_string + zk_root, session_timeout_s=4)
        two = MetadataStore(zookeeper.connect_string + zk_root, session_timeout_s=4)
        await one.start(10)
        await two.start(10)
        try:
            a, b = UnderReplicationStore(one), UnderReplicationStore(two)
            await a.ensure_paths()
            assert await a.try_lock(42, "w1", 1) == one.session_id
            assert await b.try_lock(42, "w2", 2) is None
            assert (await b.locks())[42].worker == "w1"
            await one.stop()
            assert await b.try_lock(42, "w2", 3) == two.session_id
            assert (await b.locks())[42].worker == "w2"
        finally:
            await one.stop()
            await two.stop()

    asyncio.run(main())


def test_election_order_is_the_sequence_order(zookeeper, zk_root) -> None:  # type: ignore[no-untyped-def]
    """Candidates come back lowest sequence first; the lowest one is the auditor id, and
    when its node goes the next one is."""

    async def body(urs: UnderReplicationStore) -> None:
        store = urs.store
        assert await urs.auditor_id() is None
        created = []
        for name in ("a:1", "b:2", "c:3"):
            created.append(
                await store.create(
                    f"{zkpaths.AUDITOR_ELECTION}/n_", name.encode(), ephemeral=True, sequence=True
                )
            )
        assert [cid for _, cid in await urs.candidates()] == ["a:1", "b:2", "c:3"]
        assert await urs.auditor_id() == "a:1"
        await store.delete(created[0])
        assert await urs.auditor_id() == "b:2"

    _run(zookeeper, zk_root, body)


def test_decommission_states(zookeeper, zk_root) -> None:  # type: ignore[no-untyped-def]
    """A decommission request is idempotent and moves to decommissioned once."""

    async def body(urs: UnderReplicationStore) -> None:
        await urs.request_decommission("b:1", 5)
        await urs.request_decommission("b:1", 6)
        assert await urs.decommissions() == {"b:1": DECOMMISSIONING}
        await urs.set_decommissioned("b:1")
        await urs.request_decommission("b:1", 7)
        assert await urs.decommissions() == {"b:1": DECOMMISSIONED}

    _run(zookeeper, zk_root, body)


def test_a_lock_whose_create_answered_connection_loss_is_ours(zookeeper, zk_root) -> None:  # type: ignore[no-untyped-def]
    """A try_lock whose create landed but answered ConnectionLoss holds the lock (its owner
    is this session): it neither fails nor leaks a lock that every later try_lock, this
    worker's included, would see as another's; the release frees it for others."""

    async def main() -> None:
        one = MetadataStore(zookeeper.connect_string + zk_root, session_timeout_s=4)
        two = MetadataStore(zookeeper.connect_string + zk_root, session_timeout_s=4)
        await one.start(10)
        await two.start(10)
        try:
            a, b = UnderReplicationStore(one), UnderReplicationStore(two)
            await a.ensure_paths()
            create = one.create

            async def landed_then_lost(path: str, data: bytes = b"", **kw: bool) -> str:
                await create(path, data, **kw)
                raise MetadataUnavailable(f"ZooKeeper unavailable (ConnectionLoss) at {path}")

            one.create = landed_then_lost  # type: ignore[method-assign]
            holder = await a.try_lock(42, "w1", 1)
            one.create = create  # type: ignore[method-assign]
            assert holder == one.session_id
            assert await a.try_lock(42, "w1", 2) == holder  # asked again: still ours
            assert await b.try_lock(42, "w2", 3) is None
            assert (await b.locks())[42].worker == "w1"
            assert await a.unlock(42, holder) is True
            assert await b.try_lock(42, "w2", 4) == two.session_id
        finally:
            await one.stop()
            await two.stop()

    asyncio.run(main())


def test_a_release_never_deletes_a_lock_taken_since_the_session_ended(zookeeper, zk_root) -> None:  # type: ignore[no-untyped-def]
    """Releasing deletes a lock only while the session that took it owns it: once that
    session has ended (its lock went with it) and another worker has taken the ledger's
    lock, the late release leaves that worker's lock alone, as does an update."""

    async def main() -> None:
        one = MetadataStore(zookeeper.connect_string + zk_root, session_timeout_s=4)
        two = MetadataStore(zookeeper.connect_string + zk_root, session_timeout_s=4)
        await one.start(10)
        await two.start(10)
        try:
            a, b = UnderReplicationStore(one), UnderReplicationStore(two)
            await a.ensure_paths()
            holder = await a.try_lock(7, "auditor", 1)
            assert holder is not None
            await renew_session(one, zookeeper.connect_string)
            taken = await b.try_lock(7, "w2", 2)
            assert taken is not None
            assert await a.unlock(7, holder) is True  # gone with its session: nothing to do
            await a.update_lock(LockInfo(7, "auditor", 1, {"entries_copied": 1}), holder)
            lock = (await b.locks())[7]
            assert (lock.worker, lock.progress) == ("w2", {})
            assert await b.holds(7, taken) and not await a.holds(7, holder)
        finally:
            await one.stop()
            await two.stop()

    asyncio.run(main())
