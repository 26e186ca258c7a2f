"""`gputui scale-down SERVICE VERSION REPLICAS`: the old version scaled down once its sessions are low, the
idlest pods first (pod-deletion-cost from live sessions). Exit 0 done or a clean dry run; 1 refused (a pod
still holds sessions, a count not confirmed) or a failed write; 2 bad input (an unknown service or version, a
version no Deployment runs, a count of replicas it cannot go to), read-only or no cluster."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from gputui.backends.base import Backend, BackendError, error_line
from gputui.cli.common import EXIT_NOT_DONE, EXIT_USAGE, fail
from gputui.ops.context import OpContext
from gputui.ops.scale_down import plan_scale_down, run_scale_down
from gputui.settings import Settings


def run(settings: Settings, args: argparse.Namespace, backend_factory: Callable[[Settings], Backend]) -> int:
    if args.replicas < 0 or args.threshold < 0 or (args.confirm_sessions is not None and args.confirm_sessions < 0):
        return fail("replicas, --threshold and --confirm-sessions are 0 or more", EXIT_USAGE)
    backend = backend_factory(settings)
    try:
        why = backend.why_not("scale_down")  # read-only, protected, or an identity that may not (or not known)
        if why and not args.dry_run:
            return fail(why, EXIT_USAGE)
        try:
            snapshot = backend.reader.snapshot()
            plan = plan_scale_down(snapshot, args.service, args.version, args.replicas, args.threshold)
        except BackendError as exc:  # no cluster, or nothing of that name to scale: the input, not a refusal
            return fail(error_line(exc), EXIT_USAGE)
        tag = "SIMULATED: " if snapshot.simulated else ""
        print(tag + plan.describe())
        for blocker in plan.blockers:
            print(f"{tag}blocked: {blocker}")
        if args.dry_run:
            return EXIT_NOT_DONE if plan.blockers and not args.force else 0
        print(tag + run_scale_down(plan, OpContext.of(backend, settings), force=args.force,
                                   confirm_sessions=args.confirm_sessions))
        return 0
    except BackendError as exc:
        return fail(error_line(exc), EXIT_NOT_DONE)
    finally:
        backend.close()
