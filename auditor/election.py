"""The auditor election: one elected auditor, any number of standbys.

Each candidate creates an ephemeral sequential node ``/auditor/election/n_<seq>`` whose
data is its id (``host:port``); the lowest sequence is elected. A standby watches its
predecessor only (one-shot ``exists`` watch), so one vanishing node wakes one
candidate, and re-checks when it fires.

Session states (docs/style.md §8, kazoo recipe/lock.py): SUSPENDED means "do not assume
leadership": ``on_change(False)`` at once, so the work stops (the caller cancels
running audits). LOST means the node is gone with the session; once CONNECTED again
the candidate runs again with a new node. Leadership is only ever taken while the
session is CONNECTED, from a read that shows our node lowest, and ``confirm`` reads
again before each batch of writes, so two auditors never act at once: a leader whose
session expired fails that read (or sees a lower node) before it writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kazoo.protocol.states import KazooState

from auditor.limits import ELECTION_RECHECK_INTERVAL_S, ELECTION_RETRY_DELAY_S
from services.errors import NodeNotFound, QuireError
from services.zk import paths as zkpaths
from services.zk.store import MetadataStore
from services.zk.underreplication import ELECTION_PREFIX, UnderReplicationStore

log = logging.getLogger(__name__)


def _sequence(name: str) -> str:
    return name.rsplit("_", 1)[1]


class Election:
    def __init__(
        self,
        store: MetadataStore,
        underreplication: UnderReplicationStore,
        candidate_id: str,
        on_change: Callable[[bool], None],
    ) -> None:
        self.store = store
        self.underreplication = underreplication
        self.candidate_id = candidate_id
        self.on_change = on_change
        self.node: str | None = None  # our node's name under AUDITOR_ELECTION
        self.elected = False
        self._wake = asyncio.Event()
        store.add_state_listener(self._on_state)

    # ------------------------------------------------------------------ state

    def _on_state(self, state: str) -> None:
        if state != KazooState.CONNECTED:
            self._set(False)
        if state == KazooState.LOST:
            self.node = None  # gone with the session; a new one once CONNECTED
        self._wake.set()

    def _set(self, elected: bool) -> None:
        if elected and self.store.state != KazooState.CONNECTED:
            return  # a read answered just before the session was suspended
        if elected != self.elected:
            self.elected = elected
            log.info("auditor %s %s", self.candidate_id, "elected" if elected else "standing by")
            self.on_change(elected)

    # ------------------------------------------------------------------ loop

    async def run(self) -> None:
        """Take part in the election until cancelled."""
        try:
            while True:
                self._wake.clear()
                if self.store.state == KazooState.CONNECTED:
                    try:
                        await self._check()
                    except QuireError as exc:
                        log.warning("election check failed (%s); retrying", exc)
                        self._set(False)
                        await asyncio.sleep(ELECTION_RETRY_DELAY_S)
                        continue
                try:
                    async with asyncio.timeout(ELECTION_RECHECK_INTERVAL_S):
                        await self._wake.wait()
                except TimeoutError:
                    pass
        finally:
            self._set(False)

    async def _check(self) -> None:
        if self.node is None:
            await self._remove_own_stale_nodes()
            created = await self.store.create(
                f"{zkpaths.AUDITOR_ELECTION}/{ELECTION_PREFIX}",
                self.candidate_id.encode(),
                ephemeral=True,
                sequence=True,
            )
            self.node = created.rsplit("/", 1)[1]
            log.info("auditor %s runs for election as %s", self.candidate_id, self.node)
        names = await self._names()
        if self.node not in names:
            # Our node vanished (the session expired behind our back): run again.
            self.node = None
            self._set(False)
            self._wake.set()
            return
        index = names.index(self.node)
        if index == 0:
            self._set(True)
            return
        self._set(False)
        predecessor = f"{zkpaths.AUDITOR_ELECTION}/{names[index - 1]}"
        if not await self.store.exists_once(predecessor, self._wake.set):
            self._wake.set()

    async def _names(self) -> list[str]:
        try:
            names = await self.store.children(zkpaths.AUDITOR_ELECTION)
        except NodeNotFound:
            return []
        return sorted((n for n in names if n.startswith(ELECTION_PREFIX)), key=_sequence)

    async def _remove_own_stale_nodes(self) -> None:
        """A create whose answer was lost, or an earlier run of this auditor (same id),
        may have left a node of ours: it must not stand in for us."""
        for name, candidate in await self.underreplication.candidates():
            if candidate == self.candidate_id:
                try:
                    await self.store.delete(f"{zkpaths.AUDITOR_ELECTION}/{name}")
                except NodeNotFound:
                    pass

    # ------------------------------------------------------------------ guard

    async def confirm(self) -> bool:
        """Whether we are still elected, read from ZooKeeper now (session CONNECTED,
        our node the lowest): the guard before each batch of writes."""
        if not self.elected or self.node is None or self.store.state != KazooState.CONNECTED:
            return False
        try:
            names = await self._names()
        except QuireError:
            return False
        still = bool(names) and names[0] == self.node
        if not still:
            self._set(False)
            self._wake.set()
        return still and self.elected

    async def resign(self) -> None:
        """Leave the election (shutdown): delete our node so a standby takes over now."""
        node, self.node = self.node, None
        self._set(False)
        if node is not None and self.store.connected:
            try:
                await self.store.delete(f"{zkpaths.AUDITOR_ELECTION}/{node}")
            except QuireError:
                pass
