"""The audit log, newest first: every write gputui made, who made it, and how it went."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from gputui.paths import shown
from gputui.ui.base import ClusterScreen

from gputui.ui.footer import KeyFooter
from gputui.ui.header import HeaderBar


class AuditScreen(ClusterScreen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="back")]

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="audit-title", classes="panel-title")
        with VerticalScroll():
            yield Static(id="audit-log")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.show_snapshot()

    def show_snapshot(self) -> None:
        audit = self.app.audit
        entries = list(reversed(audit.entries()))
        where = shown(audit.path) if audit.path else "not written (no audit file)"
        self.query_one("#audit-title", Static).update(
            Text(" Audit log ", style="bold") + Text(f"{len(entries)} entries  {where}", style="dim"))
        table = Table(box=None, expand=True, padding=(0, 1), header_style="bold")
        for label, kw in (("Time", {"no_wrap": True}), ("Action", {"no_wrap": True}), ("Target", {"overflow": "fold", "ratio": 2}),
                          ("Result", {"overflow": "fold", "ratio": 1}),
                          ("Who", {"no_wrap": True, "overflow": "ellipsis", "ratio": 1})):
            table.add_column(label, **kw)
        palette = self.app.palette
        wide = self.app.size.width >= 120  # narrower: the identity alone, elided rather than broken mid-word
        for e in entries:
            result = str(e.get("result", ""))
            ok = result in ("ok", "evicted", "gone")
            table.add_row(
                Text(str(e.get("time", ""))[11:19]), Text(str(e.get("action", ""))), Text(str(e.get("target", ""))),
                Text(result, style=palette.ok if ok else palette.alert), Text(f"{e.get('identity', '')}@{e.get('context', '')}" if wide else str(e.get("identity", ""))),
            )
        self.table = table
        self.query_one("#audit-log", Static).update(table)
