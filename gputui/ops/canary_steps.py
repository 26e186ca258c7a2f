"""What a guided canary will do, step by step, said before it starts (issue 35): each step it will take and the
first it would hold at, and why, so the TUI's dialog and `gputui rollout --dry-run` promise only the steps
it will take. A step is held by the shift's capacity rule (its share of new sessions above its share of the
ready pods: `--force` or `f` passes it), by a version with no ready pod, or by the new version's pods waiting
to be evicted (on a node being drained, or being deleted): traffic is never raised towards pods about to
go, and no force passes that. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from gputui.ops.traffic.plans import CAPACITY_SLACK_PCT, plan_shift
from gputui.ops.traffic.vocabulary import fmt_pct
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, NodeState


@dataclass(frozen=True, slots=True)
class StepPreview:
    step: float
    held: str = ""  # why the canary would hold at this step now ("": it would take it)
    forceable: bool = False  # held only by the capacity rule, which a force passes
    forced: str = ""  # taken only because forced: the capacity rule it passes


def leaving(snapshot: ClusterSnapshot, pod: InferencePod) -> bool:
    """The pod is waiting to be evicted: its node is being drained, or it is being deleted."""
    node = snapshot.node(pod.node) if pod.node else None
    return pod.deleting or (node is not None and node.state is NodeState.DRAINING)


def step_blocker(snapshot: ClusterSnapshot, service_key: str, new: str, step: float) -> tuple[str, bool] | None:
    """Why the canary cannot raise `new` to `step` now, and whether a force passes it; None: it can."""
    service = snapshot.service(service_key)
    if service is None:
        return f"{service_key} is no longer in the cluster", False
    ready = [p for p in snapshot.pods_of(service, new) if p.ready]
    going = [p for p in ready if leaving(snapshot, p)]
    if going and len(going) == len(ready):
        nodes = sorted({p.node for p in going if p.node})
        return (f"every ready pod of {new} is waiting to be evicted ({len(going)} on "
                f"{', '.join(nodes) or 'no node'}): traffic is not raised towards pods about to go"), False
    if going:  # the capacity rule counted without them: their sessions are about to be cut or moved
        staying = len(ready) - len(going)
        total = sum(1 for v in service.versions for p in snapshot.pods_of(service, v.name)
                    if p.ready and not leaving(snapshot, p))
        capacity = 100.0 * staying / total if total else 0.0
        if step > capacity + CAPACITY_SLACK_PCT:
            return (f"{new} would get {fmt_pct(step)} of new sessions on {fmt_pct(capacity)} of the ready pods "
                    f"that stay ({staying} of {total}; {len(going)} waiting to be evicted)"), False
    plan = plan_shift(snapshot, service_key, {new: step})
    if plan.errors:
        return plan.errors[0], False
    if plan.blockers:
        return plan.blockers[0], True
    return None


def preview(snapshot: ClusterSnapshot, service_key: str, new: str, steps: tuple[float, ...],
            force: bool = False) -> list[StepPreview]:
    """Each step as the canary would meet it now: taken, or held with why. Steps after the first held one are
    held by it (the canary does not skip a step)."""
    out: list[StepPreview] = []
    for step in steps:
        if out and out[-1].held:
            out.append(StepPreview(step, f"after {fmt_pct(out[-1].step)}"))
            continue
        blocked = step_blocker(snapshot, service_key, new, step)
        if blocked is None:
            out.append(StepPreview(step))
        elif force and blocked[1]:
            out.append(StepPreview(step, forced=blocked[0]))
        else:
            out.append(StepPreview(step, blocked[0], blocked[1]))
    return out


def preview_lines(previews: list[StepPreview], force_key: str = "--force") -> list[str]:
    """The steps in words: `25%: will be taken` … `50%: held now: why (--force passes it)`, `100%: not reached`."""
    lines = []
    for p in previews:
        if not p.held:
            lines.append(f"{fmt_pct(p.step)}: will be taken" + (" (forced past the capacity rule)" if p.forced else
                                                                ", its gates then decide the next"))
        elif p.held.startswith("after "):
            lines.append(f"{fmt_pct(p.step)}: not reached while {p.held[6:]} is held")
        else:
            lines.append(f"{fmt_pct(p.step)}: held now: {p.held}" + (f" ({force_key} passes it)" if p.forceable else ""))
    return lines
