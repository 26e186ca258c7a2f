"""The demo's answers from its metrics store: to `gputui check` (GPU memory growth per pod, one mistral pod
leaking; the alert rules a typical cluster loads, XID and temperature but nothing on GPU memory, firing
where the simulation's own state says they would), to a canary's gates (each version's requests, error
ratio and p95 latency: every demo version is healthy) and to a drain plan (how fast new sessions reach each
pod, from its engine's finished requests, as backends.prom_arrivals reads vLLM's counters)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from gputui.policy.node_pools import IdleReading
from gputui.vocabulary.check_facts import AlertRule, CheckFacts
from gputui.vocabulary.gpu_faults import PCIE_REPLAY_FIELD, THROTTLE_FIELD, XID_FIELD
from gputui.vocabulary.gpu_metrics import BY_NAME
from gputui.vocabulary.model import InferencePod, InferenceService
from gputui.vocabulary.sessions import Arrivals
from gputui.vocabulary.signals import VersionSignals

if TYPE_CHECKING:
    from gputui.backends.demo.simulation import Simulation

LEAK_MIB_PER_HOUR = 6144.0  # the planted leak: a pod whose KV cache is never given back
LEAKING = ("llm", "mistral-7b", "stable")
HOT_C = 85.0


def _leaker(sim: Simulation) -> str | None:
    pods = sorted(key for key, p in sim._pods.items() if (p.namespace, p.service, p.version) == LEAKING
                  and p.deleting_at is None and p.node)
    return pods[0] if pods else None


def check_facts(sim: Simulation, window_s: float) -> CheckFacts:
    t = sim._t
    growth: dict[str, float] = {}
    for key, p in sim._pods.items():
        # Pods placed at the start stand for a cluster that has run for long; a replacement must have
        # lived through the whole window (the store keeps no series older than the pod).
        spans = p.ready_at <= sim._began or t - p.ready_at >= window_s
        if p.gpu_request and p.node and p.deleting_at is None and p.phase == "Running" and spans:
            growth[key] = 0.0
    leaker = _leaker(sim)
    if leaker in growth:
        growth[leaker] = LEAK_MIB_PER_HOUR * window_s / 3600
    xids = sum(len(n.bad_gpus) + len(n.gpu_xids) for n in sim._nodes.values() if n.ready)
    # the planted blocked air intake and failed fan
    hot = sum(1 for n in sim._nodes.values() if n.ready and n.temp_offset > 0)
    rules = (
        AlertRule("GPUXidError", "gpu.rules", "max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0",
                  "firing" if xids else "inactive", firing=xids),
        AlertRule("GPUTemperatureHigh", "gpu.rules", f"max by (Hostname) ({BY_NAME['temp_c'].dcgm}) > {HOT_C:g}",
                  "firing" if hot else "inactive", firing=hot),
        AlertRule("InferenceQueueBacklog", "inference.rules", "sum by (pod) (vllm:num_requests_waiting) > 50",
                  "inactive"),
    )
    return CheckFacts(window_s, memory_growth_mib=growth, alert_rules=rules, fault_fields=_fault_series(sim))


_AS_SERIES = {"throttle_reasons": THROTTLE_FIELD, "pcie_replays": PCIE_REPLAY_FIELD}


def _fault_series(sim: Simulation) -> dict[str, int]:
    """The fault series the demo's store holds, by how many nodes serve each (Simulation._fault_fields: no ECC,
    NVLink or PCIe replay field; the clock event reasons on one node); a node that is down serves nothing."""
    counts: dict[str, int] = {}
    for node in sim._nodes.values():
        if not node.ready:
            continue
        served = {XID_FIELD}
        for i in range(node.product.count):
            if i not in node.bad_gpus:  # a GPU fallen off the bus serves its XID alone
                served.update(_AS_SERIES.get(k, k) for k in sim._fault_fields(node, i, 0.0))
        for name in served:
            counts[name] = counts.get(name, 0) + 1
    return counts


ERROR_RATIO = 0.002  # engines abort a few requests (clients going away)


def version_signals(sim: Simulation, service: InferenceService, window_s: float) -> dict[str, VersionSignals]:
    svc = sim._services.get(service.key)
    out = {}
    for v in service.versions:
        ready = [p for p in sim._version_pods(svc, v.name) if p.ready(sim._t)] if svc else []
        share = (service.share_pct(v.name) or 0.0) / 100
        if not ready or svc is None:
            out[v.name] = VersionSignals()
            continue
        # A bigger model answers slower: half a second plus a second per 15 GB of weights per GPU.
        out[v.name] = VersionSignals(svc.arrivals_per_s * share, ERROR_RATIO, 0.5 + svc.weights_gb / 15, len(ready))
    return out


def idle_gpus(sim: Simulation, window_s: float, below_pct: float) -> IdleReading:
    """Per node, GPUs a pod holds whose mean utilisation over the window (the simulated DCGM history) is below
    the threshold; the demo's exporter maps every unit a pod holds to it, so attribution is always complete.
    As prom_review's: only a unit its pods have held the whole window (or since the simulated world began) is
    judged; a replacement minutes old, still loading its weights, is not idle over the hour."""
    out: dict[str, int] = {}
    started = {p.uid: p.ready_at for p in sim._pods.values()}
    held_since = max(sim._t - window_s, sim._began)
    attributed = {n.name: sum(len(p.gpu_indices) for p in sim._pods.values() if p.node == n.name)
                  for n in sim._nodes.values()}
    since = sim._t - window_s
    for node in sim._nodes.values():
        for index, holders in node.holders.items():
            if any(started.get(uid, sim._t) > held_since for uid, _ready in holders):
                continue
            samples = [u for t, u in node.history.get(index, ()) if t >= since and u is not None]
            if samples and sum(samples) / len(samples) < below_pct:
                out[node.name] = out.get(node.name, 0) + 1
    return IdleReading(out, attributed)


def arrivals(sim: Simulation, pods: Collection[InferencePod], window_s: float) -> dict[str, Arrivals]:
    """Per pod key: requests its engine finished per second over the window, and their mean time held (the
    counter's rate and the latency histogram's sum over count). A pod that exports no engine metrics, or is
    gone, is absent: unknown, never zero. As prom_arrivals, never a window shorter than four scrapes."""
    w = max(60.0, window_s)
    since = sim._t - w
    out = {}
    for p in pods:
        pod = sim._pods.get(p.key)
        if pod is None or pod.uid != p.uid or not pod.signal:
            continue
        held = [s for end, s in pod.finished if end > since]
        out[p.key] = Arrivals(len(held) / w, sum(held) / len(held) if held else None)
    return out
