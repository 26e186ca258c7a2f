"""The `gputui` command: the TUI by default, headless subcommands for scripts and runbooks.

Every user error is one line on stderr and exit code 2; never a traceback. A crash (a bug) is one line
naming the crash file, which holds the traceback, and exit code 70.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gputui.backends.base import BackendError
from gputui.base import debug_log
from gputui.base.paths import shown, state_dir
from gputui.cli.common import UsageError, backend, crashed, fail, require_cluster
from gputui.cli.parser import build_parser, settings_from
from gputui.settings import SettingsError


def main(argv: Sequence[str] | None = None) -> int:
    # A library's stray log line (logging's last resort prints warnings on stderr; logging.error() would even
    # set up a handler for everyone) never reaches the terminal: gputui words its own errors, --debug its steps.
    if not logging.getLogger().handlers:
        logging.getLogger().addHandler(logging.NullHandler())
    _release_on_signals()
    streams = (sys.stdout, sys.stderr)
    try:
        return _run(argv)
    finally:  # a headless command wrapped them (safe_output); a caller running main() twice gets them back
        sys.stdout, sys.stderr = streams


def _run(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        settings = settings_from(args)
        debug_file = _debug(args.command is None) if getattr(args, "debug", False) else None
        if args.command == "rules":  # needs no cluster: a file to load into Prometheus
            from gputui.backends.recording_rules import rules_yaml  # noqa: PLC0415 (rules only)

            if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", args.host_label):
                raise UsageError(f"--host-label {args.host_label!r} is not a Prometheus label name")
            if not re.fullmatch(r"\d+(ms|s|m|h)", args.interval):
                raise UsageError(f"--interval {args.interval!r} is not a Prometheus duration (e.g. 30s, 1m)")
            sys.stdout.write(rules_yaml(args.host_label, args.interval))
            return 0
        if args.command is not None:
            # From here on a headless command prints nothing from outside raw (gputui.cli.safe_output).
            from gputui.cli import safe_output  # noqa: PLC0415 (rich, ~50 ms: headless commands only, not the TUI)

            safe_output.install(json_mode=getattr(args, "output", None) == "json")
            require_cluster(settings)
        if args.command == "nodes":
            from gputui.cli import nodes  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return nodes.run(settings, args.output, args.window)
        if args.command == "pools":
            from gputui.cli import node_pools  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return node_pools.run(settings, args)
        if args.command == "versions":
            from gputui.cli import versions  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return versions.run(settings, args.output)
        if args.command == "disruptions":
            from gputui.cli import disruptions  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return disruptions.run(settings, args.output)
        if args.command == "services":
            from gputui.cli import services  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return services.run(settings, args.output)
        if args.command == "rollout":
            from gputui.cli import rollout  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return rollout.run(settings, args, backend)
        if args.command == "scale-down":
            from gputui.cli import scale_down  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return scale_down.run(settings, args, backend)
        if args.command == "shift":
            from gputui.cli import shift  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return shift.run(settings, args, backend)
        if args.command == "check":
            from gputui.cli import check  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return check.run(settings, args, backend)
        if args.command == "serve":
            from gputui.cli import serve  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return serve.run(settings, args)
        if args.command in ("cordon", "uncordon"):
            from gputui.cli import cordon  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return cordon.run(settings, args, backend)
        if args.command == "evidence":
            from gputui.cli import evidence  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return evidence.run(settings, args, backend)
        if args.command == "drain":
            from gputui.cli import drain  # noqa: PLC0415 (a subcommand's module loads only when it runs)

            return drain.run(settings, args, backend)
        from gputui.cli import tui  # noqa: PLC0415 (the TUI's module (Textual): not for the headless commands)

        try:
            return tui.run(settings)
        finally:
            if debug_file is not None:
                print(f"gputui: debug lines written to {shown(debug_file)}", file=sys.stderr)
    except (UsageError, SettingsError, BackendError) as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gputui nodes | head`: the reader left, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - a bug: crashed() reports it with its traceback
        return crashed(exc)


def _release_on_signals() -> None:
    """SIGHUP (the SSH session dropped) and SIGTERM end gputui as they always did, once what the signal does not
    reach is gone: a running credential plugin (its own process group) and, where memfd is unavailable, the
    private directory of key files (gputui.backends.factory.release). A handler someone else set is kept."""

    def ended(signum: int, _frame: Any) -> None:
        from gputui.backends.factory import release  # noqa: PLC0415 (the backends: loaded only on the paths that connect)

        release()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for name in ("SIGHUP", "SIGTERM"):
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            if signal.getsignal(signum) == signal.SIG_DFL:
                signal.signal(signum, ended)
        except ValueError:  # not the main thread: the caller owns signals
            pass


def _debug(to_file: bool) -> Path | None:
    """--debug on: to stderr, or to a file (returned) when the terminal UI will own the terminal."""
    path = state_dir() / "debug.log" if to_file else None
    try:
        debug_log.start(path)
    except OSError as exc:
        raise UsageError(f"--debug: cannot write {path}: {exc.strerror or exc}") from None
    return path


if __name__ == "__main__":
    sys.exit(main())
