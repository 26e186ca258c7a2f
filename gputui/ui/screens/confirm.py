"""A yes/no question before any write: y or enter confirms, n or esc cancels."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static

from gputui.ui.base import ClusterModal


class ConfirmScreen(ClusterModal[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no"),
    ]

    def __init__(self, title: str, body: str) -> None:
        super().__init__()
        self._title = title
        self._body = body

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self._title, style="bold"), id="dialog-title")
            yield Static(Text(self._body), id="dialog-body")
            yield Static(Text.assemble(("y", "bold"), " confirm   ", ("n", "bold"), "/", ("esc", "bold"), " cancel"), id="dialog-keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
