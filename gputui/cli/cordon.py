"""`gputui cordon NODE --reason TEXT [--ticket T] [--expires 4h]` and `gputui uncordon NODE [--override-owner]`: the
TUI's cordon and uncordon for scripts and runbooks. A cordon records who, why, the ticket and the expiry on the
node in the same write (gputui.ops.cordon); an uncordon over another actor's hold (NVSentinel, the GPU Operator
mid-upgrade, Karpenter, the cluster autoscaler, a running gputui drain, another user's recorded cordon) is refused
unless --override-owner, which the audit log then names.

Exit 0 done, already there, or a clean dry run; 1 refused (another actor holds the node; a dry run that would be
refused) or a failed write; 2 bad input (no such node, a bad flag), read-only or a protected context."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from gputui.backends.base import Backend, BackendError, error_line
from gputui.cli.common import EXIT_NOT_DONE, EXIT_OK, EXIT_USAGE, fail
from gputui.ops.context import OpContext
from gputui.ops.cordon import CordonPlan, plan_cordon, refusal, run_cordon
from gputui.ops.errors import read_only_words
from gputui.settings import Settings

OVERRIDE_HINT = "--override-owner uncordons it anyway"


def _json(plan: CordonPlan, simulated: bool, dry_run: bool, refused: bool, result: str | None) -> dict[str, Any]:
    return {
        "node": plan.node, "verb": plan.verb, "already": plan.already, "plan": plan.describe(),
        "record": {"reason": plan.reason, "ticket": plan.ticket or None, "expires": plan.expires}
        if plan.cordon else None,
        "owner": plan.owner.to_dict() if plan.owner is not None else None,
        "refused": refusal(plan) if refused else None, "dry_run": dry_run, "result": result, "simulated": simulated,
    }


def run(settings: Settings, args: argparse.Namespace, backend_factory: Callable[[Settings], Backend]) -> int:
    verb: str = args.command
    cordon = verb == "cordon"
    override = bool(getattr(args, "override_owner", False))
    if settings.read_only and not args.dry_run:
        return fail(read_only_words(verb), EXIT_USAGE)
    backend = backend_factory(settings)
    try:
        why = backend.why_not(verb)  # read-only, protected, or an identity that may not patch nodes
        if why and not args.dry_run:
            return fail(why, EXIT_USAGE)
        ctx = OpContext.of(backend, settings)
        try:
            snapshot = backend.reader.snapshot()
            plan = plan_cordon(snapshot, args.node, cordon, reason=getattr(args, "reason", ""),
                               ticket=getattr(args, "ticket", ""), expires=getattr(args, "expires", None),
                               identity=ctx.audit.identity)
        except BackendError as exc:  # no cluster, or no such node: the input, not a refusal
            return fail(error_line(exc), EXIT_USAGE)
        refused = plan.foreign and not override
        result = None
        if not args.dry_run and not refused:
            result = run_cordon(plan, ctx, override_owner=override)
        if args.output == "json":
            json.dump(_json(plan, snapshot.simulated, args.dry_run, refused, result), sys.stdout, indent=2)
            print()
        else:
            tag = "SIMULATED: " if snapshot.simulated else ""
            print(tag + plan.describe())
            if result is not None:
                print(tag + result + (f" (overriding: {plan.owner.words()})" if plan.foreign and plan.owner else ""))
        if refused:
            return fail(f"{refusal(plan)}; {OVERRIDE_HINT}", EXIT_NOT_DONE)
        return EXIT_OK
    except BackendError as exc:  # a failed write, or the audit log that cannot take it (nothing was sent)
        return fail(error_line(exc), EXIT_NOT_DONE)
    finally:
        backend.close()
