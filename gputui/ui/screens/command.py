"""Command mode: `:` opens a one-line prompt at the bottom, with completion, over any screen."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.suggester import Suggester
from textual.widgets import Input, Static

from gputui.ui.base import ClusterModal
from gputui.ui.keys.commands import COMMANDS, Command, CommandError, complete, parse

Choices = Callable[[], Mapping[str, Sequence[str]]]
MENU_LINES = 6


class CommandSuggester(Suggester):
    def __init__(self, choices: Choices) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self._choices = choices

    async def get_suggestion(self, value: str) -> str | None:
        # Inline suggestions must extend what was typed; 'contains' matches show in the menu only.
        matches = [m for m in complete(value, self._choices()) if m.startswith(value) and m != value]
        return matches[0] if matches else None


class CommandScreen(ClusterModal[Command | None]):
    DEFAULT_CSS = """
    CommandScreen { align: left bottom; background: $background 0%; }
    #command-box { height: auto; width: 100%; background: $panel; }
    #command-menu { height: auto; padding: 0 1; color: $foreground; }
    #command-row { height: 1; background: $panel; }
    #command-colon { width: 2; padding-left: 1; text-style: bold; }
    #command-input { border: none; height: 1; padding: 0; background: $panel; width: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="command-cancel"),
        Binding("tab", "complete", "Complete", id="command-complete"),
    ]

    def __init__(self, choices: Choices) -> None:
        super().__init__()
        # Gathered once per prompt, not per keystroke: it reads the kubeconfig and walks every pod.
        self._choices = functools.cache(choices)

    def compose(self) -> ComposeResult:
        with Vertical(id="command-box"):
            yield Static(id="command-menu")
            with Horizontal(id="command-row"):
                yield Static(":", id="command-colon")
                yield Input(id="command-input", placeholder="command: nodes, drain NODE, theme NAME… (tab completes)",
                            suggester=CommandSuggester(self._choices), select_on_focus=False)

    def on_mount(self) -> None:
        self._menu("")
        self.query_one(Input).focus()

    def _menu(self, value: str, error: str | None = None) -> None:
        menu = Text()
        if error:
            menu.append(error, style=f"bold {self.app.palette.alert}")
        else:
            matches = complete(value, self._choices())[:MENU_LINES]
            helps = {s.name: s.help for s in COMMANDS}
            for i, line in enumerate(matches):
                if i:
                    menu.append("\n")
                menu.append(":" + line.rstrip(), style="bold" if i == 0 else "")
                word = line.split(" ", 1)[0]
                if " " not in line.rstrip() and word in helps:
                    menu.append("  " + helps[word], style="dim")
        self.query_one("#command-menu", Static).update(menu)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._menu(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        choices = self._choices()
        try:
            command = parse(event.value, choices)
        except CommandError as exc:
            matches = complete(event.value, choices)
            if len(matches) != 1:  # one match ('drain h100-07' -> gpu-h100-07) is taken as meant
                self._refused(event.value, self._ambiguous(event.value, matches) or str(exc))
                return
            try:
                command = parse(matches[0], choices)
            except CommandError:
                self._refused(event.value, str(exc))
                return
        self.dismiss(command)

    @staticmethod
    def _ambiguous(value: str, matches: list[str]) -> str:
        """':drain h100' with eleven nodes named so: which they are, not "no node" (issue 35)."""
        _head, _, typed = value.strip().removeprefix(":").partition(" ")
        if len(matches) < 2 or not typed:
            return ""
        names = [m.partition(" ")[2] for m in matches]
        shown = ", ".join(names[:4]) + (f", … ({len(names) - 4} more)" if len(names) > 4 else "")
        return f"'{typed}' matches {len(names)}: {shown}; type more of the name (tab takes the first)"

    def _refused(self, value: str, why: str) -> None:
        """Say why, and select what was typed: the next key replaces it, an arrow keeps it to edit (the old
        text stayed in the prompt, and what was typed next was added to it)."""
        self._menu(value, why)
        box = self.query_one(Input)
        box.select_all()

    def action_complete(self) -> None:
        box = self.query_one(Input)
        matches = complete(box.value, self._choices())
        if matches:
            box.value = matches[0]
            box.cursor_position = len(box.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
