"""The uncordon gate of issue 37 item 4: back in service only on a diagnostic's pass. A fail, a warn or an unknown
keeps the node cordoned unless the operator overrides it (asked first in the TUI; headless, --override-diag),
which the audit log then names. The verdict is written on the node's cordon record (gputui.policy.cordon_record's
`diag`) before anything else, so it is there whether or not the node is uncordoned."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gputui.ops.context import OpContext
from gputui.ops.cordon import CordonPlan
from gputui.ops.diag import DiagRun
from gputui.policy.cordon_record import diag_note
from gputui.vocabulary.disruptions import CORDON_RECORD

OVERRIDE_DIAG_HINT = "--override-diag uncordons it anyway"


@dataclass(frozen=True, slots=True)
class GateDecision:
    uncordon: bool  # go on with the uncordon
    overridden: bool  # ...although the diagnostic did not pass
    line: str  # the decision in one line


def decide(run: DiagRun, override: bool) -> GateDecision:
    """Pass: uncordon. Anything else (fail, warn, unknown): keep it cordoned, unless overridden."""
    if run.verdict == "pass":
        return GateDecision(True, False, f"{run.node} passed the DCGM diagnostic: uncordoning")
    what = {"fail": "failed the DCGM diagnostic", "warn": "passed the DCGM diagnostic only with warnings",
            }.get(run.verdict, "has no proven DCGM diagnostic result (unknown)")
    if override:
        return GateDecision(True, True, f"{run.node} {what}; uncordoning anyway, as overridden: {run.summary}")
    return GateDecision(False, False, f"{run.node} {what}, so it stays cordoned: {run.summary}")


def record_verdict(plan: CordonPlan, run: DiagRun, ctx: OpContext) -> CordonPlan:
    """Write the verdict onto the node's gputui cordon record (one merge patch of its annotation, audited) and
    return the plan with that record, so that the uncordon's audit entry shows the record it removed, verdict
    and all. A node with no readable gputui record keeps none: the verdict is then only in the audit log."""
    owner = plan.owner
    if ctx.writer is None or owner is None or owner.record is None or owner.record.problem:
        return plan
    record = replace(owner.record, diag=diag_note(run.verdict, float(int(ctx.clock())), run.summary))
    with ctx.audit.writing("annotate", f"node/{plan.node}", {"record": record.to_dict(), "why": "diagnostic"}):
        ctx.writer.annotate_node(plan.node, {CORDON_RECORD: record.to_annotation()})
    return replace(plan, owner=replace(owner, record=record))


def audit_verdict(run: DiagRun, decision: GateDecision, ctx: OpContext) -> None:
    """The verdict and what the gate did with it, as an audit event (the Job's creation is audited as a write)."""
    result = "override" if decision.overridden else ("ok" if decision.uncordon else "refused")
    ctx.audit.record("diag", f"node/{run.node}", result, {**run.to_dict(), "override_diag": decision.overridden})
