"""The auditor's stale-mark clean-up against a real ZooKeeper: it holds the ledger's lock
while it deletes a mark, never deletes a lock it does not hold (issue 35 item 10), and
never deletes a mark changed since its audit began."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Sequence

from auditor.audit import FULL, LOCK_HOLDER, Audit, AuditView
from auditor.decisions import StoredView
from auditor.replicas import ReplicaChecker
from services.protocol.metadata import LedgerMetadata
from services.zk.ledger_store import LedgerStore, VersionedLedger
from services.zk.store import MetadataStore
from services.zk.underreplication import UnderReplicationStore
from tests.harness import renew_session

BOOKIES = ("127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183")


class SessionEndsDuringRead(LedgerStore):
    """The auditor's ledger reads; the first ``get`` ends the auditor's session on the
    server (its lock goes with it) and lets ``meanwhile`` run before answering."""

    def __init__(self, store: MetadataStore, connect_string: str, meanwhile: object) -> None:
        super().__init__(store)
        self.connect_string = connect_string
        self.meanwhile = meanwhile
        self.fired = False

    async def get(self, ledger_id: int) -> VersionedLedger:
        if not self.fired:
            self.fired = True
            await renew_session(self.store, self.connect_string)
            await self.meanwhile()  # type: ignore[operator]
        return await super().get(ledger_id)


def test_the_stale_mark_clean_up_never_deletes_a_workers_lock(zookeeper, zk_root) -> None:  # type: ignore[no-untyped-def]
    """The auditor takes a whole ledger's lock to clear its stale mark; its session ends
    before it deletes the mark and a worker takes the lock meanwhile. The auditor's
    release leaves the worker's lock in place (so no second worker can take the ledger)
    and, no longer holding the lock, it leaves the mark to the worker."""
    hosts = zookeeper.connect_string + zk_root

    async def main() -> None:
        auditor_store = MetadataStore(hosts, session_timeout_s=4)
        worker_store = MetadataStore(hosts, session_timeout_s=4)
        await auditor_store.start(10)
        await worker_store.start(10)
        try:
            auditor_marks = UnderReplicationStore(auditor_store)
            worker_marks = UnderReplicationStore(worker_store)
            await auditor_marks.ensure_paths()
            metadata = LedgerMetadata.new(9, BOOKIES, 2, 2, created_at=1)
            await LedgerStore(auditor_store).create(metadata)
            await auditor_marks.mark(9, [BOOKIES[0]], 1)
            taken: list[object] = []

            async def worker_takes_the_lock() -> None:
                taken.append(await worker_marks.try_lock(9, "worker-1", 2))

            ledgers = SessionEndsDuringRead(
                auditor_store, zookeeper.connect_string, worker_takes_the_lock
            )

            async def confirm() -> bool:
                return True

            audit = Audit(
                FULL,
                ledgers,
                auditor_marks,
                AuditView(frozenset(BOOKIES), frozenset(), frozenset()),
                confirm,
                None,
                4,
            )
            audit._marked_before = await audit._read_marks()  # as run() begins
            cleared = await audit._clear_one(metadata)
            assert ledgers.fired and taken and taken[0]
            locks = await worker_marks.locks()
            assert 9 in locks, "the auditor deleted the worker's lock"
            assert locks[9].worker == "worker-1" != LOCK_HOLDER
            assert not await worker_marks.try_lock(9, "worker-2", 3)  # still held
            assert cleared is False
            assert await worker_marks.get_mark(9) is not None  # the worker's to clear
        finally:
            await auditor_store.stop()
            await worker_store.stop()

    asyncio.run(main())


class MergeDuringCheck(ReplicaChecker):
    """A replica check that finds every ledger whole (the ledgers here have no settled
    span) while another auditor merges a newly lost bookie into the ledger's mark."""

    def __init__(self, meanwhile: Callable[[], Awaitable[None]]) -> None:
        self.skipped: set[str] = set()
        self.meanwhile = meanwhile

    async def check(
        self, ledgers: Sequence[LedgerMetadata], live: Collection[str]
    ) -> dict[int, dict[str, StoredView]]:
        await self.meanwhile()
        return {}


def test_the_stale_mark_clean_up_keeps_a_mark_merged_during_the_audit(zookeeper, zk_root) -> None:  # type: ignore[no-untyped-def]
    """The auditor deletes a stale mark only at the version it read when the audit began:
    a bookie merged into the mark meanwhile (another auditor marking a newly lost bookie;
    the merge keeps the first marked_at) keeps the mark, with both bookies, while a mark
    nobody touched during the audit is cleared."""
    hosts = zookeeper.connect_string + zk_root

    async def main() -> None:
        auditor_store = MetadataStore(hosts, session_timeout_s=4)
        other_store = MetadataStore(hosts, session_timeout_s=4)
        await auditor_store.start(10)
        await other_store.start(10)
        try:
            auditor_marks = UnderReplicationStore(auditor_store)
            other_marks = UnderReplicationStore(other_store)
            await auditor_marks.ensure_paths()
            ledgers = LedgerStore(auditor_store)
            for ledger_id in (9, 10):
                await ledgers.create(LedgerMetadata.new(ledger_id, BOOKIES, 2, 2, created_at=1))
                await auditor_marks.mark(ledger_id, [BOOKIES[0]], 1)  # long before the audit

            async def another_auditor_marks_a_lost_bookie() -> None:
                await other_marks.mark(9, [BOOKIES[1]], int(time.time() * 1000))

            async def confirm() -> bool:
                return True

            audit = Audit(
                FULL,
                ledgers,
                auditor_marks,
                AuditView(frozenset(BOOKIES), frozenset(), frozenset()),
                confirm,
                MergeDuringCheck(another_auditor_marks_a_lost_bookie),
                4,
            )
            report = await audit.run()
            merged = await other_marks.get_mark(9)
            assert merged is not None, "the auditor cleared a mark merged during its audit"
            assert merged.missing_bookies == tuple(sorted(BOOKIES[:2]))
            assert await other_marks.get_mark(10) is None  # untouched, whole: cleared
            assert report.cleared == 1
            assert await other_marks.locks() == {}  # every clean-up lock released
        finally:
            await auditor_store.stop()
            await other_store.stop()

    asyncio.run(main())
