"""The fleet view at scale: many clusters of thousands of nodes, each polled on its own, in one gputui.

Sets one harness up (the real apiserver with N GPU nodes and their pods, Prometheus with the recorded per-node
series and per-pod session series, as `scale.py --recorded` does), writes a kubeconfig whose K contexts all name
that apiserver, then runs gputui as `gputui --context fleet-01,…,fleet-K` runs: the dashboard of the first context
behind the fleet view, and one read-only reader per context polling at the refresh interval. Measured, in a fresh
process per run:
  - the time to the fleet's first complete row set (every live cluster read with all N nodes);
  - steady CPU of gputui's process over the steady window (goal <= 15% of a core);
  - each cluster's freshness: the age of its last read at each half-second sample, in refresh intervals
    (goal: at most 2 cycles old);
  - peak RSS.

Then the same fleet again with a dead cluster (a port that accepts connections and never answers) and a slow
one (every answer of the real apiserver held back by --slow-s): the live clusters' figures are compared with the
first run's (a slow or dead cluster must not move them).

One harness stands for K clusters: its apiserver and Prometheus answer K times the reads K real ones would
each answer once, on the same two cores as gputui. The client side (what gputui does per cluster) is exactly
that of K clusters; the servers' share is worse, so the freshness measured here is a lower bound.

    python benchmarks/fleet.py [--contexts 20] [--nodes 5000] [--steady 60] [--warmup 30] [--profile FILE] [--json FILE]

Needs the control-plane binaries (scripts/build-control-plane.sh) and Debian's prometheus.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import threading
import time
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from benchmarks.scale import _Closing, _CollectorClock, _mem, build_fleet
from benchmarks.thread_cpu import ThreadCpu, need_py_spy, py_spy, shares

GOAL_CPU_PCT = 15.0
GOAL_CYCLES = 2.0


class Listener:
    """A port on 127.0.0.1 whose every accepted connection goes to `take`; closing it closes them all."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.open.append(conn)
            self.take(conn)

    def take(self, conn: socket.socket) -> None:
        """A dead cluster: the connection is held, never answered (the worst kind: nothing is refused)."""

    def close(self) -> None:
        self.sock.close()
        for conn in self.open:
            conn.close()


class SlowProxy(Listener):
    """A slow cluster: a TCP relay to the real apiserver (TLS passes through untouched) that holds each burst of
    its answers back by `delay` seconds, as a far or overloaded apiserver would answer."""

    def __init__(self, upstream: tuple[str, int], delay: float) -> None:
        self.upstream, self.delay = upstream, delay
        super().__init__()

    def take(self, conn: socket.socket) -> None:
        server = socket.create_connection(self.upstream)
        self.open.append(server)
        threading.Thread(target=self._pipe, args=(conn, server, 0.0), daemon=True).start()
        threading.Thread(target=self._pipe, args=(server, conn, self.delay), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, delay: float) -> None:
        last = 0.0
        try:
            while data := src.recv(65536):
                if delay and time.monotonic() - last > 0.5:  # a new answer, not the rest of one
                    time.sleep(delay)
                last = time.monotonic()
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def fleet_kubeconfig(admin: Path, out: Path, count: int, extra: dict[str, str]) -> list[str]:
    """A kubeconfig of `count` contexts fleet-01… on the admin kubeconfig's apiserver and user, plus one per
    `extra` name -> server URL (same CA and user): the contexts' names, live ones first."""
    cfg = yaml.safe_load(admin.read_text())
    cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]
    names = [f"fleet-{i:02d}" for i in range(1, count + 1)]
    servers = {name: cluster["server"] for name in names} | extra
    cfg["clusters"] = [{"name": n, "cluster": {**cluster, "server": s}} for n, s in servers.items()]
    cfg["contexts"] = [{"name": n, "context": {"cluster": n, "user": user["name"]}} for n in servers]
    cfg["current-context"] = names[0]
    out.write_text(yaml.safe_dump(cfg))
    out.chmod(0o600)
    return list(servers)


