"""ZooKeeper session metrics, the same two in every service that uses ZooKeeper.

``quire_<service>_zookeeper_connected`` is 1 while the service's session is
CONNECTED and 0 while it is SUSPENDED, LOST or not started; it is read from the
client at scrape time, so it is never stale. ``quire_<service>_zookeeper_session_
events_total{state}`` counts the session's state changes (``connected``,
``suspended``, ``lost``): a rising ``suspended`` or ``lost`` count is a flapping
link or expiring sessions even when every scrape happens to see it connected.

A service may build more than one ``MetadataStore`` over its life (a bookie makes
one per connection attempt); ``watch`` each before starting it, and the gauge
follows the last one watched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

SESSION_STATES = ("connected", "suspended", "lost")


class SessionSource(Protocol):
    """What is watched: ``services.zk.store.MetadataStore`` (or a test's fake)."""

    @property
    def connected(self) -> bool: ...

    def add_state_listener(self, callback: Callable[[str], None]) -> None: ...


class ZooKeeperMetrics:
    def __init__(self, registry: CollectorRegistry, service: str) -> None:
        self._store: SessionSource | None = None
        self.connected = Gauge(
            f"quire_{service}_zookeeper_connected",
            "1 while this process's ZooKeeper session is connected, else 0",
            registry=registry,
        )
        self.connected.set_function(self._connected)
        self.session_events = Counter(
            f"quire_{service}_zookeeper_session_events_total",
            "ZooKeeper session state changes seen, by the state entered",
            ["state"],
            registry=registry,
        )
        for state in SESSION_STATES:  # every series exists from the start (rate() works)
            self.session_events.labels(state)

    def watch(self, store: SessionSource) -> None:
        """Follow ``store``'s session from now on (call before ``store.start``)."""
        self._store = store
        store.add_state_listener(self._on_state)

    def _on_state(self, state: str) -> None:
        name = str(state).lower()
        if name in SESSION_STATES:
            self.session_events.labels(name).inc()

    def _connected(self) -> float:
        store = self._store
        return 1.0 if store is not None and store.connected else 0.0
