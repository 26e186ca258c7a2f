"""`gputui nodes`: the GPU nodes as a table or JSON, for scripts."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from rich.table import Table
from rich.text import Text

from gputui.backends.base import error_line
from gputui.cli import common, safe_output
from gputui.policy.disruptions import node_disruptions
from gputui.policy.fault_peers import DEFAULT_WINDOW_S, PeerCount, fleet_peers
from gputui.policy.health import fleet_driver, has_driver_drift
from gputui.policy.problems import snapshot_alerts
from gputui.present import cells
from gputui.settings import Settings
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_faults import faults_of
from gputui.vocabulary.gpu_metrics import COLUMNS, json_figures, value_of
from gputui.vocabulary.gpu_resources import allocation_text
from gputui.vocabulary.model import Node


def node_record(snapshot: ClusterSnapshot, node: Node, peers: list[PeerCount] | None = None) -> dict[str, Any]:
    """`peers`: the node's fault counts against its pool (fault_peers), listed when read."""
    record = {
        "name": node.name,
        "simulated": snapshot.simulated,  # true: the demo cluster, nothing here is real
        "state": node.state.value,
        "gpu_model": node.gpu_product,
        # GPU units (whole cards, MIG slices, shared replicas, DRA devices: see gpu_resources) in use / offered.
        "gpus_allocated": snapshot.gpus_allocated(node.name),
        "gpus_total": node.gpu_allocatable,
        "gpus_capacity": node.gpu_capacity,
        "physical_gpus": node.gpu_count or None,  # null: unknown (MIG slices without GFD's count)
        "allocation": _allocation(snapshot, node),
        "gpu_resources": [
            {"name": r.name, "scheme": r.scheme.value, "capacity": r.capacity, "allocatable": r.allocatable,
             "allocated": snapshot.allocated_by_resource(node.name).get(r.name, 0),
             **({"replicas": r.replicas} if r.replicas > 1 else {})}
            for r in node.gpu_resources
        ],
        "driver_version": node.driver_version,
        "alerts": [f"{a.kind}: {a.message}" for a in snapshot_alerts(snapshot, node)],  # an expired cordon too
        # Every figure of gputui.vocabulary.gpu_metrics by its name, null when unknown (a bitmask such as throttle_reasons
        # as its number: gpu_metrics.THROTTLE_REASONS decodes it).
        # faults: each in words with the action and gputui's verdict on who acts, worst first (gputui.vocabulary.
        # gpu_faults: an XID from NVIDIA's catalog, the clock event reasons, ECC, row remap, PCIe and NVLink
        # counters); the fields the exporter does not export in one `not-collected` entry, never left out.
        "gpus": [{"index": g.index, "uuid": g.uuid, **json_figures(g), "faults": [f.to_dict() for f in faults_of(g)]}
                 for g in node.gpus],
        # Who is disrupting the node and why, stuck ones first (gputui.policy.disruptions: from the Node, its NodeMaintenances and NodeClaims;
        # since: epoch seconds the actor recorded, null when it records none; stuck: why, null when not).
        "disruptions": [x.to_dict() for x in node_disruptions(node, snapshot.taken_at, snapshot)],
    }
    if peers is not None:
        # Each fault kind counted over the window against the other nodes of its pool (gputui.policy.fault_peers):
        # count null with `unknown` saying why (the read failed, or the node has no such series: not collected).
        record["fault_peers"] = [p.to_dict() for p in peers]
    return record


def read_with_peers(settings: Settings, window_s: float, peers: bool = True) -> tuple[ClusterSnapshot,
                                                                                       dict[str, list[PeerCount]]]:
    """One snapshot and, when asked, every node's fault counts over the window (one query for the fleet); the
    connection closed after them."""
    source = common.backend(settings, per_gpu=True)  # the JSON lists every GPU
    try:
        snapshot = source.reader.snapshot()
        if not peers:
            return snapshot, {}
        window, why = source.read_fault_window(window_s)
    finally:
        source.close()
    return snapshot, fleet_peers(snapshot.nodes, window, why, settings.pool_labels, window_s)


def _allocation(snapshot: ClusterSnapshot, node: Node) -> str:
    if not node.gpu_resources:
        return f"{snapshot.gpus_allocated(node.name)}/{node.gpu_allocatable}"
    return allocation_text(node.gpu_resources, snapshot.allocated_by_resource(node.name), node.gpu_count)


def run_fleet(settings: Settings, output: str, window_s: float = DEFAULT_WINDOW_S) -> int:
    """`--context a,b`: every cluster read at once (one slow cluster delays only the end, never the others'
    reads), each node tagged with its cluster; a cluster that cannot be read is one line on stderr and exit 1,
    the others still printed."""
    def read(context: str) -> tuple[str, Any, str]:
        try:
            return context, read_with_peers(replace(settings, context=context, contexts=()), window_s,
                                            output == "json"), ""
        except Exception as exc:  # noqa: BLE001 - one cluster's failure is its own line
            return context, None, error_line(exc)

    with ThreadPoolExecutor(max_workers=len(settings.contexts)) as pool:
        results = list(pool.map(read, settings.contexts))
    records = [{"cluster": context, **node_record(got[0], n, got[1].get(n.name) if output == "json" else None)}
               for context, got, _ in results if got is not None for n in got[0].nodes]
    failed = [(context, why) for context, got, why in results if got is None]
    if output == "json":
        json.dump(records, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for r in records:
            print(f"{r['cluster']}\t{r['name']}\t{r['state']}\t{r['allocation']}")
    for context, why in failed:
        print(f"gputui: error: {context}: {why}", file=sys.stderr)
    return 1 if failed else 0


def run(settings: Settings, output: str, window_s: float = DEFAULT_WINDOW_S) -> int:
    """`window_s`: the fault counts' window (`--window`, 24 h by default), read for the JSON only."""
    if len(settings.contexts) > 1:
        return run_fleet(settings, output, window_s)
    snapshot, peers = read_with_peers(settings, window_s, output == "json")
    if output == "json":
        json.dump([node_record(snapshot, n, peers.get(n.name)) for n in snapshot.nodes], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    majority = fleet_driver(snapshot)
    table = Table(box=None, pad_edge=False)
    for label in ("NODE", "STATE", "MODEL", "GPUS", *(m.label.upper() for m in COLUMNS), "DRIVER", "ALERTS"):
        table.add_column(label, no_wrap=True)
    for n in snapshot.nodes:
        g = snapshot.gauges(n)
        table.add_row(
            Text(n.name), n.state.value, Text(cells.short_model(n.gpu_product)), _allocation(snapshot, n),
            # Memory is used/total; every other figure as its row in gputui.vocabulary.gpu_metrics writes it.
            *(cells.mem_used_total(g.mem_used_mib, g.mem_total_mib) if m.name == "mem_used_mib"
              else m.fmt(value_of(g, m.name)).strip() for m in COLUMNS),
            Text(("≠" if has_driver_drift(n, majority) else "") + (n.driver_version or "–")),
            Text(", ".join(dict.fromkeys(a.kind for a in snapshot_alerts(snapshot, n, settings.temp_threshold)))),
        )
    console = safe_output.console(200)
    if snapshot.simulated:
        console.print(Text("# SIMULATED: the demo cluster, nothing here is real", style="dim"))
    console.print(table)
    return 0
