"""gputui against a large fleet on the real test apiserver and Prometheus.

Creates N GPU nodes (8 GPUs each, GPU Feature Discovery labels), one 8-GPU
vLLM pod bound to each, DCGM series for every GPU (scraped every 30 s) and
session series for every pod whose counts change at every scrape (every 10 s,
so the pods are re-joined and the screen redrawn every few refreshes, as in a
busy cluster); then measures, on the same server:
  - `kubectl get nodes,pods -A -o json` wall time (median of 3)
  - gputui's time to its first complete snapshot (Kubernetes lists + Prometheus)
  - gputui's first full frame (node table filled), headless, 200x50
  - steady-state CPU share of gputui's process at a 2 s refresh, RSS
  - Prometheus queries per refresh
  - RSS and thread count at each phase (after imports, first snapshot, first
    frame, end of the steady state), to see where memory goes

    python benchmarks/scale.py [--nodes 2000] [--steady 30]
    python benchmarks/scale.py --nodes 10000 --serve /tmp/fleet.json   # set up, then wait (Ctrl-C ends)
    python benchmarks/scale.py --against /tmp/fleet.json [--tracemalloc 15]  # measure on that fleet
    python benchmarks/scale.py --nodes 65000 --recorded         # the store holds gputui's recorded series

--recorded: Prometheus scrapes, instead of every GPU's raw DCGM series, the per-node series that
`gputui rules` records (what a store serves after evaluating the rules; the evaluation itself is
simulated: RecordedExporter writes the rule outputs directly, from per-card values drawn afresh at every
scrape). A plain Prometheus cannot ingest 520,000 GPUs' raw series on this 24 GB machine; nobody runs
one over that many (issue 18). The session series are real per-pod series either way.

--against reuses a fleet set up once (creating 10,000 nodes takes minutes);
--tracemalloc prints the top allocation sites per phase (its timings are not
valid: tracing slows Python several times).

Needs the control-plane binaries (scripts/build-control-plane.sh) and Debian's prometheus.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from benchmarks.node_reports import NodeReports
from benchmarks.thread_cpu import ThreadCpu, need_py_spy, py_spy, shares
from tests.support.control_plane import ControlPlane
from tests.support.exporters import DcgmExporter, MetricsHTTPServer
from tests.support.prom import PrometheusServer, dcgm_scrape_config

PRODUCT = "NVIDIA-H100-80GB-HBM3"
# Only the families gputui queries: Prometheus shares the two cores with what is measured.
DCGM_FIELDS_QUERIED = ("util", "fb_used", "fb_free", "temp", "power", "xid")
CREATE_THREADS = 16


SESSIONS_SCRAPE = "10s"
SESSIONS_SHARDS = 50


class SessionsExporter:
    """vLLM's running and waiting requests for every pod (labels honoured), with new counts at every scrape.
    A real fleet has a target per pod, each scraped at its own offset in the interval, so new samples arrive
    all the time; here `shards` targets (one server, a path each) stand in for them: thousands of targets
    would load this box more than gputui does, and one target would change only once per interval."""

    def __init__(self, n: int, shards: int = SESSIONS_SHARDS) -> None:
        import random

        self.rng = random.Random(4)
        self.pods = [f"llm-{i:05d}" for i in range(n)]
        self.shards = shards
        self.server = MetricsHTTPServer(self._render)

    def _render(self, path: str) -> str | None:
        head, _, shard = path.rpartition("/")
        if head != "/metrics" or not shard.isdigit() or int(shard) >= self.shards:
            return None
        pods = self.pods[int(shard)::self.shards]
        rand = self.rng.randint
        lines = ["# TYPE vllm:num_requests_running gauge"]
        lines += [f'vllm:num_requests_running{{namespace="scale",pod="{p}",model_name="llm"}} {rand(0, 8)}'
                  for p in pods]
        lines.append("# TYPE vllm:num_requests_waiting gauge")
        lines += [f'vllm:num_requests_waiting{{namespace="scale",pod="{p}",model_name="llm"}} {rand(0, 3)}'
                  for p in pods]
        return "\n".join(lines) + "\n"

    def scrape_config(self) -> dict:
        # One target per shard (a label apiece, so Prometheus spreads their scrapes over the interval).
        return {"job_name": "sessions", "honor_labels": True, "scrape_interval": SESSIONS_SCRAPE,
                "scrape_timeout": SESSIONS_SCRAPE,
                "static_configs": [{"targets": [self.server.address], "labels": {"shard": str(i)}}
                                   for i in range(self.shards)],
                "relabel_configs": [{"source_labels": ["shard"], "target_label": "__metrics_path__",
                                     "replacement": "/metrics/$1"}]}

    def close(self) -> None:
        self.server.close()


class RecordedExporter:
    """The series `gputui rules` records, per node (Hostname label), as a store holds them once its rule
    evaluator has run: mean and max utilisation, card count, memory used and total, hottest card, power.
    Each card's values are drawn afresh at every scrape, and aggregated as the rules do; no card is bad,
    so the per-card XID and health rules record nothing (their recorded set is the bad cards only)."""

    def __init__(self, n: int, gpus: int = 8, host: str = "Hostname") -> None:
        import random

        from gputui.backends.recording_rules import PROBE, rule_names

        self.rng = random.Random(5)
        self.n, self.gpus = n, gpus
        self.names = rule_names(host)
        self.probe = PROBE
        self.host = host
        self.server = MetricsHTTPServer(self._render)

    def _render(self, path: str) -> str | None:
        if path != "/metrics":
            return None
        rnd, g, names, host = self.rng.random, self.gpus, self.names, self.host
        out: dict[str, list[str]] = {f: [] for f in ("util_pct", "util_max", self.probe, "mem_used_mib",
                                                     "mem_total_mib", "temp_c", "power_w")}
        for i in range(self.n):
            node = f'{{{host}="scale-gpu-{i:05d}"}}'
            utils = [100 * rnd() for _ in range(g)]
            out["util_pct"].append(f"{names['util_pct']}{node} {sum(utils) / g:.2f}")
            out["util_max"].append(f"{names['util_max']}{node} {max(utils):.2f}")
            out[self.probe].append(f"{names[self.probe]}{node} {g}")
            out["mem_used_mib"].append(f"{names['mem_used_mib']}{node} {int(g * 81559 * rnd())}")
            out["mem_total_mib"].append(f"{names['mem_total_mib']}{node} {g * 81559}")
            out["temp_c"].append(f"{names['temp_c']}{node} {40 + int(40 * rnd())}")
            out["power_w"].append(f"{names['power_w']}{node} {g * (100 + 600 * rnd()):.1f}")
        lines = []
        for f, samples in out.items():
            lines.append(f"# TYPE {names[f]} gauge")
            lines += samples
        return "\n".join(lines) + "\n"

    def scrape_config(self) -> dict:
        return {"job_name": "recorded", "honor_labels": True, "scrape_interval": "30s", "scrape_timeout": "30s",
                "static_configs": [{"targets": [self.server.address]}]}

    def close(self) -> None:
        self.server.close()


def node_body(i: int) -> dict:
    name = f"scale-gpu-{i:05d}"
    labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": PRODUCT,
              "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.count": "8",
              "nvidia.com/cuda.driver-version.full": "550.54.15" if i % 97 else "535.161.08"}
    cap = {"cpu": "96", "memory": "1536Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            # Nodes, unlike most kinds, keep the status given at create.
            "status": {"capacity": cap, "allocatable": cap,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "lastHeartbeatTime": None, "lastTransitionTime": None}]}}


def pod_body(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"llm-{i:05d}", "namespace": "scale",
                         "labels": {"app.kubernetes.io/name": "llm", "app.kubernetes.io/version": "v1"}},
            "spec": {"nodeName": f"scale-gpu-{i:05d}", "containers": [
                {"name": "vllm", "image": "vllm/vllm-openai:v0.9.0", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}


def populate(cp: ControlPlane, n: int) -> float:
    """POSTs ready-encoded JSON on pooled connections, many at once: the apiserver is the limit,
    not the Python client's per-call serialisation."""
    import requests

    token = cp.token("harness")
    local = threading.local()

    def post(path: str, body: dict) -> None:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = requests.Session()
            session.trust_env = False
            session.verify = str(cp.ca_file)
            session.headers.update({"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        r = session.post(cp.api_url + path, data=json.dumps(body), timeout=60)
        if r.status_code not in (201, 409):
            raise RuntimeError(f"POST {path}: {r.status_code} {r.text[:200]}")

    start = time.monotonic()
    post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "scale"}})
    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        list(pool.map(lambda i: post("/api/v1/nodes", node_body(i)), range(n)))
        list(pool.map(lambda i: post("/api/v1/namespaces/scale/pods", pod_body(i)), range(n)))
    return time.monotonic() - start


