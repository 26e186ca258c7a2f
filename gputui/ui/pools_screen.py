"""`:pools`: GPU use per node pool and for the fleet (gputui.pools): allocated, unallocated, mean utilisation,
and GPUs allocated but idle over the last hour, read in a worker every IDLE_EVERY_S (a range query: never on
the UI thread, never every refresh). Idle is "?" until read, or when the metrics cannot tell (said why)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from gputui.backends.base import BackendError, error_line
from gputui.pools import FLEET, pool_rows
from gputui.ui.base import ClusterScreen
from gputui.ui.footer import KeyFooter
from gputui.ui.header import HeaderBar
from gputui.ui.key_table import KeyTable
from gputui.ui.messages import IdleRead
from gputui.ui.table_sync import sync_rows

IDLE_EVERY_S = 60.0
IDLE_WINDOW_S = 3600.0
IDLE_BELOW_PCT = 5.0


class PoolsScreen(ClusterScreen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="back")]

    def __init__(self) -> None:
        super().__init__()
        self.idle: dict[str, int] | None = None
        self.idle_why = "not read yet"
        self.read_at: float | None = None

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="pools-title", classes="panel-title")
        yield KeyTable(id="pools", cursor_type="row")
        yield Static(id="pools-note")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#pools", KeyTable)
        for label in ("Pool", "Nodes", "GPUs", "Allocated", "Unallocated", "Util", "Idle"):
            table.add_column(label, key=label.lower())
        self.show_snapshot()
        table.focus()

    def show_snapshot(self) -> None:
        app = self.app
        snapshot = app.snapshot
        if snapshot is None:
            return
        rows = pool_rows(snapshot, self.idle)
        self.query_one("#pools-title", Static).update(Text.assemble((" Pools ", "bold"), (
            f"{len(rows) - 1} pools, {snapshot.gpus_in_use}/{snapshot.gpus_total} GPUs allocated", "dim")))
        sync_rows(self.query_one("#pools", KeyTable), {
            r.pool: (Text(r.pool, style="bold" if r.pool == FLEET else ""), Text(str(r.nodes)), Text(str(r.gpus)),
                     Text(str(r.allocated)), Text(str(r.unallocated)),
                     Text("–" if r.util is None else f"{r.util:.0f}%"),
                     Text("?" if r.idle is None else str(r.idle), style=f"bold {app.palette.cordoned}" if r.idle else ""))
            for r in rows})
        note = (f"Idle: allocated GPUs below {IDLE_BELOW_PCT:g}% over the last hour"
                + (f" (unknown: {self.idle_why})" if self.idle is None else ""))
        self.query_one("#pools-note", Static).update(Text(note, style="dim"))
        now = app.clock()
        if self.read_at is None or now - self.read_at >= IDLE_EVERY_S:
            self.read_at = now
            backend = app.backend

            def read() -> None:
                try:
                    idle = backend.idle_gpus(IDLE_WINDOW_S, IDLE_BELOW_PCT)
                    self.post_message(IdleRead(idle, "" if idle is not None else
                                               "GPU series carry no pod label"))
                except BackendError as exc:
                    self.post_message(IdleRead(None, error_line(exc)))

            self.run_worker(read, thread=True, exclusive=True, group="idle", exit_on_error=False)

    def on_idle_read(self, message: IdleRead) -> None:
        self.idle, self.idle_why = message.idle, message.why
        self.show_snapshot()
