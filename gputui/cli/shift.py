"""`gputui shift SERVICE --to VERSION=PCT ...`: the traffic shift of the TUI, for scripts and runbooks.

Exit codes: 0 done (or a clean dry run); 1 refused by validation or failed
writing; 2 usage: bad arguments, unknown service, read-only.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, TextIO

from gputui.backends.base import Backend, BackendError, error_line
from gputui.ops.traffic import (
    ShiftError,
    ShiftPlan,
    apply_shift,
    find_service,
    fmt_pct,
    needs_route,
    plan_rollout,
    plan_shift,
    read_route,
    served_api_versions,
)
from gputui.settings import Settings

from gputui.cli.common import EXIT_NOT_DONE as EXIT_REFUSED, EXIT_USAGE, fail


def run(settings: Settings, args: argparse.Namespace, backend_factory: Callable[[Settings], Backend]) -> int:
    if settings.read_only:
        return fail("read-only: shift is unavailable", EXIT_USAGE)
    targets = dict(args.targets or ())
    backend = backend_factory(settings)
    try:
        writer = backend.writer
        why = backend.why_not("shift")
        if why or writer is None:
            return fail(why or "read-only", EXIT_USAGE if writer is None else EXIT_REFUSED)
        snapshot = backend.reader.snapshot()
        try:
            service = find_service(snapshot, args.service)
        except ShiftError as exc:
            return fail(str(exc), EXIT_USAGE)
        api = served_api_versions(backend)
        from gputui.ops.audit import audit_for

        audit = audit_for(settings.audit_log, backend)
        if args.undo:
            from gputui.ops.traffic.undo import plan_undo

            plan = plan_undo(snapshot, service.key, audit, api_versions=api)
            if needs_route(plan):
                plan = plan_undo(snapshot, service.key, audit, route=read_route(plan, writer), api_versions=api)
        elif args.rollout:
            plan = plan_rollout(snapshot, service.key, args.rollout, api_versions=api)
            if needs_route(plan):  # Argo's patches follow the Rollout as it is now
                plan = plan_rollout(snapshot, service.key, args.rollout, rollout=read_route(plan, writer),
                                    api_versions=api)
        else:
            plan = plan_shift(snapshot, service.key, targets, api_versions=api)
            if needs_route(plan):  # the exact patch is built on the route as it is now
                plan = plan_shift(snapshot, service.key, targets, route=read_route(plan, writer), api_versions=api)
        problems = list(plan.errors) + ([] if args.force else [b + " (--force to shift anyway)" for b in plan.blockers])
        if args.dry_run:
            _print_plan(plan, args.output, sys.stdout, simulated=snapshot.simulated)
            return fail("; ".join(problems), EXIT_REFUSED) if problems else 0
        if problems:
            return fail("; ".join(problems), EXIT_REFUSED)
        line = apply_shift(plan, writer, audit, force=args.force)
        for warning in plan.warnings:  # stdout stays the one result line
            print(f"gputui: warning: {warning}", file=sys.stderr)
    except BackendError as exc:
        return fail(error_line(exc), EXIT_REFUSED)
    finally:
        backend.close()
    if args.output == "json":
        json.dump({**plan.to_dict(), "applied": True, "simulated": snapshot.simulated, "result": line},
                  sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(f"{line} [SIMULATED: demo cluster]" if snapshot.simulated else line)
    return 0


def _print_plan(plan: ShiftPlan, output: str, out: TextIO, simulated: bool) -> None:
    if output == "json":
        json.dump({**plan.to_dict(), "dry_run": True, "simulated": simulated}, out, indent=2, ensure_ascii=False)
        out.write("\n")
        return
    if simulated:
        out.write("# demo cluster (simulated)\n")
    out.write(f"{plan.kind} {plan.service.namespace}/{plan.object_name}  "
              f"({plan.group}/{plan.api_version} {plan.plural})\n")
    if plan.action != "shift":
        out.write(f"action: {plan.action}\n")
    rows = [("VERSION", "NOW", "TARGET", "WEIGHT", "READY", "SESSIONS")]
    for v in plan.versions:
        weight = "–" if v.target_weight is None else (
            f"{v.current_weight} → {v.target_weight}" if v.changes else str(v.target_weight))
        rows.append((v.name, fmt_pct(v.current_pct), fmt_pct(v.target_pct), weight,
                     f"{v.ready}/{v.desired}", "–" if v.sessions is None else str(v.sessions)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")
    if plan.scale != 100:
        out.write(f"weights out of {plan.scale:,}\n")
    for e in plan.errors:
        out.write(f"error: {e}\n")
    for b in plan.blockers:
        out.write(f"blocked: {b}\n")
    for w in plan.warnings:
        out.write(f"warning: {w}\n")
    for n in plan.notes:
        out.write(f"note: {n}\n")
    for patch in (plan.patch, plan.then):
        if patch is not None:
            out.write(patch.render() + "\n")
    if plan.patch is None and plan.ok and not plan.changes:
        out.write("no change: nothing would be sent\n")
