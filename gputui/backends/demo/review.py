"""The demo's answer to `gputui check`'s questions about its metrics store: GPU memory growth per pod (one
mistral pod leaks) and the alert rules a typical cluster loads (XID and temperature, nothing on GPU
memory), firing where the simulation's own state says they would."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.checks.facts import AlertRule, CheckFacts

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
    xids = sum(len(n.bad_gpus) for n in sim._nodes.values() if n.ready)
    hot = sum(1 for n in sim._nodes.values() if n.ready and n.temp_offset > 0)  # the planted blocked air intake
    rules = (
        AlertRule("GPUXidError", "gpu.rules", "max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0",
                  "firing" if xids else "inactive", firing=xids),
        AlertRule("GPUTemperatureHigh", "gpu.rules", f"max by (Hostname) (DCGM_FI_DEV_GPU_TEMP) > {HOT_C:g}",
                  "firing" if hot else "inactive", firing=hot),
        AlertRule("InferenceQueueBacklog", "inference.rules", "sum by (pod) (vllm:num_requests_waiting) > 50",
                  "inactive"),
    )
    return CheckFacts(window_s, memory_growth_mib=growth, alert_rules=rules)
