"""Keypress latency on a large fleet: from a key to the frame that reflects it, driven by Textual's pilot
(headless, the app's own event loop, the same code path as a terminal). The fleet is the seeded demo's nodes
copied under new names up to N, as per-node summaries (what the fleet view gets from a live cluster); the
reference, in the same run, is the same keys on the demo's own 27 nodes.

Measured per key as the UI thread's CPU time from the key to its frame (the pilot's own sleeps excluded: they
are the harness, some 80 ms a press at any size), over --repeat presses: p50, p95, max. Keys: an unbound key (what the pilot and a frame cost by themselves), cursor down, page down, sort (s),
each character typed into the filter, enter on a node (its detail) and esc back.

    python benchmarks/keys.py [--nodes 10000] [--repeat 30] [--size 200x50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.ui_refresh import fleet  # noqa: E402
from gputui.backends.demo import demo_backend  # noqa: E402
from gputui.backends.gcpause import settle  # noqa: E402
from gputui.backends.kube_backend import SETTLE_FROM  # noqa: E402
from gputui.ops.audit import AuditLog  # noqa: E402
from gputui.settings import Settings  # noqa: E402
from gputui.ui.app import GputuiApp  # noqa: E402
from gputui.ui.messages import SnapshotReady  # noqa: E402
from tests.demo_clock import ManualClock  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def run(n: int | None, repeat: int, size: tuple[int, int]) -> dict[str, list[float]]:
    clock = ManualClock()
    backend = demo_backend(seed=7, clock=clock)
    app = GputuiApp(Settings(demo=True, refresh=3600.0), backend, clock=clock, audit=AuditLog(None, "bench", "demo"))
    base = backend.reader.snapshot()
    out: dict[str, list[float]] = {}
    async with app.run_test(size=size) as pilot:
        while app.snapshot is None:
            await pilot.pause(0.05)
        if n is not None:
            app.post_message(SnapshotReady(fleet(base, n, 1, per_gpu=False), None))
            while len(app.snapshot.nodes) != n:
                await pilot.pause(0.05)
            if n >= SETTLE_FROM:  # as the live reader does once a fleet this size is read (gcpause.settle)
                settle(renew=True)
        await pilot.pause(0.3)

        async def timed(name: str, *keys: str) -> None:
            # The UI thread's CPU from the key to its frame: the pilot's own waits (it sleeps between steps, some
            # 80 ms a press whatever the fleet) are not the app's latency; the work is, and on the one UI thread it
            # is what a person waits for.
            t0 = time.thread_time()
            await pilot.press(*keys)
            await pilot.pause()  # the frame: layout and render run before the pause returns
            out.setdefault(name, []).append(time.thread_time() - t0)

        for _ in range(repeat):
            await timed("no-op key (harness floor)", "f12")
        for _ in range(repeat):
            await timed("cursor down", "down")
        for _ in range(repeat):
            await timed("page down", "pagedown")
        for _ in range(min(repeat, 12)):
            await timed("sort (s)", "s")
        for _ in range(repeat // 6 + 1):
            await pilot.press("slash")
            await pilot.pause()
            for ch in "h100-0":
                await timed("filter: a character typed", ch)
            await pilot.press("escape")
            await pilot.pause()
        for _ in range(min(repeat, 10)):
            await timed("open node detail (enter)", "enter")
            await timed("back to the fleet (esc)", "escape")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--size", default="200x50")
    args = parser.parse_args()
    size = tuple(int(x) for x in args.size.split("x"))
    big = asyncio.run(run(args.nodes, args.repeat, size))  # type: ignore[arg-type]
    ref = asyncio.run(run(None, args.repeat, size))  # type: ignore[arg-type]
    print(f"{'key':28} {args.nodes} nodes: p50 / p95 / max (ms)      27 nodes (reference): p50 / p95     p95 ratio")
    for name, values in big.items():
        r = ref[name]
        print(f"{name:28} {1000 * statistics.median(values):7.1f} / {1000 * pct(values, .95):7.1f} / "
              f"{1000 * max(values):7.1f}        {1000 * statistics.median(r):7.1f} / {1000 * pct(r, .95):7.1f}"
              f"     {pct(values, .95) / pct(r, .95):6.1f}x")


if __name__ == "__main__":
    main()
