"""A read-only detail over any screen (an audit entry in full): esc closes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from gputui.ui.base import ClusterModal


class DetailScreen(ClusterModal[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "close", "Close", id="detail-close")]

    def __init__(self, title: str, body: RenderableType,
                 ticking: Callable[[], RenderableType] | None = None) -> None:
        """`ticking`: the body made again, for a body that shows ages (a node's heartbeat): redrawn as time
        passes, so an age never stands still on screen."""
        super().__init__()
        self._title = title
        self._body = body
        self._ticking = ticking

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self._title, style="bold"), id="dialog-title")
            with VerticalScroll(id="detail-body"):
                yield Static(self._body, id="detail-text")
            yield Static(Text.assemble(("esc", "bold"), " close"), id="dialog-keys")

    def refresh_age(self) -> None:
        if self._ticking is not None:
            self.query_one("#detail-text", Static).update(self._ticking())

    def action_close(self) -> None:
        self.dismiss(None)
