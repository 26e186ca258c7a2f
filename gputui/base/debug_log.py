"""`--debug`: what the backends decide and what their reads cost, one line per event.

The lines say which metrics mode is in force and why (gputui's recorded series or the raw DCGM ones), how
many queries a read sent and how long it took, how long a snapshot took, and when a watch lists its
objects again. Headless commands write them to stderr; the terminal UI owns the terminal, so it writes
them to a file and names it on exit. Off, each call site costs one level check.

Nothing that can hold a secret is logged (no URL, header or kubeconfig); text from the cluster or a
store (error messages) has its control characters replaced and is cut to one bounded line.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from gputui.base.safe_text import visible

log = logging.getLogger("gputui")
log.propagate = False  # never into a host program's handlers
log.addHandler(logging.NullHandler())  # off: no "no handlers" warning from the logging module

MAX_LINE = 500


class _Line(logging.Formatter):
    """One printable line of bounded length per record, whatever text came in its arguments."""

    def format(self, record: logging.LogRecord) -> str:
        text = visible(super().format(record), None)  # the one sanitiser: an ESC shows as ␛
        return text if len(text) <= MAX_LINE else text[:MAX_LINE - 1] + "…"


def start(path: Path | None = None) -> Path | None:
    """Debug lines on from now on: to stderr, or appended to the file at `path` (its directory is made).
    Returns the file written to, if any. An unwritable file raises OSError with why."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(path, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Line("%(asctime)s gputui debug: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    return path


def stop() -> None:
    """Debug lines off (the handlers closed): for tests, and a process that runs main() twice."""
    for handler in list(log.handlers):
        if not isinstance(handler, logging.NullHandler):
            log.removeHandler(handler)
            handler.close()
    log.setLevel(logging.NOTSET)
