"""What the fleet view works out per refresh from the whole fleet, kept from one refresh to the next
(fleet_sums: the header's figures and the pools' rows; present/kept_order: the node table's order in the sort
in force), against the same figures worked out from scratch, in the same run.

The fleet is the seeded demo's nodes copied under new names up to N (benchmarks/ui_refresh.fleet), read as per-node
summaries (the fleet mode). Two kinds of refresh:
  - moved: --moved nodes are replaced (a cordon flips), as node status updates do in a large cluster between
    two refreshes;
  - DCGM read: every node's summary is replaced with new figures (about 1% of them hot, others than the last
    time), no node moves.
Reported as CPU per refresh (time.process_time), median over --refreshes.

    python benchmarks/fleet_sums.py [--nodes 65000] [--moved 300] [--refreshes 8]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from benchmarks.ui_refresh import fleet
from gputui.backends.demo import demo_backend
from gputui.policy.figures import figures
from gputui.policy.health import fleet_alerts
from gputui.policy.node_pools import fleet_pools, pool_rows
from gputui.present.cells import Palette
from gputui.present.columns import NODE_COLUMNS, PROBLEMS_SORT, node_order, row_context
from gputui.snapshot import ClusterSnapshot
from tests.demo_clock import ManualClock


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=65000)
    parser.add_argument("--moved", type=int, default=300)
    parser.add_argument("--refreshes", type=int, default=8)
    json_option(parser)
    args = parser.parse_args()
    record = Figures("fleet_sums", settings_of(args))
    base = demo_backend(seed=7, clock=ManualClock()).reader.snapshot()
    snap = fleet(base, args.nodes, 1, per_gpu=False)
    rng = random.Random(18)
    palette = Palette()
    col = NODE_COLUMNS[PROBLEMS_SORT]

    def kept(s: ClusterSnapshot) -> None:
        figures(s, 85.0)
        fleet_pools(s, None)
        node_order(row_context(s, palette, 85.0), PROBLEMS_SORT, False)

    def fresh(s: ClusterSnapshot) -> None:
        s.gpu_use(), s.mean_util, fleet_alerts(s, 85.0), pool_rows(s, None)
        ctx = row_context(s, palette, 85.0)
        by_name = {n.name: n for n in s.nodes}
        sorted(by_name, key=lambda name: (col.sort(by_name[name], ctx), name))

    def moved(snap: ClusterSnapshot, r: int) -> ClusterSnapshot:
        nodes = list(snap.nodes)
        for i in rng.sample(range(len(nodes)), args.moved):
            nodes[i] = replace(nodes[i], unschedulable=not nodes[i].unschedulable)
        return replace(snap, taken_at=float(r), nodes=tuple(nodes), indexes=(snap.allocation, snap._pods_by_node))

    def dcgm_read(snap: ClusterSnapshot, r: int) -> ClusterSnapshot:
        # New figures everywhere; about 1% of the nodes run hot (an alert), not the same ones each read.
        summaries = {name: replace(s, util_pct=rng.uniform(0, 100),
                                   temp_c=90.0 if rng.random() < 0.01 else float(rng.randrange(40, 80)))
                     for name, s in snap.summaries.items()}
        return replace(snap, taken_at=float(r), summaries=summaries, indexes=(snap.allocation, snap._pods_by_node))

    for label, step in (("moved", moved), ("DCGM read", dcgm_read)):
        kept(snap)
        times: dict[str, list[float]] = {"kept": [], "fresh": []}
        for r in range(args.refreshes):
            snap = step(snap, r)
            for name, work in (("kept", kept), ("fresh", fresh)):
                t0 = time.process_time()
                work(snap)
                times[name].append(time.process_time() - t0)
        k, f = statistics.median(times["kept"]), statistics.median(times["fresh"])
        what = f"{args.moved} nodes moved" if step is moved else "every summary replaced, no node moved"
        record.add(f"{label} kept", k * 1000, "ms")
        record.add(f"{label} from scratch", f * 1000, "ms")
        record.add(f"{label} kept/scratch", k / f, "x")
        print(f"{args.nodes} nodes, {label} ({what}): figures, pools and the problems order")
        print(f"  kept from the last refresh: {k * 1000:7.1f} ms CPU per refresh")
        print(f"  worked out from scratch:    {f * 1000:7.1f} ms CPU per refresh")
        print(f"  ratio: {k / f:.2f}x")

    record.write(args.json)


if __name__ == "__main__":
    main()
