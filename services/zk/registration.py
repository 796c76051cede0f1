"""A service's registration: an ephemeral znode kept alive (a bookie's
``/bookies/{id}``, a gateway's ``/gateways/{address}``).

One task owns the znode and reconciles it whenever something may have
changed: a session state change (LOST means the znode is gone; kazoo then
connects a new session and reports CONNECTED), a data watch on the znode
(deleted by someone), a change of the bookie's state (writable/read-only),
and a slow periodic check as a safety net. ``registered`` is true only
while the znode exists and belongs to this process's current session; the
bookie's ``/health`` is 503 otherwise.

A znode left by a previous incarnation of this service (killed before its
session expired) carries the same ``instance_id`` (a bookie's comes from its
data dir, whose lock proves that incarnation is dead), so it is replaced at
once instead of waiting for its session to time out; a znode of another
instance is waited out.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from services.errors import NodeExists, NodeNotFound
from services.zk.limits import REGISTRATION_RECHECK_INTERVAL_S, REGISTRATION_RETRY_DELAY_S
from services.zk.store import MetadataStore

log = logging.getLogger(__name__)


class Registration:
    """The znode ``path`` with ``data()`` (JSON holding ``instance_id``), kept alive
    for this process; ``refresh()`` after ``data()`` changed."""

    def __init__(
        self,
        store: MetadataStore,
        path: str,
        instance_id: str,
        data: Callable[[], dict[str, Any]],
        what: str,
    ):
        self.store = store
        self.path = path
        self.instance_id = instance_id
        self._data = data
        self.what = what  # "bookie", "gateway": in log lines
        self.registered = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._warned_owner: str | None = None

    def data(self) -> bytes:
        return json.dumps({**self._data(), "instance_id": self.instance_id}).encode()

    @property
    def started(self) -> bool:
        return self._task is not None

    async def start(self) -> None:
        """Start keeping the znode up; ``registered`` turns true once it is."""
        self.store.add_state_listener(self._on_session_state)
        self.store.watch_data(self.path, self._on_node)
        self._wake.set()
        self._task = asyncio.create_task(self._run(), name=f"{self.what}-registration")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self.registered = False

    def refresh(self) -> None:
        """``data()`` may have changed: write it."""
        self._wake.set()

    def _on_session_state(self, state: str) -> None:
        if state == "LOST":
            self.registered = False
        self._wake.set()

    def _on_node(self, value: Any) -> None:
        if value is None:
            self.registered = False
        self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(REGISTRATION_RECHECK_INTERVAL_S):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self._reconcile()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried until it works
                self.registered = False
                log.warning(
                    "%s registration failed, retrying",
                    self.what,
                    extra={"fields": {"error": repr(exc), "path": self.path}},
                )
                await asyncio.sleep(REGISTRATION_RETRY_DELAY_S)
                self._wake.set()

    async def _reconcile(self) -> None:
        """Make the znode exist, belong to our session and carry our current data."""
        if not self.store.connected:
            # CONNECTED wakes the task again once kazoo has a session.
            self.registered = False
            return
        client = self.store.client
        session = self.store.session_id
        found = await asyncio.to_thread(client.exists, self.path)
        data = self.data()
        if found is not None and found.ephemeralOwner == session:
            current, stat = await asyncio.to_thread(client.get, self.path)
            if current != data:
                await self.store.set(self.path, data, stat.version)
                log.info("%s registration updated", self.what)
            self.registered = True
            return
        if found is not None:
            current, stat = await asyncio.to_thread(client.get, self.path)
            try:
                owner = json.loads(current).get("instance_id")
            except (ValueError, AttributeError):
                owner = None
            if owner != self.instance_id:
                # Not ours to take: wait for it to go (the data watch wakes us).
                self.registered = False
                if owner != self._warned_owner:
                    self._warned_owner = owner
                    log.warning(
                        "%s is registered by another instance; waiting for it to go",
                        self.what,
                        extra={"fields": {"path": self.path, "other_instance": owner}},
                    )
                return
            try:
                await self.store.delete(self.path, stat.version)
            except NodeNotFound:
                pass
        try:
            await self.store.create(self.path, data, ephemeral=True)
        except NodeExists:
            self._wake.set()
            raise
        self.registered = True
        self._warned_owner = None
        log.info(
            "%s registered", self.what, extra={"fields": {"path": self.path, "session": session}}
        )
