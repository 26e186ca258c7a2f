"""`p` with several drains: each one this gputui ran, running first, with its nodes, state and what is left;
enter opens its board. Drains run side by side (issue 35, item 2), each on its own nodes."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from gputui.ops.drain.events import EventKind as K
from gputui.present.cells import ago
from gputui.ui.base import ClusterScreen
from gputui.ui.runs.drain import DrainRun
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import HeaderBar
from gputui.ui.widgets.item_list import ItemList


def describe(run: DrainRun, now: float) -> str:
    """One drain in a line: its nodes, how far, and what is left."""
    with run.lock:
        pods = list(run.pods.values())
        ended = run.progress.nodes_ended()
    moved = sum(r.moved for r in pods)
    live = sum(r.sessions or 0 for r in pods if r.state is K.WAITING)
    state = "aborted" if run.aborted and run.finished else "finished" if run.finished else "running"
    return (f"{state:8} {', '.join(run.nodes)}: {ended}/{len(run.nodes)} nodes ended, {moved}/{len(pods)} "
            f"pods moved" + (f", {live} sessions left" if live and not run.finished else "")
            + f"; started {ago(max(0.0, now - run.started))} ago")


class DrainsListScreen(ClusterScreen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back", id="back")]

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="drains-title", classes="panel-title")
        yield ItemList(id="drains")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.show_drain()

    def show_drain(self) -> None:
        drains = sorted(self.app.drains, key=lambda s: (s.finished, -s.started))
        running = sum(not s.finished for s in drains)
        title = Text(" Drains ", style="bold")
        title.append(f"{running} running, {len(drains) - running} ended   enter opens its board", style="dim")
        self.query_one("#drains-title", Static).update(title)
        now = self.app.clock()
        lines = [describe(s, now) for s in drains]
        if lines != getattr(self, "_shown", None):  # each event moves a drain: rebuild the rows only on change
            self._shown = lines
            self.query_one(ItemList).set_items([(Text(line), s) for line, s in zip(lines, drains, strict=True)])

    def on_item_list_chosen(self, event: ItemList.Chosen) -> None:
        from gputui.ui.screens.drain_progress import DrainProgressScreen  # noqa: PLC0415 (screen: loaded when first shown)

        self.app.push_screen(DrainProgressScreen(event.payload))
