"""A node described as `kubectl describe` would, cut to what a GPU on-call engineer reads: its alerts in
words (XIDs explained), every condition with its reason and message, the GPU labels the GPU Operator and
GPU Feature Discovery set, and gputui's own drain records."""

from __future__ import annotations

import time

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gputui.policy.health import node_alerts
from gputui.present.cells import Palette, ago
from gputui.present.disruptions import hold_words, node_holds
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import DRAIN_ANNOTATION_PREFIX, GpuSummary, Node, NodeDescription

# Labels worth reading on a GPU node: the GPU Operator's and GFD's (nvidia.com/…), NFD's PCI vendor label for
# NVIDIA, and the topology a scheduler spreads over.
GPU_LABEL_PREFIXES = ("nvidia.com/", "feature.node.kubernetes.io/pci-10de", "topology.kubernetes.io/",
                      "node.kubernetes.io/instance-type")


def _section(title: str) -> Text:
    return Text(f"\n{title}", style="bold underline")


def describe(node: Node, temp_threshold: float, palette: Palette, read: NodeDescription | None = None,
             error: str | None = None, now: float | None = None, summary: GpuSummary | None = None,
             snapshot: ClusterSnapshot | None = None) -> RenderableType:
    """`read`: what describe read from the API now (taints, heartbeat, events); `error`: why it could not;
    `summary`: the node's DCGM figures in a summarised fleet (ClusterSnapshot.summary); `snapshot`: the one the
    node is from (names what holds a GPU Operator upgrade; without it, the holds are read from the node alone)."""
    parts: list[RenderableType] = []
    if error:
        parts.append(Text(f"taints, heartbeat and events unavailable: {error}", style=f"bold {palette.alert}"))
    alerts = node_alerts(node, temp_threshold, summary)
    parts.append(_section("Alerts, worst first"))
    if alerts:
        for a in alerts:
            parts.append(Text.assemble(("▲ ", f"bold {palette.alert}"), (a.kind, "bold"), ": ", a.message))
    else:
        parts.append(Text("none", style="dim"))

    parts.append(_section("Disruptions, stuck first"))  # who is disrupting it, and why (issue 40)
    at = now if now is not None else snapshot.taken_at if snapshot is not None else time.time()
    holds = node_holds(node, snapshot, at)
    for hold in holds:
        head, why, stuck = hold_words(hold, at)
        since = "" if hold.since is None else time.strftime(" (since %Y-%m-%d %H:%M UTC)", time.gmtime(hold.since))
        parts.append(Text.assemble(("◆ ", f"bold {palette.cordoned}"), (head, "bold"), since, ": ", why))
        if stuck:
            parts.append(Text.assemble(("  stuck: ", f"bold {palette.alert}"), stuck))
    if not holds:
        parts.append(Text("none the Node object shows (NodeMaintenance, NodeClaims and NVSentinel's CRs are not "
                          "read yet)", style="dim"))

    parts.append(_section("Conditions"))
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold", expand=True)
    for label in ("Type", "Status", "Reason", "Message"):
        table.add_column(label, overflow="fold", no_wrap=label in ("Type", "Status"))
    for c in node.conditions:
        bad = (c.status == "True") != (c.type == "Ready")  # Ready should be True; every other condition False
        table.add_row(Text(c.type), Text(c.status, style=f"bold {palette.alert}" if bad else ""),
                      Text(c.reason), Text(c.message))
    parts.append(table if node.conditions else Text("none reported", style="dim"))
    if read is not None:
        beat = "unknown" if read.heartbeat is None else \
            time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(read.heartbeat)) + \
            (f" ({ago(max(0.0, now - read.heartbeat))} ago)" if now is not None else "")
        parts.append(Text.assemble(("Last heartbeat (Ready): ", "bold"), beat))
        parts.append(_section("Taints"))
        parts.extend(Text(t) for t in read.taints)
        if not read.taints:
            parts.append(Text("none", style="dim"))
        parts.append(_section("Events, newest first"))
        for e in read.events:
            when = "" if e.last_seen is None or now is None else f"{ago(max(0.0, now - e.last_seen))} ago "
            count = f" ×{e.count}" if e.count > 1 else ""
            parts.append(Text.assemble((e.type.ljust(8), f"bold {palette.alert}" if e.type == "Warning" else ""),
                                       f" {when}", (e.reason, "bold"), count, f" {e.object}: ", e.message))
        if not read.events:
            parts.append(Text("none recent (events expire after an hour by default)", style="dim"))

    parts.append(_section("GPU labels"))
    labels = sorted((k, v) for k, v in node.labels.items() if k.startswith(GPU_LABEL_PREFIXES))
    parts.extend(Text(f"{k}={v}") for k, v in labels)
    if not labels:
        parts.append(Text("none: is GPU Feature Discovery running?", style=f"bold {palette.alert}"))

    records = sorted((k, v) for k, v in node.annotations.items() if k.startswith(DRAIN_ANNOTATION_PREFIX))
    if records:
        parts.append(_section("gputui drain record"))
        parts.extend(Text(f"{k}={v}") for k, v in records)
    return Group(*parts)
