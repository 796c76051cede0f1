"""The live gateways, as ZooKeeper knows them: one ephemeral ``/gateways/{host:port}``
per gateway process (services/zk/registration.py keeps it up), gone when the process's
session ends (a crash is seen within the session time-out).

A log's writer is named by its gateway's address (``LogMetadata.writer``); a gateway
that gets an append for a log written elsewhere forwards it while the writer's gateway
is live here, and may take the role once it is not (docs/logs.md, "Any gateway
appends"). ``GatewayDirectory`` watches the children and wakes whoever waits for one to
go.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from services.errors import NodeNotFound
from services.zk import paths as zkpaths
from services.zk.store import MetadataStore


@dataclass(frozen=True, slots=True)
class GatewayInfo:
    """What a gateway's registration says."""

    address: str
    scheme: str  # "http" or "https": how other gateways reach it
    draining: bool

    @classmethod
    def parse(cls, address: str, data: bytes) -> GatewayInfo:
        try:
            doc: Any = json.loads(data) if data else {}
        except ValueError:
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
        scheme = "https" if doc.get("scheme") == "https" else "http"
        return cls(address, scheme, doc.get("draining") is True)


class GatewayDirectory:
    """The addresses of the live gateways (``live``), kept by a children watch."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.live: frozenset[str] = frozenset()
        self.started = False
        self._gone: dict[str, asyncio.Future[None]] = {}  # by address, while it is live

    async def start(self) -> None:
        await self.store.ensure_path(zkpaths.GATEWAYS)
        await self.store.watch_children(zkpaths.GATEWAYS, self._on_children)
        self.started = True

    def _on_children(self, names: list[str]) -> None:
        self.live = frozenset(names)
        for address in [a for a in self._gone if a not in self.live]:
            future = self._gone.pop(address)
            if not future.done():
                future.set_result(None)

    def is_live(self, address: str) -> bool:
        return address in self.live

    def gone(self, address: str) -> asyncio.Future[None]:
        """A future done once ``address`` is no longer registered (done now if it is
        not), shared by all who wait for it."""
        future = self._gone.get(address)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            if address in self.live:
                self._gone[address] = future
            else:
                future.set_result(None)
        return future

    async def wait_gone(self, address: str, timeout_s: float) -> bool:
        """Until ``address`` is no longer registered (True), or ``timeout_s`` passed."""
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(self.gone(address))
        except TimeoutError:
            return False
        return True

    async def get(self, address: str) -> GatewayInfo | None:
        """The registration of ``address`` as stored now (None: not registered)."""
        try:
            found = await self.store.get(zkpaths.gateway(address))
        except NodeNotFound:
            return None
        return GatewayInfo.parse(address, found.data)

    async def all(self) -> list[GatewayInfo]:
        """Every registered gateway, by address."""
        names = await self.store.children(zkpaths.GATEWAYS)
        found = await self.store.get_many([zkpaths.gateway(name) for name in names])
        return [
            GatewayInfo.parse(name, item.data)
            for name, item in zip(names, found, strict=True)
            if item is not None
        ]
