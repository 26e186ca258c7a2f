"""`gputui pools`: GPU nodes by pool (the seeds' gpu.pool, the clouds' and Karpenter's node-pool labels), with
each pool's GPUs allocated, unallocated, mean utilisation, and allocated but idle over a window (seed 000 §7,
the idle rate), then the fleet. Idle is unknown, never 0, when the metrics cannot tell."""

from __future__ import annotations

import argparse
import json
import sys

from gputui.cli import common
from gputui.policy.node_pools import idle_why, pool_rows
from gputui.settings import Settings


def run(settings: Settings, args: argparse.Namespace) -> int:
    backend = common.backend(settings)
    try:
        snapshot = backend.reader.snapshot()
        idle, why = backend.read_idle(args.idle_window, args.idle_below)
    finally:
        backend.close()
    rows = pool_rows(snapshot, idle, settings.pool_labels)
    why = idle_why(rows[-1], why)
    if args.output == "json":
        json.dump({"simulated": snapshot.simulated, "idle_window_s": args.idle_window, "idle_below_pct": args.idle_below,
                   "idle_unknown_because": why or None, "pools": [r.to_dict() for r in rows]},
                  sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    if snapshot.simulated:
        print("# SIMULATED: the demo cluster, nothing here is real")
    table = [("POOL", "NODES", "ALLOCATED", "FREE", "UTIL", "IDLE")]
    for r in rows:
        table.append((r.pool, str(r.nodes), r.use.text(), r.use.free_text(),
                      "–" if r.util is None else f"{r.util:.0f}%", "?" if r.idle is None else str(r.idle)))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(f"idle: allocated GPUs below {args.idle_below:g}% over {args.idle_window:g}s"
          + (f" (unknown: {why})" if why else ""))
    return 0
