"""The embedded demo cluster: a seeded, clock-driven simulation with real semantics.

It exists so the first run always shows something real-looking, and so the UI
and the ops can be tested deterministically. It is not a stand-in for the
Kubernetes or Prometheus backends in their own tests. What it keeps true:
PodDisruptionBudgets block evictions, evicting a pod that holds sessions loses
them (and counts them), traffic weights decide where new sessions go, evicted
pods are replaced by their controller on a node with free GPUs of the model.

Split by reason to change: `scenario` (what the cluster holds), `simulation` (how it moves, what a snapshot
shows), `api` (the writer's verbs, answered as the apiserver would), `routes` (route objects and their
schema checks), `patches` (merge and JSON patch), `describe` and `review` (the answers to describe and
to `gputui check`'s questions about its metrics store).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gputui.backends.base import Backend
from gputui.backends.demo.api import DemoCluster
from gputui.backends.demo.errors import DemoApiError
from gputui.backends.demo.patches import json_patch, merge_patch

__all__ = ["DemoApiError", "DemoCluster", "demo_backend", "json_patch", "merge_patch"]


class _ReadOnlyView:
    """Only the reading half of the demo cluster: a read-only backend cannot write."""

    def __init__(self, cluster: DemoCluster) -> None:
        self.snapshot = cluster.snapshot
        self.gpu_history = cluster.gpu_history
        self.node_gpus = cluster.node_gpus
        self.describe = cluster.describe
        self.check_facts = cluster.check_facts
        self.version_signals = cluster.version_signals
        self.idle_gpus = cluster.idle_gpus
        self.arrivals = cluster.arrivals
        self.fault_window = cluster.fault_window
        self.gpu_bindings = cluster.gpu_bindings
        self.close = cluster.close


def demo_backend(
    seed: int = 7, clock: Callable[[], float] = time.time, read_only: bool = False
) -> Backend:
    cluster = DemoCluster(seed=seed, clock=clock)
    if read_only:
        return Backend(reader=_ReadOnlyView(cluster), writer=None, context="demo", simulated=True)
    return Backend(reader=cluster, writer=cluster, context="demo", simulated=True)
