"""The fleet's figures, one home for every view that shows them (the header, the wallboard's big figures, a
fleet of clusters' rows): GPUs in use and in all, mean utilisation, alerts (and the worst), drains and
canaries. Each is a walk over every node or pod, so each is worked out once per snapshot and kept on it
(ClusterSnapshot.derived), and the poll thread works them out before the UI thread is told (app._poll): at
65,000 nodes they cost most of a second the UI would otherwise spend between two keystrokes (issue 18)."""

from __future__ import annotations

from dataclasses import dataclass

from gputui.policy.fleet_sums import Contribution, SumsByContext
from gputui.policy.health import Alert, node_alerts
from gputui.policy.problems import Problem, expired_cordons, problems_of
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gauges import hot, util_sum
from gputui.vocabulary.gpu_resources import SCHEMES, GpuUse
from gputui.vocabulary.model import GpuSummary, InferenceService, Node, NodeState, rollout_status


@dataclass(frozen=True, slots=True)
class Figures:
    gpus: GpuUse  # in use and offered, per scheme (never one sum of cards, slices and replicas)
    mean_util: float | None
    alerts: int  # nodes that need attention (problems.py: a node with eight hot GPUs is one)
    drains: int
    canaries: int
    worst: str = ""  # the worst problem's kind ("" without any): the header names it
    util_gpus: int = 0  # the GPUs reporting utilisation: mean_util's weight when clusters are summed
    problems: tuple[Problem, ...] = ()  # one per node that needs attention, worst first


def canary_in_flight(svc: InferenceService) -> bool:
    """Traffic split between versions, or a version still rolling out."""
    shares = [svc.share_pct(v.name) or 0.0 for v in svc.versions]
    split = sum(1 for s in shares if 0.0 < s < 100.0) >= 2
    return split or any(rollout_status(v.rollout) != "rolled out" for v in svc.versions)


# The nodes' part of the figures, kept from one snapshot to the next (fleet_sums): per node its GPU units in use
# and offered per scheme and whether it drains, its own alerts as the extra; from its summary (metered), its
# utilisation sum and count, and all its alerts when the summary adds one (a hot GPU).
_SCHEMES = len(SCHEMES)
_sums = SumsByContext(2 * _SCHEMES + 1, metered=2)
_NodeFigures = tuple[GpuUse, float | None, int, list[Alert], int]


def _node_figures(snap: ClusterSnapshot, temp_threshold: float) -> _NodeFigures:
    def contribution(n: Node) -> Contribution:
        use = snap.node_use(n)
        return None, (*use.in_use, *use.offered, n.state is NodeState.DRAINING), tuple(node_alerts(n, temp_threshold))

    def metered(n: Node, summary: GpuSummary | None) -> tuple[tuple[float, int], tuple[Alert, ...] | None]:
        extra = tuple(node_alerts(n, temp_threshold, summary)) if hot(summary, temp_threshold) else None
        return util_sum(n, summary), extra

    def compute() -> _NodeFigures:
        groups, extras = _sums.sums(snap, ("figures", temp_threshold), contribution, metered)
        row = groups.get(None) or [0.0] * (2 * _SCHEMES + 4)  # [nodes, *in use, *offered, drains, util sum, count]
        gpus = GpuUse(tuple(map(int, row[1:1 + _SCHEMES])), tuple(map(int, row[1 + _SCHEMES:1 + 2 * _SCHEMES])))
        drains, total, count = row[-3:]
        # Worst first, in the fleet's order within a severity (health.fleet_alerts): a walk, but a lookup per
        # node where the alerts were a walk over every node's conditions. A cordon past its expiry is an alert as
        # of this snapshot's time (the kept sums hold no clock): the least severe, so they come last, in order.
        in_order = (a for n in snap.nodes for a in extras.get(n.name, ())) if extras else ()  # mostly none
        found = sorted([*in_order, *expired_cordons(snap)], key=lambda a: a.severity)
        return gpus, total / count if count else None, int(count), found, int(drains)

    return snap.derived(("node-figures", temp_threshold), compute)


def alerts(snap: ClusterSnapshot, temp_threshold: float) -> list[Alert]:
    """Every node's alerts, worst first (health.fleet_alerts, and the expired cordons), once per snapshot."""
    return _node_figures(snap, temp_threshold)[3]


def problems(snap: ClusterSnapshot, temp_threshold: float) -> tuple[Problem, ...]:
    """One problem per node that needs attention, worst first (gputui.policy.problems), once per snapshot."""
    return snap.derived(("problems", temp_threshold), lambda: tuple(problems_of(alerts(snap, temp_threshold))))


def figures(snap: ClusterSnapshot, temp_threshold: float) -> Figures:
    def compute() -> Figures:
        gpus, util, util_gpus, _found, drains = _node_figures(snap, temp_threshold)
        found = problems(snap, temp_threshold)
        return Figures(gpus=gpus, mean_util=util, alerts=len(found), drains=drains,
                       canaries=sum(1 for s in snap.services if canary_in_flight(s)),
                       worst=found[0].kind if found else "", util_gpus=util_gpus, problems=found)

    return snap.derived(("figures", temp_threshold), compute)
