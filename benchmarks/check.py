"""`gputui check` on a large fleet: how long the checks take on one snapshot, against the reference of
building that snapshot's pod indexes and alerts once (what every refresh of the dashboard already pays).

A synthetic fleet (no servers): N GPU nodes of 8 GPUs in 4 pools, a 1-GPU inference pod per GPU in S
services with two versions, a PDB per service, a few planted problems (XIDs, a drifted driver, Pending
pods). Reported as CPU time of this thread (time.thread_time), median of R runs.

    python benchmarks/check.py [--nodes 2000] [--services 50] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.checks.rules import CheckContext, run_checks  # noqa: E402
from gputui.health import fleet_alerts  # noqa: E402
from gputui.model import Budget, Gpu, InferencePod, Node, PodProbes  # noqa: E402
from gputui.snapshot import ClusterSnapshot, SourceStatus  # noqa: E402

POOLS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S", "NVIDIA-H200")


def fleet(nodes: int, services: int) -> ClusterSnapshot:
    node_list, pods, budgets = [], [], []
    for i in range(nodes):
        name = f"gpu-{i:05d}"
        gpus = tuple(Gpu(g, f"{name}-{g}", util_pct=float((i + g) % 100), temp_c=40.0 + g,
                         xid=79 if i % 997 == 0 and g == 3 else 0) for g in range(8))
        node_list.append(Node(name, ready=True, unschedulable=False, gpu_product=POOLS[i % 4], gpu_capacity=8,
                              gpu_allocatable=8, driver_version="535.1" if i % 1499 == 7 else "550.127.05",
                              cuda_version="12.4", gpus=gpus, labels={"topology.kubernetes.io/zone": f"z{i % 3}"}))
        for g in range(8):
            svc = (i * 8 + g) % services
            pods.append(InferencePod("llm", f"s{svc}-{i}-{g}", f"u{i}-{g}", name, gpu_request=1, service=f"s{svc}",
                                     version="v1" if g % 2 else "v2", labels={"app": f"s{svc}"}, session_signal=True,
                                     sessions_running=g, sessions_waiting=0, termination_grace_s=60,
                                     probes=PodProbes(True, False, 900, True)))
    pods += [InferencePod("llm", f"pending-{j}", f"p{j}", "", phase="Pending", gpu_request=8) for j in range(5)]
    budgets = [Budget("llm", f"s{s}-pdb", {"app": f"s{s}"}, max_unavailable="1", disruptions_allowed=1,
                      current_healthy=10, desired_healthy=9, expected_pods=10) for s in range(services)]
    sources = (SourceStatus("API", 1.0), SourceStatus("metrics", 1.0))
    return ClusterSnapshot(1.0, "bench", tuple(node_list), tuple(pods), budgets=tuple(budgets), sources=sources)


def cpu(fn) -> float:
    start = time.thread_time()
    fn()
    return time.thread_time() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--services", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    snap = fleet(args.nodes, args.services)
    pods = len(snap.pods)

    def reference() -> None:  # what a dashboard refresh pays anyway: the snapshot's indexes and alerts
        again = ClusterSnapshot(snap.taken_at, snap.context, snap.nodes, snap.pods, budgets=snap.budgets,
                                sources=snap.sources)
        fleet_alerts(again, 85.0)

    ref = statistics.median(cpu(reference) for _ in range(args.runs))
    checks = statistics.median(cpu(lambda: run_checks(CheckContext(snap, read_only=True))) for _ in range(args.runs))
    failed = [r.id for r in run_checks(CheckContext(snap, read_only=True)) if r.status.value == "fail"]
    print(f"{args.nodes} nodes, {pods} pods, {args.services} services ({args.runs} runs, CPU time)")
    print(f"reference (indexes + alerts): {ref * 1000:8.1f} ms")
    print(f"gputui check (all checks):    {checks * 1000:8.1f} ms   ratio {checks / ref:.2f}x   goal < 5 s")
    print(f"failing, as planted: {', '.join(failed)}")


if __name__ == "__main__":
    main()
