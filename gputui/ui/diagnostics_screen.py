"""The troubleshooting list as a screen: pending GPU pods, lost GPUs, drift, silent exporters."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from gputui.ui.base import ClusterScreen

from gputui.health import Finding, diagnose
from gputui.ui.footer import KeyFooter
from gputui.ui.header import HeaderBar


class DiagnosticsScreen(ClusterScreen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="back")]

    def __init__(self) -> None:
        super().__init__()
        self.findings: list[Finding] = []

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="diag-title", classes="panel-title")
        with VerticalScroll(id="diag-scroll"):
            yield Static(id="diagnostics")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.show_snapshot()

    def show_snapshot(self) -> None:
        snap = self.app.snapshot
        if snap is None:
            return
        findings = diagnose(snap)
        title = Text(" Diagnostics ", style="bold")
        title.append(f"{len(findings)} finding{'s' if len(findings) != 1 else ''}" if findings else "nothing to report")
        self.query_one("#diag-title", Static).update(title)
        if findings == self.findings:
            return  # nothing changed: keep the scroll position and skip the redraw
        self.findings = findings
        # A wrapping table, not a DataTable: details are sentences that must be read whole at 80 columns.
        table = Table(box=None, expand=True, show_header=True, header_style="bold", padding=(0, 1))
        table.add_column("Kind", no_wrap=True, style=f"bold {self.app.palette.alert}")
        table.add_column("Node / pod", overflow="fold", ratio=2)
        table.add_column("Detail", overflow="fold", ratio=3)
        for f in findings:
            table.add_row(Text(f.kind), Text(f.subject), Text(f.detail))
        self.query_one("#diagnostics", Static).update(table)
