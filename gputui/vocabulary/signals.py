"""What an inference version's engines say about its health over a window: requests finished, the share that
ended in error, and the 95th-percentile end-to-end latency; a canary's gates compare them between versions.
A figure that cannot be read is None (unknown), never 0 or healthy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class VersionSignals:
    requests_per_s: float | None = None
    error_ratio: float | None = None  # of finished requests, those aborted (vLLM's finished_reason="abort")
    p95_latency_s: float | None = None
    pods_read: int = 0  # pods of the version whose series were found
    picker: PickerSignals | None = None  # an InferencePool version: what its endpoint picker reports


@dataclass(frozen=True, slots=True)
class PickerSignals:
    """An InferencePool's endpoint picker (EPP) on its pool: the pool-wide averages it schedules by and the
    ready pods it sees (inference_pool_* gauges, labelled name=<pool>). None: not reported."""

    kv_cache: float | None = None  # 0..1
    queue: float | None = None  # requests waiting, averaged over the pool's pods
    ready_pods: int | None = None


def quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Prometheus' histogram_quantile over cumulative bucket rates (le -> rate): linear within a bucket,
    the upper bound of the last finite one when it falls in +Inf, None without observations."""
    ordered = sorted(buckets.items())
    if not ordered or ordered[-1][1] <= 0:
        return None
    rank = q * ordered[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for le, count in ordered:
        if count >= rank:
            if le == float("inf"):
                return lower_bound
            if count == lower_count:
                return le
            return lower_bound + (le - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = le, count
    return lower_bound
