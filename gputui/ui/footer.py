"""The key footer, compact below 120 columns so `? Help` still fits at 80."""

from __future__ import annotations

from textual.widgets import Footer

COMPACT_BELOW = 120


class KeyFooter(Footer):
    def on_mount(self) -> None:
        self.compact = self.app.size.width < COMPACT_BELOW

    def on_resize(self) -> None:
        self.compact = self.app.size.width < COMPACT_BELOW
