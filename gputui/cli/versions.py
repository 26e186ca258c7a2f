"""`gputui versions`: the version matrix (gputui.policy.versions), a table or JSON; drift against the node's pool
flagged with ≠ (JSON: each row's `drift`). Exit 0 (drift is information, `gputui check` judges it)."""

from __future__ import annotations

import json
import sys

from rich.table import Table
from rich.text import Text

from gputui.cli import common, safe_output
from gputui.policy.versions import COLUMNS, problems_first, version_matrix
from gputui.settings import Settings


def run(settings: Settings, output: str) -> int:
    snapshot = common.read_snapshot(settings)
    rows = version_matrix(snapshot, settings.pool_labels)
    if output == "json":
        json.dump([{**r.to_dict(), "simulated": snapshot.simulated} for r in rows], sys.stdout, indent=2,
                  ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    table = Table(box=None, pad_edge=False)
    for label in ("NODE", "POOL", *(c.upper() for c in COLUMNS), "UPGRADE"):
        table.add_column(label, no_wrap=True)
    for r in problems_first(rows):  # stuck upgrades and drift first, as :versions
        table.add_row(Text(r.node), Text(r.pool), *(
            Text(("≠" if c in r.drift else "") + (r.values.get(c) or "–"), style="bold" if c in r.drift else "")
            for c in COLUMNS), Text(r.upgrade or "–"))
    console = safe_output.console(240)
    if snapshot.simulated:
        console.print(Text("# SIMULATED: the demo cluster, nothing here is real", style="dim"))
    console.print(table)
    for r in rows:
        if r.stuck:
            console.print(Text(f"{r.node}: upgrade {r.upgrade or '–'}: {r.stuck}"))
    drifting = sum(1 for r in rows if r.drift)
    console.print(Text(f"{drifting} of {len(rows)} nodes differ from their pool's majority"
                       if drifting else f"{len(rows)} nodes, no drift within their pools", style="dim"))
    return 0
