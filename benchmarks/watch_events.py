"""What a watch costs per event: the CPU of a node watch's thread (gputui's ListWatchCache) while every node
reports its status as kubelets do, with the watch's batching (base.WATCH_BATCH_S) against none, in the
same run on the same cluster.

A kubelet reports its node every 5 minutes when nothing changed; every watcher receives each report. The
reports here come faster (--every, default 10 s), so a short window holds thousands of events; the cost per
event is what scales. Runs alternate (none, batched, none, batched…) so a drift in the machine's load hits both.

    python benchmarks/watch_events.py [--nodes 2000] [--every 10] [--window 20] [--rounds 2] [--json FILE]
    python benchmarks/watch_events.py --batch 0.25 --batch 1   # other pauses against none, in the same run

Needs the control-plane binaries (scripts/build-control-plane.sh).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from benchmarks.node_reports import NodeReports
from benchmarks.scale import populate
from benchmarks.thread_cpu import ThreadCpu
from gputui.backends import base
from gputui.backends import kube_objects as ko
from gputui.backends.kube_cache import ListWatchCache
from gputui.backends.kubeconfig import connect
from tests.support.control_plane import ControlPlane

KIND = "watch /api/v1/nodes"


def one_window(conn, batch_s: float, reports: NodeReports, window_s: float) -> float:
    """CPU microseconds of the node watch's thread per event received, over one window."""
    base.WATCH_BATCH_S = batch_s
    cache = ListWatchCache(conn, "/api/v1/nodes", ko.node_record).start()
    try:
        if not cache.synced.wait(120):
            raise RuntimeError("the node list never completed")
        time.sleep(2)  # past the list: only events from here
        threads, sent = ThreadCpu().start(), reports.sent
        time.sleep(window_s)
        events = reports.sent - sent
        cpu = dict(threads.stop()).get(KIND, 0.0)
    finally:
        cache.stop()
    if events <= 0:
        raise RuntimeError("no node reports were sent in the window")
    return cpu / events * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--every", type=float, default=10.0, metavar="S", help="each node reports every S seconds")
    parser.add_argument("--window", type=float, default=20.0, metavar="S")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=float, action="append", metavar="S",
                        help="a pause to measure against none (repeatable; default gputui's WATCH_BATCH_S)")
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("watch_events", settings_of(args))
    batched = base.WATCH_BATCH_S
    cp = ControlPlane(extra_args={"kube-controller-manager": ["--controllers=*,-nodelifecycle,-ttl"]})
    with cp:
        populate(cp, args.nodes)
        names = [f"scale-gpu-{i:05d}" for i in range(args.nodes)]
        reports = NodeReports(cp.api_url, cp.token("harness"), str(cp.ca_file), names, args.every).start()
        try:
            conn = connect(str(cp.admin_kubeconfig), None, None)
            pauses = [0.0, *dict.fromkeys(args.batch or [batched])]
            got: dict[float, list[float]] = {p: [] for p in pauses}
            for _ in range(args.rounds):
                for batch_s in pauses:
                    got[batch_s].append(one_window(conn, batch_s, reports, args.window))
        finally:
            reports.close()
            base.WATCH_BATCH_S = batched
    none = statistics.median(got[0.0])
    print(f"{args.nodes} nodes reporting every {args.every:g} s: {reports.rate():.0f} events/s "
          f"({reports.failed} reports failed)")
    print(f"watch CPU per event, unbatched:            {none:.0f} us  (runs: {', '.join(f'{x:.0f}' for x in got[0.0])})")
    figures.add("watch CPU per event, unbatched", none, "us")
    for pause, runs in got.items():
        if not pause:
            continue
        each = statistics.median(runs)
        mark = " (gputui's)" if pause == batched else ""
        print(f"watch CPU per event, batched {pause * 1000:.0f} ms{mark}: {each:.0f} us  "
              f"(runs: {', '.join(f'{x:.0f}' for x in runs)}); {each / none:.2f}x")
        name = "batched" if pause == batched else f"batched {pause * 1000:.0f} ms"
        figures.add(f"watch CPU per event, {name}", each, "us")
        figures.add(f"{name} / unbatched", each / none, "x")
    figures.write(args.json)


if __name__ == "__main__":
    main()
