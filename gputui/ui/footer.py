"""The key footer, compact below 120 columns so `? Help` still fits at 80. Write keys the backend may not
use (read-only, or RBAC) are drawn dimmed; pressed, they still answer why (ClusterScreen.allowed)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from gputui.backends.base import NEEDS

COMPACT_BELOW = 120


class KeyFooter(Footer):
    def on_mount(self) -> None:
        self.compact = self.app.size.width < COMPACT_BELOW

    def on_resize(self) -> None:
        self.compact = self.app.size.width < COMPACT_BELOW

    def compose(self) -> ComposeResult:
        backend = getattr(self.app, "backend", None)  # gputui's app; a bare App in widget tests has none
        for widget in super().compose():
            if not isinstance(widget, FooterKey):
                yield widget
                continue
            operation = widget.action.partition("(")[0]  # rollout('promote') needs what rollout needs
            if operation in NEEDS and backend and backend.why_not(operation):
                widget._disabled = True  # as Footer marks a binding its screen disabled
                widget.add_class("-disabled")
            yield widget
