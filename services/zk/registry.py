"""The gateway's view of the bookie registry (``/bookies`` in ZooKeeper).

A children watch keeps the set of registered bookies current; each bookie's
JSON (address, state, instance, rack) is read when it appears and re-read on
changes, so the writer knows which bookies are writable, on which racks
(placement, ensemble changes), and where each one is reached.

Bookies being decommissioned (a node under ``/decommission``, docs/api.md "Admin") are
never ``writable``: a children watch keeps that set current too, so no new ensemble
or ensemble change picks them. ``exclude`` applies a decommission this process just
requested at once, before its own watch reports the node.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from services.zk import paths as zkpaths
from services.zk.store import MetadataStore, Versioned
from services.zk.underreplication import UnderReplicationStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BookieInfo:
    bookie_id: str
    address: str
    state: str  # "writable" | "readonly"
    instance_id: str | None = None  # the bookie's cookie instance (new after a format)
    rack: str | None = None  # the rack it registered (--rack); None: the default rack


class BookieRegistry:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.bookies: dict[str, BookieInfo] = {}
        self._watched: set[str] = set()
        self._listeners: list[Callable[[], None]] = []
        self._ready = asyncio.Event()
        self._listed = False  # the children watch has answered
        self._setting: set[asyncio.Future[None]] = set()  # bookie watches being set
        # Bookie ids with a /decommission node, and those this process requested that
        # the watch has not reported yet.
        self.decommissioned: set[str] = set()
        self._excluded_early: set[str] = set()

    def add_listener(self, callback: Callable[[], None]) -> None:
        """``callback()`` on the loop whenever the set or a state changes."""
        self._listeners.append(callback)

    async def start(self) -> None:
        await self.store.ensure_path(zkpaths.BOOKIES)
        await self.store.ensure_path(zkpaths.DECOMMISSION)
        UnderReplicationStore(self.store).watch_decommissions(self._on_decommissions)
        self.store.watch_children(zkpaths.BOOKIES, self._on_children)
        async with asyncio.timeout(30):
            await self._ready.wait()

    @property
    def writable(self) -> list[str]:
        """Registered writable bookies that are not being (or were not) decommissioned."""
        excluded = self.decommissioned | self._excluded_early
        return sorted(
            b for b, info in self.bookies.items() if info.state == "writable" and b not in excluded
        )

    @property
    def racks(self) -> dict[str, str | None]:
        """Every registered bookie and its rack (None: it registered none)."""
        return {b: info.rack for b, info in self.bookies.items()}

    @property
    def instances(self) -> dict[str, str | None]:
        """Every registered bookie and its instance id (None: it registered none)."""
        return {b: info.instance_id for b, info in self.bookies.items()}

    def exclude(self, bookie_id: str) -> None:
        """Leave ``bookie_id`` out of ``writable`` from now on (its decommission was just
        requested; the watch confirms it)."""
        self._excluded_early.add(bookie_id)
        self._notify()

    def _on_decommissions(self, children: list[str]) -> None:
        self.decommissioned = set(children)
        self._excluded_early -= self.decommissioned
        self._notify()

    def address_of(self, bookie_id: str) -> str:
        info = self.bookies.get(bookie_id)
        return info.address if info else bookie_id

    def instance_of(self, bookie_id: str) -> str | None:
        """The instance id the bookie registered with (None: not registered or unknown)."""
        info = self.bookies.get(bookie_id)
        return info.instance_id if info else None

    def _on_children(self, children: list[str]) -> None:
        current = set(children)
        for gone in set(self.bookies) - current:
            del self.bookies[gone]
        for child in current - self._watched:
            # A DataWatch lives on after its node is deleted and fires again when the
            # bookie re-registers, so each bookie is watched once.
            self._watched.add(child)
            setting = self.store.watch_data(zkpaths.bookie(child), self._data_callback(child))
            self._setting.add(setting)
            setting.add_done_callback(self._watch_set)
        self._listed = True
        self._check_ready()
        self._notify()

    def _watch_set(self, setting: asyncio.Future[None]) -> None:
        self._setting.discard(setting)
        self._check_ready()

    def _check_ready(self) -> None:
        """Ready (``start`` returns) once the bookies listed first have been read too."""
        if self._listed and not self._setting:
            self._ready.set()

    def _data_callback(self, bookie_id: str) -> Callable[[Versioned | None], None]:
        def on_data(node: Versioned | None) -> None:
            if node is None:
                self.bookies.pop(bookie_id, None)
            else:
                try:
                    doc = json.loads(node.data)
                    address = (
                        str(doc.get("address") or bookie_id)
                        .removeprefix("https://")
                        .removeprefix("http://")
                    )
                    state = str(doc.get("state") or "writable")
                    instance = doc.get("instance_id")
                    instance = str(instance) if instance else None
                    rack = doc.get("rack")
                    rack = str(rack) if rack else None
                except (ValueError, AttributeError):
                    address, state, instance, rack = bookie_id, "writable", None, None
                self.bookies[bookie_id] = BookieInfo(bookie_id, address, state, instance, rack)
            self._notify()

        return on_data

    def _notify(self) -> None:
        for callback in self._listeners:
            try:
                callback()
            except Exception:  # noqa: BLE001 - one listener must not break the others
                log.exception("bookie registry listener failed")
