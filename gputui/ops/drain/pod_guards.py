"""Pods annotated `karpenter.sh/do-not-disrupt` are blockers in a drain's plan, the annotation named (issue 40 item
3). Karpenter reads the annotation on a pod as "true" (blocks voluntary disruption) or a duration after the pod's
start (sigs.k8s.io/karpenter v1.13.0 pkg/utils/pod/scheduling.go IsDoNotDisruptActive; any other value counts as
absent). gputui reads no pod start time, so a duration counts as in force (fail closed).

The annotations are read when asked, for the batch's nodes only (gputui.backends.kube_actors.ActorReader.pod_guards):
the fleet's pod records keep none. A reader that cannot read them (the demo, tests' fakes) has none to give."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol, runtime_checkable

from gputui.ops.drain.plan import DrainPlan, Step
from gputui.policy.karpenter_schedule import ScheduleError, go_duration
from gputui.vocabulary.disruptions import KARPENTER_DO_NOT_DISRUPT

GUARDS_SOURCE = f"pods' {KARPENTER_DO_NOT_DISRUPT}"  # how the plan names the read when it fails


@runtime_checkable
class PodGuards(Protocol):
    def pod_guards(self, nodes: list[str]) -> dict[str, str]:
        """Pod key -> its do-not-disrupt annotation, for the pods on these nodes; BackendError when not read."""
        ...


def guards_reader(reader: object) -> PodGuards | None:
    """The live reader's actor reader, which reads the annotations; None for a reader that cannot."""
    try:  # its own attribute only: a reader that answers every other name (a proxy, a test's fake) is not asked
        actors = vars(reader).get("actors")
    except TypeError:  # no __dict__
        return None
    return actors if isinstance(actors, PodGuards) else None


def guard_words(value: str) -> str:
    """Why a pod with this annotation value blocks the drain; "" when Karpenter would ignore the value."""
    if value == "true":
        return (f"annotated {KARPENTER_DO_NOT_DISRUPT}=true: Karpenter's guard against voluntary disruption "
                "(remove the annotation to drain this node)")
    try:
        go_duration(value)
    except ScheduleError:
        return ""
    return (f"annotated {KARPENTER_DO_NOT_DISRUPT}={value}: guarded for {value} after the pod started (gputui "
            "reads no start time: counted as in force; remove the annotation to drain this node)")


def with_guards(plan: DrainPlan, guards: Mapping[str, str]) -> DrainPlan:
    """The plan with each pod it would move that carries an active do-not-disrupt annotation made a blocker."""
    if not guards:
        return plan
    pods = []
    for p in plan.pods:
        words = guard_words(guards.get(p.pod.key, "")) if p.pod.key in guards else ""
        if words and p.step in (Step.EVICT, Step.WAIT_SESSIONS):
            p = replace(p, step=Step.ERROR, note=words)
        pods.append(p)
    return replace(plan, pods=tuple(pods))
