"""Node and service columns: what each shows, how it sorts, and which drop first when narrow."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from rich.text import Text

from gputui.policy.health import fleet_driver, has_driver_drift, problem_order, version_key
from gputui.policy.node_pools import DEFAULT_POOL_LABELS, pool_of
from gputui.policy.problems import Problem, problem_of, snapshot_alerts
from gputui.present import cells
from gputui.present.cells import Palette
from gputui.present.disruptions import actor_of, state_with_actor
from gputui.present.kept_order import KeptOrders
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gauges import hot
from gputui.vocabulary.gpu_metrics import BY_NAME, COLUMNS, GpuMetric, value_of
from gputui.vocabulary.gpu_resources import allocation_text
from gputui.vocabulary.model import GpuSummary, InferenceService, Node, NodeState, ServiceVersion


@dataclass(frozen=True)
class RowContext:
    snapshot: ClusterSnapshot
    palette: Palette
    temp_threshold: float
    majority_driver: str
    pool_labels: tuple[str, ...] = DEFAULT_POOL_LABELS
    # The problems flapping within the last minute, by node (gputui.policy.problems.ProblemMemory): the problem
    # column says "flapping" for them, even for a node whose problem is gone this very refresh.
    flaps: Mapping[str, Problem] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeColumn:
    key: str
    label: str
    width: int
    priority: int  # 0 always shown; higher numbers drop first
    cell: Callable[[Node, RowContext, int], Any]
    # Ascending is the column's natural order (`order` says it in words): names A→Z, figures highest first,
    # problems worst first. Reversing the sort reverses it (`reverse` in words).
    sort: Callable[[Node, RowContext], Any]
    order: str = "highest first"
    reverse: str = "lowest first"
    compact: int = 0  # a narrower form (figures without their bar) used before columns are dropped
    # What of the node's summary (gputui.vocabulary.gauges) the sort reads, if anything: the summaries live beside the
    # nodes, so a kept order (kept_order) places again the nodes where this moved, not only the nodes that did.
    metered: Callable[[GpuSummary | None, RowContext], Any] | None = None


def _util(node: Node, ctx: RowContext, width: int) -> Text:
    util = ctx.snapshot.gauges(node).util_pct
    figure = BY_NAME["util_pct"].fmt(util)
    if width < 10:  # compact: the figure alone
        return Text(figure.rjust(width), style=ctx.palette.heat(util))
    text = cells.bar(util, width - 5, ctx.palette.heat(util))
    text.append(" " + figure)
    return text


def _mem(node: Node, ctx: RowContext, width: int) -> Text:
    g = ctx.snapshot.gauges(node)
    used, total = g.mem_used_mib, g.mem_total_mib
    share = 100.0 * used / total if used is not None and total else None
    label = cells.mem_used_total(used, total)
    if width < 12:  # compact: used/total alone, coloured by how full
        if len(label) > width and used is not None and total:  # 1128/1536G: a node of over 1000 GiB, in TiB
            label = f"{used / 1048576:.1f}/{total / 1048576:.1f}T"
        return Text(label.rjust(width), style=ctx.palette.heat(share))
    text = cells.bar(share, width - 9, ctx.palette.heat(share))
    text.append(" " + label.rjust(8))
    return text


def _temp(node: Node, ctx: RowContext, width: int) -> Text:
    t = ctx.snapshot.gauges(node).temp_c
    style = ""
    if t is not None and t >= ctx.temp_threshold:
        style = f"bold {ctx.palette.alert}"
    elif t is not None and t >= ctx.temp_threshold - 10:
        style = ctx.palette.heat_mid
    return Text(BY_NAME["temp_c"].fmt(t).rjust(width), style=style)


def _figure(metric: GpuMetric) -> Callable[[Node, RowContext, int], Text]:
    """A figure's cell as its row in gputui.vocabulary.gpu_metrics writes it, right-aligned."""
    def cell(node: Node, ctx: RowContext, width: int) -> Text:
        return Text(metric.fmt(value_of(ctx.snapshot.gauges(node), metric.name)).rjust(width))

    return cell


def _gpus(node: Node, ctx: RowContext, width: int) -> Text:
    text = Text(allocation_text(node.gpu_resources, ctx.snapshot.allocated_by_resource(node.name), node.gpu_count,
                                short=True) if node.gpu_resources
                else f"{ctx.snapshot.gpus_allocated(node.name)}/{node.gpu_allocatable}")
    if node.gpu_allocatable < node.gpu_capacity:  # the device plugin took a GPU out
        text.append(f"({node.gpu_capacity})", style=ctx.palette.alert)
    return text


