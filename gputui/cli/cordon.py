"""`gputui cordon NODE --reason TEXT [--ticket T] [--expires 4h]` and `gputui uncordon NODE [--override-owner]`: the
TUI's cordon and uncordon for scripts and runbooks. A cordon records who, why, the ticket and the expiry on the
node in the same write (gputui.ops.cordon); an uncordon over another actor's hold (NVSentinel, the GPU Operator
mid-upgrade, Karpenter, the cluster autoscaler, a running gputui drain, another user's recorded cordon) is refused
unless --override-owner, which the audit log then names.

`gputui uncordon NODE --diag` runs a DCGM diagnostic on the node first (gputui.ops.diag) and uncordons only on a
pass; a fail, a warn or an unknown lists what failed, leaves the node cordoned and exits 1, unless --override-diag.
The verdict goes on the node's cordon record and in the audit log.

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
from gputui.ops.diag import DiagRun, run_diag
from gputui.ops.diag_gate import OVERRIDE_DIAG_HINT, GateDecision, audit_verdict, decide, record_verdict
from gputui.ops.errors import read_only_words
from gputui.settings import Settings

OVERRIDE_HINT = "--override-owner uncordons it anyway"


def _json(plan: CordonPlan, simulated: bool, dry_run: bool, refused: bool, result: str | None,
          diag: DiagRun | None = None, gate: GateDecision | None = None) -> dict[str, Any]:
    return {
        "diag": None if diag is None else {**diag.to_dict(), "uncordon": gate.uncordon if gate else None,
                                           "overridden": gate.overridden if gate else None},
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
    with_diag, override_diag = bool(getattr(args, "diag", False)), bool(getattr(args, "override_diag", False))
    if override_diag and not with_diag:
        return fail("--override-diag goes with --diag", EXIT_USAGE)
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
        why = backend.why_not(plan.operation)  # withdrawing gputui's NodeMaintenance: a delete as well
        if why and not args.dry_run:
            return fail(why, EXIT_USAGE)
        refused = plan.foreign and not override
        result = None
        tag = "SIMULATED: " if snapshot.simulated else ""
        diag: DiagRun | None = None
        gate: GateDecision | None = None
        if with_diag and not args.dry_run and not refused and not plan.already:
            # The owner is judged first: a diagnostic holds every GPU of the node for minutes, for nothing if
            # the uncordon is then refused.
            def progress(line: str) -> None:
                print(tag + line, file=sys.stderr, flush=True)
            diag = run_diag(plan.node, ctx, progress)
            gate = decide(diag, override_diag)
            plan = record_verdict(plan, diag, ctx)
            audit_verdict(diag, gate, ctx)
        if not args.dry_run and not refused and (gate is None or gate.uncordon):
            result = run_cordon(plan, ctx, override_owner=override, diag=diag.to_dict() if diag else None)
        if args.output == "json":
            json.dump(_json(plan, snapshot.simulated, args.dry_run, refused, result, diag, gate), sys.stdout, indent=2)
            print()
        else:
            print(tag + plan.describe())
            if with_diag and args.dry_run and not plan.already and not refused:
                print(tag + f"A DCGM diagnostic (dcgmi diag -r {settings.diag_level}, {settings.diag_image}) "
                      "would run first; the node is uncordoned only on a pass.")
            if diag is not None and gate is not None:
                for line in diag.lines():
                    print(tag + line)
                if diag.cleanup:
                    print(tag + diag.cleanup)
            if result is not None:
                print(tag + result + (f" (overriding: {plan.owner.words()})" if plan.foreign and plan.owner else ""))
        if refused:
            return fail(f"{refusal(plan)}; {OVERRIDE_HINT}", EXIT_NOT_DONE)
        if gate is not None and not gate.uncordon:
            return fail(f"{gate.line}; {OVERRIDE_DIAG_HINT}", EXIT_NOT_DONE)
        return EXIT_OK
    except BackendError as exc:  # a failed write, or the audit log that cannot take it (nothing was sent)
        return fail(error_line(exc), EXIT_NOT_DONE)
    finally:
        backend.close()
