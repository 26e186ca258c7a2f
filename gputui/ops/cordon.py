"""Cordon and uncordon, as kubectl does them: idempotent, planned first."""

from __future__ import annotations

from dataclasses import dataclass

from gputui.backends.base import BackendError, Writer
from gputui.snapshot import ClusterSnapshot
from gputui.upgrades import owner_warning
from gputui.ops.audit import AuditLog


class ReadOnlyError(BackendError):
    def __init__(self, action: str) -> None:
        super().__init__(f"read-only mode: {action} is not allowed")


@dataclass(frozen=True, slots=True)
class CordonPlan:
    node: str
    cordon: bool  # True: cordon; False: uncordon
    already: bool  # nothing to send
    running_pods: int
    warning: str = ""  # another controller owns the node now (the GPU Operator mid-upgrade)

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
        return f"Uncordon {self.node}: new pods may be scheduled on it again.{warning}"


def plan_cordon(snapshot: ClusterSnapshot, node: str, cordon: bool = True) -> CordonPlan:
    found = snapshot.node(node)
    if found is None:
        raise BackendError(f'node "{node}" not found')
    running = sum(1 for p in snapshot.pods_on(node) if not p.terminated)
    return CordonPlan(node, cordon, found.unschedulable == cordon, running, owner_warning(found))


def run_cordon(plan: CordonPlan, writer: Writer | None, audit: AuditLog) -> str:
    """Apply the plan; returns the line to show. Sends nothing when already there."""
    if writer is None:
        raise ReadOnlyError(plan.verb)
    if plan.already:
        return plan.describe()
    with audit.writing(plan.verb, f"node/{plan.node}"):
        writer.set_unschedulable(plan.node, plan.cordon)
    return f"node/{plan.node} {plan.verb}ed"
