"""`:versions`: the version matrix (gputui.policy.versions), redrawn on each snapshot. What is the same on every node
is said once above the table, and what no node reports too; the table keeps the columns that differ, with
the node's name fixed at the left, nodes that drifted or whose driver upgrade is stuck first; a value that
differs from the majority of the node's pool is marked ≠ in the drift colour, unknown is –. Why the selected
node's upgrade is stuck is written in full below the table (issue 35: that column was cut even at 200
columns). `enter` opens the node. The same rows as `gputui versions`."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.widgets import DataTable, Static

from gputui.policy.versions import VersionRow, problems_first, varying, version_matrix
from gputui.present import cells
from gputui.ui.base import ClusterScreen
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import HeaderBar
from gputui.ui.widgets.key_table import KeyTable
from gputui.ui.widgets.table_sync import sync_rows

LABELS = {"cuda": "CUDA", "os": "OS"}


class VersionsTable(KeyTable):
    """← and → scroll by a quarter of the table's width (one cell per press was no way to read a wide row)."""

    def action_cursor_right(self) -> None:
        self.scroll_to(x=self.scroll_target_x + max(8, self.size.width // 4), animate=False)

    def action_cursor_left(self) -> None:
        self.scroll_to(x=max(0, self.scroll_target_x - max(8, self.size.width // 4)), animate=False)


class VersionsScreen(ClusterScreen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back", id="back")]
    DEFAULT_CSS = """
    #versions-same { height: auto; padding: 0 1; color: $text-muted; }
    #versions-why { height: auto; max-height: 5; padding: 0 1; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._columns: tuple[str, ...] = ()
        self._rows: dict[str, VersionRow] = {}

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="versions-title", classes="panel-title")
        yield Static(id="versions-same")
        yield VersionsTable(id="versions", cursor_type="row", zebra_stripes=True)
        yield Static(id="versions-why")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#versions", KeyTable)
        table.fixed_columns = 1  # the node's name never scrolls away
        self.show_snapshot()
        table.focus()

    def on_resize(self, event: Resize) -> None:
        self.query_one("#versions", KeyTable).scroll_to(x=0, animate=False)  # a new width: from the left again

    def show_snapshot(self) -> None:
        snapshot = self.app.snapshot
        if snapshot is None:
            return
        rows = problems_first(version_matrix(snapshot, self.app.settings.pool_labels))
        self._rows = {r.node: r for r in rows}
        columns, same, unread = varying(rows)
        drifting = sum(1 for r in rows if r.drift)
        stuck = sum(1 for r in rows if r.stuck)
        title = Text(" Versions ", style="bold")
        title.append(f"{drifting} of {len(rows)} nodes differ from their pool" if drifting
                     else f"{len(rows)} nodes, no drift within their pools",
                     style=f"bold {self.app.palette.drift}" if drifting else "dim")
        if stuck:
            title.append(f" · {stuck} driver upgrade{'s' * (stuck != 1)} stuck", style=f"bold {self.app.palette.alert}")
        self.query_one("#versions-title", Static).update(title)
        said = Text()
        if same:
            said.append("Same on every node: ", style="bold")
            said.append(" · ".join(f"{LABELS.get(c, c)} {v}" for c, v in same.items()))
        if unread:
            said.append(("\n" if same else "") + "Read on no node: ", style="bold")
            said.append(", ".join(unread))
        self.query_one("#versions-same", Static).update(said)
        table = self.query_one("#versions", KeyTable)
        if columns != self._columns:
            table.clear(columns=True)
            for label in ("Node", "Pool", *(LABELS.get(c, c.capitalize()) for c in columns), "Upgrade"):
                table.add_column(label, key=label.lower())
            self._columns = columns
        drift_style = f"bold {self.app.palette.drift}"
        sync_rows(table, {
            r.node: (Text(r.node, style=drift_style if r.stuck or r.drift else ""), Text(r.pool), *(
                Text(("≠" if c in r.drift else "") + (r.values.get(c) or "–"), style=drift_style if c in r.drift else "")
                for c in columns), Text(self._upgrade(r.node, r.upgrade) + (" ⚠" if r.stuck else ""),
                                        style=drift_style if r.stuck else ""))
            for r in rows})
        self._why()

    def _why(self) -> None:
        table = self.query_one("#versions", KeyTable)
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value if table.row_count else None
        row = self._rows.get(key or "")
        text = Text()
        if row is not None:
            text.append(f"{row.node}: ", style="bold")
            if row.stuck:
                text.append(f"{row.upgrade} stuck because ", style=f"bold {self.app.palette.drift}")
                text.append(row.stuck)
            else:
                state = f"driver upgrade {row.upgrade}, moving" if row.upgrade else "no driver upgrade"
                drift = f"; differs from its pool in {', '.join(sorted(row.drift))}" if row.drift else ""
                text.append(state + drift, style="dim")
            text.append("   enter opens the node", style="dim")
        self.query_one("#versions-why", Static).update(text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._why()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.app.open_node(event.row_key.value)

    def _upgrade(self, node: str, state: str) -> str:
        """The state and how long it has held, as far as gputui has watched (≥: since gputui first looked)."""
        since = self.app.upgrade_clock.since(node, self.app.clock()) if state else None
        if since is None:
            return state or "–"
        seconds, exact = since
        return f"{state} {'' if exact else '≥'}{cells.ago(seconds)}"
