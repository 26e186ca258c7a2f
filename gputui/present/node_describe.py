"""A node described as `kubectl describe` would, cut to what a GPU on-call engineer reads: its alerts in
words (XIDs explained), every condition with its reason and message, the GPU labels the GPU Operator and
GPU Feature Discovery set, and gputui's own drain records."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gputui.policy.cordon_record import read_record, shown_time
from gputui.policy.fault_peers import PeerCount, line_items, window_words
from gputui.policy.health import node_alerts
from gputui.policy.problems import expired_cordon_alert
from gputui.present.cells import Palette, ago
from gputui.present.disruptions import hold_words, node_holds
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_faults import NOT_COLLECTED, faults_of
from gputui.vocabulary.model import DRAIN_ANNOTATION_PREFIX, Gpu, GpuSummary, Node, NodeDescription

# Labels worth reading on a GPU node: the GPU Operator's and GFD's (nvidia.com/…), NFD's PCI vendor label for
# NVIDIA, and the topology a scheduler spreads over.
GPU_LABEL_PREFIXES = ("nvidia.com/", "feature.node.kubernetes.io/pci-10de", "topology.kubernetes.io/",
                      "node.kubernetes.io/instance-type")


def _section(title: str) -> Text:
    return Text(f"\n{title}", style="bold underline")


def gpu_faults_text(gpu: Gpu, palette: Palette) -> RenderableType:
    """One GPU's faults in words with the action, worst first (node detail, enter on a GPU row)."""
    parts: list[RenderableType] = []
    for f in faults_of(gpu):
        style = f"bold {palette.alert}" if f.category not in ("application", "informational", NOT_COLLECTED) else "bold"
        parts.append(Text.assemble((f.category, style), ": ", f.words))
        parts.append(Text.assemble(("  → ", "dim"), f.action, "\n"))
    return Group(*parts) if parts else Text("no fault: every fault field read, none says anything", style="dim")


def _faults(node: Node, palette: Palette) -> list[RenderableType]:
    """Each GPU's faults in words with the action, worst first; the fields the exporter does not export once for
    the GPUs that share the same gap (usually all of them), never left out."""
    parts: list[RenderableType] = [_section("GPU faults, worst first")]
    gaps: dict[tuple[str, ...], list[int]] = {}
    for gpu in node.gpus:
        for f in faults_of(gpu):
            if f.category == NOT_COLLECTED:
                gaps.setdefault(f.fields, []).append(gpu.index)
                continue
            style = f"bold {palette.alert}" if f.category not in ("application", "informational") else "bold"
            parts.append(Text.assemble((f"GPU {gpu.index} ", "bold"), (f.category, style), ": ", f.words))
            parts.append(Text.assemble(("  → ", "dim"), f.action))
    if len(parts) == 1:
        parts.append(Text("none", style="dim") if node.gpus else Text("no GPU read yet", style="dim"))
    for fields, indexes in gaps.items():
        which = "every GPU" if len(indexes) == len(node.gpus) > 1 else \
            f"GPU{'s' if len(indexes) > 1 else ''} {', '.join(map(str, indexes))}"
        parts.append(Text.assemble((f"{which} ", "bold"), (NOT_COLLECTED, "dim"), f": {', '.join(fields)}"))
        parts.append(Text.assemble(("  → ", "dim"), "add them to dcgm-exporter's counters CSV: unknown, never healthy"))
    return parts


def peer_lines(peers: Sequence[PeerCount] | None, palette: Palette) -> list[RenderableType]:
    """The node's fault counts over the window against its pool (fault_peers), a line per kind; unknown lines in
    the alert colour (never shown as none)."""
    if peers is None:
        return [Text("fault counts against the pool: not read yet", style="dim")]
    out: list[RenderableType] = []
    for line, notable in line_items(peers):
        out.append(Text.assemble(("≈ ", f"bold {palette.alert}" if notable else "dim"), line))
    return out


def describe(node: Node, temp_threshold: float, palette: Palette, read: NodeDescription | None = None,
             error: str | None = None, now: float | None = None, summary: GpuSummary | None = None,
             snapshot: ClusterSnapshot | None = None, peers: Sequence[PeerCount] | None = None) -> RenderableType:
    """`read`: what describe read from the API now (taints, heartbeat, events); `error`: why it could not;
    `summary`: the node's DCGM figures in a summarised fleet (ClusterSnapshot.summary); `snapshot`: the one the
    node is from (names what holds a GPU Operator upgrade; without it, the holds are read from the node alone);
    `peers`: its fault counts over a window against its pool (gputui.policy.fault_peers; None: not read)."""
    parts: list[RenderableType] = []
    if error:
        parts.append(Text(f"taints, heartbeat and events unavailable: {error}", style=f"bold {palette.alert}"))
    alerts = node_alerts(node, temp_threshold, summary)
    expired = expired_cordon_alert(node, now) if now is not None else None
    alerts = [*alerts, expired] if expired is not None else alerts  # the least severe: last
    parts.append(_section("Alerts, worst first"))
    if alerts:
        for a in alerts:
            parts.append(Text.assemble(("▲ ", f"bold {palette.alert}"), (a.kind, "bold"), ": ", a.message))
    else:
        parts.append(Text("none", style="dim"))

    parts.extend(_faults(node, palette))
    window = f" over {window_words(peers[0].window_s)}" if peers else ""
    parts.append(_section(f"GPU faults{window} against the other nodes of its pool"))
    parts.extend(peer_lines(peers, palette))

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

    parts.extend(_cordon_record(node, palette, now))
    records = sorted((k, v) for k, v in node.annotations.items() if k.startswith(DRAIN_ANNOTATION_PREFIX))
    if records:
        parts.append(_section("gputui drain record"))
        parts.extend(Text(f"{k}={v}") for k, v in records)
    return Group(*parts)


def _cordon_record(node: Node, palette: Palette, now: float | None) -> list[RenderableType]:
    """Who cordoned it through gputui, why, the ticket, since when and until when (issue 40 item 2)."""
    record = read_record(node.annotations) if node.unschedulable else None
    if record is None:
        return []
    out: list[RenderableType] = [_section("Cordoned through gputui")]
    if record.problem:
        return [*out, Text(record.words(), style=f"bold {palette.alert}")]
    rows = [("By", record.by), ("Reason", record.reason), ("Ticket", record.ticket or "none")]
    if record.since is not None:
        rows.append(("Since", shown_time(record.since) + (f" ({ago(max(0.0, now - record.since))} ago)"
                                                          if now is not None else "")))
    rows.append(("Expires", "never (no expiry given)" if record.expires is None else shown_time(record.expires)))
    out.extend(Text.assemble((f"{label}: ", "bold"), value) for label, value in rows)
    if record.expires is not None and now is not None and record.expired(now):
        out.append(Text(f"EXPIRED {ago(now - record.expires)} ago: uncordon it, or cordon it again with a new expiry",
                        style=f"bold {palette.alert}"))
    return out
