"""Applying a plan through the writer, audited, with the apiserver's conflicts made plain."""

from __future__ import annotations

from gputui.backends.base import BackendError, ConflictError
from gputui.ops.context import OpContext
from gputui.ops.errors import ReadOnlyError
from gputui.ops.traffic.plans import read_route, replan
from gputui.ops.traffic.vocabulary import ShiftError, ShiftPlan, fmt_pct


def _conflict(exc: BaseException) -> bool:
    """The writers say it (ConflictError); a 409 from anything else means the same."""
    return isinstance(exc, ConflictError) or getattr(exc, "status", None) == 409


def apply_shift(plan: ShiftPlan, ctx: OpContext, *, force: bool = False) -> str:
    """Send the plan's patch through the context's writer; returns the line to show. Audit-logged in the
    context's log, ok or not. `force`: past the blockers (never past an error)."""
    writer, audit = ctx.writer, ctx.audit
    if writer is None:
        raise ReadOnlyError("shift")
    if plan.errors:
        raise ShiftError(plan.errors[0])
    if plan.blockers and not force:
        raise ShiftError(plan.blockers[0] + " (force to shift anyway)")
    if not plan.changes:
        return f"{plan.target}: already at {', '.join(f'{v.name} {fmt_pct(v.current_pct)}' for v in plan.versions)}"
    if plan.patch is None:
        # Planned from the snapshot: read the route now, and refuse when it moved since.
        fresh = replan(plan, read_route(plan, writer))
        if fresh.errors:
            raise ShiftError(fresh.errors[0])
        moved = [v for v, f in zip(plan.versions, fresh.versions, strict=True) if v.current_weight != f.current_weight]
        if moved:
            raise ShiftError(
                f"{plan.target} changed since the plan ({', '.join(f'{f.name} now {fmt_pct(f.current_pct)}' for f in fresh.versions)}): "
                "look again before shifting"
            )
        if fresh.blockers and not force:
            raise ShiftError(fresh.blockers[0] + " (force to shift anyway)")
        plan = fresh
        if plan.patch is None:
            return f"{plan.target}: nothing to change"
    patch = plan.patch
    params = {
        "service": plan.service.key,
        "action": plan.action,
        "from": {v.name: v.current_weight for v in plan.versions},
        "to": {v.name: v.target_weight for v in plan.versions},
        "patch_type": patch.patch_type,
        "subresource": patch.subresource,
        "patch": patch.body,
        "force": force,
    }
    if plan.then is not None:
        params["then"] = {"subresource": plan.then.subresource, "patch": plan.then.body}
    action = "shift" if plan.action == "shift" else f"rollout-{plan.action}"
    try:
        with audit.writing(action, plan.target, params):
            for p in (patch, plan.then):
                if p is not None:
                    writer.patch_object(p.group, p.version, p.plural, p.namespace, p.name, p.body,
                                        patch_type=p.patch_type, subresource=p.subresource)
    except BackendError as exc:
        if _conflict(exc):
            raise ShiftError(
                f"{plan.target} changed since it was read (someone else edited it): nothing was changed; "
                "look again and retry"
            ) from None
        raise
    if plan.action != "shift":
        return f"{plan.target}: {plan.action} sent"
    return f"{plan.target}: {plan.summary()}"
