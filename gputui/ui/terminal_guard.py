"""The last line between text from outside and the terminal: no character a terminal acts on leaves a
rendered line of the screen, whichever widget drew it.

Views make cluster text visible where they build it (gputui.base.safe_text), which also keeps widths right.
This guard is for the place that forgets: a Rich `Text` keeps an ESC as it is, and Textual writes a
segment's text to the terminal verbatim, so one `Text(node.kernel)` would let a node retitle or clear the
operator's terminal (kubectl's CVE-2021-25743). Every line Textual paints is joined into terminal output
by `Strip.render`, the one place this hooks; Textual's own control sequences (cursor moves, styles) are
added outside a strip's text and are untouched. `tests/ui/test_hostile_text.py` proves the hook holds on
the Textual in use.
"""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from textual.strip import Strip

from gputui.base.safe_text import is_clean, visible

_ORIGINAL = Strip.render


def _render(self: Strip, console: Any) -> str:
    if self._render_cache is None and not all(is_clean(text) and "\n" not in text for text, _, _ in self._segments):
        # A strip is one screen line: a newline in it is as unwanted as an ESC.
        self._segments = [Segment(visible(text, None), style, control) for text, style, control in self._segments]
    return _ORIGINAL(self, console)


def install() -> None:
    """Hook Strip.render (once; later calls do nothing)."""
    if Strip.render is not _render:
        Strip.render = _render  # type: ignore[method-assign]
