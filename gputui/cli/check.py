"""`gputui check`: the seeds' checklists against the cluster, as text, JSON or JUnit; exit 1 when one fails."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from gputui.backends.base import Backend
from gputui.checks.context import context_for
from gputui.checks.output import as_json, as_junit, as_text
from gputui.checks.result import exit_code
from gputui.checks.rules import run_checks
from gputui.cli import drill
from gputui.settings import Settings

WRITERS = {"text": as_text, "json": as_json, "junit": as_junit}


def run(settings: Settings, args: argparse.Namespace, backend_factory: Callable[[Settings], Backend]) -> int:
    if args.drill:
        return drill.run(settings, args, backend_factory)
    backend = backend_factory(settings)
    try:
        snapshot = backend.reader.snapshot()
        ctx = context_for(snapshot, settings, backend, backend.check_facts(args.window))
        results = run_checks(ctx, args.only)
    finally:
        backend.close()
    print(WRITERS[args.output](results, snapshot.context, snapshot.simulated))
    return exit_code(results, strict=args.strict)
