"""`gputui rollout SERVICE VERSION`: the guided canary, headless, with a line per step and per look at the
gates. Before anything is written it says, per step, whether it would be taken now or held and why (and a dry
run exits 1 when a step would be held). Exit 0 when the version reached its last step; 1 when it was rolled
back or held (gates failing or unreadable, no traffic to judge, not enough ready pods, pods waiting to be
evicted) or a write failed; 2 on bad input (an unknown service or version, a router
it cannot step, steps below the version's share now, a gate that is not a finite number above 0), read-only or
no cluster. Ctrl-C stops where it is and says how to roll back."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from gputui.backends.base import Backend, BackendError, error_line
from gputui.cli.common import EXIT_NOT_DONE, EXIT_OK, EXIT_USAGE, fail
from gputui.ops.canary import CanaryOptions, CanaryReport, Gates, plan_canary, run_canary
from gputui.ops.canary_steps import preview, preview_lines
from gputui.ops.context import OpContext
from gputui.ops.errors import read_only_words
from gputui.ops.steps import run_steps
from gputui.ops.traffic import fmt_pct
from gputui.settings import Settings


def run(settings: Settings, args: argparse.Namespace, backend_factory: Callable[[Settings], Backend]) -> int:
    for flag, x in (("--error-x", args.error_x), ("--latency-x", args.latency_x)):
        if not (math.isfinite(x) and x > 0):  # NaN or inf would switch the gate off (the parser refuses them too)
            return fail(f"{flag} must be a finite number above 0, got {x}", EXIT_USAGE)
    if not (math.isfinite(args.poll) and args.poll >= 1):
        return fail(f"--poll must be at least 1s, got {args.poll}", EXIT_USAGE)
    backend = backend_factory(settings)
    try:
        why = backend.why_not("shift")
        if why or backend.writer is None:
            return fail(why or read_only_words("the canary"), EXIT_USAGE)
        try:
            snapshot = backend.reader.snapshot()
            plan = plan_canary(snapshot, args.service, args.version, tuple(args.steps) if args.steps else None)
        except BackendError as exc:  # no cluster; no such service or version, steps it cannot take: the input
            return fail(error_line(exc), EXIT_USAGE)
        tag = "SIMULATED: " if snapshot.simulated else ""
        gates = Gates(error_ratio_x=args.error_x, latency_x=args.latency_x, window_s=args.window, hold_s=args.hold)
        print(f"{tag}{plan.describe()}\n{tag}{gates.describe()}", flush=True)
        # Each step as the canary would meet it now: the steps it will take, and where it would hold and why.
        steps_now = preview(snapshot, plan.service.key, plan.new, plan.steps, force=args.force)
        for line in preview_lines(steps_now):
            print(f"{tag}  {line}", flush=True)
        if args.dry_run:
            held = next((p for p in steps_now if p.held), None)
            if held is None:
                return EXIT_OK
            return fail(f"the canary would hold before {fmt_pct(held.step)}" + (
                ": --force passes the capacity rule" if held.forceable else ""), EXIT_NOT_DONE)
        steps = run_canary(plan, OpContext.of(backend, settings).paced(args.poll), CanaryOptions(gates, args.force))
        try:
            report: CanaryReport = run_steps(steps, lambda line: print(f"{tag}{line}", flush=True))
        except KeyboardInterrupt:
            back = " ".join(f"--to {k}={v:g}" for k, v in plan.start.items())
            print(f"{tag}stopped by the operator; traffic left as it is. Back to the start: "
                  f"gputui shift {plan.service.key} {back}", flush=True)
            return EXIT_NOT_DONE
    except BackendError as exc:
        return fail(error_line(exc), EXIT_NOT_DONE)
    finally:
        backend.close()
    reached = "–" if report.reached is None else fmt_pct(report.reached)
    print(f"{tag}{report.outcome}: {report.reason} (reached {reached})")
    return EXIT_OK if report.outcome == "done" else EXIT_NOT_DONE
