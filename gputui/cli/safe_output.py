"""Every headless command's stdout and stderr pass through the one sanitiser (gputui.base.safe_text), so no text
from outside reaches a terminal or a log raw, whichever line printed it.

Two choke points, installed by `main()` before a command runs:
- `VisibleStream` wraps sys.stdout and sys.stderr: plain `print()`s (drain progress, plans, check's text,
  error lines) have their control characters made visible. For `-o json` it writes the JSON escape
  (`\\u009b`) instead, so the output stays valid JSON carrying the raw value.
- `console()` is the Rich console the table commands print with: it writes colour codes of its own to the
  real stream, and makes visible what the rendered cells hold (a Rich `Text` keeps an ESC as it is).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import IO, Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from gputui.base.safe_text import is_clean, json_escaped, visible


class VisibleStream:
    """A text stream that writes `visible()` text (newlines and tabs kept) to the stream it wraps."""

    def __init__(self, raw: IO[str], json_mode: bool = False) -> None:
        self.raw = raw
        self.json_mode = json_mode

    def write(self, text: str) -> int:
        if self.json_mode:
            safe = json_escaped(text)
        else:
            safe = text if is_clean(text) else visible(text, None, newlines=True)
        self.raw.write(safe)
        return len(text)

    def isatty(self) -> bool:
        # Rich asks to decide on colour codes: those it writes through console() to the raw stream.
        return False

    def __getattr__(self, name: str) -> Any:  # flush, fileno, encoding, ...: the wrapped stream's
        return getattr(self.raw, name)


def install(json_mode: bool) -> None:
    """Wrap stdout and stderr (main() puts the old ones back when the command returns)."""
    sys.stdout = VisibleStream(sys.stdout, json_mode)
    sys.stderr = VisibleStream(sys.stderr)


def raw_stdout() -> IO[str]:
    out = sys.stdout
    return out.raw if isinstance(out, VisibleStream) else out


class _VisibleConsole(Console):
    """A Rich console whose rendered text is made visible before it is written: Console.print renders
    through `render`, so this is the one place every table cell passes."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or is_clean(segment.text):
                yield segment
            else:
                yield Segment(visible(segment.text, None, newlines=True), segment.style, segment.control)


def console(width: int = 200) -> Console:
    """The console a table command prints with: colour on a terminal (unless NO_COLOR), `width` columns
    when the output is a pipe or a file."""
    out = raw_stdout()
    tty = out.isatty()
    return _VisibleConsole(file=out, no_color=bool(os.environ.get("NO_COLOR")), width=None if tty else width)
