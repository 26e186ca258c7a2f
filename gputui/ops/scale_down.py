"""Session-aware scale-down of a version (seed 001 §7: scale the old version down only once its active
connections are low). Kubernetes' ReplicaSet controller removes, among ready pods, those with the lowest
`controller.kubernetes.io/pod-deletion-cost` first; so the idlest pods are chosen here, every pod of the
version is annotated with a cost from its live sessions, and only then is the Deployment scaled. A pod
chosen while it holds more sessions than the threshold (or an unknown count) blocks the plan unless the
operator forces it and confirms how many sessions that cuts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gputui.ops.context import OpContext
from gputui.ops.errors import ReadOnlyError
from gputui.ops.traffic.plans import find_service
from gputui.ops.traffic.vocabulary import ShiftError
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
REMOVE_FIRST, KEEP_UNKNOWN = -1000, 2**31 - 1  # int32, as the annotation allows


@dataclass(frozen=True, slots=True)
class ScaleDownPlan:
    service: str
    version: str
    namespace: str
    workload: str
    current: int
    target: int
    victims: tuple[InferencePod, ...]  # removed, idlest first
    keep: tuple[InferencePod, ...]
    threshold: int
    sessions: Mapping[str, int | None]  # each pod's live sessions by name, as planned (None: unknown)
    blockers: tuple[str, ...] = ()

    @property
    def cut(self) -> int | None:
        """Live sessions the removed pods hold (None: some count is unknown)."""
        total = 0
        for p in self.victims:
            live = self.sessions[p.name]
            if live is None:
                return None
            total += live
        return total

    def costs(self) -> dict[str, int]:
        """The pod-deletion-cost of every pod: the chosen ones lowest, the others their live sessions."""
        out = {p.name: REMOVE_FIRST - i for i, p in enumerate(self.victims)}
        out.update({p.name: KEEP_UNKNOWN if (live := self.sessions[p.name]) is None else live for p in self.keep})
        return out

    def describe(self) -> str:
        removed = ", ".join(f"{p.name} ({_count(self.sessions[p.name])} sessions)" for p in self.victims)
        return (f"Scale {self.namespace}/{self.workload} ({self.service} {self.version}) from {self.current} to "
                f"{self.target}: removes {removed}; cuts "
                f"{'an unknown number of' if self.cut is None else self.cut} live sessions")


def _count(live: int | None) -> str:
    return "unknown" if live is None else str(live)


def plan_scale_down(snapshot: ClusterSnapshot, service_key: str, version: str, replicas: int,
                    threshold: int = 0) -> ScaleDownPlan:
    service = find_service(snapshot, service_key)
    found = next((v for v in service.versions if v.name == version), None)
    if found is None:
        raise ShiftError(f'{service.key} has no version "{version}" ({", ".join(v.name for v in service.versions)})')
    if service.router_kind == "Rollout":
        raise ShiftError(f"{service.key} is an Argo Rollout: its controller scales it (promote or abort instead)")
    candidates = [p for p in snapshot.pods_of(service, version) if not p.terminated and not p.deleting]
    live = {p.name: snapshot.sessions(p).live for p in candidates}
    # As the ReplicaSet controller ranks before the cost: unready pods go first; then the fewest sessions.
    pods = sorted(candidates, key=lambda p: (p.ready, live[p.name] is None, live[p.name] or 0, p.name))
    if any(p.owner_kind != "ReplicaSet" for p in pods):
        raise ShiftError(f"{service.key} {version} is not a Deployment's (a StatefulSet removes its highest "
                         "ordinal whatever the cost): scale it with its own controller")
    if not 0 <= replicas < len(pods):
        raise ShiftError(f"{service.key} {version} runs {len(pods)} pods: scale down to 0..{len(pods) - 1}")
    victims, keep = tuple(pods[: len(pods) - replicas]), tuple(pods[len(pods) - replicas:])
    busy = [p for p in victims if (n := live[p.name]) is None or n > threshold]
    blockers = tuple(
        f"{p.name} holds {'an unknown number of' if live[p.name] is None else live[p.name]} live sessions "
        f"(threshold {threshold}): wait for them to end, or force and confirm the count" for p in busy)
    return ScaleDownPlan(service.key, version, service.namespace, found.workload or f"{service.name}-{version}",
                         len(pods), replicas, victims, keep, threshold,
                         {p.name: live[p.name] for p in pods}, blockers)


def run_scale_down(plan: ScaleDownPlan, ctx: OpContext, force: bool = False,
                   confirm_sessions: int | None = None) -> str:
    """Annotate every pod's deletion cost, then scale the Deployment; audited once. Pods above the threshold
    need `force`; any session cut needs its count typed back (`confirm_sessions`); an unknown count refuses."""
    writer, audit = ctx.writer, ctx.audit
    if writer is None:
        raise ReadOnlyError("scale-down")
    if plan.blockers and not force:
        raise ShiftError(plan.blockers[0])
    if plan.cut is None:
        raise ShiftError("it would cut an unknown number of live sessions: refused (wait until they can be read)")
    if plan.cut and confirm_sessions != plan.cut:  # whatever the threshold: cutting sessions is asked first
        raise ShiftError(f"it cuts {plan.cut} live sessions: confirm that number")
    params = {"service": plan.service, "version": plan.version, "from": plan.current, "to": plan.target,
              "costs": plan.costs(), "cut": plan.cut, "force": force}
    target = f"deployment/{plan.namespace}/{plan.workload}"
    with audit.writing("scale-down", target, params):
        for name, cost in plan.costs().items():
            writer.patch_object("", "v1", "pods", plan.namespace, name,
                                {"metadata": {"annotations": {DELETION_COST: str(cost)}}}, "merge")
        writer.patch_object("apps", "v1", "deployments", plan.namespace, plan.workload,
                            {"spec": {"replicas": plan.target}}, "merge", subresource="scale")
    return f"{target} scaled {plan.current} → {plan.target}, idlest first"
