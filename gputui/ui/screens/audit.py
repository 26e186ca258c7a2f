"""The audit log, newest first: every write gputui made, when, with what parameters, by whom and how it
went; enter shows an entry in full. The log is outside input: it is read from its end, bounded, lines it
cannot use are skipped and counted in the title, and every string from it is shown through `visible()`."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from gputui.base.paths import shown
from gputui.base.safe_text import MAX_FIELD, visible
from gputui.ui.base import ClusterScreen
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import HeaderBar
from gputui.ui.widgets.item_list import ItemList

OK_RESULTS = ("ok", "evicted", "gone")
PARAMS_SHOWN = 2000  # characters of an entry's parameters on its row (enter shows them all)


def params_text(params: Any) -> str:
    """`key=value …` on one line (a shift's weights, a drain's options), control characters made visible."""
    if not isinstance(params, dict) or not params:
        return ""
    return visible("  ".join(
        f"{k}={json.dumps(v, sort_keys=True, separators=(',', ':')) if not isinstance(v, str) else v}"
        for k, v in params.items()), PARAMS_SHOWN)


def _text(value: Any, limit: int = MAX_FIELD) -> str:
    return visible("" if value is None else value, limit)


class AuditScreen(ClusterScreen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back", id="back")]

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
        read = audit.tail()
        entries = list(reversed(read.entries))
        where = shown(audit.path) if audit.path else "not written (no audit file)"
        title = Text(" Audit log ", style="bold") + Text(f"{len(entries)} entries  {where}   enter: in full",
                                                         style="dim")
        problems = [read.error] if read.error else []
        if read.skipped:
            problems.append(f"{read.skipped} unreadable lines skipped")
        if not read.complete:
            problems.append(f"only the last {read.bytes_read // 1024} kB of the log read")
        if audit.unrecorded:
            problems.append(f"not recorded: {audit.unrecorded[-1]}")
        if problems:
            title.append("   " + _text("; ".join(problems)), style=self.app.palette.alert)
        self.query_one("#audit-title", Static).update(title)
        self.query_one("#audit-head", Static).update(self._row([Text(h, style="bold") for h in
                                                                ("Time (UTC)", "Action", "Target", "Result", "Who")]))
        if entries == self._shown:
            return
        self._shown = entries
        palette = self.app.palette
        wide = self.app.size.width >= 120
        rows = []
        for e in entries:
            when = _text(e.get("time"), 40).replace("T", " ").rstrip("Z")
            result = _text(e.get("result"))
            target = Text(_text(e.get("target")))
            params = params_text(e.get("params"))
            if params:
                target.append("\n" + params, style="dim")
            who = (f"{_text(e.get('identity'))}@{_text(e.get('context'))}" if wide else _text(e.get("identity")))
            rows.append((self._row([Text(when if wide else when[5:]), Text(_text(e.get("action"), 60)), target,
                                    Text(result, style=palette.ok if result in OK_RESULTS else palette.alert),
                                    Text(who)]), e))
        self.query_one(ItemList).set_items(rows)

    def on_item_list_chosen(self, event: ItemList.Chosen) -> None:
        from gputui.ui.screens.detail import DetailScreen  # noqa: PLC0415 (screen: loaded when first shown)

        entry = event.payload
        # json.dumps escapes every control and non-ASCII character; visible() once more costs nothing.
        self.app.push_screen(DetailScreen(f"{_text(entry.get('action'), 60)} {_text(entry.get('target'))}",
                                          Text(visible(json.dumps(entry, indent=2, sort_keys=True), None,
                                                       newlines=True))))
