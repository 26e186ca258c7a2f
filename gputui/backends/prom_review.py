"""What `gputui check` asks Prometheus beyond a refresh: GPU memory growth per pod over a window, and
the alert rules loaded (its rules API). Two or three requests per check run, each with the source's
timeout; a failure makes that part unknown with its reason, never a pass."""

from __future__ import annotations

from typing import Any

from gputui.backends.base import BackendError
from gputui.backends.prom import PromSource, finite
from gputui.backends.prom_fault_fields import read_fault_fields
from gputui.base.errors import first_line
from gputui.policy.node_pools import IdleReading
from gputui.vocabulary.check_facts import AlertRule, CheckFacts
from gputui.vocabulary.gpu_metrics import BY_NAME

FB_USED = BY_NAME["mem_used_mib"].dcgm
# Which labels name the pod holding a GPU, most specific first: with honor_labels off the exporter's own
# pod is `pod` and the GPU's is `exported_pod`; older exporters say pod_name/pod_namespace.
POD_LABELS = (("exported_namespace", "exported_pod"), ("pod_namespace", "pod_name"), ("namespace", "pod"))
BY_POD = "sum by (" + ", ".join(label for pair in POD_LABELS for label in pair) + ")"


def growth_query(window_s: float) -> str:
    """MiB gained per pod over the window, only for GPUs whose series already existed at its start (a pod
    still loading its model would otherwise read as a leak)."""
    w = f"{int(window_s)}s"
    return f"{BY_POD} (delta({FB_USED}[{w}]) and ({FB_USED} offset {w}))"


ATTRIBUTED = " or ".join(f'{FB_USED}{{{pod}!=""}}' for _ns, pod in POD_LABELS)


def _pod_key(labels: dict[str, str]) -> str | None:
    for ns, pod in POD_LABELS:
        if labels.get(ns) and labels.get(pod):
            return f"{labels[ns]}/{labels[pod]}"
    return None


def memory_growth(prom: PromSource, window_s: float) -> tuple[dict[str, float] | None, str]:
    """(MiB gained per "namespace/pod", "") or (None, why it cannot be told)."""
    try:
        if not prom.query(f"count({ATTRIBUTED})"):
            return None, "DCGM series carry no pod label (turn on the exporter's Kubernetes pod mapping)"
        rows = prom.query(growth_query(window_s))
    except BackendError as exc:
        return None, str(exc)
    out: dict[str, float] = {}
    for row in rows:
        key = _pod_key(row.get("metric") or {})
        value = finite((row.get("value") or [None, None])[1])
        if key and value is not None:
            out[key] = out.get(key, 0.0) + value
    return out, ""


def alert_rules(prom: PromSource) -> tuple[tuple[AlertRule, ...] | None, str]:
    """Every alerting rule loaded, or (None, why not): Mimir and Cortex serve this API from their ruler,
    which may be elsewhere; a 404 says so rather than 'no rules'."""
    try:
        data = prom.api_get("/api/v1/rules", {"type": "alert"})
    except BackendError as exc:
        return None, str(exc)
    rules = []
    for group in data.get("groups") or []:
        for rule in group.get("rules") or []:
            if rule.get("type") != "alerting":
                continue
            alerts: list[Any] = rule.get("alerts") or []
            rules.append(AlertRule(
                name=str(rule.get("name", "")), group=str(group.get("name", "")), query=str(rule.get("query", "")),
                state=str(rule.get("state", "unknown")), health=str(rule.get("health", "unknown")),
                error=first_line(str(rule.get("lastError") or ""), 160),
                firing=sum(1 for a in alerts if isinstance(a, dict) and a.get("state") == "firing")))
    return tuple(rules), ""


def read_facts(prom: PromSource | None, window_s: float) -> CheckFacts:
    if prom is None:
        why = "no metrics source (give --prometheus)"
        return CheckFacts(window_s, memory_error=why, rules_error=why, fault_fields_error=why)
    growth, growth_error = memory_growth(prom, window_s)
    rules, rules_error = alert_rules(prom)
    fields, fields_error = read_fault_fields(prom)
    return CheckFacts(window_s, growth, growth_error, rules, rules_error, fault_fields=fields,
                      fault_fields_error=fields_error)



UTIL = BY_NAME["util_pct"].dcgm


MIG_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # a MIG instance's busy ratio (0-1): the util gauge is not served


def _held(pod: str) -> tuple[str, str]:
    """The series of GPUs a pod holds, by the exporter's pod label: whole cards, and MIG instances."""
    return f'{UTIL}{{{pod}!=""}}', f'{MIG_ACTIVE}{{GPU_I_ID!="",{pod}!=""}}'


def idle_gpus(prom: PromSource, window_s: float, below_pct: float) -> IdleReading | None:
    """Per node, the GPUs and MIG instances a pod holds (the exporter's pod mapping), and those whose mean
    utilisation over the window is below the threshold: allocated but idle. None when no series names a pod
    (attribution unavailable, never "none idle"); per node, pools.pool_rows compares what is attributed with
    what is allocated. Only a series held the whole window is judged: one that exists now and existed a window
    ago (the exporter's pod label makes a new series for each new holder). Otherwise a drain's replacements,
    minutes old and loading their weights, counted as idle over the hour, and the old holders' series, gone but
    still in the window, counted the same GPUs again. Two range-aggregating queries, asked on demand."""
    by_host = f"count by ({', '.join(prom.host_labels)})"
    attributed = _per_host(prom, prom.query(f"{by_host} ({' or '.join(s for _ns, pod in POD_LABELS for s in _held(pod))})"))
    if not attributed:
        return None
    w = f"{max(1, int(window_s))}s"
    idle = []
    for _ns, pod in POD_LABELS:
        card, mig = _held(pod)
        idle += [f"(avg_over_time({card}[{w}]) < {below_pct:g} and {card} and {card} offset {w})",
                 f"(avg_over_time({mig}[{w}]) * 100 < {below_pct:g} and {mig} and {mig} offset {w})"]
    return IdleReading(_per_host(prom, prom.query(f"{by_host} ({' or '.join(idle)})")), attributed)


def _per_host(prom: PromSource, rows: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in rows:
        host = prom._host(row.get("metric") or {})
        value = finite((row.get("value") or [None, None])[1])
        if host and value is not None:
            out[host] = out.get(host, 0) + int(value)
    return out
