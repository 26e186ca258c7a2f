"""Cordon and uncordon, as kubectl does them: idempotent, planned first. A cordon with a reason records its owner
(gputui.policy.cordon_record) in the same write; an uncordon names who holds the node (gputui.policy.cordon_owner)
and sends nothing over another actor's hold unless told to override it, which the audit log then names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gputui.backends.base import BackendError, LifecycleWriter, error_line
from gputui.ops.context import OpContext
from gputui.ops.drain.maintenance_request import withdraw
from gputui.ops.drain.out_of_rotation import RECORD, OutOfRotation, put_back, recorded
from gputui.ops.errors import ReadOnlyError
from gputui.policy.cordon_owner import CordonOwner, cordon_owner
from gputui.policy.cordon_record import CordonRecord, shown_time
from gputui.policy.upgrades import owner_warning
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.disruptions import CORDON_RECORD


class OwnerRefused(Exception):
    """An uncordon over another actor's hold, not overridden: nothing was sent."""


@dataclass(frozen=True, slots=True)
class CordonPlan:
    node: str
    cordon: bool  # True: cordon; False: uncordon
    already: bool  # nothing to send
    running_pods: int
    warning: str = ""  # another controller owns the node now (the GPU Operator mid-upgrade)
    # Uncordon: the pods a drain took out of rotation on this node (its record), put back first.
    back_in_rotation: tuple[OutOfRotation, ...] = ()
    # Cordon: what the record says (reason "": no record, as before issue 40; the UI and CLI always give one).
    reason: str = ""
    ticket: str = ""
    expires: float | None = None
    owner: CordonOwner | None = None  # uncordon: who holds the node
    # Uncordon: a gputui drain marked the node Drained (KEP-5683): back in service, that mark is cleared.
    clears_drained: bool = False

    @property
    def verb(self) -> str:
        return "cordon" if self.cordon else "uncordon"

    @property
    def operation(self) -> str:
        """The operation whose permissions this plan needs (gputui.backends.base.NEEDS): an uncordon that
        withdraws gputui's own NodeMaintenance deletes it too."""
        if not self.cordon and not self.already and self.owner is not None and self.owner.requests:
            return "uncordon_nodemaintenance"
        return self.verb

    @property
    def foreign(self) -> bool:
        """An uncordon that would undo another actor's hold."""
        return not self.cordon and self.owner is not None and self.owner.foreign

    def describe(self) -> str:
        if self.already:
            return f"{self.node} is already {'cordoned' if self.cordon else 'schedulable'}"
        warning = f" Warning: {self.warning}." if self.warning else ""
        if self.cordon:
            why = ""
            if self.reason:
                why = f" Reason: {self.reason}" + (f" (ticket {self.ticket})" if self.ticket else "") + \
                      (f"; expires {shown_time(self.expires)}" if self.expires is not None else "") + "."
            return (
                f"Cordon {self.node}: no new pods will be scheduled on it. "
                f"Its {self.running_pods} running pods stay.{why}{warning}"
            )
        n = len(self.back_in_rotation)
        back = (f" {n} pod{'s' * (n != 1)} a drain took out of rotation {'go' if n != 1 else 'goes'} back in first "
                f"({', '.join(e.key for e in self.back_in_rotation)})." if n else "")
        owner = ""
        if self.owner is not None and self.owner.foreign:
            owner = f" Held by another actor: {self.owner.words()}."
        elif self.owner is not None and self.owner.note:
            owner = f" It was {self.owner.note}."
        return f"Uncordon {self.node}: new pods may be scheduled on it again.{back}{owner}{warning}"