def measure_fleet(kubeconfig: str, prom_url: str, contexts: list[str], live: list[str], n: int, steady_s: float,
                  refresh: float, prom_timeout: float, profile: str = "", warmup_s: float = 0.0) -> dict:
    """Runs in a fresh child process, so CPU and RSS are this gputui's alone. `profile`: where py-spy writes what
    the steady window's threads ran (collapsed stacks; py-spy samples from its own process, without stopping
    this one)."""
    from gputui.backends.kube_backend import live_backend
    from gputui.settings import Settings
    from gputui.ui.app import GputuiApp

    settings = Settings(kubeconfig=kubeconfig, prometheus=prom_url, refresh=refresh, prometheus_timeout=prom_timeout,
                        context=contexts[0], contexts=tuple(contexts), cache=False)
    result: dict[str, Any] = {}

    async def run() -> None:
        t0 = time.monotonic()
        app = GputuiApp(settings, live_backend(settings))
        async with app.run_test(headless=True, size=(200, 50)) as pilot:
            deadline = time.monotonic() + 900
            while True:  # the first complete row set: every live cluster read whole
                fleet = app.fleet
                if fleet is not None and all((s := fleet.latest[c][0]) is not None and len(s.nodes) >= n for c in live):
                    break
                if time.monotonic() > deadline or not app.is_running:
                    got = {c: (len(s.nodes) if s else None, e) for c, (s, e) in (fleet.latest.items() if fleet else {})}
                    raise RuntimeError(f"no complete fleet in 900 s: {got}")
                await pilot.pause(0.05)
            result["first_complete_s"] = time.monotonic() - t0
            # What start-up does once (the collector's first full passes while the rows fill in, caches warming)
            # is not the steady state: the window opens `warmup_s` later.
            await asyncio.sleep(warmup_s)
            watch = fleet
            result["screen"] = type(app.screen).__name__
            reads = {c: 0 for c in contexts}
            counting = watch.store

            def store(message: Any) -> None:
                if message.snapshot is not None:
                    reads[message.context] += 1
                counting(message)

            watch.store = store  # type: ignore[method-assign]
            ages: dict[str, list[float]] = {c: [] for c in contexts}
            collector = _CollectorClock()
            threads = ThreadCpu().start()
            spy = py_spy(steady_s, profile)
            cpu0, wall0 = time.process_time(), time.monotonic()
            while time.monotonic() - wall0 < steady_s:
                await asyncio.sleep(0.5)
                now = time.time()
                for row in watch.rows(settings.temp_threshold):
                    if row.context in ages:
                        ages[row.context].append(now - row.taken_at if row.taken_at is not None else float("inf"))
            cpu1, wall1 = time.process_time(), time.monotonic()
            if spy is not None:
                spy.wait(timeout=60)
            result["threads"] = shares(threads.stop(), wall1 - wall0)
            collector.stop()
            result["gc"] = (collector.seconds, collector.longest, collector.full)
            result["cpu_share"] = (cpu1 - cpu0) / (wall1 - wall0)
            result["ages"] = {c: (max(a), statistics.median(a)) for c, a in ages.items() if c in live}
            result["others"] = {c: (reads[c], ages[c][-1], watch.latest[c][1]) for c in contexts if c not in live}
            result["reads"] = reads

    asyncio.run(run())
    result["rss_mb"] = _mem()["peak_mb"]
    return result


def in_child(*args: Any) -> dict:
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(measure_fleet, args)


