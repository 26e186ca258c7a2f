"""`:pools`: GPU use per node pool and for the fleet (gputui.policy.node_pools): allocated, unallocated, mean utilisation,
and GPUs allocated but idle over the last hour (the app's IdleWatch: a range query in a worker, never on the UI
thread, never every refresh). Idle is "?" until read, or when the metrics cannot tell (said why)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from gputui.policy.figures import figures
from gputui.policy.node_pools import FLEET, IDLE_BELOW_PCT, fleet_pools, idle_why
from gputui.present.cells import NARROW
from gputui.ui.base import ClusterScreen
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import HeaderBar
from gputui.ui.widgets.key_table import KeyTable
from gputui.ui.widgets.table_sync import sync_rows


class NodePoolsScreen(ClusterScreen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back", id="back")]

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="pools-title", classes="panel-title")
        yield KeyTable(id="pools", cursor_type="row")
        yield Static(id="pools-note")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._short: bool | None = None  # the figures' form the columns were made for (show_snapshot)
        self.show_snapshot()
        self.query_one("#pools", KeyTable).focus()

    def on_resize(self) -> None:
        self.show_snapshot()  # the figures' long or short form follows the width

    def show_snapshot(self) -> None:
        app = self.app
        snapshot = app.snapshot
        if snapshot is None:
            return
        watch = app.idle_watch
        rows = fleet_pools(snapshot, watch.idle, app.settings.pool_labels)
        gpus = figures(snapshot, app.settings.temp_threshold).gpus
        self.query_one("#pools-title", Static).update(Text.assemble((" Pools ", "bold"), (
            f"{len(rows) - 1} pools, {gpus.text()} GPUs allocated", "dim")))
        # Below 100 columns whole cards and a "+" (as the header): the other schemes' figures would push Util and
        # Idle off an 80-column screen. The title gives the fleet's in full.
        short = app.size.width < NARROW
        table = self.query_one("#pools", KeyTable)
        if short != self._short:  # columns made anew: a column keeps the width its widest cell once gave it
            self._short = short
            table.clear(columns=True)
            for label in ("Pool", "Nodes", "Allocated", "Free", "Util", "Idle"):
                table.add_column(label, key=label.lower())
        sync_rows(table, {
            r.pool: (Text(r.pool, style="bold" if r.pool == FLEET else ""), Text(str(r.nodes)),
                     Text(r.use.text(short)), Text(r.use.free_text(short)),
                     Text("–" if r.util is None else f"{r.util:.0f}%"),
                     Text("?" if r.idle is None else str(r.idle), style=f"bold {app.palette.cordoned}" if r.idle else ""))
            for r in rows})
        why = idle_why(rows[-1], watch.why)
        note = f"Idle: allocated GPUs below {IDLE_BELOW_PCT:g}% over the last hour" + (f" (unknown: {why})" if why else "")
        if short and len(rows[-1].use.shown()) > 1:
            note += "\n+: MIG slices, shared replicas or DRA devices too (a wider screen shows each)"
        self.query_one("#pools-note", Static).update(Text(note, style="dim"))
        watch.want(app)
