"""The question before a guided canary starts (issue 35): the plan with each step it will take now and the first
it would hold at, and why; `y` starts it, `f` starts it forcing each step past the capacity rule (what
`gputui rollout --force` does; offered only when that rule is what holds a step), `n` or esc cancels."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static

from gputui.ops.canary import CanaryPlan, Gates
from gputui.ops.canary_steps import StepPreview, preview_lines
from gputui.ui.screens.confirm import ConfirmScreen


def canary_question(plan: CanaryPlan, gates: Gates, steps: list[StepPreview], simulated: bool) -> str:
    lines = [f"{'SIMULATED: ' if simulated else ''}{plan.describe()}", "Each step, as it stands now:"]
    lines += [f"  {line}" for line in preview_lines(steps, force_key="f")]
    lines.append(gates.describe())
    if any(s.held for s in steps):
        lines.append("A held step is tried again at every look; space tries it now, x stops the canary, b rolls "
                     "it back.")
    lines.append("While it runs: space pauses or continues it, x stops it where it is, b rolls it back at once. "
                 "The old version is never scaled down or deleted by it.")
    return "\n".join(lines)


class CanaryConfirm(ConfirmScreen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("f", "force", "Start, forced", id="canary-force",
                        tooltip="Start the canary, each step forced past the capacity rule (rollout --force)")]

    def __init__(self, title: str, body: str, forceable: bool) -> None:
        super().__init__(title, body)
        self.forceable = forceable
        self.forced = False

    def compose(self) -> ComposeResult:
        keys = Text.assemble(("y", "bold"), " start   ")
        if self.forceable:
            keys.append_text(Text.assemble(("f", "bold"), " start, forcing past the capacity rule   "))
        keys.append_text(Text.assemble(("n", "bold"), "/", ("esc", "bold"), " cancel"))
        with Vertical(id="dialog"):
            yield Static(Text(self._title, style="bold"), id="dialog-title")
            yield Static(Text(self._body), id="dialog-body")
            yield Static(keys, id="dialog-keys")

    def action_force(self) -> None:
        if not self.forceable:
            self.app.notify("nothing to force: no step is held by the capacity rule")
            return
        self.forced = True
        self.dismiss(True)
