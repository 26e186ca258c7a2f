"""`gputui disruptions`: every node being disrupted, by actor, with its phase, age and why, stuck ones first
(gputui.present.disruptions, the rows `:disruptions` shows). Read from the Node objects, NodeMaintenances and
Karpenter NodeClaims; each source's state is named (read, not installed, unknown).
Exit 0: a disruption is information, not an error."""

from __future__ import annotations

import json
import sys

from rich.table import Table
from rich.text import Text

from gputui.cli import common, safe_output
from gputui.present.disruptions import disruption_rows, sources, unknown_because
from gputui.settings import Settings


def run(settings: Settings, output: str) -> int:
    snapshot = common.read_snapshot(settings)
    rows = disruption_rows(snapshot)
    unknown = unknown_because(snapshot)
    if output == "json":
        json.dump({
            "simulated": snapshot.simulated,  # true: the demo cluster, nothing here is real
            # Where the holds were read from; an unread source is named as such, never as "none found".
            "sources": sources(snapshot),
            "known": not unknown,  # false: the list below may be incomplete (even empty) for want of a read
            "disruptions": [r.to_dict(snapshot.simulated) for r in rows],
        }, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    console = safe_output.console(200)
    if snapshot.simulated:
        console.print(Text("# SIMULATED: the demo cluster, nothing here is real", style="dim"))
    if unknown:
        console.print(Text(f"unknown: {unknown}", style="bold"))
    table = Table(box=None, pad_edge=False)
    for label in ("NODE", "ACTOR", "PHASE", "AGE", "WHY"):
        table.add_column(label, no_wrap=label != "WHY", overflow="fold")
    for r in rows:  # Text(): what the cluster wrote is never read as markup; safe_output makes it visible
        table.add_row(Text(r.node), Text(r.actor), Text(r.phase + (" ⚠" if r.stuck else "")), r.age_text(),
                      Text(r.why))
    console.print(table)
    for r in rows:
        if r.stuck:  # in full below the table, as `gputui versions` does: the why column is already wide
            console.print(Text(f"{r.node}: {r.actor} {r.phase} stuck: {r.stuck}"))
    stuck = sum(1 for r in rows if r.stuck)
    nodes = len({r.node for r in rows})
    console.print(Text(f"{nodes} node{'s' * (nodes != 1)} disrupted, {stuck} stuck" if rows
                       else "no node is disrupted" if not unknown else "", style="dim"))
    console.print(Text("sources: " + "; ".join(f"{k}: {v}" for k, v in sources(snapshot).items()), style="dim"))
    return 0
