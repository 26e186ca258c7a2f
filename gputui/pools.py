"""Which pool a GPU node belongs to (../shared/reference/gpu-resources.md, "Node pools"): the first of the
pool labels it carries, the seeds' own `gpu.pool` first, then the clouds' and Karpenter's. Nodes that carry
none are one pool, "(no pool)", so drift and idle figures still compare like with like."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

if TYPE_CHECKING:
    from gputui.model import Node
    from gputui.snapshot import ClusterSnapshot

DEFAULT_POOL_LABELS = ("gpu.pool", "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup",
                       "kubernetes.azure.com/agentpool", "karpenter.sh/nodepool")
NO_POOL = "(no pool)"


def pool_of(labels: Mapping[str, str], keys: Iterable[str] = DEFAULT_POOL_LABELS) -> str:
    return next((labels[k] for k in keys if labels.get(k)), NO_POOL)


FLEET = "(fleet)"
NO_ATTRIBUTION = "GPU series carry no pod label: allocated-but-idle cannot be told"


@dataclass(frozen=True, slots=True)
class IdleReading:
    """What the metrics say of GPUs held by pods, per node, in the units pods are allocated (cards, MIG
    instances): how many are idle over the window, and how many series name a pod at all. A node with more
    units allocated than attributed cannot be told (some exporters leave MIG or shared GPUs unlabelled):
    its idle figure is unknown, never guessed from the rest."""

    idle: Mapping[str, int]
    attributed: Mapping[str, int]
IDLE_WINDOW_S = 3600.0  # the TUI's idle figures: allocated GPUs below IDLE_BELOW_PCT over the last hour
IDLE_BELOW_PCT = 5.0


@dataclass(frozen=True, slots=True)
class PoolRow:
    """A pool's GPUs (in the units its nodes hand out) and how they are used (seed 000 §7: the idle rate)."""

    pool: str
    nodes: int
    gpus: int  # allocatable units
    allocated: int
    util: float | None  # mean over the pool's GPUs reporting; None: none reports
    idle: int | None  # allocated to a pod but below the idle threshold over the window; None: unknown
    unattributed: int = 0  # nodes whose allocated GPUs the metrics do not map to pods (why idle is unknown)

    @property
    def unallocated(self) -> int:
        return max(0, self.gpus - self.allocated)

    def to_dict(self) -> dict:
        return {"pool": self.pool, "nodes": self.nodes, "gpus": self.gpus, "allocated": self.allocated,
                "unallocated": self.unallocated, "util_pct": None if self.util is None else round(self.util, 1),
                "allocated_idle": self.idle, "idle_unattributed_nodes": self.unattributed}


def idle_why(row: PoolRow, why: str) -> str:
    """Why a row's idle figure is unknown ("" when it is known)."""
    if row.idle is not None:
        return ""
    if row.unattributed:
        return f"no pod attribution on {row.unattributed} node{'s' * (row.unattributed != 1)} with GPUs allocated"
    return why or "not read yet"


def pool_rows(snapshot: ClusterSnapshot, reading: IdleReading | None,
              keys: Iterable[str] = DEFAULT_POOL_LABELS) -> list[PoolRow]:
    """One row per pool, then the fleet's. `reading`: the idle GPUs the metrics could tell (None: no series
    names a pod, so every idle figure is unknown). A pool with a node whose allocation is not attributed has
    an unknown idle figure too, and says on how many nodes."""
    keys = tuple(keys)
    groups: dict[str, list] = {}
    for n in snapshot.nodes:
        groups.setdefault(pool_of(n.labels, keys), []).append(n)

    def node_idle(n: Node, allocated: int) -> int | None:
        if reading is None or allocated > reading.attributed.get(n.name, 0):
            return None if reading is None or allocated else 0
        return reading.idle.get(n.name, 0)

    def row(name: str, nodes: list) -> PoolRow:
        weighted = [(n.mean_util, n.summary.count if n.summary and n.summary.count else len(n.gpus) or 1)
                    for n in nodes if n.mean_util is not None]
        weight = sum(w for _u, w in weighted)
        util = sum(u * w for u, w in weighted) / weight if weight else None
        allocated = [min(snapshot.gpus_allocated(n.name), n.gpu_allocatable) for n in nodes]
        idle = [node_idle(n, a) for n, a in zip(nodes, allocated)]
        unknown = sum(1 for i in idle if i is None) if reading is not None else 0
        return PoolRow(name, len(nodes), sum(n.gpu_allocatable for n in nodes), sum(allocated), util,
                       None if reading is None or unknown else sum(i or 0 for i in idle), unknown)

    rows = [row(name, nodes) for name, nodes in sorted(groups.items())]
    return rows + [row(FLEET, list(snapshot.nodes))]