def kubectl_seconds(cp: ControlPlane, runs: int = 3) -> float:
    """kubectl's median list time over `runs` (at 65,000 nodes each takes 1.5 min)."""
    times = []
    for _ in range(runs):
        t = time.monotonic()
        out = cp.kubectl("get", "nodes,pods", "-A", "-o", "json", user="admin", timeout=600)
        times.append(time.monotonic() - t)
        assert len(out.stdout) > 1000
    return statistics.median(times)


def _mem() -> dict:
    """This process's resident memory now and at peak (MB) and its thread count, from /proc."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
            elif key == "Threads":
                out[key] = int(value)
    return {"rss_mb": round(out["VmRSS"], 1), "peak_mb": round(out["VmHWM"], 1), "threads": out["Threads"]}


def _top(snapshot, base, limit: int) -> list[str]:
    stats = snapshot.compare_to(base, "lineno") if base is not None else snapshot.statistics("lineno")
    return [str(s) for s in stats[:limit]]


def measure_gputui(kubeconfig: str, prom_url: str, n: int, steady_s: float, trace: int = 0,
                   dcgm_interval: float = 15.0, refresh: float = 2.0, prom_timeout: float = 3.0,
                   profile: str = "") -> dict:
    """Runs in a fresh child process, so CPU and RSS are gputui's alone. `profile`: py-spy's record of the steady
    window (thread_cpu.py_spy)."""
    import gc
    import os

    if os.environ.get("GPUTUI_SCALE_DEBUG"):  # --debug's lines (relists, reads, joins) into that file
        from pathlib import Path

        from gputui.base import debug_log

        debug_log.start(Path(os.environ["GPUTUI_SCALE_DEBUG"]))

    from gputui.backends.kube_backend import live_backend
    from gputui.settings import Settings
    from gputui.ui.app import GputuiApp

    phases: dict[str, dict] = {"imported": _mem()}
    traces: dict[str, list[str]] = {}
    tracer = None
    if trace:
        import tracemalloc

        tracemalloc.start(1)
        tracer = tracemalloc
        base = tracemalloc.take_snapshot()

    def phase(name: str) -> None:
        phases[name] = _mem()
        if tracer is not None:
            snap_ = tracer.take_snapshot()
            traces[name] = [f"traced now {tracer.get_traced_memory()[0] / 2**20:.0f} MB, "
                            f"peak {tracer.get_traced_memory()[1] / 2**20:.0f} MB", *_top(snap_, base, trace)]

    # A store answering for 65,000 nodes on the same two cores as everything else takes more than the default
    # 3 s per query at times; a read that times out makes every count unknown, which is not the steady state
    # to measure. An operator at that size sets prometheus_timeout likewise (--prom-timeout).
    settings = Settings(kubeconfig=kubeconfig, prometheus=prom_url, refresh=refresh, dcgm_interval=dcgm_interval,
                        prometheus_timeout=prom_timeout)
    t0 = time.monotonic()
    backend = live_backend(settings)
    tries = 0
    while True:  # complete means metrics too: a Prometheus that timed out is asked again, and that counts
        snap = backend.reader.snapshot()
        tries += 1
        gpus = sum(summary.count for summary in snap.summaries.values())
        if gpus >= 8 * n * 0.99 or time.monotonic() - t0 > 120:
            break
    first_snapshot = time.monotonic() - t0
    assert len(snap.nodes) >= n, f"{len(snap.nodes)} nodes; {snap.sources}"
    assert gpus >= 8 * n * 0.99, f"{gpus} GPUs with metrics; {snap.sources}"
    phase("first_snapshot")
    backend.close()
    del snap, backend
    gc.collect()
    phase("closed")

    result: dict = {"first_snapshot_s": first_snapshot, "first_snapshot_tries": tries, "dcgm_interval": dcgm_interval,
                    "refresh": refresh, "prom_timeout": prom_timeout}

    async def run_app() -> None:
        t1 = time.monotonic()
        backend2 = live_backend(settings)
        polls: list[tuple[float, int, bool]] = []  # (seconds, queries, metrics failed) of each refresh
        _count_polls(backend2.reader, polls)
        app = GputuiApp(settings, backend2)
        async with app.run_test(headless=True, size=(200, 50)) as pilot:
            deadline = time.monotonic() + 600
            while not (app.snapshot and len(app.snapshot.nodes) >= n and app.screen.query_one("#nodes").row_count >= n):
                if time.monotonic() > deadline or not app.is_running:  # never wait forever on a broken app
                    raise RuntimeError(f"no full frame: running={app.is_running}, poll error {app.poll_error!r}")
                await pilot.pause(0.01)
            await pilot.pause()
            result["first_frame_s"] = time.monotonic() - t1
            phase("first_frame")
            done0 = len(polls)
            collector = _CollectorClock()
            threads = ThreadCpu().start()
            spy = py_spy(steady_s, profile)
            cpu0, wall0 = time.process_time(), time.monotonic()
            await asyncio.sleep(steady_s)
            cpu1, wall1 = time.process_time(), time.monotonic()
            if spy is not None:
                spy.wait(timeout=60)
            result["threads"] = shares(threads.stop(), wall1 - wall0)
            collector.stop()
            result["gc_s"], result["gc_full"] = collector.seconds, collector.full
            result["gc_by_gen_s"] = [round(x, 2) for x in collector.by_gen]
            steady = polls[done0:]
            result["cpu_share"] = (cpu1 - cpu0) / (wall1 - wall0)
            # The share depends on how long a refresh takes (a slow Prometheus makes it look cheap);
            # CPU per refresh does not.
            result["cpu_per_refresh_s"] = (cpu1 - cpu0) / max(1, len(steady))
            result["refreshes"] = len(steady)
            result["cycle_s"] = (wall1 - wall0) / max(1, len(steady))  # refresh pause + snapshot + drawing
            result["queries_per_refresh"] = max((q for _s, q, _f in steady), default=0)
            result["refresh_s"] = statistics.mean(s for s, _q, _f in steady) if steady else float("nan")
            result["metrics_failed"] = sum(1 for _s, _q, failed in steady if failed)
            phase("steady")
        backend2.close()

    asyncio.run(run_app())
    result["rss_mb"] = _mem()["peak_mb"]
    result["phases"] = phases
    if traces:
        result["traces"] = traces
    return result


class _CollectorClock:
    """Wall time inside CPython's cycle collector (all generations) and how many full (gen 2) passes ran:
    the share of the steady CPU that no line of gputui's shows in a profile."""

    def __init__(self) -> None:
        import gc

        self.seconds, self.full, self._t = 0.0, 0, 0.0
        self.by_gen = [0.0, 0.0, 0.0]
        self.longest = 0.0  # the longest single pass: the screen's (and every thread's) longest stall
        gc.callbacks.append(self._tick)

    def _tick(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            spent = time.perf_counter() - self._t
            self.seconds += spent
            self.by_gen[info["generation"]] += spent
            self.longest = max(self.longest, spent)
            self.full += info.get("generation") == 2

    def stop(self) -> None:
        import gc

        gc.callbacks.remove(self._tick)


def _count_polls(reader, polls: list[tuple[float, int, bool]]) -> None:
    """Records each snapshot's wall time, Prometheus queries (exact per refresh, unlike a time window) and
    whether its metrics read failed (a steady state of failed reads would be a cheap, wrong one)."""
    inner = reader.snapshot

    def snapshot():
        q, t, snap = reader.prom.queries, time.monotonic(), None
        try:
            snap = inner()
            return snap
        finally:
            source = snap.source("metrics") if snap is not None else None
            polls.append((time.monotonic() - t, reader.prom.queries - q, source is None or bool(source.error)))

    reader.snapshot = snapshot


def build_fleet(stack: ExitStack, n: int, recorded: bool = False, kubectl_runs: int = 3,
                node_reports_s: float = 300.0) -> dict:
    """Control plane, N nodes and pods, DCGM exporter (or the recorded series) and Prometheus, and each node's
    status reported every node_reports_s as a kubelet does (benchmarks/node_reports.py; 0: none); closed by
    the stack."""
    if recorded:
        from gputui.backends.recording_rules import PROBE, rule_names

        gpu_source: Any = stack.enter_context(_Closing(RecordedExporter(n)))
        dcgm_config, ready = gpu_source.scrape_config(), rule_names("Hostname")[PROBE]
    else:
        gpu_source = stack.enter_context(_Closing(DcgmExporter(fields=DCGM_FIELDS_QUERIED)))
        for i in range(n):
            gpu_source.add_node(f"scale-gpu-{i:05d}", gpus=8, model=PRODUCT.replace("-", " "), driver="550.54.15",
                                fb_total_mib=81559)
        gpu_source.render()  # once, before Prometheus' first scrape
        dcgm_config, ready = dcgm_scrape_config(gpu_source), "DCGM_FI_DEV_GPU_UTIL"
    sessions = stack.enter_context(_Closing(SessionsExporter(n)))
    # No TTL controller: it annotates every node once, at 20 updates a second, for minutes (54 at 65,000 nodes),
    # and a steady window measured inside that storm differed from one after it. NodeReports stands for the
    # kubelets' steady updates instead.
    cp = stack.enter_context(ControlPlane(extra_args={"kube-controller-manager": ["--controllers=*,-nodelifecycle,-ttl"]}))
    created = populate(cp, n)
    print(f"created {n} nodes and {n} pods in {created:.1f}s", flush=True)
    reports = stack.enter_context(_Closing(NodeReports(
        cp.api_url, cp.token("harness"), str(cp.ca_file), [f"scale-gpu-{i:05d}" for i in range(n)],
        node_reports_s).start()))
    prom = PrometheusServer([dcgm_config, sessions.scrape_config()], scrape_interval="30s")
    stack.callback(prom.close)
    prom.start(ready=ready, timeout=300)
    if recorded:
        prom.wait_until(f"sum({ready})", lambda v: sum(v.values()) >= 8 * n, timeout=300)
    else:
        prom.wait_until("count(DCGM_FI_DEV_GPU_UTIL)", lambda v: sum(v.values()) >= 8 * n, timeout=300)
    prom.wait_until('count({__name__="vllm:num_requests_running"})', lambda v: sum(v.values()) >= n, timeout=300)
    kubectl = kubectl_seconds(cp, kubectl_runs)
    return {"nodes": n, "kubeconfig": str(cp.admin_kubeconfig), "prometheus": prom.url, "kubectl_get_s": kubectl,
            "created_s": created, "recorded": recorded, "node_reports_per_s": reports.rate(),
            "pids": {"prometheus": prom.proc.pid, **{p.name: p.pid for p in cp.processes()}}}


def server_memory(pids: dict) -> dict[str, float]:
    """Resident memory (MB) of each server process now: where the harness's memory goes."""
    out = {}
    for name, pid in pids.items():
        try:
            with open(f"/proc/{pid}/status") as f:
                out[name] = round(next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS")) / 1024)
        except (OSError, StopIteration, ValueError):
            out[name] = float("nan")
    return out


class _Closing:
    def __init__(self, thing) -> None:
        self.thing = thing

    def __enter__(self):
        return self.thing

    def __exit__(self, *exc) -> None:
        self.thing.close()


def report(fleet: dict, got: dict, figures: Figures) -> None:
    kubectl = fleet["kubectl_get_s"]
    record(figures, fleet, got)
    flat = {k: round(v, 3) for k, v in got.items() if isinstance(v, (int, float))}
    print(json.dumps({"nodes": fleet["nodes"], "kubectl_get_s": round(kubectl, 3), **flat,
                      "phases": got["phases"]}))
    for name, lines in got.get("traces", {}).items():
        print(f"--- tracemalloc, {name} (growth since imports) ---")
        print("\n".join(lines))
    if fleet.get("servers_rss_mb"):
        print("servers' RSS (MB): " + ", ".join(f"{k} {v}" for k, v in fleet["servers_rss_mb"].items()))
    print("store holds the recorded per-node series (rule outputs simulated, see --recorded)" if fleet.get("recorded")
           else "store holds every GPU's raw DCGM series")
    if "node_reports_per_s" in fleet:  # (a fleet served by an older scale.py says nothing)
        print(f"node status updates (as kubelets report): {fleet['node_reports_per_s']:.0f}/s")
    print(f"kubectl get nodes,pods -A -o json: {kubectl:.2f}s")
    print(f"gputui first complete snapshot:    {got['first_snapshot_s']:.2f}s  "
          f"(ratio {got['first_snapshot_s'] / kubectl:.2f}x, goal <= 1.5x; {got['first_snapshot_tries']} read(s))")
    print(f"gputui first full frame:           {got['first_frame_s']:.2f}s  "
          f"(ratio {got['first_frame_s'] / kubectl:.2f}x)")
    print(f"steady-state CPU at {got['refresh']:g} s refresh: {got['cpu_share'] * 100:.1f}% of one core (goal <= 15%), "
          f"{got['cpu_per_refresh_s']:.2f}s CPU per refresh")
    if "threads" in got:
        print(f"steady CPU by thread:              {got['threads']}")
    print(f"peak RSS of gputui's process:      {got['rss_mb']:.0f} MB (goal <= 1 GB at 65,000 nodes)")
    print(f"Prometheus queries per refresh:    {got['queries_per_refresh']:.0f} at most (goal <= 10)")
    print(f"cycle collector in the steady state: {got['gc_s']:.2f}s ({got['gc_s'] / got['cpu_per_refresh_s'] / max(1, got['refreshes']) * 100:.0f}% "
          f"of the CPU), {got['gc_full']} full passes; by generation {got['gc_by_gen_s']} s")
    print(f"metrics reads failed (timed out):  {got['metrics_failed']} of {got['refreshes']} in the steady state "
          f"(per-query timeout {got['prom_timeout']:g}s)")
    print(f"refreshes in the steady state:     {got['refreshes']}, a snapshot taking {got['refresh_s']:.2f}s on average "
          f"(fleet-wide DCGM every {got['dcgm_interval']:g}s); one every {got['cycle_s']:.2f}s")
    for name, m in got["phases"].items():
        print(f"  {name:15s} RSS {m['rss_mb']:6.0f} MB  peak {m['peak_mb']:6.0f} MB  threads {m['threads']}")
    if got.get("traces"):
        print("(tracemalloc was on: the timings above are not valid)")


def record(figures: Figures, fleet: dict, got: dict) -> None:
    """What report() prints, for --json: the same figures under short names."""
    kubectl = fleet["kubectl_get_s"]
    figures.add("kubectl get nodes,pods", kubectl, "s")
    if "created_s" in fleet:
        figures.add("fleet created", fleet["created_s"], "s")
    for name, mb in fleet.get("servers_rss_mb", {}).items():
        figures.add(f"server {name} RSS", mb, "MB")
    figures.add("first snapshot", got["first_snapshot_s"], "s")
    figures.add("first snapshot/kubectl", got["first_snapshot_s"] / kubectl, "x")
    figures.add("first snapshot reads", got["first_snapshot_tries"], "", "")
    figures.add("first frame", got["first_frame_s"], "s")
    figures.add("first frame/kubectl", got["first_frame_s"] / kubectl, "x")
    figures.add("steady CPU", got["cpu_share"] * 100, "% core")
    figures.add("CPU per refresh", got["cpu_per_refresh_s"], "s")
    figures.add("peak RSS", got["rss_mb"], "MB")
    figures.add("queries per refresh", got["queries_per_refresh"], "")
    figures.add("cycle collector", got["gc_s"], "s")
    figures.add("cycle collector share", got["gc_s"] / got["cpu_per_refresh_s"] / max(1, got["refreshes"]) * 100, "%")
    figures.add("full collections", got["gc_full"], "", "")
    for gen, seconds in enumerate(got["gc_by_gen_s"]):
        figures.add(f"cycle collector gen {gen}", seconds, "s")
    figures.add("metrics reads failed", got["metrics_failed"], "")
    figures.add("refreshes", got["refreshes"], "", "")
    figures.add("snapshot time", got["refresh_s"], "s")
    figures.add("cycle", got["cycle_s"], "s")
    for name, m in got["phases"].items():
        figures.add(f"phase {name} RSS", m["rss_mb"], "MB")
        figures.add(f"phase {name} peak RSS", m["peak_mb"], "MB")
        figures.add(f"phase {name} threads", m["threads"], "", "")


def measure(fleet: dict, steady: float, trace: int, dcgm_interval: float, refresh: float,
            prom_timeout: float = 3.0, profile: str = "") -> dict:
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(measure_gputui, (fleet["kubeconfig"], fleet["prometheus"], fleet["nodes"], steady, trace,
                                           dcgm_interval, refresh, prom_timeout,
                                           os.path.abspath(profile) if profile else ""))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--steady", type=float, default=30.0, help="seconds of steady state to measure")
    parser.add_argument("--serve", metavar="FILE", help="set the fleet up, write its address to FILE, wait")
    parser.add_argument("--against", metavar="FILE", help="measure on a fleet --serve set up")
    parser.add_argument("--refresh", type=float, default=2.0, metavar="S",
                        help="gputui's pause between refreshes (default 2); a slow Prometheus makes a cycle longer, "
                             "so give less to measure a true 2 s cycle")
    parser.add_argument("--prom-timeout", type=float, default=3.0, metavar="S",
                        help="gputui's per-query metrics timeout (prometheus_timeout; default 3)")
    parser.add_argument("--dcgm-interval", type=float, default=15.0, metavar="S",
                        help="gputui's dcgm_interval (default 15, as shipped; 0: every refresh)")
    parser.add_argument("--recorded", action="store_true",
                        help="the store holds gputui's recorded per-node series, not every GPU's raw series")
    parser.add_argument("--kubectl-runs", type=int, default=3, metavar="N",
                        help="kubectl lists to take the median of (default 3; each takes 1.5 min at 65,000 nodes)")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="N", help="top N allocation sites per phase")
    parser.add_argument("--node-reports", type=float, default=300.0, metavar="S",
                        help="each node's status is updated every S seconds, as a kubelet reports it (default 300, "
                             "the kubelet's nodeStatusReportFrequency; 0: never)")
    parser.add_argument("--profile", metavar="FILE", default="",
                        help="py-spy's record of the steady window, as collapsed stacks by thread (py-spy on PATH)")
    json_option(parser)
    args = parser.parse_args()
    need_py_spy(parser, args.profile)
    figures = Figures("scale", settings_of(args))
    if args.kubectl_runs < 1:
        parser.error("--kubectl-runs must be at least 1")
    if args.against:
        fleet = json.loads(Path(args.against).read_text())
        got = measure(fleet, args.steady, args.tracemalloc, args.dcgm_interval, args.refresh, args.prom_timeout,
                      args.profile)
        fleet["servers_rss_mb"] = server_memory(fleet.get("pids", {}))
        report(fleet, got, figures)
        figures.write(args.json)
        return
    with ExitStack() as stack:
        fleet = build_fleet(stack, args.nodes, args.recorded, args.kubectl_runs, args.node_reports)
        if args.serve:
            Path(args.serve).write_text(json.dumps(fleet))
            print(f"fleet of {args.nodes} nodes up; kubectl {fleet['kubectl_get_s']:.2f}s; "
                  f"measure with --against {args.serve}; Ctrl-C or SIGTERM ends it", flush=True)
            stop = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            try:
                while not stop.wait(1.0):
                    pass
            except KeyboardInterrupt:
                pass
            os.unlink(args.serve)
            figures.add("kubectl get nodes,pods", fleet["kubectl_get_s"], "s")  # all a fleet set up alone measured
            figures.add("fleet created", fleet["created_s"], "s")
            figures.write(args.json)
            return
        got = measure(fleet, args.steady, args.tracemalloc, args.dcgm_interval, args.refresh, args.prom_timeout,
                      args.profile)
        fleet["servers_rss_mb"] = server_memory(fleet["pids"])  # while they still run
    report(fleet, got, figures)
    figures.write(args.json)


if __name__ == "__main__":
    main()
