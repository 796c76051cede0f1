"""The pauses of CPython's cyclic garbage collector, as a Prometheus histogram.

A collection stops the whole process: every request, every timer, every stream waits
for it. Its cost grows with the objects the process holds (a full collection walks all
of them), so a gateway holding thousands of waiting long polls and streams pauses for
hundreds of milliseconds at a time (benchmarks/README.md, "Many open things"). The
pauses are timed by one ``gc.callbacks`` hook per process, installed by the first
``register``; each service's registry exposes them as
``quire_<service>_gc_pause_seconds{generation}`` (docs/operations.md "Metrics").
"""

from __future__ import annotations

import bisect
import gc
import threading
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
GENERATIONS = (0, 1, 2)


class _Pauses:
    """Counts of collections by generation and bucket, and their summed seconds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts = {g: [0] * (len(BUCKETS) + 1) for g in GENERATIONS}
        self.sums = dict.fromkeys(GENERATIONS, 0.0)
        self._started: float | None = None

    def callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        started, self._started = self._started, None
        generation = info.get("generation")
        if started is None or generation not in self.sums:
            return
        took = time.perf_counter() - started
        with self.lock:
            self.counts[generation][bisect.bisect_left(BUCKETS, took)] += 1
            self.sums[generation] += took


_PAUSES = _Pauses()
_INSTALLED = threading.Lock()


class GcPauseCollector(Collector):
    def __init__(self, service: str) -> None:
        self.name = f"quire_{service}_gc_pause_seconds"

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(
            self.name,
            "Pauses of the process for CPython's cyclic garbage collection, by generation",
            labels=["generation"],
        )
        with _PAUSES.lock:
            counts = {g: list(c) for g, c in _PAUSES.counts.items()}
            sums = dict(_PAUSES.sums)
        for generation in GENERATIONS:
            cumulative, buckets = 0, []
            for bound, count in zip((*map(str, BUCKETS), "+Inf"), counts[generation], strict=True):
                cumulative += count
                buckets.append((bound, cumulative))
            family.add_metric([str(generation)], buckets, sums[generation])
        yield family


def register(registry: CollectorRegistry, service: str) -> None:
    """Expose the process's collection pauses in ``registry`` as ``service``'s."""
    with _INSTALLED:
        if _PAUSES.callback not in gc.callbacks:
            gc.callbacks.append(_PAUSES.callback)
    registry.register(GcPauseCollector(service))
