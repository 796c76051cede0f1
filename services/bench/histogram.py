"""The latency histogram of the load generators: log buckets of 2 %, mergeable across
processes (``quire bench`` and benchmarks/)."""

from __future__ import annotations

import math

BUCKET_BASE = 1.02  # latency histogram resolution: 2 %


def bucket_of(latency_s: float) -> int:
    return int(math.log(max(latency_s, 1e-6) * 1e6, BUCKET_BASE))


def bucket_value_s(bucket: int) -> float:
    return BUCKET_BASE ** (bucket + 0.5) / 1e6


def percentile_s(histogram: dict[int, int], fraction: float) -> float:
    """The latency under which ``fraction`` of the samples fall (2 % resolution)."""
    total = sum(histogram.values())
    if total == 0:
        return 0.0
    rank = fraction * total
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= rank:
            return bucket_value_s(bucket)
    return bucket_value_s(max(histogram))


def merge_histograms(histograms: list[dict]) -> dict[int, int]:
    """Sum histograms (keys may be JSON strings)."""
    out: dict[int, int] = {}
    for histogram in histograms:
        for bucket, count in histogram.items():
            out[int(bucket)] = out.get(int(bucket), 0) + count
    return out
