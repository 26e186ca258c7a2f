"""Which pool a GPU node belongs to (../shared/reference/gpu-resources.md, "Node pools"): the first of the
pool labels it carries, the seeds' own `gpu.pool` first, then the clouds' and Karpenter's. Nodes that carry
none are one pool, "(no pool)", so drift and idle figures still compare like with like."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

if TYPE_CHECKING:
    from gputui.backends.base import Backend
    from gputui.snapshot import ClusterSnapshot

DEFAULT_POOL_LABELS = ("gpu.pool", "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup",
                       "kubernetes.azure.com/agentpool", "karpenter.sh/nodepool")
NO_POOL = "(no pool)"


def pool_of(labels: Mapping[str, str], keys: Iterable[str] = DEFAULT_POOL_LABELS) -> str:
    return next((labels[k] for k in keys if labels.get(k)), NO_POOL)


FLEET = "(fleet)"
NO_ATTRIBUTION = "GPU series carry no pod label: allocated-but-idle cannot be told"
IDLE_WINDOW_S = 3600.0  # the TUI's idle figures: allocated GPUs below IDLE_BELOW_PCT over the last hour
IDLE_BELOW_PCT = 5.0


def read_idle(backend: Backend, window_s: float, below_pct: float) -> tuple[dict[str, int] | None, str]:
    """Per node, allocated GPUs idle over the window (one range query), or None and why it is unknown."""
    from gputui.backends.base import BackendError, error_line

    try:
        idle = backend.idle_gpus(window_s, below_pct)
    except BackendError as exc:
        return None, error_line(exc)
    return idle, "" if idle is not None else NO_ATTRIBUTION


@dataclass(frozen=True, slots=True)
class PoolRow:
    """A pool's GPUs (in the units its nodes hand out) and how they are used (seed 000 §7: the idle rate)."""

    pool: str
    nodes: int
    gpus: int  # allocatable units
    allocated: int
    util: float | None  # mean over the pool's GPUs reporting; None: none reports
    idle: int | None  # allocated to a pod but below the idle threshold over the window; None: unknown

    @property
    def unallocated(self) -> int:
        return max(0, self.gpus - self.allocated)

    def to_dict(self) -> dict:
        return {"pool": self.pool, "nodes": self.nodes, "gpus": self.gpus, "allocated": self.allocated,
                "unallocated": self.unallocated, "util_pct": None if self.util is None else round(self.util, 1),
                "allocated_idle": self.idle}


def pool_rows(snapshot: ClusterSnapshot, idle: Mapping[str, int] | None,
              keys: Iterable[str] = DEFAULT_POOL_LABELS) -> list[PoolRow]:
    """One row per pool, then the fleet's. `idle`: per node, allocated GPUs idle over the window (None:
    attribution unavailable, so every idle figure is unknown)."""
    keys = tuple(keys)
    groups: dict[str, list] = {}
    for n in snapshot.nodes:
        groups.setdefault(pool_of(n.labels, keys), []).append(n)

    def row(name: str, nodes: list) -> PoolRow:
        weighted = [(n.mean_util, n.summary.count if n.summary and n.summary.count else len(n.gpus) or 1)
                    for n in nodes if n.mean_util is not None]
        weight = sum(w for _u, w in weighted)
        util = sum(u * w for u, w in weighted) / weight if weight else None
        return PoolRow(name, len(nodes), sum(n.gpu_allocatable for n in nodes),
                       sum(min(snapshot.gpus_allocated(n.name), n.gpu_allocatable) for n in nodes), util,
                       None if idle is None else sum(idle.get(n.name, 0) for n in nodes))

    rows = [row(name, nodes) for name, nodes in sorted(groups.items())]
    return rows + [row(FLEET, list(snapshot.nodes))]
