"""A node's GPU gauges in aggregate (utilisation, memory, temperature, power): what its row, its detail, the
wallboard and the fleet's figures show of it.

They come from one of two places. A large fleet is read as per-node aggregates (GpuSummary, one per node, from
Prometheus); those live beside the nodes, in the snapshot's `summaries` map, not in the nodes: a DCGM read
moves every node's figures, and at 65,000 nodes rebuilding every Node for it, then walking them all again for
the header, the pools and the table's order, cost most of the steady CPU (issue 18). With the summaries apart,
such a read builds no node, and what depends on the figures alone is summed from the map. A small fleet is
read per GPU: its nodes carry their GPUs (Node.gpus) and the gauges are worked out from them.

A value nobody reported stays None (unknown), never zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gputui.vocabulary.gpu_metrics import BY_NAME, NO_VALUES, NODE_FIGURES, TYPED, Figures, aggregate, extra_of
from gputui.vocabulary.model import Gpu, GpuSummary, Node


@dataclass(frozen=True, slots=True)
class Gauges:
    """A node's figures, named and aggregated as gputui.vocabulary.gpu_metrics says (util_pct the mean of its GPUs, temp_c
    the hottest, power_w the sum...)."""

    util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    reporting: bool = False  # any DCGM series for the node at all
    extra: Figures = NO_VALUES  # the table's other figures, known ones only


def _sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def mem_total(node: Node, summary: GpuSummary | None) -> float | None:
    """The node's GPU memory: as reported, else the card size from its label times the cards."""
    if summary is not None:
        total = summary.mem_total_mib
        if total is None and node.gpu_memory_mib:  # the card size from the node label times the cards reporting
            return float(node.gpu_memory_mib * summary.count)
    else:
        total = _sum(g.mem_total_mib for g in node.gpus)
    if total is None and node.gpu_memory_mib and node.gpu_capacity:
        return float(node.gpu_memory_mib * node.gpu_capacity)
    return total


def util_sum(node: Node, summary: GpuSummary | None) -> tuple[float, int]:
    """Utilisation summed over the node's GPUs reporting it, and how many report: what the fleet's mean and a
    pool's add up."""
    if summary is not None:
        if summary.util_pct is not None and summary.count:
            return summary.util_pct * summary.count, summary.count
        return 0.0, 0
    total, count = 0.0, 0
    for g in node.gpus:
        if g.util_pct is not None:
            total += g.util_pct
            count += 1
    return total, count


def hot(summary: GpuSummary | None, temp_threshold: float) -> bool:
    """Whether the summary's hottest GPU is at or over the threshold (an alert of its own, health.node_alerts)."""
    return summary is not None and summary.temp_c is not None and summary.temp_c >= temp_threshold


def gauges(node: Node, summary: GpuSummary | None) -> Gauges:
    """The node's gauges, from its summary when there is one, else from its GPUs (each figure aggregated as its
    row in gputui.vocabulary.gpu_metrics says)."""
    if summary is not None:
        return Gauges(summary.util_pct, summary.mem_used_mib, mem_total(node, summary), summary.temp_c,
                      summary.power_w, True, summary.extra)
    gpus = node.gpus
    total, count = util_sum(node, None)
    extra = extra_of({m.name: aggregate(m.node, (g.extra.get(m.name) for g in gpus))
                      for m in NODE_FIGURES if m.name not in TYPED}) \
        if any(g.extra is not NO_VALUES for g in gpus) else NO_VALUES  # (most GPUs report nothing more)
    return Gauges(total / count if count else None, _node_figure("mem_used_mib", gpus), mem_total(node, None),
                  _node_figure("temp_c", gpus), _node_figure("power_w", gpus), bool(gpus), extra)


def _node_figure(name: str, gpus: tuple[Gpu, ...]) -> float | None:
    return aggregate(BY_NAME[name].node, (getattr(g, name) for g in gpus))
