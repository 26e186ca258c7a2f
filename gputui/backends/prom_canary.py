"""A canary's gates from the engines' own metrics (vLLM, ../shared/reference/inference-routing.md): finished
requests by reason and the end-to-end latency histogram, two queries for the whole fleet, joined to
versions through the snapshot's pods (engines do not label their series with the version). A version behind
an InferencePool also gets what the pool's endpoint picker reports, one more query."""

from __future__ import annotations

import re
from collections import defaultdict

from gputui.backends.prom import PromSource, finite
from gputui.backends.session_metrics import engine_pod
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferenceService
from gputui.vocabulary.signals import PickerSignals, VersionSignals, quantile

BY_POD = "namespace, pod, exported_namespace, exported_pod"


def version_signals(prom: PromSource, snapshot: ClusterSnapshot, service: InferenceService,
                    window_s: float) -> dict[str, VersionSignals]:
    """Per version of the service; a version none of whose pods reported is all unknown. Raises BackendError
    when Prometheus cannot answer (the caller holds the canary: unknown is not a pass)."""
    w = f"{max(1, int(window_s))}s"
    finished = prom.query(f"sum by ({BY_POD}, finished_reason) (rate(vllm:request_success_total[{w}]))")
    buckets = prom.query(f"sum by ({BY_POD}, le) (rate(vllm:e2e_request_latency_seconds_bucket[{w}]))")
    version_of = {(p.namespace, p.name): v.name for v in service.versions for p in snapshot.pods_of(service, v.name)}
    done: dict[str, float] = defaultdict(float)
    errors: dict[str, float] = defaultdict(float)
    hist: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    pods: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for row in finished:
        labels = row.get("metric") or {}
        key = engine_pod(labels)
        value = finite((row.get("value") or [None, None])[1])
        if key not in version_of or value is None:
            continue
        version = version_of[key]
        pods[version].add(key)
        done[version] += value
        if labels.get("finished_reason") == "abort":
            errors[version] += value
    for row in buckets:
        labels = row.get("metric") or {}
        key = engine_pod(labels)
        value = finite((row.get("value") or [None, None])[1])
        try:
            le = float(labels.get("le", ""))
        except ValueError:
            continue
        if key in version_of and value is not None:
            hist[version_of[key]][le] += value
    pickers = picker_signals(prom, service)
    out = {}
    for v in service.versions:
        picker = pickers.get(v.backend) if v.pool else None
        if not pods[v.name]:
            out[v.name] = VersionSignals(picker=picker)
            continue
        rate = done[v.name]
        out[v.name] = VersionSignals(rate, errors[v.name] / rate if rate > 0 else None,
                                     quantile(0.95, hist[v.name]) if hist[v.name] else None, len(pods[v.name]),
                                     picker=picker)
    return out


PICKER_GAUGES = {"inference_pool_average_kv_cache_utilization": "kv_cache",
                 "inference_pool_average_queue_size": "queue", "inference_pool_ready_pods": "ready_pods"}


def picker_signals(prom: PromSource, service: InferenceService) -> dict[str, PickerSignals]:
    """Pool name -> what its EPP reports; a pool it does not report on is absent (unknown, not idle)."""
    names = sorted({v.backend for v in service.versions if v.pool and v.backend})
    if not names:
        return {}
    pattern = "|".join(re.escape(n) for n in names).replace("\\", "\\\\").replace('"', '\\"')
    rows = prom.query(f'{{__name__=~"{"|".join(PICKER_GAUGES)}", name=~"{pattern}"}}')
    found: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rows:
        labels = row.get("metric") or {}
        namespaces = [labels[k] for k in ("exported_namespace", "namespace") if k in labels]
        if namespaces and service.namespace not in namespaces:
            continue  # a pool of the same name in another namespace
        value = finite((row.get("value") or [None, None])[1])
        field = PICKER_GAUGES.get(labels.get("__name__", ""))
        if field and value is not None and value >= 0:
            found[labels.get("name", "")][field] = value
    return {name: PickerSignals(f.get("kv_cache"), f.get("queue"),
                                None if f.get("ready_pods") is None else int(f["ready_pods"]))
            for name, f in found.items()}

