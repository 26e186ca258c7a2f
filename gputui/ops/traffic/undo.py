"""Undo the last shift of a service: the weights it had before, as the audit log recorded them. Planned like
any shift (the route read fresh, the same checks), and refused unless forced when the route moved since that
shift: undoing it then would also revert whatever changed it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gputui.base.paths import shown
from gputui.base.safe_text import visible
from gputui.ops.audit import AuditLog
from gputui.ops.traffic.plans import find_service, plan_shift
from gputui.ops.traffic.vocabulary import ShiftError, ShiftPlan, fmt_pct
from gputui.ops.traffic.weights import shares
from gputui.snapshot import ClusterSnapshot

# The last shift of a service is recent: the log is read from its end, at most this many entries or bytes
# (a year of log, or a hostile 200 MB line, is never read whole).
AUDIT_LINES_READ = 5000
AUDIT_BYTES_READ = 16 * 1024 * 1024


def last_shift(audit: AuditLog, service_key: str) -> dict[str, Any]:
    """The last shift of this service that went through, as the audit log has it (lines it cannot use are
    skipped: the reader checked the weights are integers by version name)."""
    def wanted(entry: dict[str, Any]) -> bool:
        params = entry.get("params") or {}
        return entry.get("action") == "shift" and entry.get("result") == "ok" and params.get("service") == service_key

    read = audit.find_last(wanted, AUDIT_LINES_READ, AUDIT_BYTES_READ)
    if read.error:
        raise ShiftError(f"nothing to undo: {read.error}")
    if read.entries and wanted(read.entries[0]):
        return read.entries[0]
    where = shown(audit.path) if audit.path else "the audit log"
    looked = "" if read.complete and len(read.entries) < AUDIT_LINES_READ else " (its last entries read)"
    skipped = f"; {read.skipped} unreadable lines skipped" if read.skipped else ""
    # The log's path last: an error is shown cut to one line, and a long path must not cut off what was found.
    raise ShiftError(f"no shift of {service_key} to undo{skipped}: looked in {where}{looked}")


def plan_undo(snapshot: ClusterSnapshot, service_key: str, audit: AuditLog, *, route: Mapping[str, Any] | None = None,
              api_versions: Mapping[str, str] | None = None) -> ShiftPlan:
    service = find_service(snapshot, service_key)
    entry = last_shift(audit, service.key)
    params = entry["params"]
    before: dict[str, int | None] = dict(params.get("from") or {})
    after: dict[str, int | None] = dict(params.get("to") or {})
    names = {v.name for v in service.versions}
    if set(before) != names:
        raise ShiftError(f"{service.key}'s versions changed since the shift of {visible(entry.get('time'), 40)} "
                         f"({visible(', '.join(sorted(before)), 200)} then, {', '.join(sorted(names))} now): "
                         "nothing to undo to")
    plan = plan_shift(snapshot, service.key, shares(before), route=route, api_versions=api_versions)
    # The log is outside input: its time and identity are shown as text, never as terminal controls.
    note = (f"undoes the shift of {visible(entry.get('time'), 40)} by {visible(entry.get('identity'), 200)}: back to "
            + ", ".join(f"{k} {fmt_pct(p)}" for k, p in shares(before).items()))
    blockers = list(plan.blockers)
    now = {v.name: v.current_weight for v in plan.versions}
    if any(now.get(k) != w for k, w in after.items()):
        blockers.append(f"{plan.target} moved since that shift (now "
                        + ", ".join(f"{v.name} {fmt_pct(v.current_pct)}" for v in plan.versions)
                        + "): undoing it would also revert that change")
    return replace(plan, blockers=tuple(blockers), notes=(*plan.notes, note))
