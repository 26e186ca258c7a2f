"""What every subcommand shares: the one exit-code table, the one error line, the backend it acts on."""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import TYPE_CHECKING

from gputui.backends.base import Backend
from gputui.base.errors import first_line
from gputui.base.paths import shown, state_dir
from gputui.settings import Settings

if TYPE_CHECKING:
    from gputui.snapshot import ClusterSnapshot

# Exit codes of every gputui command (README): 0 done; 1 refused, blocked or not done (a node not drained, a
# shift refused by validation, a failed write); 2 bad input: flags, files, no cluster, read-only; 70 gputui
# crashed (a bug: the traceback is in the crash file named on stderr; sysexits' EX_SOFTWARE).
EXIT_OK, EXIT_NOT_DONE, EXIT_USAGE, EXIT_CRASH = 0, 1, 2, 70


class UsageError(Exception):
    """Bad input, worded for the user in one line (exit 2)."""


def fail(message: str, code: int = EXIT_USAGE) -> int:
    """One line on stderr, never a traceback; returns the exit code to return."""
    print(f"gputui: error: {first_line(message, 1000) or 'failed'}", file=sys.stderr)
    return code


def crashed(exc: BaseException) -> int:
    """A crash: its traceback (no locals: they hold tokens and kubeconfig contents) to the crash file, one line
    naming it on stderr, exit 70. Never exit 0, never a traceback on the terminal."""
    from gputui import __version__  # noqa: PLC0415 (the installed metadata, ~20 ms: only for a crash)

    path = state_dir() / "crash.log"
    text = (f"gputui {__version__} crashed at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} "
            f"(Python {sys.version.split()[0]})\n" + "".join(traceback.format_exception(exc)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as error:
        sys.stderr.write(text)
        return fail(f"crashed ({type(exc).__name__}): its traceback is above ({path} could not be "
                    f"written: {error.strerror or error})", EXIT_CRASH)
    return fail(f"crashed ({type(exc).__name__}): the traceback is in {shown(path)} (please report it)",
                EXIT_CRASH)


def require_cluster(settings: Settings) -> None:
    """A headless command acts on the cluster it was pointed at, never on a simulation by surprise: with
    no kubeconfig it stops with one line (the TUI, where the header says SIMULATED, falls back instead)."""
    from gputui.backends.factory import have_cluster_config, kubeconfig_paths  # noqa: PLC0415 (the backends: not for --help or rules)

    if not settings.demo and not have_cluster_config(settings):
        looked = ", ".join(str(p) for p in kubeconfig_paths(settings))
        raise UsageError(f"no kubeconfig found (looked for {looked}); give --kubeconfig or --context, "
                         f"or --demo for the simulated demo cluster")


def backend(settings: Settings, per_gpu: bool = False) -> Backend:
    from gputui.backends.factory import build_backend  # noqa: PLC0415 (the backends: not for --help or rules)

    return build_backend(settings, per_gpu=per_gpu)


def read_snapshot(settings: Settings, per_gpu: bool = False) -> ClusterSnapshot:
    """One snapshot, the connection closed after it: what a listing subcommand prints."""
    source = backend(settings, per_gpu=per_gpu)
    try:
        return source.reader.snapshot()
    finally:
        source.close()
