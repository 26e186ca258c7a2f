"""Node and service columns: what each shows, how it sorts, and which drop first when narrow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from rich.text import Text

from gputui.present import cells
from gputui.model import InferenceService, Node, ServiceVersion
from gputui.snapshot import ClusterSnapshot
from gputui.health import has_driver_drift, node_alerts
from gputui.present.cells import Palette


@dataclass(frozen=True)
class RowContext:
    snapshot: ClusterSnapshot
    palette: Palette
    temp_threshold: float
    majority_driver: str


@dataclass(frozen=True)
class NodeColumn:
    key: str
    label: str
    width: int
    priority: int  # 0 always shown; higher numbers drop first
    cell: Callable[[Node, RowContext, int], Any]
    sort: Callable[[Node, RowContext], Any]


def _util(node: Node, ctx: RowContext, width: int) -> Text:
    util = node.mean_util
    text = cells.bar(util, width - 5, ctx.palette.heat(util))
    text.append(" " + cells.pct(util))
    return text


def _mem(node: Node, ctx: RowContext, width: int) -> Text:
    used, total = node.mem_used_mib, node.mem_total_mib
    share = 100.0 * used / total if used is not None and total else None
    label = cells.mem_used_total(used, total)
    text = cells.bar(share, width - 9, ctx.palette.heat(share))
    text.append(" " + label.rjust(8))
    return text


def _temp(node: Node, ctx: RowContext, width: int) -> Text:
    t = node.max_temp
    style = ""
    if t is not None and t >= ctx.temp_threshold:
        style = f"bold {ctx.palette.alert}"
    elif t is not None and t >= ctx.temp_threshold - 10:
        style = ctx.palette.heat_mid
    return Text(cells.temp(t).rjust(width), style=style)


def _gpus(node: Node, ctx: RowContext, width: int) -> Text:
    text = Text(f"{ctx.snapshot.gpus_allocated(node.name)}/{node.gpu_allocatable}")
    if node.gpu_allocatable < node.gpu_capacity:  # the device plugin took a GPU out
        text.append(f"({node.gpu_capacity})", style=ctx.palette.alert)
    return text


def _driver(node: Node, ctx: RowContext, width: int) -> Text:
    if has_driver_drift(node, ctx.majority_driver):
        return Text("≠" + node.driver_version, style=f"bold {ctx.palette.drift}")
    return Text(node.driver_version or "–")


def _alerts(node: Node, ctx: RowContext, width: int) -> Text:
    alerts = node_alerts(node, ctx.temp_threshold)
    if not alerts:
        return Text("")
    return Text(f"{len(alerts)} {alerts[0].kind}", style=f"bold {ctx.palette.alert}")


def _neg(value: float | None) -> float:
    return -1.0 if value is None else value


NODE_COLUMNS: tuple[NodeColumn, ...] = (
    NodeColumn("name", "Node", 12, 0, lambda n, c, w: Text(n.name), lambda n, c: n.name),
    NodeColumn(
        "state", "State", 9, 0, lambda n, c, w: cells.node_state_text(n, c.palette),
        lambda n, c: n.state.value,
    ),
    NodeColumn(
        "model", "Model", 14, 4, lambda n, c, w: Text(cells.short_model(n.gpu_product)[:w]),
        lambda n, c: n.gpu_product,
    ),
    NodeColumn("gpus", "GPUs", 7, 0, _gpus, lambda n, c: c.snapshot.gpus_allocated(n.name)),
    NodeColumn("util", "Util", 12, 0, _util, lambda n, c: _neg(n.mean_util)),
    NodeColumn("mem", "Memory", 17, 2, _mem, lambda n, c: _neg(n.mem_used_mib)),
    NodeColumn("temp", "Temp", 5, 1, _temp, lambda n, c: _neg(n.max_temp)),
    NodeColumn("power", "Power", 6, 5, lambda n, c, w: Text(cells.power(n.power_w).rjust(w)),
               lambda n, c: _neg(n.power_w)),
    NodeColumn("driver", "Driver", 11, 3, _driver, lambda n, c: n.driver_version),
    NodeColumn("alerts", "Alerts", 11, 1, _alerts,
               lambda n, c: len(node_alerts(n, c.temp_threshold))),
)
SORTABLE = tuple(c.key for c in NODE_COLUMNS)


def fit_columns(columns: tuple[NodeColumn, ...], width: int, padding: int = 2) -> tuple[NodeColumn, ...]:
    """The columns that fit `width`, dropping the highest priority numbers first, order kept."""
    chosen = list(columns)
    while len(chosen) > 1 and sum(c.width + padding for c in chosen) > width:
        worst = max((c for c in chosen if c.priority > 0), key=lambda c: c.priority, default=None)
        if worst is None:
            break
        chosen.remove(worst)
    return tuple(chosen)


def service_rows(
    snapshot: ClusterSnapshot, palette: Palette, columns, namespace: str | None = None
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
    palette: Palette, columns,
) -> tuple[Any, ...]:
    r = ver.rollout
    share = svc.share_pct(ver.name)
    share_text = Text("–" if share is None else f"{share:.0f}%".rjust(4))
    if svc.router_kind and len(svc.versions) > 1 and share is not None and 0 < share < 100:
        share_text.stylize(f"bold {palette.upgrading}")  # a canary in flight
    ready = Text(f"{r.ready}/{r.replicas_desired}", style="" if r.ready >= r.replicas_desired else palette.cordoned)
    status = Text(r.status, style=palette.ok if r.complete else palette.cordoned)
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
SERVICE_COLUMNS = (
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