def plan_cordon(snapshot: ClusterSnapshot, node: str, cordon: bool = True, *, reason: str = "", ticket: str = "",
                expires: float | None = None, identity: str | None = None) -> CordonPlan:
    """`reason`, `ticket`, `expires`: a cordon's record (checked by the caller: gputui.policy.cordon_record);
    `identity`: who uncordons (the audit log's), to tell a cordon of one's own from another's. The TUI and the
    CLI always give it; without it (the drill, which uncordons only its own cordon) no owner is judged."""
    found = snapshot.node(node)
    if found is None:
        raise BackendError(f'node "{node}" not found')
    running = sum(1 for p in snapshot.pods_on(node) if not p.terminated)
    back = () if cordon else tuple(recorded(found).values())
    already = found.unschedulable == cordon and not back
    owner = None if cordon or identity is None else cordon_owner(found, identity, snapshot.taken_at, snapshot)
    drained = not cordon and any(c.type == d.LC_DRAINED and c.status == "True" and c.reason.startswith(d.LC_GPUTUI)
                                 for c in found.conditions)
    return CordonPlan(node, cordon, already, running, owner_warning(found), back, reason, ticket,
                      expires, owner, drained)


def refusal(plan: CordonPlan) -> str:
    """Why an uncordon is refused without an override, in one line naming the actor."""
    assert plan.owner is not None
    return f"{plan.node} is held by another actor: {plan.owner.words()}"


def run_cordon(plan: CordonPlan, ctx: OpContext, *, override_owner: bool = False,
               diag: Mapping[str, Any] | None = None) -> str:
    """Apply the plan; returns the line to show. Sends nothing when already there, nor (OwnerRefused) over another
    actor's hold unless `override_owner` (the TUI asks first; headless, --override-owner). `diag`: the DCGM
    diagnostic that gated this uncordon (gputui.ops.diag_gate), named in its audit entry."""
    writer, audit = ctx.writer, ctx.audit
    if writer is None:
        raise ReadOnlyError(plan.verb)
    if plan.already:  # nothing to send but, on a node back in service already, a drain's Drained mark
        return plan.describe() + _clear_drained(plan, ctx)
    if plan.foreign and not override_owner:
        raise OwnerRefused(refusal(plan))
    for ref in plan.owner.requests if plan.owner is not None and not plan.cordon else ():
        withdraw(writer, audit, ref, "uncordon")  # gputui's own NodeMaintenance: the maintenance ends with it
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
    params: dict[str, Any] = {}
    note: str | None = None  # the record to write (a cordon) or remove (None, an uncordon of a recorded node)
    if plan.cordon and plan.reason:
        record = CordonRecord(audit.identity, plan.reason, float(int(ctx.clock())), plan.ticket, plan.expires)
        note = record.to_annotation()
        params["record"] = record.to_dict()
    if plan.owner is not None:
        if plan.owner.record is not None:
            params["record_removed"] = plan.owner.record.to_dict()
        if plan.foreign:  # the override, with whom it overrode
            params["override_owner"] = plan.owner.to_dict()["holders"]
    if diag is not None:
        params["diag"] = dict(diag)
    with audit.writing(plan.verb, f"node/{plan.node}", params):
        if note is not None or (plan.owner is not None and plan.owner.record is not None):
            # One write: the cordon and its record together (a merge patch on the node; null removes both).
            writer.patch_object("", "v1", "nodes", "", plan.node,
                                {"spec": {"unschedulable": True if plan.cordon else None},
                                 "metadata": {"annotations": {CORDON_RECORD: note}}})
        else:
            writer.set_unschedulable(plan.node, plan.cordon)
    said = f"node/{plan.node} {plan.verb}ed" + (f"; {back} pod{'s' * (back != 1)} back in rotation" if back else "")
    return said + _clear_drained(plan, ctx)


def _clear_drained(plan: CordonPlan, ctx: OpContext) -> str:
    """Drained False on a node back in service, when a gputui drain set it (advisory, as the drain's marks are)."""
    writer: object = ctx.writer  # the optional protocol: a writer that can (the live one) or not (the demo)
    if not plan.clears_drained or not isinstance(writer, LifecycleWriter):
        return ""
    try:
        with ctx.audit.writing("node-condition", f"node/{plan.node}",
                               {"type": d.LC_DRAINED, "status": "False", "reason": d.LC_UNCORDONED}):
            writer.set_node_condition(plan.node, d.LC_DRAINED, "False", d.LC_UNCORDONED,
                                      f"uncordoned by {ctx.audit.identity}")
    except BackendError as exc:
        return f"; its {d.LC_DRAINED} condition stays: {error_line(exc)}"
    return f"; its {d.LC_DRAINED} condition cleared"
