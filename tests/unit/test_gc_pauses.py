"""The collector's pauses are timed and exposed per generation (services/gc_pauses.py)."""

from __future__ import annotations

import gc

from prometheus_client import CollectorRegistry

from services import gc_pauses


def count_and_sum(registry: CollectorRegistry, generation: str) -> tuple[float, float]:
    labels = {"generation": generation}
    count = registry.get_sample_value("quire_gateway_gc_pause_seconds_count", labels)
    total = registry.get_sample_value("quire_gateway_gc_pause_seconds_sum", labels)
    assert count is not None and total is not None
    return count, total


def test_each_full_collection_is_counted_with_its_time() -> None:
    """Three full collections add three pauses of generation 2, each timed; the buckets
    are cumulative and end at the count; registering twice installs one hook."""
    registry = CollectorRegistry()
    gc_pauses.register(registry, "gateway")
    gc_pauses.register(CollectorRegistry(), "bookie")
    assert gc.callbacks.count(gc_pauses._PAUSES.callback) == 1
    count, total = count_and_sum(registry, "2")
    garbage = [[] for _ in range(10_000)]
    for item in garbage:
        item.append(item)  # cycles: only the collector frees them
    del garbage, item
    for _ in range(3):
        gc.collect()
    after, after_total = count_and_sum(registry, "2")
    assert after == count + 3 and after_total > total
    buckets = [
        registry.get_sample_value(
            "quire_gateway_gc_pause_seconds_bucket", {"generation": "2", "le": le}
        )
        for le in (*map(str, gc_pauses.BUCKETS), "+Inf")
    ]
    assert buckets == sorted(buckets) and buckets[-1] == after
