"""The main screen: GPU nodes above, inference services below."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.widgets import DataTable, Input, Static

from gputui.backends.base import NEEDS
from gputui.ops.drain.options import DrainOptions, settings_options
from gputui.policy.node_pools import fleet_pools
from gputui.policy.problems import snapshot_alerts
from gputui.present.columns import (
    NODE_COLUMNS,
    NodeColumn,
    fit_node_columns,
    fit_service_columns,
    node_order,
    row_context,
    service_rows,
)
from gputui.present.node_filter import words_of
from gputui.present.node_pools import has_pools, pool_strip
from gputui.snapshot import ClusterSnapshot
from gputui.ui.runs.resume import offer_resume, resume_drains
from gputui.ui.screens.node_order import NodeOrder
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import HeaderBar
from gputui.ui.widgets.key_table import KeyTable
from gputui.ui.widgets.table_sync import sync_rows
from gputui.ui.widgets.virtual_table import VirtualTable

if TYPE_CHECKING:
    from gputui.ops.drain.options import DrainOptions


class DashboardScreen(NodeOrder):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_node", "Open", id="open-node"),
        Binding("c", "cordon", "Cordon", id="cordon", tooltip="Cordon the selected node"),
        Binding("u", "uncordon", "Uncordon", id="uncordon", tooltip="Uncordon the selected node"),
        Binding("r", "drain", "Drain", id="drain", tooltip="Drain the marked nodes, or the selected one"),
        Binding("space", "mark", "Mark", id="mark", show=False,
                tooltip="Mark or unmark the selected node for a batch drain, then move down (r drains the marked)"),
        Binding("p", "drain_progress", "Progress", id="drain-progress", show=False, tooltip="The running drain's board"),
        Binding("R", "resume_drains", "Resume", id="resume-drains", show=False, tooltip="Resume interrupted drains"),
        Binding("L", "audit", "Audit log", id="audit-log", show=False, tooltip="Every write gputui made"),
        Binding("w", "shift", "Weights", id="shift", tooltip="Shift traffic between the selected service's versions"),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("d", "diagnostics", "Diagnose", id="diagnostics", tooltip="Pending GPU pods, lost GPUs, drift, silent exporters"),
        Binding("s", "sort", "Sort", id="sort", tooltip="Sort by the next column"),
        Binding("S", "reverse_sort", "Reverse sort", id="reverse-sort", show=False),
        Binding("tab", "app.focus_next", "Next panel", id="next-panel", show=False),
        Binding("escape", "clear_filter", "Clear filter", id="clear-filter", show=False),
        Binding("n", "match(1)", "Next match", id="next-match", show=False, tooltip="Next node matching the filter"),
        Binding("exclamation_mark", "next_problem", "Next problem", id="next-problem", show=False,
                tooltip="The next node with a problem, worst first"),
        Binding("M", "clear_marks", "Clear marks", id="clear-marks", show=False, tooltip="Unmark every node"),
        Binding("N", "match(-1)", "Previous match", id="prev-match", show=False, tooltip="Previous node matching the filter"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.filter_text = ""
        self._drawn: tuple | None = None  # what the last full draw showed (on_screen_resume)
        self._columns: tuple[NodeColumn, ...] = ()
        self.marked: set[str] = set()
        self._told_resumable: set[str] = set()
        self._resume_looked: object = None  # the snapshot last looked at for interrupted drains
        self._service_columns: tuple = ()

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="pool-strip")
        yield Static(id="nodes-title", classes="panel-title")
        yield VirtualTable(id="nodes")
        yield Static(id="services-title", classes="panel-title")
        yield KeyTable(id="services", cursor_type="row")
        yield KeyFooter()  # the filter box is mounted above it when first opened (_filter_box)

    @property
    def nodes_table(self) -> VirtualTable:
        return self.query_one("#nodes", VirtualTable)

    @property
    def services_table(self) -> DataTable:
        return self.query_one("#services", DataTable)

    def on_mount(self) -> None:
        self._layout_columns(self.app.size.width)
        self.nodes_table.focus()
        self.show_snapshot()

    def on_screen_resume(self) -> None:
        # It follows every change while covered (data_revision reaches it), so coming back redraws only when
        # something it draws moved since: at 65,000 nodes a redraw is a frame's worth of work for nothing.
        if self._drawn != self._drawn_key():
            self.show_snapshot()

    def _drawn_key(self) -> tuple:
        app = self.app
        # data_revision moves with every new snapshot, poll error, theme and namespace view.
        return app.data_revision, app.size, self.view, self.filter_text, frozenset(self.marked)

    def on_resize(self, event: Resize) -> None:
        self._layout_columns(event.size.width)
        self.show_snapshot()

    def _layout_columns(self, width: int) -> None:
        services = fit_service_columns(width - 2)
        if services != self._service_columns:
            self.services_table.clear(columns=True)
            for key, label, col_width, _ in services:
                self.services_table.add_column(label, width=col_width, key=key)
            self._service_columns = services
        columns, gap = fit_node_columns(NODE_COLUMNS, width - 1)  # the scrollbar's cell
        if columns == self._columns:
            return
        self._columns = columns
        # The name's first cell holds the batch mark (render_row): its title starts one cell in, over the name.
        self.nodes_table.set_columns([(c.key, f" {c.label}" if c.key == "name" else c.label, c.width)
                                      for c in columns], gap)

    # ----- rendering ----------------------------------------------------------

    def show_snapshot(self) -> None:
        snap = self.app.snapshot
        if snap is None or not self._columns:
            self.query_one("#nodes-title", Static).update(Text(" Nodes", style="bold"))
            return
        settings = self.app.settings
        flaps = self.app.problem_watch.flaps(snap, settings.temp_threshold)
        ctx = row_context(snap, self.app.palette, settings.temp_threshold, settings.pool_labels, flaps)
        words = words_of(self.filter_text)
        nodes = self._matching(snap, words, ctx)
        # The whole fleet's order, kept on the snapshot per sort: a filter keystroke only drops rows from it.
        full = node_order(ctx, self.sort_index, self.sort_reverse)
        order = full if not words or len(nodes) == len(snap.nodes) else list(filter(nodes.__contains__, full))
        columns = self._columns

        marked = self.marked

        def render_row(name: str) -> tuple[Text, ...]:
            node = nodes[name]
            cells = [col.cell(node, ctx, col.width) for col in columns]
            # The mark takes the name's first cell: the name stays readable.
            cells[0] = (Text("●", style=f"bold {ctx.palette.draining}") if name in marked else Text(" ")) + cells[0]
            return tuple(cells)

        with self.app.batch_update():
            # What a node's cells show: its node, its DCGM figures, the pods on it, the columns, the marks and the
            # looks. While they are the very same objects (a filter keystroke, a sort, a refresh in which only
            # session counts moved), the rows already drawn are kept; and the same rows in the same order are not
            # painted again at all.
            looks = (ctx.palette, self.app.theme, ctx.temp_threshold, ctx.majority_driver, flaps)
            self.nodes_table.set_rows(order, render_row,
                                      (snap.nodes, snap.summaries, snap.pods, columns, frozenset(marked), looks))
            namespace = self.app.namespace_view
            sync_rows(
                self.services_table, service_rows(snap, self.app.palette, self._service_columns, namespace)
            )
            services = sum(1 for s in snap.services if namespace in (None, s.namespace))
            self._titles(len(nodes), len(snap.nodes), services)
            self._pool_strip(snap)
        self._offer_resume(snap)
        self._drawn = self._drawn_key()

    def _pool_strip(self, snap: ClusterSnapshot) -> None:
        watch = self.app.idle_watch
        # A sort or a filter keystroke redraws the nodes, not the pools: same snapshot and idle read, same rows.
        rows = fleet_pools(snap, watch.idle, self.app.settings.pool_labels)
        strip = self.query_one("#pool-strip", Static)
        shown = has_pools(rows)
        strip.set_class(shown, "shown")
        if shown:
            strip.update(pool_strip(rows, self.app.size.width, self.app.palette, watch.why), layout=False)
            watch.want(self.app)

    def _offer_resume(self, snap: ClusterSnapshot) -> None:
        # Once per snapshot: a filter keystroke or a sort brings no interrupted drain to light.
        if snap is not self._resume_looked and not self.app.running_drains:
            self._resume_looked = snap
            offer_resume(self.app, snap, self._told_resumable)

    def _titles(self, shown: int, total: int, services: int) -> None:
        col = NODE_COLUMNS[self.sort_index]
        title = Text(" Nodes ", style="bold")
        title.append(f"{shown}/{total}" if shown != total else str(total))
        what = "problems" if col.key == "alerts" else col.label.lower()
        title.append(f"  sort {what}, {col.reverse if self.sort_reverse else col.order}", style="dim")
        if self.marked:
            title.append(f"  ● {len(self.marked)} marked", style=f"bold {self.app.palette.draining}")
            title.append(" (M clears)", style="dim")
        if self.filter_text:
            title.append("  filter: ", style="dim")
            title.append(self.filter_text, style="bold")
            if not shown:
                title.append("  no node matches (esc clears)", style=f"bold {self.app.palette.alert}")
        # Titles and the strip are one line each (height: 1): repainting them needs no layout pass of the screen,
        # which every refresh and every filter keystroke paid for.
        self.query_one("#nodes-title", Static).update(title, layout=False)
        title = Text(" Inference services ", style="bold") + Text(str(services))
        if self.app.namespace_view:
            title.append("  namespace: ", style="dim")
            title.append(self.app.namespace_view, style="bold")
        self.query_one("#services-title", Static).update(title, layout=False)

    # ----- selection -------------------------------------------------------------

    def selected_node(self) -> str | None:
        return self.nodes_table.selected_key

    def _node_in_focus(self, doing: str) -> str | None:
        """The node a key acts on: the nodes panel's selection, and only while that panel has the focus
        (never the other panel's last selection)."""
        if self.services_table.has_focus:
            self.app.notify(f"the services panel has the focus: tab to the nodes panel to {doing} a node")
            return None
        return self.selected_node()

    # ----- actions ---------------------------------------------------------------

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        self.action_open_node()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """enter on a service: the service in full (w from there shifts its traffic)."""
        if event.data_table is self.services_table:
            from gputui.ui.screens.service import ServiceScreen  # noqa: PLC0415 (screen: loaded when first shown)

            key = event.row_key.value
            if key is not None:
                self.app.push_screen(ServiceScreen(key))

    def action_next_problem(self) -> None:
        """`!`: the next node (below the cursor, wrapping) that has an alert."""
        snap, table = self.app.snapshot, self.nodes_table
        if snap is None or not table.row_count:
            return
        threshold = self.app.settings.temp_threshold
        keys = list(table.keys)
        for step in range(1, len(keys) + 1):
            i = (table.cursor_row + step) % len(keys)
            node = snap.node(keys[i])
            if node is not None and snapshot_alerts(snap, node, threshold):
                table.cursor_row = i
                return
        self.app.notify("no node shown has a problem")

    def action_clear_marks(self) -> None:
        if self.marked:
            self.app.notify(f"{len(self.marked)} marks cleared")
            self.marked.clear()
            self.show_snapshot()

    def action_match(self, step: int) -> None:
        """n/N: the next node matching the filter, wrapping (the table shows only matches)."""
        table = self.nodes_table
        if table.row_count:
            table.cursor_row = (table.cursor_row + step) % table.row_count

    def run_command(self, name: str, arg: str | None) -> None:
        """Commands from `:` that act on this screen (the app handles the rest)."""
        if name in NEEDS and not self.allowed(name):
            return
        if name == "nodes":
            self.nodes_table.focus()
        elif name == "services":
            self.services_table.focus()
        elif name == "check":
            from gputui.ui.screens.check import CheckScreen  # noqa: PLC0415 (screen: loaded when first shown)

            self.app.push_screen(CheckScreen())
        elif name == "pools":
            from gputui.ui.screens.node_pools import NodePoolsScreen  # noqa: PLC0415 (screen: loaded when first shown)

            self.app.push_screen(NodePoolsScreen())
        elif name == "versions":
            from gputui.ui.screens.versions import VersionsScreen  # noqa: PLC0415 (screen: loaded when first shown)

            self.app.push_screen(VersionsScreen())
        elif name == "diag":
            self.action_diagnostics()
        elif name == "audit":
            self.action_audit()
        elif name in ("drain", "cordon", "uncordon") and arg:
            self.nodes_table.focus()
            self.nodes_table.move_to(arg)
            if self.selected_node() != arg:  # hidden by the filter: clear it so the row exists
                self.action_clear_filter()
                self.show_snapshot()
                self.nodes_table.move_to(arg)
            if name == "drain":
                self.marked.clear()
                self.action_drain()
            else:
                from gputui.ui.screens.cordon_dialog import ask_cordon  # noqa: PLC0415 (dialog: loaded when first shown)

                ask_cordon(self.app, arg, name == "cordon")
        elif name == "shift" and arg:
            from gputui.ui.screens.traffic_shift import TrafficShiftScreen  # noqa: PLC0415 (screen: loaded when first shown)

            self.app.push_screen(TrafficShiftScreen(arg))

    def action_open_node(self) -> None:
        """Open what has the focus: a keymap's other key for it (vim's `l`) reaches here from the services panel
        too, and opened the node selected in the other panel (issue 35); there it opens the service."""
        table = self.services_table
        if table.has_focus:
            if table.row_count:
                from gputui.ui.screens.service import ServiceScreen  # noqa: PLC0415 (screen: loaded when first shown)

                key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
                if key is not None:
                    self.app.push_screen(ServiceScreen(key))
            return
        name = self.selected_node()  # enter on a node row (the services table handles its own enter)
        if name:
            self.app.open_node(name)

    def action_mark(self) -> None:
        """`space`: mark or unmark the selected node for a batch drain (`r` drains the marked nodes), then move
        down to the next node, as file managers tag a file: space, space marks two nodes in a row. What was
        marked is said by name (issue 35: the cursor moved unsaid, and a second space marked a node the operator
        had not looked at). Where nothing can drain (read-only), nothing is marked."""
        if not self.allowed("drain"):
            return
        name = self._node_in_focus("mark")
        if name:
            self.marked.symmetric_difference_update({name})
            count = len(self.marked)
            done = "marked" if name in self.marked else "unmarked"
            self.nodes_table.action_cursor(1)
            below = self.selected_node()
            moved = f"; the cursor moved down to {below}" if below and below != name else ""
            self.app.notify(f"{name} {done} ({count} marked: r drains them, M clears){moved}", markup=False,
                            timeout=4)
            self.show_snapshot()

    def action_drain(self) -> None:
        if not self.allowed("drain"):
            return
        selected = None if self.marked else self._node_in_focus("drain")
        nodes = sorted(self.marked) or ([selected] if selected else [])
        if not nodes or self.app.snapshot is None:
            return
        busy = sorted(set(nodes) & {n for s in self.app.running_drains for n in s.nodes})
        if busy:  # other nodes may drain beside a running drain, not these
            self.app.notify(f"{', '.join(busy)} {'is' if len(busy) == 1 else 'are'} being drained already: see it "
                            "with p", severity="warning", markup=False)
            return
        from gputui.ui.screens.drain_plan import DrainPlanScreen  # noqa: PLC0415 (screen: loaded when first shown)

        def chosen(options: DrainOptions | None) -> None:
            if options is not None:
                self.marked.clear()
                self._start(nodes, options)

        self.app.push_screen(DrainPlanScreen(nodes, settings_options(self.app.settings)), chosen)

    def _start(self, nodes: list[str], options: DrainOptions, take_over: bool = False) -> None:
        from gputui.ui.runs.drain import start_drain  # noqa: PLC0415 (the drain machinery loads with the first drain)
        from gputui.ui.screens.drain_progress import DrainProgressScreen  # noqa: PLC0415 (screen: loaded when first shown)

        session = start_drain(self.app, nodes, options, take_over=take_over)
        self.app.push_screen(DrainProgressScreen(session))

    def action_drain_progress(self) -> None:
        from gputui.ui.screens.drain_progress import DrainProgressScreen  # noqa: PLC0415 (screen: loaded when first shown)

        drains = self.app.drains
        if not drains:
            self.app.notify("No drain has run since gputui started.")
            return
        running = self.app.running_drains
        if len(running) > 1 or (not running and len(drains) > 1):
            from gputui.ui.screens.drains_list import DrainsListScreen  # noqa: PLC0415 (screen: loaded when first shown)

            self.app.push_screen(DrainsListScreen())
            return
        self.app.push_screen(DrainProgressScreen(running[0] if running else drains[-1]))

    def action_resume_drains(self) -> None:
        if self.allowed("resume_drains"):
            resume_drains(self.app, self._start)

    def action_shift(self) -> None:
        from gputui.ui.screens.traffic_shift import TrafficShiftScreen  # noqa: PLC0415 (screen: loaded when first shown)

        table = self.services_table
        if not table.has_focus:
            self.app.notify("tab to the services panel and pick the service whose traffic to shift")
            return
        if table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if key is not None:
            self.app.push_screen(TrafficShiftScreen(key))

    def action_audit(self) -> None:
        from gputui.ui.screens.audit import AuditScreen  # noqa: PLC0415 (screen: loaded when first shown)

        self.app.push_screen(AuditScreen())

    def action_diagnostics(self) -> None:
        from gputui.ui.screens.diagnostics import DiagnosticsScreen  # noqa: PLC0415 (screen: loaded when first shown)

        self.app.push_screen(DiagnosticsScreen())

    def action_cordon(self) -> None:
        self._cordon(True)

    def action_uncordon(self) -> None:
        self._cordon(False)

    def _cordon(self, cordon: bool) -> None:
        from gputui.ui.screens.cordon_dialog import ask_cordon  # noqa: PLC0415 (dialog: loaded when first shown)

        node = self._node_in_focus("cordon" if cordon else "uncordon")
        if node is not None:
            ask_cordon(self.app, node, cordon)

    async def action_filter(self) -> None:
        box = self._filter_box()
        if box is None:
            # Mounted on first use, not composed: an Input's styles are worked out on the way to the first frame
            # otherwise, for a box most sessions never open (about 5% of start-up's CPU, benchmarks/startup.py).
            box = Input(placeholder="filter: a name, model or driver; or alert, drift, xid, temp, ready, notready, "
                                    "cordoned…", id="filter")
            await self.mount(box, before=self.query_one(KeyFooter))
        box.add_class("shown")
        box.value = self.filter_text
        box.focus()
        self._note_filter()

    def _filter_box(self) -> Input | None:
        found = self.query("#filter")
        return found.first(Input) if found else None

    def action_clear_filter(self) -> None:
        """esc: clears the filter; with none, back to the fleet view when gputui watches a fleet."""
        box = self._filter_box()
        idle = box is None or (not box.value and not box.has_class("shown"))
        if idle and self.app.fleet is not None:
            self.app.open_fleet()
            return
        if box is not None:
            box.value = ""
        self._close_filter()

    def _close_filter(self) -> None:
        if (box := self._filter_box()) is not None:
            box.remove_class("shown")
        self.nodes_table.focus()
        self._note_filter()

    def _note_filter(self) -> None:
        """Note in the view whether the filter is open or narrows the table (a filter left in place does, each
        refresh): the poll thread, handed the view, then readies what the next keystroke tests."""
        box = self._filter_box()
        filtering = bool(self.filter_text) or (box is not None and box.has_class("shown"))
        self.view = replace(self.view, filtering=filtering)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.filter_text = event.value.strip()
            self._note_filter()
            self.show_snapshot()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self._close_filter()
