"""The troubleshooting list as a screen: the nodes that need attention (as the header counts them), then
pending GPU pods, pods not ready or restarting, drift, silent exporters. enter on a finding opens the node it
concerns (a pod's: the node it runs on)."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from gputui.base.safe_text import visible
from gputui.policy.health import Finding
from gputui.policy.problems import findings as all_findings
from gputui.policy.problems import summary
from gputui.ui.base import ClusterScreen
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import HeaderBar
from gputui.ui.widgets.item_list import ItemList


def _row(kind: Text, subject: Text, detail: Text) -> Table:
    """One line of the list; every row has the same column widths, so they line up."""
    grid = Table.grid(expand=True, padding=(0, 1))
    grid.add_column(width=10, no_wrap=True)
    grid.add_column(ratio=2, overflow="fold")
    grid.add_column(ratio=3, overflow="fold")  # details are sentences: wrapped, read whole
    grid.add_row(kind, subject, detail)
    return grid


class DiagnosticsScreen(ClusterScreen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back", id="back")]

    def __init__(self) -> None:
        super().__init__()
        self.findings: list[Finding] | None = None

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="diag-title", classes="panel-title")
        yield Static(_row(Text("Kind", style="bold"), Text("Node / pod", style="bold"), Text("Detail", style="bold")))
        yield ItemList(id="diagnostics")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.show_snapshot()

    def show_snapshot(self) -> None:
        snap = self.app.snapshot
        if snap is None:
            return
        problems = self.app.problems(snap)
        findings = all_findings(problems, snap)
        title = Text(" Diagnostics ", style="bold")
        # The same count as the header, /alert, gputui check and the wallboard: nodes, not alerts.
        title.append(summary(problems), style=f"bold {self.app.palette.alert}" if problems else self.app.palette.ok)
        others = len(findings) - len(problems)
        title.append(f" · {others} other finding{'s' if others != 1 else ''}" if others else " · nothing else to report")
        title.append("   enter opens the node", style="dim")
        modes = [f"{s.name}: {s.mode}" for s in snap.sources if s.mode]
        if modes:  # e.g. whether the fleet's GPU figures come from gputui's recording rules
            title.append(f"   {'; '.join(modes)}", style="dim")
        cache = self.app.cache_note or (self.app.keeper.note if self.app.keeper else "")
        if cache:  # the cached first frame: why there was none, or why none is kept
            title.append(f"   {visible(cache, 200)}", style="dim")
        self.query_one("#diag-title", Static).update(title)
        if findings == self.findings:
            return  # nothing changed: keep the cursor and skip the redraw
        self.findings = findings
        alert = f"bold {self.app.palette.alert}"
        self.query_one(ItemList).set_items(
            [(_row(Text(f.kind, style=alert), Text(f.subject), Text(f.detail)), f) for f in findings])

    def on_item_list_chosen(self, event: ItemList.Chosen) -> None:
        finding: Finding = event.payload
        snap = self.app.snapshot
        if snap is None:
            return
        node = finding.subject if snap.node(finding.subject) else None
        if node is None:
            pod = next((p for p in snap.pods if p.key == finding.subject), None)
            node = pod.node if pod else None
        if not node:
            self.app.notify(f"{finding.subject} is on no node: {finding.detail}", markup=False)
            return
        self.app.open_node(node)
