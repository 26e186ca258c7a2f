"""The default fake GPU fleet the integration fixtures create.

The same node names are used by the fake kubelet (Node objects) and by the
DCGM exporter (``Hostname`` label), so the app can join the two.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuNodeSpec:
    name: str
    gpus: int
    product: str  # node label spelling (GFD: spaces become "-")
    driver: str
    memory_mib: int

    @property
    def model_name(self) -> str:  # dcgm-exporter's modelName spelling
        return self.product.replace("-", " ")


DEFAULT_GPU_NODES: tuple[GpuNodeSpec, ...] = (
    GpuNodeSpec("gpu-node-1", 8, "NVIDIA-H100-80GB-HBM3", "550.54.15", 81559),
    GpuNodeSpec("gpu-node-2", 8, "NVIDIA-H100-80GB-HBM3", "550.54.15", 81559),
    GpuNodeSpec("gpu-node-3", 4, "NVIDIA-A100-SXM4-80GB", "535.161.08", 81920),
)

#: A node without GPUs (system pods, CPU workloads).
DEFAULT_CPU_NODES: tuple[str, ...] = ("cpu-node-1",)

#: History backfilled into Prometheus before it starts: from
#: ``now - HISTORY_SECONDS`` to ``now - HISTORY_END_OFFSET``, one sample every
#: ``HISTORY_STEP`` seconds, value :func:`history_util`.
HISTORY_SECONDS = 600
HISTORY_END_OFFSET = 30
HISTORY_STEP = 15


def history_util(node: str, gpu: int, t: float) -> float:
    """Backfilled DCGM_FI_DEV_GPU_UTIL: deterministic, different per GPU and over time."""
    node_no = sum(map(ord, node)) % 7
    return float((int(t // HISTORY_STEP) * 3 + gpu * 11 + node_no * 5) % 101)
