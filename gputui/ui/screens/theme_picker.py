"""The theme picker: moving through the list previews each theme; enter keeps it, escape goes back."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from gputui.ui.base import ClusterModal


class ThemePickerScreen(ClusterModal[str | None]):
    DEFAULT_CSS = """
    ThemePickerScreen { align: center middle; }
    #theme-box { width: 44; max-width: 100%; height: auto; max-height: 90%;
                 border: round $primary; background: $surface; padding: 0 1; }
    #theme-list { height: auto; max-height: 20; border: none; }
    #theme-hint { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "keep", "Keep", id="theme-keep"),
        Binding("escape", "cancel", "Cancel", id="theme-cancel"),
    ]

    def __init__(self, names: list[str], current: str) -> None:
        super().__init__()
        self._names = names
        self._original = current

    def compose(self) -> ComposeResult:
        with Vertical(id="theme-box"):
            yield Static("[b]Theme[/b]  (↑↓ preview)", id="theme-title")
            yield OptionList(*[Option(n, id=n) for n in self._names], id="theme-list")
            yield Static("enter keep · esc back · `theme:` in config.yaml makes it stick", id="theme-hint")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self._original in self._names:
            options.highlighted = self._names.index(self._original)
        options.focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id is not None:
            self.app.theme = event.option.id

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_keep(self) -> None:
        self.dismiss(self.app.theme)

    def action_cancel(self) -> None:
        self.app.theme = self._original
        self.dismiss(None)
