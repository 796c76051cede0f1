"""The pauses of CPython's cyclic garbage collector, as a Prometheus histogram.

A collection stops the whole process: every request, every timer, every stream waits
for it. Its cost grows with the objects the process holds (a full collection walks all
of them), so a gateway holding thousands of waiting long polls and streams pauses for
hundreds of milliseconds at a time (benchmarks/README.md, "Many open things"). The
pauses are timed by one ``gc.callbacks`` hook per process, installed by the first
``register``; each service's registry exposes them as
``quire_<service>_gc_pause_seconds{generation}`` (docs/operations.md "Metrics").

Survivors kept frozen (``keep_survivors_frozen``, the services' ``--gc-thorough-interval-s``).
A full collection runs each time a quarter as many objects again as survived the last
one have reached the oldest generation; a gateway's waiting long polls live 30 s, long
enough to get there, so beside 10,000 tailing readers it ran one every 10-40 s, each
pausing the process for 1-1.7 s (benchmarks/README.md, "Many open things"). After each
full collection its survivors are therefore frozen (``gc.freeze``: moved where no
collection looks), so the next one walks only what was made since. Cycles among frozen
objects that die later are not freed then, so every ``interval`` the frozen objects are
thawed (``gc.unfreeze``) and the next full collection walks everything, frees them, and
freezes again: one long pause an interval instead of one every few seconds, and cyclic
garbage kept at most about that long. Objects freed by their reference count (most of
them) are freed at once either way. The frozen count is exposed as
``quire_<service>_gc_frozen_objects``.
"""

from __future__ import annotations

import bisect
import gc
import threading
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
GENERATIONS = (0, 1, 2)


class _Pauses:
    """Counts of collections by generation and bucket, and their summed seconds.

    No lock: the collector runs one collection at a time, so its callbacks never race
    each other, and a scrape that copies the counts while a collection ends at worst
    reads one collection's count without its time. (A lock deadlocked: a scrape
    allocating while it held it could start a collection whose callback, in the same
    thread, waited for it.)"""

    def __init__(self) -> None:
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
        self.counts[generation][bisect.bisect_left(BUCKETS, took)] += 1
        self.sums[generation] += took


class _Freezer:
    """Freezes the survivors of each full collection, and thaws them every
    ``interval_s`` so that the next full collection is thorough (module docstring)."""

    def __init__(self) -> None:
        self.interval_s = 0.0
        self.thorough_due = 0.0
        self.thawed = False

    def enable(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.thorough_due = time.monotonic() + interval_s
        self.thawed = False

    def callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info.get("generation") != 2 or self.interval_s <= 0:
            return
        now = time.monotonic()
        if self.thawed:  # this one walked every object: a new interval starts
            self.thawed = False
            self.thorough_due = now + self.interval_s
        elif now >= self.thorough_due:
            gc.unfreeze()  # into the oldest generation: the next full one walks them
            self.thawed = True
            return
        gc.freeze()  # the survivors, all in the oldest generation now


_PAUSES = _Pauses()
_FREEZER = _Freezer()
_INSTALLED = threading.Lock()


def keep_survivors_frozen(interval_s: float) -> None:
    """Freeze the survivors of every full collection, with a thorough one every
    ``interval_s`` (0: leave CPython's collector as it is). Once per process; a service
    calls it when it has started."""
    with _INSTALLED:
        _FREEZER.enable(interval_s)
        if interval_s > 0 and _FREEZER.callback not in gc.callbacks:
            gc.callbacks.append(_FREEZER.callback)


class GcPauseCollector(Collector):
    def __init__(self, service: str) -> None:
        self.name = f"quire_{service}_gc_pause_seconds"
        self.frozen_name = f"quire_{service}_gc_frozen_objects"

    def collect(self) -> Iterator[HistogramMetricFamily | GaugeMetricFamily]:
        family = HistogramMetricFamily(
            self.name,
            "Pauses of the process for CPython's cyclic garbage collection, by generation",
            labels=["generation"],
        )
        counts = {g: list(c) for g, c in _PAUSES.counts.items()}
        sums = dict(_PAUSES.sums)
        for generation in GENERATIONS:
            cumulative, buckets = 0, []
            for bound, count in zip((*map(str, BUCKETS), "+Inf"), counts[generation], strict=True):
                cumulative += count
                buckets.append((bound, cumulative))
            family.add_metric([str(generation)], buckets, sums[generation])
        yield family
        yield GaugeMetricFamily(
            self.frozen_name,
            "Objects the garbage collector leaves alone (frozen after start-up and after "
            "full collections)",
            value=gc.get_freeze_count(),
        )


def register(registry: CollectorRegistry, service: str) -> None:
    """Expose the process's collection pauses in ``registry`` as ``service``'s."""
    with _INSTALLED:
        if _PAUSES.callback not in gc.callbacks:
            gc.callbacks.append(_PAUSES.callback)
    registry.register(GcPauseCollector(service))