def _driver(node: Node, ctx: RowContext, width: int) -> Text:
    if has_driver_drift(node, ctx.majority_driver):
        return Text("≠" + node.driver_version, style=f"bold {ctx.palette.drift}")
    return Text(node.driver_version or "–")


def _alerts(node: Node, ctx: RowContext, width: int) -> Text:
    """The node's worst problem in a word that fits whole (`NotReady`, `XID 79`, `96°C`, `upgrade ✗`), then the
    others while they fit; `flapping` for one that came and went within the minute."""
    problem = ctx.flaps.get(node.name) or problem_of(snapshot_alerts(ctx.snapshot, node, ctx.temp_threshold))
    if problem is None:
        return Text("")
    return Text(problem.cell(width), style=f"bold {ctx.palette.alert}" if problem.present else ctx.palette.alert)


def _state(node: Node, ctx: RowContext, width: int) -> Text:
    words = state_with_actor(node.state.value, actor_of(node, ctx.snapshot), width)
    return Text(words, style=ctx.palette.state(node.state))


def _by_gauge(name: str) -> Callable[[Node, RowContext], Any]:
    """A figure's sort key, highest first: read from the node's summary where it has one (a sort walks every
    node: no Gauges built for each), else from its gauges. The same name and value either way (gauges.gauges)."""
    def key(node: Node, ctx: RowContext) -> tuple[bool, float]:
        summary = ctx.snapshot.summaries.get(node.name)
        return _high_first(value_of(summary if summary is not None else ctx.snapshot.gauges(node), name))

    return key


def _whole(summary: GpuSummary | None, ctx: RowContext) -> GpuSummary | None:
    return summary


def _high_first(value: float | None) -> tuple[bool, float]:
    """Figures highest first, unknown after every known one."""
    return (value is None, -(value or 0.0))


STATE_ORDER = {state: i for i, state in enumerate(
    (NodeState.NOT_READY, NodeState.DRAINING, NodeState.UPGRADING, NodeState.CORDONED, NodeState.READY))}
A_Z = ("A→Z", "Z→A")
WORST = ("worst first", "best first")

# The table's figures that draw more than their formatted value (a bar, a threshold's colour); any other column
# of gputui.vocabulary.gpu_metrics is its row's formatter, right-aligned (_figure).
FIGURE_COLUMNS = {
    "util_pct": NodeColumn("util_pct", "Util", 12, 0, _util, _by_gauge("util_pct"), compact=4, metered=_whole),
    "mem_used_mib": NodeColumn("mem_used_mib", "Memory", 17, 0, _mem, _by_gauge("mem_used_mib"), compact=8,
                               metered=_whole),
    "temp_c": NodeColumn("temp_c", "Temp", 5, 0, _temp, _by_gauge("temp_c"), metered=_whole),
    "power_w": NodeColumn("power_w", "Power", 6, 0, _figure(BY_NAME["power_w"]), _by_gauge("power_w"),
                          metered=_whole, compact=5),
}

