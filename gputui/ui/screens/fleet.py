"""`:fleet` (or `--context a,b`): one row per cluster, each polled on its own (FleetWatch), and the fleet's
sums. `enter` dives into a cluster's dashboard (as `:ctx`); `esc` on that dashboard comes back here."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from gputui.policy.fleet import FLEET, ClusterRow, fleet_total
from gputui.present import cells
from gputui.ui.base import ClusterScreen
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.key_table import KeyTable
from gputui.ui.widgets.table_sync import sync_rows

# Freshness early: at 80 columns what is cut is the least needed (counts of drains and canaries).
COLUMNS = ("Cluster", "GPUs", "Util", "Alerts", "Read", "Nodes", "Drains", "Canaries")


class FleetScreen(ClusterScreen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back", id="back")]
    pauses_poll = True  # the app's own poll waits while this screen is on top (its pollers read every cluster)

    def on_screen_suspend(self) -> None:
        """Covered (a dialog, help) or left: what is shown next reads the app's snapshot."""
        self.app.resume_poll()

    def on_unmount(self) -> None:
        self.app.resume_poll()  # popped: its suspension may not be handled before it is removed

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-title", classes="panel-title")
        yield KeyTable(id="fleet", cursor_type="row")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#fleet", KeyTable)
        for label in COLUMNS:
            table.add_column(label, key=label.lower())
        self.show_snapshot()
        table.focus()

    def refresh_age(self) -> None:
        self.show_snapshot()

    def show_snapshot(self) -> None:
        app = self.app
        fleet = app.fleet
        if fleet is None:
            return
        rows = fleet.rows(app.settings.temp_threshold)
        total = fleet_total(rows)
        now, refresh = app.clock(), app.settings.refresh
        title = Text(" Fleet ", style="bold")
        title.append(f"{total.clusters} clusters", style="dim")
        if total.unread:
            title.append(f"  {total.unread} not read", style=f"bold {app.palette.alert}")
        title.append(f"  now on {app.backend.context}  enter opens one, esc there comes back", style="dim")
        self.query_one("#fleet-title", Static).update(title)
        sync_rows(self.query_one("#fleet", KeyTable), {r.context: self._cells(r, now, refresh) for r in [*rows, total]})

    def _cells(self, r: ClusterRow, now: float, refresh: float) -> tuple[Text, ...]:
        palette = self.app.palette
        read = r.taken_at is not None
        fresh = r.freshness(now, refresh) if r.context != FLEET else (
            f"{r.clusters - r.unread}/{r.clusters} read" + (f", oldest {now - r.taken_at:.0f}s" if r.taken_at else ""))
        bad = r.error or (read and fresh.startswith("STALE")) or (r.context == FLEET and r.unread)
        known = read or r.context == FLEET  # a cluster never read has no figures: –, not 0

        def figure(value: object, style: str = "") -> Text:
            return Text(str(value) if known else "–", style=style if known else "")

        return (Text(r.context, style="bold" if r.context in (FLEET, self.app.backend.context) else ""),
                figure(r.gpus.text()),
                Text(cells.pct(r.util), style=palette.heat(r.util)),
                figure(r.alerts_text(compact=self.app.size.width < 120) or "none",
                       f"bold {palette.alert}" if r.alerts else ""),
                Text(fresh, style=f"bold {palette.alert}" if bad else "dim"),
                figure(r.nodes),
                figure(r.drains, palette.draining if r.drains else ""),
                figure(r.canaries, palette.upgrading if r.canaries else ""))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """enter on a cluster: its dashboard (as :ctx)."""
        context = str(event.row_key.value)
        if context == FLEET:
            return
        self.app.pop_screen()
        if context != self.app.backend.context:
            self.app.switch_context(context)
