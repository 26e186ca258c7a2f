"""Cordon and uncordon, as kubectl does them: idempotent, planned first."""

from __future__ import annotations

from dataclasses import dataclass

from gputui.backends.base import BackendError
from gputui.ops.context import OpContext
from gputui.ops.drain.out_of_rotation import RECORD, OutOfRotation, put_back, recorded
from gputui.ops.errors import ReadOnlyError
from gputui.policy.upgrades import owner_warning
from gputui.snapshot import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class CordonPlan:
    node: str
    cordon: bool  # True: cordon; False: uncordon
    already: bool  # nothing to send
    running_pods: int
    warning: str = ""  # another controller owns the node now (the GPU Operator mid-upgrade)
    # Uncordon: the pods a drain took out of rotation on this node (its record), put back first.
    back_in_rotation: tuple[OutOfRotation, ...] = ()

    @property
    def verb(self) -> str:
        return "cordon" if self.cordon else "uncordon"

    def describe(self) -> str:
        if self.already:
            return f"{self.node} is already {'cordoned' if self.cordon else 'schedulable'}"
        warning = f" Warning: {self.warning}." if self.warning else ""
        if self.cordon:
            return (
                f"Cordon {self.node}: no new pods will be scheduled on it. "
                f"Its {self.running_pods} running pods stay.{warning}"
            )
        n = len(self.back_in_rotation)
        back = (f" {n} pod{'s' * (n != 1)} a drain took out of rotation {'go' if n != 1 else 'goes'} back in first "
                f"({', '.join(e.key for e in self.back_in_rotation)})." if n else "")
        return f"Uncordon {self.node}: new pods may be scheduled on it again.{back}{warning}"


def plan_cordon(snapshot: ClusterSnapshot, node: str, cordon: bool = True) -> CordonPlan:
    found = snapshot.node(node)
    if found is None:
        raise BackendError(f'node "{node}" not found')
    running = sum(1 for p in snapshot.pods_on(node) if not p.terminated)
    back = () if cordon else tuple(recorded(found).values())
    already = found.unschedulable == cordon and not back
    return CordonPlan(node, cordon, already, running, owner_warning(found), back)


def run_cordon(plan: CordonPlan, ctx: OpContext) -> str:
    """Apply the plan; returns the line to show. Sends nothing when already there."""
    writer, audit = ctx.writer, ctx.audit
    if writer is None:
        raise ReadOnlyError(plan.verb)
    if plan.already:
        return plan.describe()
    back = 0
    for entry in plan.back_in_rotation:  # never a pod left out of rotation with no drain that owns it
        with audit.writing("rotation-in", f"pod/{entry.key}", {"node": plan.node, "labels": dict(entry.labels),
                                                               "why": "uncordon"}) as result:
            if put_back(writer, entry):
                back += 1
            else:
                result.result = "ok: the pod is gone or replaced; nothing to put back"
    if plan.back_in_rotation:
        with audit.writing("annotate", f"node/{plan.node}", {RECORD: None}):
            writer.annotate_node(plan.node, {RECORD: None})
    with audit.writing(plan.verb, f"node/{plan.node}"):
        writer.set_unschedulable(plan.node, plan.cordon)
    return f"node/{plan.node} {plan.verb}ed" + (f"; {back} pod{'s' * (back != 1)} back in rotation" if back else "")
