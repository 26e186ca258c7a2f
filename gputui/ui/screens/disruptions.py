"""`:disruptions`: every node being disrupted (gputui.present.disruptions, the rows `gputui disruptions` prints),
redrawn on each snapshot: node, actor, phase, age and why, stuck ones first, then the oldest. The why column is cut
to the width left; the selected row's why and why it is stuck are written in full below the table. `enter` opens
the node. Read-only: it changes nothing. What the cluster wrote is shown made visible (safe_text), never raw."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.widgets import DataTable, Static

from gputui.base.safe_text import visible
from gputui.present.disruptions import (
    ACTOR_WORDS,
    DisruptionRow,
    cells,
    disruption_rows,
    sources,
    unknown_because,
)
from gputui.ui.base import ClusterScreen
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import HeaderBar
from gputui.ui.widgets.key_table import KeyTable
from gputui.ui.widgets.table_sync import sync_rows
from gputui.vocabulary.disruptions import READ

# Node, actor, phase and age; the why takes what is left (at 80 columns, 26 characters). From WIDE columns on,
# the phase is whole (`pod-restart-required`, the GPU Operator's longest, is 20).
WIDTHS = (12, 12, 14, 5)
WIDE_WIDTHS = (16, 12, 22, 5)
WIDE = 120
GAP = 2  # DataTable's cell padding, one each side
MIN_WHY = 12


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


class DisruptionsScreen(ClusterScreen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back", id="back")]
    DEFAULT_CSS = """
    #disruptions-why { height: auto; max-height: 7; padding: 0 1; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[str, DisruptionRow] = {}
        self._why_width = 0

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="disruptions-title", classes="panel-title")
        yield KeyTable(id="disruptions", cursor_type="row", zebra_stripes=True)
        yield Static(id="disruptions-why")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.show_snapshot()
        self.query_one("#disruptions", KeyTable).focus()

    def on_resize(self, event: Resize) -> None:
        self.show_snapshot()  # the why column takes the width left: cut again

    def _widths(self) -> tuple[int, int, int, int]:
        return WIDE_WIDTHS if self.size.width >= WIDE else WIDTHS

    def _fit_why(self) -> int:
        widths = self._widths()
        return max(MIN_WHY, self.size.width - sum(widths) - GAP * (len(widths) + 1) - 1)

    def show_snapshot(self) -> None:
        snapshot = self.app.snapshot
        if snapshot is None:
            return
        rows = disruption_rows(snapshot)
        unknown = unknown_because(snapshot)
        self._rows = {r.key: r for r in rows}
        stuck = sum(1 for r in rows if r.stuck)
        nodes = len({r.node for r in rows})
        title = Text(" Disruptions ", style="bold")
        if unknown:  # unknown is never "none": the list may be missing what could not be read
            title.append(f"unknown: {visible(unknown, 200)}", style=f"bold {self.app.palette.alert}")
        elif rows:
            title.append(f"{nodes} node{'s' * (nodes != 1)} disrupted")
        else:
            title.append("no node is disrupted (by what the Node objects say)", style="dim")
        if stuck:
            title.append(f" · {stuck} stuck", style=f"bold {self.app.palette.alert}")
        read = [name for name, state in sources(snapshot).items() if state == READ]
        title.append(f" · from {', '.join(read) or 'nothing read yet'}", style="dim")
        self.query_one("#disruptions-title", Static).update(title)
        table = self.query_one("#disruptions", KeyTable)
        why_width = self._fit_why()
        if not table.columns or why_width != self._why_width:
            table.clear(columns=True)
            for label, width in zip(("Node", "Actor", "Phase", "Age", "Why"), (*self._widths(), why_width),
                                    strict=True):
                table.add_column(label, key=label.lower(), width=width)
            self._why_width = why_width
        alert = f"bold {self.app.palette.alert}"
        out: dict[str, tuple[Text, ...]] = {}
        w = self._widths()
        for r in rows:
            node, actor, phase, age, why = cells(r, why_width)
            out[r.key] = (Text(_cut(node, w[0]), style=alert if r.stuck else ""),
                          Text(_cut(ACTOR_WORDS.get(actor, actor), w[1])),
                          Text(_cut(phase, w[2] - 2) + " ⚠" if r.stuck else _cut(phase, w[2]),
                               style=alert if r.stuck else ""), Text(age.rjust(w[3])), Text(why))
        if [k.value for k in table.rows] != list(out):  # a new order (a hold became stuck, or aged past another)
            self._refill(table, out)
        else:
            sync_rows(table, out)
        self._why()

    def _refill(self, table: KeyTable, out: dict[str, tuple[Text, ...]]) -> None:
        """The rows in their new order, the cursor kept on the row it was on (if it is still there)."""
        keys = list(out)
        selected = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value if table.row_count else None
        table.clear()
        for key, row in out.items():
            table.add_row(*row, key=key)
        if selected in out:
            table.move_cursor(row=keys.index(selected))

    def _why(self) -> None:
        table = self.query_one("#disruptions", KeyTable)
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value if table.row_count else None
        row = self._rows.get(key or "")
        text = Text()
        if row is not None:
            text.append(f"{visible(row.node, 63)}: ", style="bold")
            if row.stuck:
                text.append("stuck: ", style=f"bold {self.app.palette.alert}")
                text.append(visible(row.stuck) + "; ")
            text.append(visible(row.why))
            text.append("   enter opens the node", style="dim")
        self.query_one("#disruptions-why", Static).update(text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._why()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        row = self._rows.get(event.row_key.value or "")
        if row is not None:
            self.app.open_node(row.node)
