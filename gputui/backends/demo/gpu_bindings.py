"""The demo's pod attribution, as its simulated dcgm-exporter would label the series: each unit a pod holds maps
to its physical GPU (SimNode.units), so attribution is always complete there (as demo/review.py counts it)."""

from __future__ import annotations

from typing import Any

from gputui.vocabulary.gpu_bindings import BoundGpu, GpuBindings


def demo_bindings(sim: Any, node: str) -> GpuBindings:
    with sim._lock:
        n = sim._nodes.get(node)
        if n is None:
            return GpuBindings(dcgm="no such node in the simulated cluster")
        held: dict[int, set[str]] = {}
        for pod in sim._pods.values():
            if pod.node == node and pod.deleting_at is None:
                for unit in pod.gpu_indices:
                    held.setdefault(n.units[unit][1], set()).add(f"{pod.namespace}/{pod.name}")
        return GpuBindings(tuple(BoundGpu(i, uuid, "", frozenset(held.get(i, ()))) for i, uuid in enumerate(n.uuids)))