# At 80 columns every figure an operator works from stays (utilisation, memory, temperature, power, driver) and
# the problem's word is whole: the model and the pool go first, figures lose their bars, the columns close up
# to one blank between them (fit_columns).
NODE_COLUMNS: tuple[NodeColumn, ...] = (
    NodeColumn("name", "Node", 13, 0, lambda n, c, w: Text(n.name), lambda n, c: n.name, *A_Z, compact=12),
    # The state and the actor holding the node (issue 40): `cordoned·nvsentinel`, the actor alone when narrow.
    NodeColumn("state", "State", 21, 0, _state, lambda n, c: STATE_ORDER[n.state], *WORST, compact=9),
    NodeColumn("model", "Model", 14, 5, lambda n, c, w: Text(cells.short_model(n.gpu_product)[:w]),
               lambda n, c: n.gpu_product, *A_Z),
    # Sorted by pool, the table is the nodes grouped by pool (names A→Z within each).
    NodeColumn("pool", "Pool", 12, 6, lambda n, c, w: Text(pool_of(n.labels, c.pool_labels)[:w]),
               lambda n, c: pool_of(n.labels, c.pool_labels), *A_Z),
    NodeColumn("gpus", "GPUs", 7, 0, _gpus, lambda n, c: -c.snapshot.gpus_allocated(n.name), "most in use first",
               "fewest in use first"),
    *(FIGURE_COLUMNS.get(m.name) or NodeColumn(m.name, m.label, m.width, 0, _figure(m), _by_gauge(m.name),
                                               metered=_whole) for m in COLUMNS),
    NodeColumn("driver", "Driver", 11, 0, _driver, lambda n, c: tuple(-p for p in version_key(n.driver_version)),
               "newest first", "oldest first"),
    NodeColumn("alerts", "Problem", 11, 0, _alerts,
               lambda n, c: problem_order(n, c.temp_threshold, c.majority_driver, c.snapshot.summary(n)), *WORST,
               compact=9, metered=lambda s, c: hot(s, c.temp_threshold)),  # a hot summary is its one alert
)
SORTABLE = tuple(c.key for c in NODE_COLUMNS)
PROBLEMS_SORT = SORTABLE.index("alerts")  # the default: what needs a look comes first
# The state gives up the actor's word beside it first (the word alone stays), then figures lose their bars, then the
# problem column shows the worst problem alone (whole: `upgrade ✗` is 9).
COMPACT_ORDER = ("state", "mem_used_mib", "util_pct", "alerts", "power_w", "name")
GAPS = (2, 1)  # blank cells between columns: two while every column that must stay fits, else one


def row_context(snap: ClusterSnapshot, palette: Palette, temp_threshold: float,
                pool_labels: tuple[str, ...] = DEFAULT_POOL_LABELS,
                flaps: Mapping[str, Problem] | None = None) -> RowContext:
    """What a node's row needs besides the node; the fleet's majority driver once per snapshot."""
    driver = fleet_driver(snap)
    return RowContext(snap, palette, temp_threshold, driver, tuple(pool_labels), {} if flaps is None else flaps)


_kept = KeptOrders()


def order_key(ctx: RowContext, sort_index: int, reverse: bool) -> Hashable:
    """Where a sort's order is kept on its snapshot (ClusterSnapshot.derived): the sort and what it reads."""
    return ("order", sort_index, reverse, ctx.temp_threshold, ctx.majority_driver, ctx.pool_labels)


def compute_order(ctx: RowContext, sort_index: int, reverse: bool) -> list[str]:
    """Every node's name in a sort's order, worked out: reads the snapshot and writes nothing on it (given its
    node index, snapshot.by_name(), built first: an incremental sort looks moved nodes up in it), so a worker
    thread may ask it of a snapshot the UI shows and hand the answer over by message (keep_order stores it).
    The order kept from the last snapshot (_kept: a locked cache, not the snapshot's memo) is what makes a
    second call cheap: only the nodes that moved find their place again."""
    snap = ctx.snapshot
    if sort_index == 0:  # by name: the keys themselves (a third of a refresh at 10,000 nodes)
        return sorted((n.name for n in snap.nodes), reverse=reverse)
    col = NODE_COLUMNS[sort_index]
    metered = col.metered
    return _kept.names(snap, (sort_index, ctx.temp_threshold, ctx.majority_driver, ctx.pool_labels),
                       lambda node: col.sort(node, ctx), reverse,
                       None if metered is None else lambda summary: metered(summary, ctx))


def keep_order(snap: ClusterSnapshot, key: Hashable, names: list[str]) -> None:
    """Store an order worked out elsewhere (compute_order, order_key) on its snapshot, unless one is there. Call
    it where the snapshot's memo may be written: the UI thread for a snapshot it shows, the poll thread for one
    it has not yet handed over."""
    snap.derived(key, lambda: names)


def node_order(ctx: RowContext, sort_index: int, reverse: bool) -> list[str]:
    """Every node's name in a sort's order, once per snapshot and sort: a filter keystroke only drops names
    from it, and the poll thread works out the sort in force before the UI is told (app.prepare_snapshot).
    Worked out and stored in one step: for the thread that may write the snapshot's memo."""
    return ctx.snapshot.derived(order_key(ctx, sort_index, reverse), lambda: compute_order(ctx, sort_index, reverse))


