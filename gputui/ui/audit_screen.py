"""The audit log, newest first: every write gputui made, when, with what parameters, by whom and how it
went; enter shows an entry in full."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from gputui.paths import shown
from gputui.ui.base import ClusterScreen
from gputui.ui.footer import KeyFooter
from gputui.ui.header import HeaderBar
from gputui.ui.item_list import ItemList

OK_RESULTS = ("ok", "evicted", "gone")


def params_text(params: Any) -> str:
    """`key=value …` on one line (a shift's weights, a drain's options)."""
    if not isinstance(params, dict) or not params:
        return ""
    return "  ".join(f"{k}={json.dumps(v, sort_keys=True, separators=(',', ':')) if not isinstance(v, str) else v}"
                     for k, v in params.items())


class AuditScreen(ClusterScreen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="back")]

    def __init__(self) -> None:
        super().__init__()
        self._shown: list[dict[str, Any]] | None = None

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="audit-title", classes="panel-title")
        yield Static(id="audit-head")
        yield ItemList(id="audit-log")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.show_snapshot()

    def _row(self, cells: list[Text]) -> Table:
        wide = self.app.size.width >= 120
        grid = Table.grid(expand=True, padding=(0, 1))
        grid.add_column(width=19 if wide else 14, no_wrap=True)  # the date too: a log spans days
        grid.add_column(width=9, no_wrap=True)
        grid.add_column(ratio=2, overflow="fold")
        grid.add_column(ratio=1, overflow="fold")
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        grid.add_row(*cells)
        return grid

    def show_snapshot(self) -> None:
        audit = self.app.audit
        entries = list(reversed(audit.entries()))
        where = shown(audit.path) if audit.path else "not written (no audit file)"
        self.query_one("#audit-title", Static).update(
            Text(" Audit log ", style="bold") + Text(f"{len(entries)} entries  {where}   enter: in full", style="dim"))
        self.query_one("#audit-head", Static).update(self._row([Text(h, style="bold") for h in
                                                                ("Time (UTC)", "Action", "Target", "Result", "Who")]))
        if entries == self._shown:
            return
        self._shown = entries
        palette = self.app.palette
        wide = self.app.size.width >= 120
        rows = []
        for e in entries:
            when = str(e.get("time", "")).replace("T", " ").rstrip("Z")
            result = str(e.get("result", ""))
            target = Text(str(e.get("target", "")))
            params = params_text(e.get("params"))
            if params:
                target.append("\n" + params, style="dim")
            who = f"{e.get('identity', '')}@{e.get('context', '')}" if wide else str(e.get("identity", ""))
            rows.append((self._row([Text(when if wide else when[5:]), Text(str(e.get("action", ""))), target,
                                    Text(result, style=palette.ok if result in OK_RESULTS else palette.alert),
                                    Text(who)]), e))
        self.query_one(ItemList).set_items(rows)

    def on_item_list_chosen(self, event: ItemList.Chosen) -> None:
        from gputui.ui.detail_screen import DetailScreen

        entry = event.payload
        self.app.push_screen(DetailScreen(f"{entry.get('action', '')} {entry.get('target', '')}",
                                          Text(json.dumps(entry, indent=2, sort_keys=True))))
