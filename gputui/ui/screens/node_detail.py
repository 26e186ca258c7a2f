"""One node: a row per GPU with history, and the pods on it with their live sessions."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Sequence
from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.widgets import Static

from gputui.backends.base import error_line
from gputui.policy.fault_peers import PeerCount
from gputui.policy.health import fleet_driver, has_driver_drift
from gputui.policy.problems import snapshot_alerts
from gputui.present import cells
from gputui.present.disruptions import hold_words, node_holds
from gputui.snapshot import ClusterSnapshot
from gputui.ui.messages import DescriptionRead, HistoryRead
from gputui.ui.screens.cordon_dialog import ask_cordon
from gputui.ui.screens.node_actions import NodeActions
from gputui.ui.screens.node_peers import READ_EVERY_S, FaultPeersRead, peer_text, read_peers
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.header import HeaderBar
from gputui.ui.widgets.virtual_table import VirtualTable
from gputui.vocabulary.gpu_faults import node_worst
from gputui.vocabulary.gpu_metrics import BY_NAME, METRICS, NO_VALUES, GpuMetric
from gputui.vocabulary.gpu_resources import Scheme, allocation_text, holders
from gputui.vocabulary.model import Gpu, Node
from gputui.vocabulary.sessions import SessionState

HISTORY_MINUTES = 5
# The figures of gputui.vocabulary.gpu_metrics a GPU's row shows: the typed ones always, the others (DETAIL_EXTRA) when a
# GPU of the node reports them (a cluster whose exporter serves them), after these, each as its row writes it.
DETAIL_TYPED = tuple(m for m in METRICS if m.detail and m.typed)
DETAIL_EXTRA = tuple(m for m in METRICS if m.detail and not m.typed)


def gpu_columns(extra: tuple[GpuMetric, ...] = ()) -> tuple[tuple[str, str, int | None], ...]:
    """(key, label, width) of the GPU table; width None takes what the terminal has left."""
    return (("gpu", "GPU", 3), *((m.name, m.label, m.width) for m in (*DETAIL_TYPED, *extra)),
            ("health", "Health", 7), ("history", f"Util, last {HISTORY_MINUTES} min", None))


GPU_COLUMNS = gpu_columns()
POD_COLUMNS = (
    ("pod", "Pod", None), ("workload", "Service / version", 20), ("gpus", "GPUs", 4),
    ("status", "Status", 11), ("sessions", "Sessions", 8),
)


def _widths(columns: Sequence[tuple[str, str, int | None]], total: int, minimum: int = 12, maximum: int = 60) -> list[tuple[str, str, int]]:
    """Give the flexible column the room the fixed ones leave (2 cells of padding each)."""
    fixed = sum(w + 2 for _, _, w in columns if w is not None)
    flex = max(minimum, min(maximum, total - fixed - 4))
    return [(k, label, flex if w is None else w) for k, label, w in columns]


class NodeDetailScreen(NodeActions):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
        Binding("c", "cordon", "Cordon", id="cordon"),
        Binding("u", "uncordon", "Uncordon", id="uncordon"),
        # On a GPU row, r drains only that GPU's pods and the footer says so (check_action passes to the node's
        # drain elsewhere).
        Binding("r", "drain_gpu", "Drain GPU", id="drain-gpu",
                tooltip="Drain only the pods bound to the selected GPU (its plan first); the node keeps serving"),
        Binding("r", "drain", "Drain", id="drain", tooltip="Drain this node (its plan first)"),
        Binding("w", "shift", "Weights", id="shift", tooltip="Shift traffic of the selected pod's service"),
        Binding("d", "diagnostics", "Diagnose", id="diagnostics"),
        Binding("i", "describe", "Describe", id="describe",
                tooltip="Conditions with reasons, GPU labels, alerts explained (XIDs in words)"),
        # Listed in help (?), not in the footer: at 80 columns it would push q and ? off the line.
        Binding("E", "evidence", "Evidence", id="evidence", show=False,
                tooltip="Write this node's evidence bundle (.tar.gz) for an RMA or incident ticket"),
    ]

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node_name = node
        self.history: dict[int, list[float | None]] = {}
        self.full_gpus: tuple[Gpu, ...] | None = None  # every GPU, fetched when the snapshot holds aggregates only
        self.spark_width = 30
        self.pod_width = 30
        self.extra_figures: tuple[GpuMetric, ...] = ()  # DETAIL_EXTRA's figures some GPU of the node reports
        self.peers: list[PeerCount] | None = None  # its fault counts against its pool (node_peers); None: not read
        self._peers_asked: float | None = None  # when they were last asked for (monotonic)

    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(id="node-info")
        # Line-API tables: a DataTable renders each cell through Rich on every repaint, most of what an open cost
        # (benchmarks/keys.py); these paint a line once and keep it until its cells change.
        yield VirtualTable(id="gpus")
        yield Static(Text(" Pods on this node", style="bold"), classes="panel-title")
        yield VirtualTable(id="pods")
        yield KeyFooter()

    def aim(self, node: str) -> None:
        """Show a node (the app keeps one detail screen): nothing read for the last one is shown for it, even
        under the same name (another cluster's, after :ctx)."""
        self.node_name, self.history, self.full_gpus = node, {}, None
        self.peers, self._peers_asked = None, None
        if self.is_mounted:
            for table in self.query(VirtualTable):
                table.show_rows({})
                table.cursor_row = 0

    def on_screen_resume(self) -> None:
        """Shown again (opened anew, or a dialog above it closed): what changed while it was hidden."""
        if self.is_mounted and hasattr(self, "_laid_out_for"):
            self.show_snapshot()

    def on_mount(self) -> None:
        self._layout(self.app.size.width)
        # This node's GPUs and history on every refresh, even when the fleet view (whose DCGM gauges
        # are read less often) did not change.
        self.set_interval(self.app.settings.refresh, self._fetch_history)

    def on_resize(self, event: Resize) -> None:
        self._layout(event.size.width)

    def _layout(self, width: int) -> None:
        if width == getattr(self, "_laid_out_for", None):
            return
        self._laid_out_for = width
        self._gpu_layout(width)
        self.query_one("#pods", VirtualTable).set_columns(_widths(POD_COLUMNS, width))
        self.pod_width = _widths(POD_COLUMNS, width)[0][2]
        self.show_snapshot()

    def _gpu_layout(self, width: int) -> None:
        columns = gpu_columns(self.extra_figures)
        self.query_one("#gpus", VirtualTable).set_columns(_widths(columns, width))
        self.spark_width = _widths(columns, width)[-1][2]

    def action_cordon(self) -> None:
        ask_cordon(self.app, self.node_name, True)

    def action_uncordon(self) -> None:
        ask_cordon(self.app, self.node_name, False)

    def action_drain(self) -> None:
        """As `:drain NODE` does: back to the dashboard, which plans it."""
        from gputui.ui.keys.commands import Command  # noqa: PLC0415 (the command grammar loads with the first command)

        if self.allowed("drain"):
            self.app.run_command(Command("drain", self.node_name))

    def action_shift(self) -> None:
        snap = self.app.snapshot
        key = self.query_one("#pods", VirtualTable).selected_key
        if snap is None or key is None:
            return
        pod = next((p for p in snap.pods_on(self.node_name) if p.key == key), None)
        if pod is None or not pod.service:
            self.app.notify("the selected pod belongs to no inference service: nothing to shift")
            return
        from gputui.ui.screens.traffic_shift import TrafficShiftScreen  # noqa: PLC0415 (screen: loaded when first shown)

        self.app.push_screen(TrafficShiftScreen(f"{pod.namespace}/{pod.service}"))

    def action_describe(self) -> None:
        """Read the node's taints, heartbeat and events now (a thread: network calls), then show it all."""
        snap = self.app.snapshot
        if snap is None or snap.node(self.node_name) is None:
            return
        reader, node = self.app.backend.reader, self.node_name
        pods = [(p.namespace, p.name) for p in snap.pods_on(node)]

        def read() -> None:
            try:
                self.post_message(DescriptionRead(node, reader.describe(node, pods), None))
            except Exception as exc:  # noqa: BLE001 - shown with what the snapshot holds, never a crash
                self.post_message(DescriptionRead(node, None, error_line(exc)))

        self.run_worker(read, thread=True, exclusive=True, group="describe", exit_on_error=False)

    def on_description_read(self, message: DescriptionRead) -> None:
        snap = self.app.snapshot
        node = snap.node(message.node) if snap else None
        if snap is None or node is None or not self.is_current:
            return
        from gputui.present.node_describe import describe  # noqa: PLC0415 (the describe text loads with the first describe)
        from gputui.ui.screens.detail import DetailScreen  # noqa: PLC0415 (screen: loaded when first shown)

        def body() -> RenderableType:  # the heartbeat's age moves with the clock
            return describe(node, self.app.settings.temp_threshold, self.app.palette, message.description,
                            message.error, now=self.app.clock(), summary=snap.summary(node), snapshot=snap,
                            peers=self.peers)

        self.app.push_screen(DetailScreen(f"node {node.name}", body(), ticking=body))

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        """enter on a pod: its service's screen (enter did nothing: issue 35); on a GPU, its faults in words with
        the action (the Health cell has room for `XID 79` alone)."""
        if event.table.id == "gpus":
            self._show_gpu_faults(event.key)
            return
        if event.table.id != "pods":
            return
        snap = self.app.snapshot
        pod = next((p for p in snap.pods_on(self.node_name) if p.key == event.key), None) if snap else None
        if pod is None:
            return
        if not pod.service:
            self.app.notify(f"{pod.key} belongs to no inference service ({pod.owner_kind or 'no owner'}): "
                            "its row says all gputui knows of it", markup=False)
            return
        from gputui.ui.screens.service import ServiceScreen  # noqa: PLC0415 (screen: loaded when first shown)

        self.app.push_screen(ServiceScreen(f"{pod.namespace}/{pod.service}"))

    def _show_gpu_faults(self, key: str) -> None:
        snap = self.app.snapshot
        node = snap.node(self.node_name) if snap else None
        if snap is None or node is None:
            return
        gpus = self.full_gpus if snap.summary(node) is not None and self.full_gpus is not None else node.gpus
        gpu = next((g for g in gpus if str(g.index) == key), None)
        if gpu is None:
            return
        from gputui.present.node_describe import gpu_faults_text  # noqa: PLC0415 (the describe text loads when first asked)
        from gputui.ui.screens.detail import DetailScreen  # noqa: PLC0415 (screen: loaded when first shown)

        self.app.push_screen(DetailScreen(f"{node.name} GPU {gpu.index} faults", gpu_faults_text(gpu, self.app.palette)))

    def action_diagnostics(self) -> None:
        from gputui.ui.screens.diagnostics import DiagnosticsScreen  # noqa: PLC0415 (screen: loaded when first shown)

        self.app.push_screen(DiagnosticsScreen())

    def show_snapshot(self) -> None:
        """A new snapshot: draw it, then fetch what it does not hold (full GPU rows, history). Not while it is
        off the stack (kept for the next open): it draws when it comes back (on_screen_resume)."""
        if self not in self.app.screen_stack:
            return
        self._draw()
        self._fetch_history()

    def _draw(self) -> None:
        snap = self.app.snapshot
        node = snap.node(self.node_name) if snap else None
        info = self.query_one("#node-info", Static)
        if node is None:
            info.update(Text(f" {self.node_name}: no longer in the cluster", style="bold"))
            return
        assert snap is not None  # a node was found in it
        info.update(self._info(node, snap))
        palette = self.app.palette
        pod_rows = {}
        for pod in sorted(snap.pods_on(node.name), key=lambda p: (p.namespace, p.name)):
            status = "Terminating" if pod.deleting else pod.phase
            if pod.phase == "Running" and not pod.ready and not pod.deleting:
                status = "NotReady"
            read = snap.sessions(pod)
            sessions, unknown = read.live, read.state is SessionState.UNKNOWN
            pod_rows[pod.key] = (
                Text(cells.elide_middle(pod.name, self.pod_width)),
                Text(f"{pod.service} {pod.version}".strip() or pod.owner_kind, style="" if pod.service else "dim"),
                Text(str(pod.gpu_request) if pod.gpu_request else "–"),
                Text(status, style="" if status == "Running" else palette.cordoned),
                # Unknown is not "none": "?" in the alert colour, as the service screen has it.
                Text("?" if unknown else "–" if sessions is None else str(sessions).rjust(8),
                     style=palette.alert if unknown else "bold" if sessions else ""),
            )
        self.query_one("#pods", VirtualTable).show_rows(pod_rows)
        self._draw_gpus()

    def _draw_gpus(self) -> None:
        """The GPU rows alone: what a history read changes (the pods' lines stay painted)."""
        snap = self.app.snapshot
        node = snap.node(self.node_name) if snap else None
        if snap is None or node is None:
            return
        palette = self.app.palette
        gpu_rows = {}
        gpus = self.full_gpus if snap.summary(node) is not None and self.full_gpus is not None else node.gpus
        extra = tuple(m for m in DETAIL_EXTRA if any(m.name in g.extra for g in gpus))
        if extra != self.extra_figures:  # the node's exporter serves another set of figures: columns for them
            self.extra_figures = extra
            self._gpu_layout(self.app.size.width)
        for gpu in gpus:
            # A fault field that asks for an action (gpu_faults) shows as `fault`: enter on the row says which.
            faulty = not gpu.xid and gpu.extra is not NO_VALUES and node_worst((gpu,)) is not None
            health = Text(f"XID {gpu.xid}" if gpu.xid else "fault" if faulty else gpu.health.value)
            if gpu.xid or faulty or gpu.health.value in ("warn", "fail"):
                health.stylize(f"bold {palette.alert}")
            util_cell = cells.bar(gpu.util_pct, 9, palette.heat(gpu.util_pct))
            util_cell.append(" " + BY_NAME["util_pct"].fmt(gpu.util_pct))
            mem_cell = cells.bar(gpu.mem_pct, 8, palette.heat(gpu.mem_pct))
            mem_cell.append(" " + cells.mem_used_total(gpu.mem_used_mib, gpu.mem_total_mib).rjust(9))
            temp_style = f"bold {palette.alert}" if gpu.temp_c is not None and gpu.temp_c >= self.app.settings.temp_threshold else ""
            gpu_rows[str(gpu.index)] = (
                Text(str(gpu.index)), util_cell, mem_cell, Text(BY_NAME["temp_c"].fmt(gpu.temp_c), style=temp_style),
                Text(BY_NAME["power_w"].fmt(gpu.power_w)), *(Text(m.fmt(gpu.extra.get(m.name))) for m in extra), health,
                Text(cells.sparkline(self.history.get(gpu.index, []), self.spark_width), style=palette.heat(gpu.util_pct)),
            )
        self.query_one("#gpus", VirtualTable).show_rows(gpu_rows)

    def _info(self, node: Node, snap: ClusterSnapshot) -> Text:
        palette = self.app.palette
        pieces = [Text(node.name, style="bold"), cells.node_state_text(node, palette),
                  Text(f"{cells.short_model(node.gpu_product)} ×{node.gpu_count or node.gpu_capacity}")]
        allocated = snap.allocated_by_resource(node.name)
        if node.gpu_resources:
            pieces.append(Text(f"GPUs {allocation_text(node.gpu_resources, allocated, node.gpu_count)} allocated"))
        else:
            pieces.append(Text(f"GPUs {snap.gpus_allocated(node.name)}/{node.gpu_allocatable} allocated"))
        majority = fleet_driver(snap)
        drift = has_driver_drift(node, majority)
        driver = Text("driver ")
        driver.append(node.driver_version or "–", style=f"bold {palette.drift}" if drift else "")
        if drift:
            driver.append(f" (fleet {majority})", style=palette.drift)
        pieces.append(driver)
        if node.cuda_version:
            pieces.append(Text(f"CUDA {node.cuda_version}"))
        if node.upgrade_state:
            pieces.append(Text(f"upgrade: {node.upgrade_state}", style=palette.upgrading))
        # Broken between pieces, never inside one (at 80 columns "driver" and its version were torn apart).
        width, text, used = max(20, self.app.size.width - 2), Text(" "), 1
        for i, piece in enumerate(pieces):
            if i and used + 2 + len(piece) > width:
                text.append("\n ")
                used = 1
            elif i:
                text.append("  ")
                used += 2
            text.append_text(piece)
            used += len(piece)
        if len(node.gpu_resources) > 1 or any(r.scheme is not Scheme.WHOLE for r in node.gpu_resources):
            # Slices, replicas and DRA devices: which pods hold them (whole cards show in the pods table).
            on_node = [(p.name, p.gpu_units) for p in snap.pods_on(node.name) if not p.terminated and p.gpu_units]
            for line in holders(node.gpu_resources, on_node, allocated):
                text.append(f"\n   {line}")
        for alert in snapshot_alerts(snap, node, self.app.settings.temp_threshold):
            text.append("\n ▲ ", style=f"bold {palette.alert}")
            text.append(alert.message, style=palette.alert)
        text.append_text(peer_text(self.peers, width, palette))  # its fault counts against its pool (issue 37)
        for hold in node_holds(node, snap, snap.taken_at):  # who is disrupting it (issue 40): actor, phase, age, why
            head, why, stuck = hold_words(hold, snap.taken_at)
            text.append("\n ◆ ", style=f"bold {palette.cordoned}")
            text.append(head[:width - 3], style="bold")
            # Wrapped here, between words, to the screen's width (as the pieces above): no line runs past it.
            for line in textwrap.wrap(why, width - 3):
                text.append(f"\n   {line}")
            for line in textwrap.wrap(f"stuck: {stuck}" if stuck else "", width - 3):
                text.append(f"\n   {line}", style=f"bold {palette.alert}")
        return text

    def _fetch_history(self) -> None:
        if self in self.app.screen_stack:  # the interval runs on while the screen is kept off the stack
            now = time.monotonic()
            peers = self._peers_asked is None or now - self._peers_asked >= READ_EVERY_S
            if peers:
                self._peers_asked = now
            self._read_history(self.node_name, peers)

    def on_fault_peers_read(self, message: FaultPeersRead) -> None:
        if message.node != self.node_name:
            return  # read for the node shown before
        self.peers = message.peers
        snap = self.app.snapshot
        node = snap.node(self.node_name) if snap else None
        if snap is not None and node is not None:
            self.query_one("#node-info", Static).update(self._info(node, snap))

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def _read_history(self, node: str, peers: bool = False) -> None:
        """The node's GPU rows and history; with `peers`, first its fault counts against its pool (one query for
        the fleet, every READ_EVERY_S): posted before the history, so both show at the same draw."""
        snap = self.app.snapshot
        if peers and snap is not None:
            self.post_message(FaultPeersRead(node, read_peers(self.app.backend, snap, node,
                                                              self.app.settings.pool_labels)))
        reader = self.app.backend.reader
        try:
            gpus = reader.node_gpus(node) if hasattr(reader, "node_gpus") else None
            history = reader.gpu_history(node, HISTORY_MINUTES)
        except Exception:  # noqa: BLE001 - the rows keep their last values; the header shows source errors
            return
        self.post_message(HistoryRead(gpus, history, node))

    def on_history_read(self, message: HistoryRead) -> None:
        if message.node != self.node_name:
            return  # read for the node shown before
        if message.gpus is not None:
            self.full_gpus = message.gpus
        self.history = message.history
        self._draw_gpus()  # sets the rows only when a cell changed (show_rows)
