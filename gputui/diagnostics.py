"""The troubleshooting list: what is wrong with GPU scheduling and serving, worst first. Pure."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gputui.model import ClusterSnapshot

RESTARTS_WORTH_A_LOOK = 3


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str  # Pending, NoMetrics, NotReady, Restarts, Drift, GpuLost
    subject: str  # node name or namespace/pod
    detail: str


def diagnose(snap: ClusterSnapshot) -> list[Finding]:
    out: list[Finding] = []
    for pod in snap.pods:
        if pod.phase == "Pending" and pod.gpu_request > 0 and not pod.node:
            out.append(Finding("Pending", pod.key, pod.pending_reason or f"waiting for {pod.gpu_request} GPUs"))
    for node in snap.nodes:
        if node.gpu_allocatable < node.gpu_capacity:
            lost = node.gpu_capacity - node.gpu_allocatable
            out.append(Finding("GpuLost", node.name, f"{lost} of {node.gpu_capacity} GPUs not allocatable (unhealthy device)"))
    for pod in snap.pods:
        if not pod.service or pod.deleting or pod.terminated:
            continue
        if pod.phase == "Running" and not pod.ready:
            out.append(Finding("NotReady", pod.key, f"{pod.service} {pod.version}: running but not Ready"))
        if pod.restarts >= RESTARTS_WORTH_A_LOOK:
            out.append(Finding("Restarts", pod.key, f"{pod.service} {pod.version}: {pod.restarts} restarts"))
    metrics = snap.source("metrics")
    if metrics is not None and metrics.error is None and metrics.fetched_at is not None:
        for node in snap.nodes:
            if node.ready and node.gpu_capacity and not node.has_metrics:
                out.append(Finding("NoMetrics", node.name, "no DCGM series for this node (is the exporter running?)"))
    majority = snap.majority_driver
    cuda = Counter(n.cuda_version for n in snap.nodes if n.cuda_version).most_common(1)
    cuda_major = cuda[0][0] if cuda else ""
    for node in snap.nodes:
        drift = []
        if majority and node.driver_version and node.driver_version != majority:
            drift.append(f"driver {node.driver_version} (fleet {majority})")
        if cuda_major and node.cuda_version and node.cuda_version != cuda_major:
            drift.append(f"CUDA {node.cuda_version} (fleet {cuda_major})")
        if drift:
            out.append(Finding("Drift", node.name, ", ".join(drift)))
    return out
