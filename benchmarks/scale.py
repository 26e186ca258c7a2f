"""gputui against a large fleet on the real test apiserver and Prometheus.

Creates N GPU nodes (8 GPUs each, GPU Feature Discovery labels), one 8-GPU
pod bound to each, and DCGM series for every GPU; then measures, on the same
server:
  - `kubectl get nodes,pods -A -o json` wall time (median of 3)
  - gputui's time to its first complete snapshot (Kubernetes lists + Prometheus)
  - gputui's first full frame (node table filled), headless, 200x50
  - steady-state CPU share of gputui's process at a 2 s refresh, RSS
  - Prometheus queries per refresh

    python benchmarks/scale.py [--nodes 2000] [--steady 30]

Needs the control-plane binaries (scripts/build-control-plane.sh) and Debian's prometheus.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.control_plane import ControlPlane  # noqa: E402
from tests.support.exporters import DcgmExporter  # noqa: E402
from tests.support.prom import PrometheusServer, dcgm_scrape_config  # noqa: E402

PRODUCT = "NVIDIA-H100-80GB-HBM3"


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
    from kubernetes import client

    api = cp.client("harness")
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "scale"}})
    start = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: core.create_node(node_body(i), _preload_content=False), range(n)))
        list(pool.map(lambda i: core.create_namespaced_pod("scale", pod_body(i), _preload_content=False), range(n)))
    return time.monotonic() - start


def kubectl_seconds(cp: ControlPlane) -> float:
    times = []
    for _ in range(3):
        t = time.monotonic()
        out = cp.kubectl("get", "nodes,pods", "-A", "-o", "json", user="admin", timeout=600)
        times.append(time.monotonic() - t)
        assert len(out.stdout) > 1000
    return statistics.median(times)


def measure_gputui(kubeconfig: str, prom_url: str, n: int, steady_s: float) -> dict:
    """Runs in a fresh child process, so CPU and RSS are gputui's alone."""
    from gputui.backends.kube_backend import live_backend
    from gputui.settings import Settings
    from gputui.ui.app import GputuiApp

    settings = Settings(kubeconfig=kubeconfig, prometheus=prom_url, refresh=2.0)
    t0 = time.monotonic()
    backend = live_backend(settings)
    snap = backend.reader.snapshot()
    first_snapshot = time.monotonic() - t0
    assert len(snap.nodes) >= n, len(snap.nodes)
    assert sum(node.summary.count for node in snap.nodes if node.summary) >= 8 * n * 0.99
    backend.close()

    result: dict = {"first_snapshot_s": first_snapshot}

    async def run_app() -> None:
        t1 = time.monotonic()
        backend2 = live_backend(settings)
        app = GputuiApp(settings, backend2)
        async with app.run_test(headless=True, size=(200, 50)) as pilot:
            while not (app.snapshot and len(app.snapshot.nodes) >= n and app.screen.query_one("#nodes").row_count >= n):
                await pilot.pause(0.01)
            await pilot.pause()
            result["first_frame_s"] = time.monotonic() - t1
            prom_source = backend2.reader.prom
            q0, polls0 = prom_source.queries, _polls(app)
            cpu0, wall0 = time.process_time(), time.monotonic()
            await asyncio.sleep(steady_s)
            cpu1, wall1 = time.process_time(), time.monotonic()
            polls = _polls(app) - polls0
            result["cpu_share"] = (cpu1 - cpu0) / (wall1 - wall0)
            result["refreshes"] = polls
            result["queries_per_refresh"] = (prom_source.queries - q0) / max(1, polls)
        backend2.close()

    asyncio.run(run_app())
    result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def _polls(app) -> int:
    return getattr(app, "polls", 0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--steady", type=float, default=30.0, help="seconds of steady state to measure")
    args = parser.parse_args()
    n = args.nodes
    exporter = DcgmExporter()
    for i in range(n):
        exporter.add_node(f"scale-gpu-{i:05d}", gpus=8, model=PRODUCT.replace("-", " "), driver="550.54.15",
                          fb_total_mib=81559)
    with ControlPlane() as cp:
        created = populate(cp, n)
        print(f"created {n} nodes and {n} pods in {created:.1f}s")
        prom = PrometheusServer([dcgm_scrape_config(exporter)], scrape_interval="5s")
        try:
            prom.start(ready="DCGM_FI_DEV_GPU_UTIL", timeout=120)
            prom.wait_until("count(DCGM_FI_DEV_GPU_UTIL)", lambda v: sum(v.values()) >= 8 * n, timeout=120)
            kubectl = kubectl_seconds(cp)
            import multiprocessing

            with multiprocessing.get_context("spawn").Pool(1) as pool:
                got = pool.apply(measure_gputui, (str(cp.admin_kubeconfig), prom.url, n, args.steady))
        finally:
            prom.close()
            exporter.close()
    print(json.dumps({"nodes": n, "kubectl_get_s": round(kubectl, 3), **{k: round(v, 3) for k, v in got.items()}}))
    print(f"kubectl get nodes,pods -A -o json: {kubectl:.2f}s")
    print(f"gputui first complete snapshot:    {got['first_snapshot_s']:.2f}s  "
          f"(ratio {got['first_snapshot_s'] / kubectl:.2f}x, goal <= 1.5x)")
    print(f"gputui first full frame:           {got['first_frame_s']:.2f}s  "
          f"(ratio {got['first_frame_s'] / kubectl:.2f}x)")
    print(f"steady-state CPU at 2 s refresh:   {got['cpu_share'] * 100:.1f}% of one core (goal <= 15%)")
    print(f"peak RSS of gputui's process:      {got['rss_mb']:.0f} MB (goal <= 400 MB at 10,000 nodes)")
    print(f"Prometheus queries per refresh:    {got['queries_per_refresh']:.1f} (goal <= 10)")


if __name__ == "__main__":
    main()
