"""What a drain would do, before it does anything: kubectl's filters plus session awareness. Pure.

kubectl's pod filters, in its order (the first that says "keep" wins):
DaemonSet-managed (error unless ignore-daemonsets, then skipped with a
warning), mirror pods (skipped silently), emptyDir volumes (error unless
delete-emptydir-data, then a warning), no controller (error unless force,
then a warning). Finished pods pass the checks. Any error stops the drain of
that node before its first eviction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping

from gputui.model import Budget, ClusterSnapshot, InferencePod

DEFAULT_SESSION_DEADLINE_S = 15 * 60


@dataclass(frozen=True, slots=True)
class DrainOptions:
    ignore_daemonsets: bool = True
    delete_emptydir_data: bool = False
    force: bool = False
    pod_selector: Mapping[str, str] = field(default_factory=dict)
    grace_seconds: int | None = None  # None: each pod's own terminationGracePeriodSeconds
    session_threshold: int = 0  # evict an inference pod once its live sessions are at or below this
    session_deadline_s: float = DEFAULT_SESSION_DEADLINE_S
    disable_eviction: bool = False  # delete instead of evict: bypasses PDBs (force + typed confirm only)


class Step(str, Enum):
    EVICT = "evict"  # no session signal: evict now (retrying while a PDB blocks)
    WAIT_SESSIONS = "wait"  # inference pod: wait for its sessions, then evict
    SKIP = "skip"  # left alone (DaemonSet, mirror pod, finished)
    ERROR = "error"  # blocks the whole node's drain


@dataclass(frozen=True, slots=True)
class PodPlan:
    pod: InferencePod
    step: Step
    note: str = ""  # warning or error, in kubectl's words where kubectl has them
    budgets: tuple[Budget, ...] = ()

    @property
    def budget_note(self) -> str:
        if not self.budgets:
            return ""
        if len(self.budgets) > 1:
            return "more than one PodDisruptionBudget: the eviction will fail"
        return self.budgets[0].describe()

    @property
    def pdb_blocks_now(self) -> bool:
        return len(self.budgets) == 1 and self.budgets[0].disruptions_allowed <= 0 and self.pod.phase == "Running"


@dataclass(frozen=True, slots=True)
class CapacityCheck:
    product: str
    needed: tuple[int, ...]  # GPU requests of the pods that must be placed elsewhere
    free_by_node: Mapping[str, int]

    @property
    def fits(self) -> bool:
        """First-fit decreasing, as a scheduler would have to place them: whole pods per node."""
        free = sorted(self.free_by_node.values(), reverse=True)
        for need in sorted(self.needed, reverse=True):
            for i, room in enumerate(free):
                if room >= need:
                    free[i] -= need
                    break
            else:
                return False
        return True

    @property
    def free_total(self) -> int:
        return sum(self.free_by_node.values())

    def describe(self) -> str:
        if not self.needed:
            return "no GPU pods to place elsewhere"
        verdict = "fits" if self.fits else "does NOT fit"
        return (f"{sum(self.needed)} GPUs in {len(self.needed)} pods need a new home; "
                f"{self.free_total} {self.product or 'GPUs'} free on other schedulable nodes: {verdict}")


@dataclass(frozen=True, slots=True)
class DrainPlan:
    node: str
    options: DrainOptions
    pods: tuple[PodPlan, ...]
    capacity: CapacityCheck
    already_cordoned: bool

    @property
    def errors(self) -> list[str]:
        return [f"{p.pod.key}: {p.note}" for p in self.pods if p.step is Step.ERROR]

    @property
    def blocked(self) -> bool:
        return bool(self.errors)

    @property
    def to_evict(self) -> list[PodPlan]:
        return [p for p in self.pods if p.step in (Step.EVICT, Step.WAIT_SESSIONS)]

    @property
    def live_sessions(self) -> int:
        return sum(p.pod.live_sessions or 0 for p in self.pods if p.step is Step.WAIT_SESSIONS)


def classify(pod: InferencePod, options: DrainOptions, sessions_unknown: str | None = None) -> tuple[Step, str]:
    """kubectl drain's filters in its order, then gputui's: wait on a pod's sessions.

    `sessions_unknown` says why session metrics cannot be read right now; an
    inference pod is then not evicted blindly (that would cut its sessions
    unseen) unless the operator chose force.
    """
    if pod.owner_kind == "DaemonSet":
        if not options.ignore_daemonsets:
            return Step.ERROR, "DaemonSet-managed pod (use ignore-daemonsets)"
        return Step.SKIP, "ignoring DaemonSet-managed pod"
    if pod.mirror:
        return Step.SKIP, "mirror pod"
    if pod.terminated:
        return Step.EVICT, ""  # finished pods pass the checks; the apiserver deletes them at once
    warnings = []
    if pod.has_emptydir:
        if not options.delete_emptydir_data:
            return Step.ERROR, "has local storage (emptyDir); use delete-emptydir-data"
        warnings.append("deleting emptyDir data")
    if not pod.owner_kind:
        if not options.force:
            return Step.ERROR, "not managed by a controller (use force)"
        warnings.append("not managed by a controller: it will not come back")
    if pod.live_sessions is None and pod.service and sessions_unknown:
        if not options.force:
            return Step.ERROR, f"live sessions unknown (metrics {sessions_unknown}); wait for metrics or use force"
        warnings.append(f"live sessions unknown (metrics {sessions_unknown}): any will be cut")
    step = Step.WAIT_SESSIONS if pod.live_sessions is not None else Step.EVICT
    return step, "; ".join(warnings)


def _selected(pod: InferencePod, selector: Mapping[str, str]) -> bool:
    return all(pod.labels.get(k) == v for k, v in selector.items())


def capacity_after(snapshot: ClusterSnapshot, nodes: set[str], product: str, needed: list[int]) -> CapacityCheck:
    """Free GPUs of the same model on Ready, schedulable nodes outside the set being drained."""
    free = {
        n.name: max(0, n.gpu_allocatable - snapshot.gpus_allocated(n.name))
        for n in snapshot.nodes
        if n.name not in nodes and n.gpu_product == product and n.ready and not n.unschedulable
    }
    return CapacityCheck(product, tuple(needed), free)


def plan_drain(
    snapshot: ClusterSnapshot, node: str, options: DrainOptions = DrainOptions(), batch: set[str] | None = None,
) -> DrainPlan:
    target = snapshot.node(node)
    if target is None:
        raise KeyError(node)
    plans = []
    metrics = snapshot.source("metrics")
    sessions_unknown = None if metrics is None else metrics.error or (None if metrics.fetched_at else "not read yet")
    for pod in sorted(snapshot.pods_on(node), key=lambda p: (p.namespace, p.name)):
        if options.pod_selector and not _selected(pod, options.pod_selector):
            continue
        step, note = classify(pod, options, sessions_unknown)
        plans.append(PodPlan(pod, step, note, tuple(snapshot.budget_for(pod))))
    needed = [p.pod.gpu_request for p in plans
              if p.step in (Step.EVICT, Step.WAIT_SESSIONS) and p.pod.gpu_request and not p.pod.terminated
              and p.pod.owner_kind]  # an unmanaged pod is not recreated anywhere
    capacity = capacity_after(snapshot, (batch or set()) | {node}, target.gpu_product, needed)
    return DrainPlan(node, options, tuple(plans), capacity, target.unschedulable)


def plan_json(plan: DrainPlan) -> dict:
    return {
        "node": plan.node,
        "blocked": plan.blocked,
        "errors": plan.errors,
        "already_cordoned": plan.already_cordoned,
        "live_sessions": plan.live_sessions,
        "capacity": {"product": plan.capacity.product, "needed_gpus": list(plan.capacity.needed),
                     "free_gpus": plan.capacity.free_total, "fits": plan.capacity.fits},
        "pods": [
            {"namespace": p.pod.namespace, "name": p.pod.name, "step": p.step.value, "note": p.note,
             "gpus": p.pod.gpu_request, "service": p.pod.service, "version": p.pod.version,
             "live_sessions": p.pod.live_sessions,
             "budgets": [{"name": b.name, "disruptions_allowed": b.disruptions_allowed,
                          "current_healthy": b.current_healthy, "desired_healthy": b.desired_healthy}
                         for b in p.budgets]}
            for p in plan.pods
        ],
    }
