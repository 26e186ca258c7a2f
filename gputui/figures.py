"""The fleet's figures, one home for every view that shows them (the header, the wallboard's big figures, a
fleet of clusters' rows): GPUs in use and in all, mean utilisation, alerts (and the worst), drains and
canaries. Each is a walk over every node or pod, so each is worked out once per snapshot and kept on it
(ClusterSnapshot.derived), and the poll thread works them out before the UI thread is told (app._poll): at
65,000 nodes they cost most of a second the UI would otherwise spend between two keystrokes (issue 18)."""

from __future__ import annotations

from dataclasses import dataclass

from gputui.health import Alert, fleet_alerts
from gputui.model import InferenceService, NodeState, rollout_status
from gputui.snapshot import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class Figures:
    gpus_in_use: int
    gpus_total: int
    mean_util: float | None
    alerts: int
    drains: int
    canaries: int
    worst: str = ""  # the worst alert's kind ("" without alerts): the header names it


def canary_in_flight(svc: InferenceService) -> bool:
    """Traffic split between versions, or a version still rolling out."""
    shares = [svc.share_pct(v.name) or 0.0 for v in svc.versions]
    split = sum(1 for s in shares if 0.0 < s < 100.0) >= 2
    return split or any(rollout_status(v.rollout) != "rolled out" for v in svc.versions)


# The node-only figures of the last nodes tuple: a refresh where only sessions moved keeps its nodes tuple
# (join.Joiner), and so these. One entry is enough: every view asks with the same threshold. Replaced whole
# (one assignment), so a thread reading it never sees half of it.
_nodes_figures: tuple[object, float, tuple[int, float | None, list[Alert], int]] | None = None


def alerts(snap: ClusterSnapshot, temp_threshold: float) -> list[Alert]:
    """Every node's alerts, worst first (health.fleet_alerts), once per nodes tuple."""
    return _node_figures(snap, temp_threshold)[2]


def _node_figures(snap: ClusterSnapshot, temp_threshold: float) -> tuple[int, float | None, list[Alert], int]:
    global _nodes_figures
    cached = _nodes_figures
    if cached is not None and cached[0] is snap.nodes and cached[1] == temp_threshold:
        return cached[2]
    figures_ = (snap.gpus_total, snap.mean_util, fleet_alerts(snap, temp_threshold),
                sum(1 for n in snap.nodes if n.state is NodeState.DRAINING))
    _nodes_figures = (snap.nodes, temp_threshold, figures_)
    return figures_


def figures(snap: ClusterSnapshot, temp_threshold: float) -> Figures:
    def compute() -> Figures:
        total, util, found, drains = _node_figures(snap, temp_threshold)
        return Figures(gpus_in_use=snap.gpus_in_use, gpus_total=total, mean_util=util, alerts=len(found),
                       drains=drains, canaries=sum(1 for s in snap.services if canary_in_flight(s)),
                       worst=found[0].kind if found else "")

    return snap.derived(("figures", temp_threshold), compute)
