"""`gputui check --drill NODE`: seed 000 §6's injected-fault drill, run headless with progress lines; on a
real cluster only with --yes-i-mean-it, never read-only. Exit 0 when the service recovered, 1 when not."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from gputui.backends.base import Backend
from gputui.cli.common import EXIT_NOT_DONE, EXIT_OK, UsageError
from gputui.ops.context import OpContext
from gputui.ops.drill import DrillReport, plan_drill, run_drill
from gputui.ops.steps import run_steps
from gputui.settings import Settings

CONFIRM_FLAG = "--yes-i-mean-it"


def run(settings: Settings, args: argparse.Namespace, backend_factory: Callable[[Settings], Backend]) -> int:
    backend = backend_factory(settings)
    try:
        why = backend.why_not("drain")  # a cordon and an eviction: what a drain needs
        if why:
            raise UsageError(f"the drill writes (cordon, evict): {why}")
        plan = plan_drill(backend.reader.snapshot(), args.drill, args.drill_pod)
        tag = "SIMULATED: " if backend.simulated else ""
        print(f"{tag}{plan.describe()}", flush=True)
        if not backend.simulated and not args.yes_i_mean_it:
            raise UsageError(f"a drill on {backend.context} evicts a live pod: add {CONFIRM_FLAG} to run it")
        steps = run_drill(plan, OpContext.of(backend, settings), timeout_s=args.drill_timeout)
        report: DrillReport = run_steps(steps, lambda line: print(f"  {tag}{line}", flush=True))
    finally:
        backend.close()
    print(tag + summary(report))
    return EXIT_OK if report.recovered else EXIT_NOT_DONE


def summary(report: DrillReport) -> str:
    undo = "cordon undone" if report.undone else "UNDO FAILED: uncordon the node by hand"
    if report.recovered:
        return (f"recovered: {report.replacement} Ready after {report.ready_after_s:.0f}s, serving traffic after "
                f"{report.traffic_after_s:.0f}s; {undo}")
    return f"NOT recovered: {report.failure}; {undo}"