def fit_node_columns(columns: tuple[NodeColumn, ...], width: int) -> tuple[tuple[NodeColumn, ...], int]:
    """The columns that fit `width` and the gap between them (GAPS): two blank cells while every column that
    must stay (priority 0) fits with them, else one."""
    for gap in GAPS:  # fit_columns drops only columns that may go (priority above 0)
        chosen = fit_columns(columns, width, gap)
        if sum(c.width + gap for c in chosen) <= width:
            return chosen, gap
    return chosen, GAPS[-1]


def fit_columns(columns: tuple[NodeColumn, ...], width: int, padding: int = 2) -> tuple[NodeColumn, ...]:
    """The columns that fit `width`, order kept: first figures lose their bars (compact forms), then the
    highest priority numbers drop; the last column takes what is left, so no space stays empty."""
    chosen = list(columns)

    def used() -> int:
        return sum(c.width + padding for c in chosen)

    for key in COMPACT_ORDER:
        if used() <= width:
            break
        chosen = [replace(c, width=c.compact) if c.key == key and c.compact else c for c in chosen]
    while len(chosen) > 1 and used() > width:
        worst = max((c for c in chosen if c.priority > 0), key=lambda c: c.priority, default=None)
        if worst is None:
            break
        chosen.remove(worst)
    spare = width - used()
    if spare > 0:
        chosen[-1] = replace(chosen[-1], width=chosen[-1].width + spare)
    return tuple(chosen)


def service_rows(
    snapshot: ClusterSnapshot, palette: Palette, columns: ServiceColumns, namespace: str | None = None
) -> dict[str, tuple[Any, ...]]:
    """One row per service version: service, version, share, ready/desired, rollout, sessions."""
    rows: dict[str, tuple[Any, ...]] = {}
    for svc in snapshot.services:
        if namespace is not None and svc.namespace != namespace:
            continue
        for i, ver in enumerate(svc.versions):
            rows[f"{svc.key}@{ver.name}"] = _service_cells(snapshot, svc, ver, i == 0, palette, columns)
    return rows


def _service_cells(
    snapshot: ClusterSnapshot, svc: InferenceService, ver: ServiceVersion, first: bool,
    palette: Palette, columns: ServiceColumns,
) -> tuple[Any, ...]:
    r = ver.rollout
    share = svc.share_pct(ver.name)
    share_text = Text("–" if share is None else f"{share:.0f}%".rjust(4))
    if svc.router_kind and len(svc.versions) > 1 and share is not None and 0 < share < 100:
        share_text.stylize(f"bold {palette.upgrading}")  # a canary in flight
    ready = Text(f"{r.ready}/{r.replicas_desired}", style="" if r.ready >= r.replicas_desired else palette.cordoned)
    status = Text(r.status, style=palette.ok if r.complete else palette.cordoned)
    shares = [svc.share_pct(v.name) or 0.0 for v in svc.versions]
    if r.complete and share is not None and 0 < share < 100 and share < max(shares):
        # Its pods rolled out, its traffic a minority of a split: the canary the wallboard counts (it said
        # "rolled out" on every row while the wallboard counted 2 canaries: issue 35).
        status = Text(f"canary at {share:.0f}%", style=f"bold {palette.upgrading}")
    sessions = snapshot.sessions_of(svc, ver.name)
    cells = {
        "service": Text(svc.name if first else "", style="bold"),
        "version": Text(ver.name),
        "share": share_text,
        "ready": ready,
        "sessions": Text("–" if sessions is None else str(sessions).rjust(8)),
        "rollout": status,
        "router": Text(svc.router_kind or "–", style="dim") if first else Text(""),
    }
    return tuple(cells[key] for key, *_ in columns)


# key, label, width, priority (higher drops first when the terminal is narrow)
ServiceColumns = tuple[tuple[str, str, int, int], ...]
SERVICE_COLUMNS: ServiceColumns = (
    ("service", "Service", 20, 0),
    ("version", "Version", 7, 0),
    ("share", "Weight", 6, 0),
    ("ready", "Ready", 5, 0),
    ("sessions", "Sessions", 8, 0),
    ("rollout", "Rollout", 17, 1),
    ("router", "Router", 14, 2),
)


def fit_service_columns(width: int, padding: int = 2) -> tuple[tuple[str, str, int, int], ...]:
    chosen = list(SERVICE_COLUMNS)
    while sum(c[2] + padding for c in chosen) > width and any(c[3] for c in chosen):
        chosen.remove(max(chosen, key=lambda c: c[3]))
    return tuple(chosen)