def report(name: str, got: dict, refresh: float, figures: Figures, live: list[str]) -> None:
    worst = max(got["ages"].values(), key=lambda a: a[0])
    worst_cycles = worst[0] / refresh
    reads = [got["reads"][c] for c in live]
    print(f"--- {name}: {len(live)} live clusters" + (f", also {', '.join(got['others'])}" if got["others"] else ""))
    print(f"first complete row set:   {got['first_complete_s']:.1f}s (on {got['screen']})")
    print(f"steady CPU:               {got['cpu_share'] * 100:.1f}% of one core (goal <= {GOAL_CPU_PCT:g}%)")
    print(f"freshness, worst cluster: {worst[0]:.1f}s old at worst = {worst_cycles:.1f} refresh intervals "
          f"(goal <= {GOAL_CYCLES:g}); median of the clusters' medians "
          f"{statistics.median(a[1] for a in got['ages'].values()):.1f}s")
    print(f"reads per live cluster:   {min(reads)} to {max(reads)} in the steady window")
    print(f"peak RSS:                 {got['rss_mb']:.0f} MB")
    print(f"CPU by thread:            {got['threads']}")
    gc_s, gc_longest, gc_full = got["gc"]
    print(f"cycle collector:          {gc_s:.1f}s in the steady window, its longest pass {gc_longest:.2f}s "
          f"(every thread stalls in it), {gc_full} full passes")
    for context, (count, age, error) in got["others"].items():
        last = f"the last read {age:.0f}s old at its end" if age != float("inf") else "never read"
        print(f"  {context}: {count} reads in the steady window, {last}"
              + (f"; shows: {error}" if error else ""))
    figures.add(f"{name} first complete row set", got["first_complete_s"], "s")
    figures.add(f"{name} steady CPU", got["cpu_share"] * 100, "% core")
    figures.add(f"{name} worst freshness", worst[0], "s")
    figures.add(f"{name} worst freshness in refreshes", worst_cycles, "x")
    figures.add(f"{name} fewest reads per cluster", min(reads), "", "higher")
    figures.add(f"{name} peak RSS", got["rss_mb"], "MB")
    figures.add(f"{name} cycle collector", gc_s, "s")
    figures.add(f"{name} longest collector pass", gc_longest, "s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--contexts", type=int, default=20, help="clusters in the fleet (default 20)")
    parser.add_argument("--nodes", type=int, default=5000, help="GPU nodes per cluster (default 5000)")
    parser.add_argument("--steady", type=float, default=60.0, help="seconds of steady state per run (default 60)")
    parser.add_argument("--refresh", type=float, default=2.0, metavar="S", help="gputui's refresh (default 2)")
    parser.add_argument("--prom-timeout", type=float, default=3.0, metavar="S", help="prometheus_timeout (default 3)")
    parser.add_argument("--slow-s", type=float, default=5.0, metavar="S",
                        help="how long the slow cluster holds each answer back (default 5)")
    parser.add_argument("--no-faults", action="store_true",
                        help="measure the live fleet only (no second run beside a dead and a slow cluster)")
    parser.add_argument("--warmup", type=float, default=30.0, metavar="S",
                        help="seconds after the first complete row set before the steady window opens (default 30)")
    parser.add_argument("--profile", metavar="FILE", default="",
                        help="py-spy's record of the live run's steady window, as collapsed stacks by thread "
                             "(py-spy must be on PATH; its samples cost this process next to nothing)")
    json_option(parser)
    args = parser.parse_args()
    if args.contexts < 2 or args.nodes < 1:
        parser.error("--contexts must be at least 2 and --nodes at least 1")
    need_py_spy(parser, args.profile)
    figures = Figures("fleet", settings_of(args))
    with ExitStack() as stack:
        fleet = build_fleet(stack, args.nodes, recorded=True, kubectl_runs=1)
        work = Path(fleet["kubeconfig"]).parent
        dead = stack.enter_context(_Closing(Listener()))
        api = urlsplit(yaml.safe_load(Path(fleet["kubeconfig"]).read_text())["clusters"][0]["cluster"]["server"])
        slow = stack.enter_context(_Closing(SlowProxy((api.hostname or "127.0.0.1", api.port or 443), args.slow_s)))
        live = fleet_kubeconfig(Path(fleet["kubeconfig"]), work / "fleet-live.kubeconfig", args.contexts, {})
        both = fleet_kubeconfig(Path(fleet["kubeconfig"]), work / "fleet-faults.kubeconfig", args.contexts,
                                {"dead": f"https://127.0.0.1:{dead.port}", "slow": f"https://127.0.0.1:{slow.port}"})
        print(f"{args.contexts} contexts on one harness of {args.nodes} nodes (created in {fleet['created_s']:.0f}s); "
              f"kubectl get nodes,pods: {fleet['kubectl_get_s']:.2f}s", flush=True)
        figures.add("fleet created", fleet["created_s"], "s")
        figures.add("kubectl get nodes,pods (one cluster)", fleet["kubectl_get_s"], "s")
        common = (args.nodes, args.steady, args.refresh, args.prom_timeout)
        alone = in_child(str(work / "fleet-live.kubeconfig"), fleet["prometheus"], live, live, *common,
                         os.path.abspath(args.profile) if args.profile else "", args.warmup)
        report("live", alone, args.refresh, figures, live)
        if args.no_faults:
            figures.write(args.json)
            return
        faults = in_child(str(work / "fleet-faults.kubeconfig"), fleet["prometheus"], both, live, *common, "",
                          args.warmup)
        report("with dead+slow", faults, args.refresh, figures, live)
    moved = faults["ages"], alone["ages"]
    a = statistics.median(x[1] for x in moved[1].values())
    b = statistics.median(x[1] for x in moved[0].values())
    print(f"the live clusters' median freshness: {a:.1f}s alone, {b:.1f}s beside a dead and a slow cluster "
          f"({b / a if a else float('nan'):.2f}x)")
    figures.add("freshness beside dead+slow / alone", b / a if a else float("nan"), "x")
    figures.write(args.json)


if __name__ == "__main__":
    main()
