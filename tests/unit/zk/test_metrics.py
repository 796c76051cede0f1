"""ZooKeeper session metrics: the gauge follows the watched store's session at scrape
time, and state changes are counted by the state entered."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry

from services.zk.metrics import ZooKeeperMetrics


class FakeStore:
    def __init__(self) -> None:
        self.connected = False
        self.listeners: list[Callable[[str], None]] = []

    def add_state_listener(self, callback: Callable[[str], None]) -> None:
        self.listeners.append(callback)

    def enter(self, state: str) -> None:
        self.connected = state == "CONNECTED"
        for callback in self.listeners:
            callback(state)


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    assert found is not None, f"{name} {labels} is not exposed"
    return found


def test_connected_gauge_follows_the_last_store_watched() -> None:
    """0 before any store, then the watched store's state at each read; a newer store
    (a bookie's next connection attempt) replaces the older one."""
    registry = CollectorRegistry()
    metrics = ZooKeeperMetrics(registry, "bookie")
    assert value(registry, "quire_bookie_zookeeper_connected") == 0
    first = FakeStore()
    metrics.watch(first)
    first.enter("CONNECTED")
    assert value(registry, "quire_bookie_zookeeper_connected") == 1
    first.enter("SUSPENDED")
    assert value(registry, "quire_bookie_zookeeper_connected") == 0
    second = FakeStore()
    metrics.watch(second)
    first.enter("CONNECTED")
    assert value(registry, "quire_bookie_zookeeper_connected") == 0
    second.enter("CONNECTED")
    assert value(registry, "quire_bookie_zookeeper_connected") == 1


def test_session_events_are_counted_by_state() -> None:
    """Every state has a series from the start (0); each change counts once."""
    registry = CollectorRegistry()
    metrics = ZooKeeperMetrics(registry, "gateway")
    events = "quire_gateway_zookeeper_session_events_total"
    for state in ("connected", "suspended", "lost"):
        assert value(registry, events, state=state) == 0
    store = FakeStore()
    metrics.watch(store)
    for state in ("CONNECTED", "SUSPENDED", "CONNECTED", "LOST", "CONNECTED"):
        store.enter(state)
    assert value(registry, events, state="connected") == 3
    assert value(registry, events, state="suspended") == 1
    assert value(registry, events, state="lost") == 1
