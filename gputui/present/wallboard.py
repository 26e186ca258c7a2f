"""What the wallboard shows, computed from a snapshot (no UI): the big figures and the heat map.

The heat map draws one cell per GPU. Level is carried twice, by colour and by
glyph (░ ▒ █), so it reads in monochrome and without telling red from green.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text

from gputui.policy.health import fleet_driver, problem_order
from gputui.policy.problems import EXPIRED_CORDON, alerts_at
from gputui.present.cells import Palette, heat_band, pct
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_metrics import value_of
from gputui.vocabulary.model import GpuSummary, Health, Node, NodeState

GLYPHS = ("░", "▒", "█")  # low, mid, high
NO_DATA = "·"
FAULT = "✗"  # a GPU with an XID or failed health: never drawn as an idle one


HEAT = {"util": "util_pct", "temp": "temp_c"}  # the heat map's setting (wallboard_heat) -> gputui.vocabulary.gpu_metrics' figure


def level(value: float | None, metric: str, temp_threshold: float) -> int | None:
    """0 low, 1 mid, 2 high; None without data. Temperature bands end at the alert threshold."""
    if value is None:
        return None
    if metric == "temp":
        return 2 if value >= temp_threshold else 1 if value >= temp_threshold - 20 else 0
    return heat_band(value)


def gpu_values(node: Node, metric: str, summary: GpuSummary | None) -> list[float | None]:
    """One value per GPU; a node known only by its summary repeats its mean (or max temperature)."""
    if node.gpus:
        return [value_of(g, HEAT[metric]) for g in node.gpus]
    if summary is None:
        return [None] * node.gpu_capacity
    value = value_of(summary, HEAT[metric])
    return [value] * (summary.count or node.gpu_capacity)


def gpu_faults(node: Node) -> set[int]:
    """Positions (in gpu_values' order) of the GPUs with an XID or failed health."""
    return {i for i, g in enumerate(node.gpus) if g.xid or g.health is Health.FAIL}


def problems_first(snap: ClusterSnapshot, temp_threshold: float) -> list[Node]:
    """Worst first by the one severity order (health.problem_order), by name within each."""
    majority = fleet_driver(snap)
    summaries = snap.summaries
    return sorted(snap.nodes, key=lambda n: (problem_order(n, temp_threshold, majority, summaries.get(n.name)), n.name))


def _cells(node: Node, values: list[float | None], metric: str, temp_threshold: float, palette: Palette,
           cell_w: int = 1) -> Text:
    text = Text()
    colours = (palette.heat_low, palette.heat_mid, palette.heat_high)
    faults = gpu_faults(node)
    for i, value in enumerate(values):
        if i and cell_w > 1:
            text.append(" ")
        lvl = level(value, metric, temp_threshold)
        if i in faults:
            text.append(FAULT * cell_w, style=f"bold {palette.alert}")
        elif lvl is None:
            text.append(NO_DATA * cell_w, style=palette.muted)
        else:
            text.append(GLYPHS[lvl] * cell_w, style=colours[lvl])
    return text


def heat_map(snap: ClusterSnapshot, width: int, height: int, metric: str, temp_threshold: float,
             palette: Palette) -> list[Text]:
    """Lines of the heat map for a width x height area, problems first.

    One node per line with its name when the fleet fits; otherwise nodes flow
    as blocks of cells, and what does not fit is counted, never silently cut.
    """
    nodes = problems_first(snap, temp_threshold)
    if width <= 0 or height <= 0:
        return []
    summaries = snap.summaries
    blocks = [(n, gpu_values(n, metric, summaries.get(n.name))) for n in nodes]
    widest = max((len(v) for _, v in blocks), default=0)
    name_w = min(max((len(n.name) for n in nodes), default=0), max(8, width // 3))
    if len(nodes) <= height and name_w + 2 + widest + 12 <= width:
        # Room to spare: wider cells, so the board reads from across the room.
        cell_w = max(1, min(3, (width - name_w - 40) // max(1, widest)))
        return [_named_line(n, v, name_w, cell_w, metric, temp_threshold, palette, summaries.get(n.name), snap.taken_at)
                for n, v in blocks]
    column_w = name_w + 1 + widest + 3
    per_line = max(1, width // column_w)
    if -(-len(nodes) // per_line) <= height and per_line > 1:
        rows = -(-len(nodes) // per_line)
        return _named_grid(blocks, rows, name_w, column_w, metric, temp_threshold, palette, summaries, snap.taken_at)
    lines: list[Text] = []
    counts: list[int] = []  # nodes on each line
    line, count = Text(), 0
    for node, values in blocks:
        block = _cells(node, values, metric, temp_threshold, palette)
        if node.state is not NodeState.READY:
            block.stylize("underline")  # cordoned, draining, not ready: marked without colour too
        if len(line) and len(line) + 1 + len(block) > width:
            lines.append(line)
            counts.append(count)
            line, count = Text(), 0
        if len(line):
            line.append(" ")
        line.append_text(block)
        count += 1
    lines.append(line)
    counts.append(count)
    if len(lines) > height:
        hidden = len(nodes) - sum(counts[: height - 1])
        words = f"+{hidden} nodes not shown: enlarge the window"
        more = Text(words if len(words) <= width else f"+{hidden} more"[:width], style=f"bold {palette.alert}")
        lines = [*lines[:height - 1], more]
    for line in lines:
        line.truncate(width)  # a node with more GPUs than the width: cut at the edge, not wrapped
    return lines


def _named_grid(blocks: list[tuple[Node, list[float | None]]], rows: int, name_w: int, column_w: int,
                metric: str, temp_threshold: float, palette: Palette, summaries: Mapping[str, GpuSummary],
                now: float) -> list[Text]:
    """Names and cells in columns, read downwards, so the problems listed first share column one."""
    lines = [Text() for _ in range(rows)]
    for i, (node, values) in enumerate(blocks):
        line = lines[i % rows]
        name = node.name if len(node.name) <= name_w else node.name[: name_w - 1] + "…"
        cell = Text(name.ljust(name_w) + " ",
                    style=_name_style(node, temp_threshold, palette, summaries.get(node.name), now))
        cell.append_text(_cells(node, values, metric, temp_threshold, palette))
        cell.pad_right(column_w - len(cell))
        line.append_text(cell)
    for line in lines:
        line.rstrip()
    return lines


def _name_style(node: Node, temp_threshold: float, palette: Palette, summary: GpuSummary | None, now: float) -> str:
    if alerts_at(node, now, temp_threshold, summary):  # an expired cordon too, as the header counts it
        return f"bold {palette.alert}"
    return palette.state(node.state) if node.state is not NodeState.READY else ""


def _named_line(node: Node, values: list[float | None], name_w: int, cell_w: int, metric: str,
                temp_threshold: float, palette: Palette, summary: GpuSummary | None, now: float) -> Text:
    name = node.name if len(node.name) <= name_w else node.name[: name_w - 1] + "…"
    line = Text(name.ljust(name_w), style=_name_style(node, temp_threshold, palette, summary, now))
    line.append("  ")
    line.append_text(_cells(node, values, metric, temp_threshold, palette, cell_w))
    line.append("  ")
    known = [v for v in values if v is not None]
    if metric == "util":
        mean = sum(known) / len(known) if known else None
        line.append(pct(mean).strip(), style=palette.heat(mean))
    else:
        hottest = max(known) if known else None
        line.append("–" if hottest is None else f"{hottest:.0f}°C")
    alerts = alerts_at(node, now, temp_threshold, summary)
    kinds = {a.kind for a in alerts}
    # `cordon expired` says the node is cordoned: its state is not said twice.
    told = node.state.value in kinds or (node.state is NodeState.CORDONED and "Cordon" in kinds)
    if node.state is not NodeState.READY and not told:
        line.append(f" {node.state.value}", style=palette.state(node.state))
    if alerts:
        words = (EXPIRED_CORDON if a.kind == "Cordon" else a.kind for a in alerts)
        line.append(" " + ", ".join(dict.fromkeys(words)), style=f"bold {palette.alert}")
    return line


def legend(metric: str, temp_threshold: float, palette: Palette) -> Text:
    colours = (palette.heat_low, palette.heat_mid, palette.heat_high)
    if metric == "util":
        bands = ("<50%", "50–85%", "≥85%")
    else:
        low = temp_threshold - 20
        bands = (f"<{low:.0f}°C", f"{low:.0f}–{temp_threshold:.0f}°C", f"≥{temp_threshold:.0f}°C")
    text = Text()
    for glyph, band, colour in zip(GLYPHS, bands, colours, strict=True):
        text.append(glyph * 2, style=colour)
        text.append(f" {band}  ")
    text.append(NO_DATA * 2, style=palette.muted)
    text.append(" no data  ")
    text.append(FAULT * 2, style=f"bold {palette.alert}")
    text.append(" fault")  # an XID or failed health
    return text
