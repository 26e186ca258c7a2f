"""Keypress latency on a large fleet: from a key to the frame that reflects it, driven by Textual's pilot
(headless, the app's own event loop, the same code path as a terminal). The fleet is the seeded demo's nodes
copied up to N, as per-node summaries (what the fleet view gets from a live cluster); the first copy of each
keeps its name, pods and GPU history, so node detail opens on a node as busy as a real one (every GPU's row and
sparkline, its pods). The reference, in the same run, is the same keys on the demo's own 27 nodes.

Measured per key as the UI thread's CPU time from the key to its frame (the pilot's own sleeps excluded: they
are the harness, some 80 ms a press at any size), over --repeat presses: p50, p95, max. Keys: an unbound key (what the pilot and a frame cost by themselves), cursor down, page down, sort (s),
each character typed into the filter, enter on a node (its detail) and esc back.

    python benchmarks/keys.py [--nodes 10000] [--repeat 30] [--size 200x50]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from benchmarks.ui_refresh import fleet
from gputui.backends.demo import demo_backend
from gputui.ops.audit import AuditLog
from gputui.settings import Settings
from gputui.ui.app import GputuiApp
from tests.demo_clock import ManualClock

KEY_NAMES = {  # the figures' short names in --json (the printed rows keep their long ones)
    "no-op key (harness floor)": "no-op key", "filter: a character typed": "filter char",
    "open node detail (enter)": "node detail", "back to the fleet (esc)": "back to fleet"}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def until(pilot, app: GputuiApp, ready, what: str, seconds: float = 300.0) -> None:
    """Wait for the app; an app that failed (its worker raised) or never got there ends the run with one line."""
    deadline = time.monotonic() + seconds
    while not ready():
        if app._exception is not None or time.monotonic() > deadline:
            raise SystemExit(f"keys.py: gave up waiting for {what}: {app._exception or 'timed out'}")
        await pilot.pause(0.05)


async def run(n: int | None, repeat: int, size: tuple[int, int],
              passes: dict[str, list[int]]) -> dict[str, list[float]]:
    clock = ManualClock()
    backend = demo_backend(seed=7, clock=clock)
    base = backend.reader.snapshot()
    shown = base if n is None else fleet(base, n, 1, per_gpu=False, keep_names=True)
    # The app polls at a live refresh, as it runs on a cluster: the same fleet every time, so what a key costs is
    # not mixed with redraws of a changing one; the poll's own upkeep (gcpause) runs as it would live.
    backend.reader.snapshot = lambda: shown
    # A summarised node's detail reads every GPU from the backend, as the live reader does (the demo's own
    # snapshot holds them all, so its reader has none to give).
    backend.reader.node_gpus = lambda name: base.node(name).gpus if base.node(name) and name in shown.summaries else None
    app = GputuiApp(Settings(demo=True, refresh=2.0), backend, clock=clock, audit=AuditLog(None, "bench", "demo"))
    out: dict[str, list[float]] = {}
    async with app.run_test(size=size) as pilot:
        await until(pilot, app, lambda: app.snapshot is shown, f"the {len(shown.nodes)}-node snapshot")
        await pilot.pause(0.3)

        async def timed(name: str, *keys: str) -> None:
            # The UI thread's CPU from the key to its frame: the pilot's own waits (it sleeps between steps, some
            # 80 ms a press whatever the fleet) are not the app's latency; the work is, and on the one UI thread it
            # is what a person waits for.
            t0, collected[:] = time.thread_time(), []
            await pilot.press(*keys)
            await pilot.pause()  # the frame: layout and render run before the pause returns
            out.setdefault(name, []).append(time.thread_time() - t0)
            passes.setdefault(name, []).append(max(collected, default=-1))

        def collector(phase: str, info: dict) -> None:
            if phase == "start":
                collected.append(info["generation"])

        collected: list[int] = []
        gc.callbacks.append(collector)  # which collector passes ran in a press (--raw): where a tail comes from

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
        # A node as busy as the demo has: every GPU's row with its history, and its pods with their sessions.
        busiest = max(base.nodes, key=lambda node: (len(node.gpus), len(base.pods_on(node.name))))
        app.screen.nodes_table.move_to(busiest.name)
        await pilot.pause()
        for _ in range(repeat):  # as many as the other keys: a p95 of 10 presses is their max
            await timed("open node detail (enter)", "enter")
            await timed("back to the fleet (esc)", "escape")
    gc.callbacks.remove(collector)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--size", default="200x50")
    parser.add_argument("--raw", action="store_true", help="also print every press's time, sorted (where a tail is)")
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("keys", settings_of(args))
    size = tuple(int(x) for x in args.size.split("x"))
    big_passes: dict[str, list[int]] = {}
    ref_passes: dict[str, list[int]] = {}
    big = asyncio.run(run(args.nodes, args.repeat, size, big_passes))  # type: ignore[arg-type]
    ref = asyncio.run(run(None, args.repeat, size, ref_passes))  # type: ignore[arg-type]
    print(f"{'key':28} {args.nodes} nodes: p50 / p95 / max (ms)      27 nodes (reference): p50 / p95     p95 ratio")
    for name, values in big.items():
        r = ref[name]
        short = KEY_NAMES.get(name, name)
        figures.add(f"{short} p50", 1000 * statistics.median(values), "ms")
        figures.add(f"{short} p95", 1000 * pct(values, .95), "ms")
        figures.add(f"{short} max", 1000 * max(values), "ms")
        figures.add(f"{short} reference p50", 1000 * statistics.median(r), "ms")
        figures.add(f"{short} reference p95", 1000 * pct(r, .95), "ms")
        figures.add(f"{short} p95 ratio", pct(values, .95) / pct(r, .95), "x")
        print(f"{name:28} {1000 * statistics.median(values):7.1f} / {1000 * pct(values, .95):7.1f} / "
              f"{1000 * max(values):7.1f}        {1000 * statistics.median(r):7.1f} / {1000 * pct(r, .95):7.1f}"
              f"     {pct(values, .95) / pct(r, .95):6.1f}x")
    if args.raw:  # each press in ms, sorted; "/2" marks a press in which the collector walked its oldest generation
        for label, run_out, run_passes in ((f"{args.nodes} nodes", big, big_passes), ("27 nodes", ref, ref_passes)):
            for name, values in run_out.items():
                presses = sorted(zip(values, run_passes[name], strict=True))
                print(f"{label:>12} {name:28} "
                      + " ".join(f"{round(1000 * v)}{'/2' if g == 2 else ''}" for v, g in presses))

    figures.write(args.json)


if __name__ == "__main__":
    main()
