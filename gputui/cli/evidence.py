"""`gputui evidence NODE [-o FILE] [--force]`: one node's evidence bundle for an RMA or incident ticket
(gputui.ops.evidence gathers it, gputui.ops.evidence_write makes the file). Read-only: nothing is written to the
cluster.

Exit 0: written, even with parts missing (each named on stderr and in the MANIFEST with its reason); 2: the node
itself cannot be read (no such node, no cluster, forbidden), or FILE exists and --force was not given."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gputui.backends.base import Backend, BackendError, error_line
from gputui.base.paths import shown
from gputui.cli.common import EXIT_OK, EXIT_USAGE, fail
from gputui.ops.evidence import gather
from gputui.ops.evidence_write import archive, default_path, done_line, missing_by_reason, write
from gputui.settings import Settings


def _progress(line: str) -> None:
    print(f"gputui: evidence: {line}", file=sys.stderr, flush=True)


def run(settings: Settings, args: argparse.Namespace, backend_factory: Callable[[Settings], Backend]) -> int:
    given = Path(args.file).expanduser() if args.file else None
    if given is not None and given.exists() and not args.force:  # before any read: nothing is wasted
        return fail(f"{shown(given)} exists: not replaced (--force replaces it)", EXIT_USAGE)
    backend = backend_factory(settings)
    try:
        try:
            ev = gather(backend, args.node, audit_log=settings.audit_log, progress=_progress,
                        pool_labels=settings.pool_labels)
        except BackendError as exc:  # the node itself: there is nothing to bundle
            return fail(f"node {args.node}: {error_line(exc)}", EXIT_USAGE)
    finally:
        backend.close()
    path = given or default_path(ev.node, time.time())
    try:
        write(path, archive(ev), force=args.force)
    except FileExistsError:
        return fail(f"{shown(path)} exists: not replaced (--force replaces it)", EXIT_USAGE)
    except OSError as exc:
        return fail(f"cannot write {shown(path)}: {exc.strerror or exc}", EXIT_USAGE)
    for why, names in missing_by_reason(ev):
        print(f"gputui: evidence: missing {names}: {why}", file=sys.stderr)
    print(done_line(ev, path))
    return EXIT_OK
