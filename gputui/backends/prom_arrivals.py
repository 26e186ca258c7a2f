"""How fast new sessions reach each pod, from its engine's request counters (vLLM's, as the canary reads them:
../shared/reference/inference-routing.md): finished requests per second and their mean end-to-end time, over a
window. In a steady state requests finish as fast as they arrive, and the mean time a pod holds one is its
histogram's sum over its count; the two give how many it will still hold later (Little's law)."""

from __future__ import annotations

import re
from collections.abc import Collection

from gputui.backends.prom import PromSource, finite
from gputui.backends.session_metrics import engine_pod
from gputui.vocabulary.model import InferencePod
from gputui.vocabulary.sessions import Arrivals

BY_POD = "namespace, pod, exported_namespace, exported_pod"


def arrivals(prom: PromSource, pods: Collection[InferencePod], window_s: float) -> dict[str, Arrivals]:
    """Per pod ("namespace/name"); a pod no counter names is absent (unknown, never zero). Raises BackendError
    when Prometheus cannot answer."""
    if not pods:
        return {}
    w = f"{max(60, int(window_s))}s"  # four scrapes at 15 s: a shorter rate() may have no answer
    names = "|".join(re.escape(p.name) for p in pods).replace("\\", "\\\\")
    narrow = f'{{pod=~"{names}"}}'
    rows = {
        part: prom.query(f"sum by ({BY_POD}) (rate({metric}{narrow}[{w}]))")
        for part, metric in (("rate", "vllm:request_success_total"), ("sum", "vllm:e2e_request_latency_seconds_sum"),
                             ("count", "vllm:e2e_request_latency_seconds_count"))
    }
    read: dict[str, dict[str, float]] = {}
    for part, answer in rows.items():
        for row in answer:
            pod = engine_pod(row.get("metric") or {})
            value = finite((row.get("value") or [None, None])[1])
            if pod is not None and value is not None:
                read.setdefault(f"{pod[0]}/{pod[1]}", {})[part] = value
    wanted = {p.key for p in pods}
    out = {}
    for key, parts in read.items():
        if key not in wanted or "rate" not in parts:
            continue
        count = parts.get("count")
        mean = parts["sum"] / count if count and "sum" in parts else None
        out[key] = Arrivals(parts["rate"], mean)
    return out
