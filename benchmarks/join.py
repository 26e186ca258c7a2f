"""Cost of joining Kubernetes records and metrics into a snapshot, per node per refresh.

A synthetic fleet (no servers): N GPU nodes with a GPU pod each, pods spread
over S services of two versions behind HTTPRoutes, per-node summaries whose
values change every refresh (as live utilisation does), sessions for every
pod. Four cases:
  - full:        every refresh joins from scratch (a fresh Joiner each time)
  - steady:      nothing changed: equal metrics in new objects, as Prometheus
                 answers between two scrapes (DCGM collects every 30 s by
                 default; gputui refreshes every 2 s)
  - metrics:     the Kubernetes records are unchanged, every node's metrics
                 and most pods' sessions move (the worst case for metrics)
  - churn:       as metrics, and 1% of the pods are replaced by new records
                 each refresh (status updates in a busy cluster)
  - sessions:    only most pods' session counts move (the same DCGM summaries):
                 most refreshes at a 2 s refresh and a 15 s dcgm_interval
Reported as CPU time of the joining thread (time.thread_time), so other load
on the machine does not count; the collector is paused as KubeReader pauses it.
With --mixed, the same fleet hands its GPUs out four ways, a quarter each
(whole cards; MIG mixed strategy, two profiles; time-sliced ×4; DRA devices in
ResourceSlices, one claim per pod), and each case is printed with its ratio to
the whole-cards fleet measured in the same run.

    python benchmarks/join.py [--nodes 10000] [--services 100] [--refreshes 10] [--mixed]
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from gputui.backends import kube_objects as ko
from gputui.backends.gcpause import gc_paused
from gputui.backends.join import Joiner, KubeState, Metrics
from gputui.vocabulary.model import GpuSummary

MIXED = False  # --mixed: node i hands its GPUs out by SCHEMES[i % 4]
SCHEMES = ("whole", "mig", "shared", "dra")
OFFERED = {"whole": {"nvidia.com/gpu": "8"}, "mig": {"nvidia.com/mig-1g.10gb": "28", "nvidia.com/mig-3g.40gb": "8"},
           "shared": {"nvidia.com/gpu.shared": "32"}, "dra": {}}
ASKED = {"whole": {"nvidia.com/gpu": "8"}, "mig": {"nvidia.com/mig-1g.10gb": "4"}, "shared": {"nvidia.com/gpu.shared": "2"},
         "dra": {}}


def scheme(i: int) -> str:
    return SCHEMES[i % 4] if MIXED else "whole"


def node_json(i: int) -> dict:
    name = f"gpu-{i:05d}"
    labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true",
              "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559",
              "nvidia.com/cuda.driver-version.full": "550.54.15", "nvidia.com/gpu.count": "8"}
    if scheme(i) == "shared":
        labels.update({"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"})
    offered = OFFERED[scheme(i)]
    return {"metadata": {"name": name, "uid": f"uid-{i}", "labels": labels},
            "status": {"capacity": dict(offered), "allocatable": dict(offered),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def dra_records(n: int) -> tuple[tuple, tuple]:
    """Slices for the DRA quarter of the fleet (8 devices each) and one claim of 2 devices per pod there."""
    from gputui.backends.kube_dra import claim_record, slice_record

    slices, claims = [], []
    for i in range(n):
        if scheme(i) != "dra":
            continue
        node = f"gpu-{i:05d}"
        slices.append(slice_record({"spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node},
                                             "devices": [{"name": f"gpu-{d}"} for d in range(8)]}}))
        claims.append(claim_record({"metadata": {"namespace": "llm", "name": f"claim-{i}"}, "status": {
            "allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "pool": node, "device": f"gpu-{d}"}
                                                   for d in range(2)]}},
            "reservedFor": [{"resource": "pods", "name": f"llm-{i:05d}", "uid": f"pod-{i}-0"}]}}))
    return tuple(slices), tuple(claims)


def pod_json(i: int, services: int, generation: int = 0) -> dict:
    svc, version = (f"svc-{i % services:03d}", f"v{i // services % 2 + 1}") if services else ("none", "v1")
    return {"metadata": {"name": f"llm-{i:05d}", "namespace": "llm", "uid": f"pod-{i}-{generation}",
                         "labels": {"app.kubernetes.io/name": svc, "app.kubernetes.io/version": version},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": f"{svc}-{version}", "controller": True}]},
            "spec": {"nodeName": f"gpu-{i:05d}",
                     "containers": [{"resources": {"limits": dict(ASKED[scheme(i)])}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def kube_state(n: int, services: int) -> KubeState:
    workloads, svcs, routes = [], [], []
    for s in range(services):
        name = f"svc-{s:03d}"
        for version in ("v1", "v2"):
            labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/version": version}
            workloads.append(ko.deployment_record({
                "kind": "Deployment", "metadata": {"name": f"{name}-{version}", "namespace": "llm"},
                "spec": {"replicas": 1, "template": {"metadata": {"labels": labels}, "spec": {
                    "containers": [{"resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}))
            svcs.append(ko.service_record({"metadata": {"name": f"{name}-{version}", "namespace": "llm"},
                                           "spec": {"selector": labels}}))
        routes.append(ko.httproute_record({"metadata": {"name": name, "namespace": "llm"}, "spec": {"rules": [
            {"backendRefs": [{"name": f"{name}-v1", "weight": 90}, {"name": f"{name}-v2", "weight": 10}]}]}}))
    slices, claims = dra_records(n)
    return KubeState(nodes=tuple(ko.node_record(node_json(i)) for i in range(n)),
                     pods=tuple(ko.pod_record(pod_json(i, services)) for i in range(n)),
                     workloads=tuple(workloads), services=tuple(svcs), routes=tuple(routes),
                     resource_slices=slices, resource_claims=claims)


def metrics(n: int, rng: random.Random) -> Metrics:
    nodes = {f"gpu-{i:05d}": GpuSummary(8, util_pct=rng.uniform(0, 100), mem_used_mib=rng.uniform(0, 6e5),
                                        temp_c=float(rng.randint(30, 80)), power_w=rng.uniform(500, 5000))
             for i in range(n)}
    sessions = {("llm", f"llm-{i:05d}"): rng.randint(0, 3) for i in range(n)}
    return Metrics(nodes=nodes, sessions=sessions)


def run(case: str, n: int, services: int, refreshes: int) -> float:
    rng = random.Random(1)
    state = kube_state(n, services)
    samples = [metrics(n, rng) for _ in range(refreshes + 1)]
    if case == "steady":
        samples = [copy.deepcopy(samples[0]) for _ in samples]
    if case == "sessions":
        samples = [Metrics(gpus=samples[0].gpus, nodes=samples[0].nodes, sessions=m.sessions) for m in samples]
    joiner = Joiner()
    joiner.join(state, samples[0], now=0.0, context="bench", sources=())  # warm: the first snapshot
    spent = 0.0
    for r in range(1, refreshes + 1):
        if case == "churn":
            pods = list(state.pods)
            for i in rng.sample(range(n), max(1, n // 100)):
                pods[i] = ko.pod_record(pod_json(i, services, generation=r))
            state = KubeState(nodes=state.nodes, pods=tuple(pods), workloads=state.workloads,
                              services=state.services, routes=state.routes,
                              resource_slices=state.resource_slices, resource_claims=state.resource_claims)
        if case == "full":
            joiner = Joiner()
        t = time.thread_time()  # CPU, not wall: the machine is shared, contention must not count
        with gc_paused():  # as KubeReader.snapshot joins
            snap = joiner.join(state, samples[r], now=float(r), context="bench", sources=())
        spent += time.thread_time() - t
        assert len(snap.nodes) == n and len(snap.pods) == n
    return spent / refreshes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--services", type=int, default=100)
    parser.add_argument("--refreshes", type=int, default=10)
    parser.add_argument("--mixed", action="store_true", help="a quarter each: whole, MIG, time-sliced, DRA")
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("join", settings_of(args))
    global MIXED
    for case in ("full", "steady", "metrics", "churn", "sessions"):
        MIXED = False
        whole = run(case, args.nodes, args.services, args.refreshes)
        figures.add(case, whole * 1000, "ms")
        figures.add(f"{case} per node", whole / args.nodes * 1e6, "µs")
        line = f"{case:8s} {whole * 1000:8.1f} ms CPU per refresh  {whole / args.nodes * 1e6:6.1f} µs per node"
        if args.mixed:
            MIXED = True
            mixed = run(case, args.nodes, args.services, args.refreshes)
            figures.add(f"{case} mixed", mixed * 1000, "ms")
            figures.add(f"{case} mixed/whole", mixed / whole, "x")
            line += f"   mixed schemes {mixed * 1000:8.1f} ms  ({mixed / whole:4.2f}× whole cards)"
        print(line)
    figures.write(args.json)


if __name__ == "__main__":
    main()
