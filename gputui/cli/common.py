"""What every subcommand shares: the one exit-code table, the one error line, the backend it acts on."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from gputui.backends.base import Backend
from gputui.errors import first_line
from gputui.settings import Settings

if TYPE_CHECKING:
    from gputui.snapshot import ClusterSnapshot

# Exit codes of every gputui command (README): 0 done; 1 refused, blocked or not done (a node not drained, a
# shift refused by validation, a failed write); 2 bad input: flags, files, no cluster, read-only.
EXIT_OK, EXIT_NOT_DONE, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad input, worded for the user in one line (exit 2)."""


def fail(message: str, code: int = EXIT_USAGE) -> int:
    """One line on stderr, never a traceback; returns the exit code to return."""
    print(f"gputui: error: {first_line(message, 1000) or 'failed'}", file=sys.stderr)
    return code


def require_cluster(settings: Settings) -> None:
    """A headless command acts on the cluster it was pointed at, never on a simulation by surprise: with
    no kubeconfig it stops with one line (the TUI, where the header says SIMULATED, falls back instead)."""
    from gputui.backends.factory import have_cluster_config, kubeconfig_paths

    if not settings.demo and not have_cluster_config(settings):
        looked = ", ".join(str(p) for p in kubeconfig_paths(settings))
        raise UsageError(f"no kubeconfig found (looked for {looked}); give --kubeconfig or --context, "
                         f"or --demo for the simulated demo cluster")


def backend(settings: Settings, per_gpu: bool = False) -> Backend:
    from gputui.backends.factory import build_backend

    return build_backend(settings, per_gpu=per_gpu)


def read_snapshot(settings: Settings, per_gpu: bool = False) -> "ClusterSnapshot":
    """One snapshot, the connection closed after it: what a listing subcommand prints."""
    source = backend(settings, per_gpu=per_gpu)
    try:
        return source.reader.snapshot()
    finally:
        source.close()
