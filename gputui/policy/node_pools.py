"""Which pool a GPU node belongs to (../shared/reference/gpu-resources.md, "Node pools"): the first of the
pool labels it carries, the seeds' own `gpu.pool` first, then the clouds' and Karpenter's. Nodes that carry
none are one pool, "(no pool)", so drift and idle figures still compare like with like."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.policy.fleet_sums import Contribution, SumsByContext
from gputui.vocabulary.gauges import util_sum
from gputui.vocabulary.gpu_resources import SCHEMES, GpuUse

if TYPE_CHECKING:
    from gputui.snapshot import ClusterSnapshot
    from gputui.vocabulary.model import GpuSummary, Node

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
    """A pool's GPUs and how they are used (seed 000 §7: the idle rate). `use` tells whole cards, MIG slices,
    shared replicas and DRA devices apart, as the header does: what a view shows. `gpus` and `allocated` are
    the units of every scheme together, the units pods are allocated and the idle figure counts in."""

    pool: str
    nodes: int
    gpus: int  # allocatable units, every scheme together
    allocated: int
    util: float | None  # mean over the pool's GPUs reporting; None: none reports
    idle: int | None  # allocated to a pod but below the idle threshold over the window; None: unknown
    unattributed: int = 0  # nodes whose allocated GPUs the metrics do not map to pods (why idle is unknown)
    use: GpuUse = GpuUse()  # units allocated and offered, per scheme

    @property
    def unallocated(self) -> int:
        return max(0, self.gpus - self.allocated)

    def to_dict(self) -> dict:
        return {"pool": self.pool, "nodes": self.nodes, "gpus": self.gpus, "allocated": self.allocated,
                "unallocated": self.unallocated, "util_pct": None if self.util is None else round(self.util, 1),
                "allocated_idle": self.idle, "idle_unattributed_nodes": self.unattributed,
                "by_scheme": self.use.to_dict()}


def idle_why(row: PoolRow, why: str) -> str:
    """Why a row's idle figure is unknown ("" when it is known)."""
    if row.idle is not None:
        return ""
    if row.unattributed:
        return f"no pod attribution on {row.unattributed} node{'s' * (row.unattributed != 1)} with GPUs allocated"
    return why or "not read yet"


_sums = SumsByContext(4 + 2 * len(SCHEMES), metered=2)  # the pools' sums, kept from one snapshot to the next (fleet_pools)


def fleet_pools(snapshot: ClusterSnapshot, reading: IdleReading | None,
                keys: Iterable[str] = DEFAULT_POOL_LABELS) -> list[PoolRow]:
    """pool_rows, once per snapshot, idle reading and pool labels: the dashboard's line, :pools and the
    wallboard share them, and the poll thread works them out before the UI is told (app._poll). The sums are
    kept from one snapshot to the next (fleet_sums): a refresh looks again only at the nodes that moved, and a
    DCGM read only at their utilisation."""
    keys = tuple(keys)

    def compute() -> tuple[IdleReading | None, list[PoolRow]]:
        # The reading is in the key by identity: held by the sums, so its id cannot be reused meanwhile.
        groups, _ = _sums.sums(snapshot, ("pools", keys, id(reading), reading), _contribution(snapshot, reading, keys),
                               _metered)
        return reading, _rows(groups, reading)

    # The reading is kept in the value, so its id cannot be reused while this snapshot holds it.
    held, rows = snapshot.derived(("pools", keys, id(reading)), compute)
    return rows if held is reading else pool_rows(snapshot, reading, keys)


def pool_rows(snapshot: ClusterSnapshot, reading: IdleReading | None,
              keys: Iterable[str] = DEFAULT_POOL_LABELS) -> list[PoolRow]:
    """One row per pool, then the fleet's. `reading`: the idle GPUs the metrics could tell (None: no series
    names a pod, so every idle figure is unknown). A pool with a node whose allocation is not attributed has
    an unknown idle figure too, and says on how many nodes. One pass over the nodes; the fleet's row sums the
    pools'."""
    keys = tuple(keys)
    contribution = _contribution(snapshot, reading, keys)
    summaries = snapshot.summaries
    groups: dict[Hashable, list[float]] = {}
    for n in snapshot.nodes:
        pool, numbers, _ = contribution(n)
        metered, _ = _metered(n, summaries.get(n.name))
        a = groups.setdefault(pool, [0.0] * (len(numbers) + len(metered) + 1))
        a[0] += 1
        for i, value in enumerate((*numbers, *metered), 1):
            a[i] += value
    return _rows(groups, reading)


def _contribution(snapshot: ClusterSnapshot, reading: IdleReading | None,
                  keys: tuple[str, ...]) -> Callable[[Node], Contribution]:
    """A node's pool and what it adds to its row: GPUs, allocated, idle GPUs, whether its idle figure is
    unknown, then its units in use and offered per scheme."""
    def contribution(n: Node) -> Contribution:
        allocated = min(snapshot.gpus_allocated(n.name), n.gpu_allocatable)
        idle, unknown = 0, 0
        if reading is not None:
            if allocated > reading.attributed.get(n.name, 0):
                unknown = 1
            else:
                idle = reading.idle.get(n.name, 0)
        use = snapshot.node_use(n)
        return pool_of(n.labels, keys), (n.gpu_allocatable, allocated, idle, unknown, *use.in_use, *use.offered), None

    return contribution


def _metered(n: Node, summary: GpuSummary | None) -> tuple[tuple[float, int], None]:
    """What a node's gauges add to its pool's row: utilisation summed over its GPUs reporting, and how many."""
    return util_sum(n, summary), None


def _rows(groups: Mapping[Hashable, list[float]], reading: IdleReading | None) -> list[PoolRow]:
    # Each group: [nodes, GPUs, allocated, idle, idle unknown on, *in use, *offered (per scheme), utilisation sum,
    # GPUs reporting]
    n = len(SCHEMES)
    fleet = [sum(a[i] for a in groups.values()) for i in range(7 + 2 * n)]

    def row(name: str, a: list[float]) -> PoolRow:
        unknown = int(a[4])
        use = GpuUse(tuple(map(int, a[5:5 + n])), tuple(map(int, a[5 + n:5 + 2 * n])))
        total, count = a[5 + 2 * n:7 + 2 * n]
        return PoolRow(name, int(a[0]), int(a[1]), int(a[2]), total / count if count else None,
                       None if reading is None or unknown else int(a[3]), unknown, use)

    return [row(str(name), a) for name, a in sorted(groups.items(), key=lambda kv: str(kv[0]))] + [row(FLEET, fleet)]
