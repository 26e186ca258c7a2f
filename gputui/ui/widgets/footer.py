"""The key footer, compact below 120 columns so `? Help` still fits at 80. Write keys the backend may not
use (read-only, or RBAC) are drawn dimmed; pressed, they still answer why (ClusterScreen.allowed).

One widget drawing one line, not Textual's Footer: that composes a widget per key (some thirty on the
dashboard) and rebuilds them all whenever a screen is pushed or popped, which was most of the time it took to
open a node's detail and come back (issue 18, benchmarks/keys.py). Looks and clicks are the same."""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widget import Widget

from gputui.backends.base import NEEDS

COMPACT_BELOW = 120


class KeyFooter(Widget):
    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {"footer-key--key", "footer-key--description"}
    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        text-wrap: nowrap;
        text-overflow: clip;
        color: $footer-foreground;
        background: $footer-background;
        .footer-key--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .footer-key--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
    }
    """

    def __init__(self) -> None:
        super().__init__()
        # (first column, last column + 1, key, enabled) of each key drawn: what a click lands on.
        self._spans: list[tuple[int, int, str, bool]] = []

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen) -> None:
        if self.is_attached and screen is self.screen:
            self.refresh()

    def on_resize(self) -> None:
        self.refresh()

    def _keys(self) -> list[tuple[str, str, str, bool]]:
        """(key, shown key, description, enabled) per action, first binding first, as Textual's Footer shows."""
        backend = getattr(self.app, "backend", None)  # gputui's app; a bare App in widget tests has none
        seen: set[str] = set()
        out = []
        for _node, binding, enabled, _tooltip in self.screen.active_bindings.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            operation = binding.action.partition("(")[0]  # rollout('promote') needs what rollout needs
            if operation in NEEDS and backend and backend.why_not(operation):
                enabled = False
            out.append((binding.key, self.app.get_key_display(binding), binding.description, enabled))
        return out

    def render(self) -> Text:
        compact = self.app.size.width < COMPACT_BELOW
        key_style = self.get_component_rich_style("footer-key--key")
        desc_style = self.get_component_rich_style("footer-key--description")
        dim = Style(dim=True)
        line = Text(no_wrap=True, overflow="crop", end="")
        spans = []
        for key, shown, description, enabled in self._keys():
            start = len(line)
            extra = Style() if enabled else dim
            if compact:  # "key desc" and a space between keys
                line.append(shown, key_style + extra)
                if description:
                    line.append(f" {description}", desc_style + extra)
            else:  # " key desc " with no gap
                line.append(f" {shown} " if description else shown, key_style + extra)
                if description:
                    line.append(f"{description} ", desc_style + extra)
            spans.append((start, len(line), key, enabled))
            if compact:
                line.append(" ")
        self._spans = spans
        return line

    def on_mouse_down(self, event: events.MouseDown) -> None:
        for start, end, key, enabled in self._spans:
            if start <= event.x < end:
                if enabled:
                    self.app.simulate_key(key)
                else:
                    self.app.bell()
                return
