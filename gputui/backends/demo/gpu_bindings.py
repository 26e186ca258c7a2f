"""The demo's pod attribution, as its simulated dcgm-exporter would label the series: each unit a pod holds maps
to its physical GPU (SimNode.units), so attribution is always complete there (as demo/review.py counts it)."""

from __future__ import annotations

from typing import Any

from gputui.vocabulary.gpu_bindings import BoundGpu, GpuBindings


def demo_bindings(sim: Any, node: str) -> GpuBindings:
    held = sim.gpu_pods(node)  # the simulated exporter's pod labels: one home (Simulation.gpu_pods)
    if held is None:
        return GpuBindings(dcgm="no such node in the simulated cluster")
    with sim._lock:
        uuids = tuple(sim._nodes[node].uuids)
    return GpuBindings(tuple(BoundGpu(i, uuid, "", frozenset(held.get(i, ()))) for i, uuid in enumerate(uuids)))
