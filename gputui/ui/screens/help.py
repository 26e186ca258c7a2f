"""The keys in force on the screen beneath, read from its live bindings."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from gputui.backends.base import NEEDS
from gputui.ui.base import ClusterModal


def key_label(app: App, key: str) -> str:
    return app.get_key_display(Binding(key, ""))


class HelpScreen(ClusterModal[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss_help", "Close", id="close-help")]

    def __init__(self, beneath: Screen) -> None:
        super().__init__()
        self._beneath = beneath

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(self._table(), id="help-keys")

    def _table(self) -> Table:
        app = self.app
        table = Table(title=f"gputui keys  ·  keymap {app.keymap_name}", expand=True, show_edge=False,
                      box=None, padding=(0, 1))
        table.add_column("Key", style="bold", no_wrap=True)
        table.add_column("Does")
        table.add_column("", style="dim", no_wrap=True)
        # The live bindings of the screen beneath (focused widget, screen, app), so a keymap's
        # keys are what is listed; one row per action, its keys together.
        rows: dict[str, tuple[list[str], str, bool]] = {}
        for key, active in self._beneath.active_bindings.items():
            binding = active.binding
            if not binding.description or not binding.id:
                continue  # widget plumbing (copy, focus)
            # Write keys stay live (they say why when refused): the backend says which are unavailable.
            operation = binding.action.partition("(")[0]
            usable = active.enabled and not (operation in NEEDS and app.backend.why_not(operation))
            keys, _, enabled = rows.setdefault(binding.id, ([], binding.tooltip or binding.description, usable))
            keys.append(key_label(app, key))
        refused = "unavailable (read-only)" if app.read_only else "unavailable (not permitted)"
        for keys, does, enabled in rows.values():
            table.add_row(" ".join(keys), Text(does), "" if enabled else refused)
        table.add_row("", "", "")
        table.add_row("", Text("Node states: Ready, NotReady, Cordoned, Draining, Upgrading (GPU Operator driver upgrade)."), "")
        table.add_row("", Text("≠ before a driver version: it differs from the fleet's majority."), "")
        table.add_row("", Text("GPUs 7/7(8): allocated / allocatable, (capacity) when a GPU was taken out."), "")
        return table

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
