"""CPU the UI spends on one refresh of a large fleet, without servers.

The seeded demo's nodes are copied under new names up to N, as per-node
summaries (what the fleet view gets from a live cluster) or with every GPU;
every refresh moves every node's utilisation (new objects, as a live poll
brings) and the dashboard redraws. Reported per refresh as the main thread's CPU time
(time.thread_time), after what the poll thread derives (app.prepare_snapshot): the 80x24 and 200x50 cases, sorted by name and by util.
Then the refresh that comes most often on a live fleet: only session counts moved (they are scraped every 10-30 s
at their own offsets, the DCGM figures read every 15 s), against a refresh in which every node's figures moved too
(a DCGM read), on the same fleet and size.

    python benchmarks/ui_refresh.py [--nodes 10000] [--refreshes 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from gputui.backends.demo import demo_backend
from gputui.ops.audit import AuditLog
from gputui.present.columns import SORTABLE
from gputui.settings import Settings
from gputui.snapshot import ClusterSnapshot
from gputui.ui.app import GputuiApp
from gputui.ui.messages import SnapshotReady
from gputui.vocabulary.model import GpuSummary
from tests.demo_clock import ManualClock


def fleet(base: ClusterSnapshot, n: int, step: int, per_gpu: bool, keep_names: bool = False) -> ClusterSnapshot:
    """N nodes as a live poll brings them: per-node summaries (the fleet view), or every GPU (the wallboard).
    `keep_names`: the first copy of each demo node keeps its name, so the demo's pods and GPU history are on it."""
    nodes, summaries = [], {}
    for i in range(n):
        node = base.nodes[i % len(base.nodes)]
        gpus = tuple(replace(g, util_pct=((g.util_pct or 0) + 7 * step + i) % 100) for g in node.gpus)
        if per_gpu:
            nodes.append(replace(node, name=f"{node.name}-{i:05d}", gpus=gpus))
            continue
        temps = [g.temp_c for g in gpus if g.temp_c is not None]
        gauge = base.gauges(node)
        name = node.name if keep_names and i < len(base.nodes) else f"{node.name}-{i:05d}"
        summaries[name] = GpuSummary(len(gpus), util_pct=sum(g.util_pct for g in gpus) / len(gpus) if gpus else None,
                                     mem_used_mib=gauge.mem_used_mib, mem_total_mib=gauge.mem_total_mib,
                                     temp_c=max(temps) if temps else None, power_w=gauge.power_w)
        odd = tuple(g for g in gpus if g.xid or g.health.value in ("warn", "fail"))  # named one by one, as live
        nodes.append(replace(node, name=name, gpus=odd))
    return replace(base, nodes=tuple(nodes), summaries=summaries, taken_at=base.taken_at + step)


async def measure(n: int, refreshes: int, size: tuple[int, int], sort_index: int, per_gpu: bool,
                  sessions_only: bool | None = None) -> float:
    clock = ManualClock()
    backend = demo_backend(seed=7, clock=clock)
    app = GputuiApp(Settings(demo=True, refresh=3600.0), backend, clock=clock, audit=AuditLog(None, "bench", "demo"))
    base = backend.reader.snapshot()
    if sessions_only is None:
        snaps = [fleet(base, n, step, per_gpu) for step in range(refreshes + 1)]
    else:  # the demo's pods on their nodes, every pod's count moving; the figures too, unless sessions_only
        first = fleet(base, n, 0, per_gpu, keep_names=True)
        snaps = [replace(fleet(base, n, step, per_gpu, keep_names=True) if not sessions_only else first,
                         session_counts={k: (v + step) % 7 for k, v in first.session_counts.items()},
                         taken_at=first.taken_at + step) for step in range(refreshes + 1)]
    async with app.run_test(size=size) as pilot:
        while app.snapshot is None:
            await pilot.pause(0.05)
        app.screen.sort_index = sort_index
        app.post_message(SnapshotReady(snaps[0], None))
        await pilot.pause(0.2)
        costs = []
        for snap in snaps[1:]:
            app.prepare_snapshot(snap, app.dashboard_view())  # the poll thread's share (app._poll), not the UI thread's
            t0 = time.thread_time()
            app.on_snapshot_ready(SnapshotReady(snap, None))
            await pilot.pause()  # let the frame be drawn (counted: it runs on this thread)
            costs.append(time.thread_time() - t0)
    return statistics.median(costs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--refreshes", type=int, default=10)
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("ui_refresh", settings_of(args))
    for per_gpu in (False, True):
        shape = "every GPU" if per_gpu else "per-node summaries"
        for size in ((80, 24), (200, 50)):
            for sort_index, label in ((0, "name"), (SORTABLE.index("util_pct"), "util")):
                cost = asyncio.run(measure(args.nodes, args.refreshes, size, sort_index, per_gpu))
                figures.add(f"{'every GPU' if per_gpu else 'summaries'} {size[0]}x{size[1]} by {label}", cost * 1000, "ms")
                print(f"{args.nodes} nodes ({shape}), {size[0]}x{size[1]}, sorted by {label}: "
                      f"{cost * 1000:.0f} ms CPU per refresh (median)")
    for size in ((80, 24), (200, 50)):
        full = asyncio.run(measure(args.nodes, args.refreshes, size, 0, False, sessions_only=False))
        quiet = asyncio.run(measure(args.nodes, args.refreshes, size, 0, False, sessions_only=True))
        figures.add(f"sessions only {size[0]}x{size[1]}", quiet * 1000, "ms")
        figures.add(f"all figures moved {size[0]}x{size[1]}", full * 1000, "ms")
        figures.add(f"sessions only/all moved {size[0]}x{size[1]}", quiet / full, "x")
        print(f"{args.nodes} nodes, {size[0]}x{size[1]}, only session counts moved: {quiet * 1000:.0f} ms CPU per "
              f"refresh (median), against {full * 1000:.0f} ms when every node's figures moved too "
              f"(ratio {quiet / full:.2f}x)")

    figures.write(args.json)


if __name__ == "__main__":
    main()
