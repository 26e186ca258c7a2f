"""`:versions`: the version matrix (gputui.versions) as a table, redrawn on each snapshot; a value that differs
from the majority of the node's pool is marked ≠ in the drift colour, unknown is –. The same rows as
`gputui versions`."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from gputui.present import cells
from gputui.ui.base import ClusterScreen
from gputui.ui.footer import KeyFooter
from gputui.ui.header import HeaderBar
from gputui.ui.key_table import KeyTable
from gputui.ui.table_sync import sync_rows
from gputui.versions import COLUMNS, version_matrix


class VersionsScreen(ClusterScreen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="back")]

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="versions-title", classes="panel-title")
        yield KeyTable(id="versions", cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#versions", KeyTable)
        for label in ("Node", "Pool", *(c.capitalize() for c in COLUMNS), "Upgrade", "Stuck because"):
            table.add_column(label, key=label.lower())
        self.show_snapshot()
        table.focus()

    def show_snapshot(self) -> None:
        snapshot = self.app.snapshot
        if snapshot is None:
            return
        rows = version_matrix(snapshot, self.app.settings.pool_labels)
        drifting = sum(1 for r in rows if r.drift)
        title = Text(" Versions ", style="bold")
        title.append(f"{drifting} of {len(rows)} nodes differ from their pool" if drifting
                     else f"{len(rows)} nodes, no drift within their pools",
                     style=f"bold {self.app.palette.drift}" if drifting else "dim")
        self.query_one("#versions-title", Static).update(title)
        drift_style = f"bold {self.app.palette.drift}"
        sync_rows(self.query_one("#versions", KeyTable), {
            r.node: (Text(r.node), Text(r.pool), *(
                Text(("≠" if c in r.drift else "") + (r.values.get(c) or "–"), style=drift_style if c in r.drift else "")
                for c in COLUMNS), Text(self._upgrade(r.node, r.upgrade)), Text(r.stuck or "", style=drift_style))
            for r in rows})

    def _upgrade(self, node: str, state: str) -> str:
        """The state and how long it has held, as far as gputui has watched (≥: since gputui first looked)."""
        since = self.app.upgrade_clock.since(node, self.app.clock()) if state else None
        if since is None:
            return state or "–"
        seconds, exact = since
        return f"{state} {'' if exact else '≥'}{cells.ago(seconds)}"
