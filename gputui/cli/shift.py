"""`gputui shift SERVICE --to VERSION=PCT ...`: the traffic shift of the TUI, for scripts and runbooks.

Exit codes (README's table): 0 done (or a clean dry run); 1 refused (a blocker, a route that cannot take it, nothing
to undo) or a failed write; 2 bad input (bad arguments, an unknown service or version, targets that cannot add
up), read-only (the flag, a protected context, an identity that may not patch) or no cluster.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from functools import partial

from gputui.backends.base import Backend, BackendError, error_line
from gputui.cli.common import EXIT_NOT_DONE as EXIT_REFUSED
from gputui.cli.common import EXIT_USAGE, fail
from gputui.ops.context import OpContext
from gputui.ops.errors import read_only_words
from gputui.ops.traffic import (
    ShiftError,
    apply_shift,
    find_service,
    on_route_now,
    plan_rollout_now,
    plan_shift,
    resolve_targets,
    served_api_versions,
)
from gputui.ops.traffic.undo import plan_undo
from gputui.present.shift import plan_text
from gputui.settings import Settings


def run(settings: Settings, args: argparse.Namespace, backend_factory: Callable[[Settings], Backend]) -> int:
    if settings.read_only:
        return fail(read_only_words("shift"), EXIT_USAGE)
    targets = dict(args.targets or ())
    if len(targets) != len(args.targets or ()):
        twice = sorted({v for v, _ in args.targets if sum(1 for w, _ in args.targets if w == v) > 1})
        return fail(f"--to names {', '.join(twice)} more than once", EXIT_USAGE)
    backend = backend_factory(settings)
    try:
        writer = backend.writer
        why = backend.why_not("shift")
        if why or writer is None:  # read-only, whatever the reason (the flag, a protected context, RBAC)
            return fail(why or read_only_words("shift"), EXIT_USAGE)
        try:
            snapshot = backend.reader.snapshot()
        except BackendError as exc:  # no cluster to act on: bad input, as for every command
            return fail(error_line(exc), EXIT_USAGE)
        try:
            service = find_service(snapshot, args.service)
        except ShiftError as exc:
            return fail(str(exc), EXIT_USAGE)
        if targets and service.router_kind:  # versions it lacks, percentages that cannot add up: the input
            _, bad = resolve_targets({v.name: service.share_pct(v.name) or 0.0 for v in service.versions}, targets)
            if bad:
                return fail("; ".join(bad), EXIT_USAGE)
        api = served_api_versions(backend)
        ctx = OpContext.of(backend, settings)  # its audit log: audit_for(settings.audit_log, backend)
        audit = ctx.audit
        if args.undo:
            plan = on_route_now(partial(plan_undo, snapshot, service.key, audit, api_versions=api), writer)
        elif args.rollout:
            plan = plan_rollout_now(snapshot, service.key, args.rollout, writer, api)
        else:
            plan = on_route_now(partial(plan_shift, snapshot, service.key, targets, api_versions=api), writer)
        problems = list(plan.errors) + ([] if args.force else [b + " (--force to shift anyway)" for b in plan.blockers])
        if args.dry_run:
            if args.output == "json":
                json.dump({**plan.to_dict(), "dry_run": True, "simulated": snapshot.simulated}, sys.stdout,
                          indent=2, ensure_ascii=False)
                sys.stdout.write("\n")
            else:
                sys.stdout.write(plan_text(plan, snapshot.simulated))
            return fail("; ".join(problems), EXIT_REFUSED) if problems else 0
        if problems:
            return fail("; ".join(problems), EXIT_REFUSED)
        line = apply_shift(plan, ctx, force=args.force)
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
