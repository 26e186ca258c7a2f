"""What the scheduling facts (gputui.vocabulary.scheduling: taints, allocatable, node selector, affinity, tolerations,
spread, requests) cost the records the watch caches hold: memory and build time of N node records and N pod
records shaped like a real inference fleet's, with the facts read and without them (the readers patched to
None, as the records were before), in one run.

Nodes carry ~50 labels (as benchmarks/records.py), cpu/memory/pods/ephemeral-storage/hugepages allocatable, a
GPU taint and, on one node in ten, a dedicated taint. Pods carry the two tolerations the DefaultTolerationSeconds
admission adds, a GPU toleration, cpu and memory requests, a node selector; one service in four a hostname
anti-affinity and a zone spread constraint. 100 services: their pods share one spec each.

    python benchmarks/scheduling_records.py [--nodes 65000] [--runs 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from gputui.backends import kube_objects as ko

CONDITIONS = [{"type": t, "status": "False", "reason": f"KubeletHas{t}", "message": f"kubelet has no {t}"}
              for t in ("MemoryPressure", "DiskPressure", "PIDPressure")] + [
    {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]


def node_json(i: int) -> dict:
    labels = {f"feature.node.kubernetes.io/cpu-cpuid.F{k}": "true" for k in range(30)}
    labels.update({f"nvidia.com/gpu.attr{k}": "H100-SXM5-80GB" for k in range(18)})
    labels.update({"kubernetes.io/hostname": f"gpu-{i:05d}", "topology.kubernetes.io/zone": f"zone-{i % 3}",
                   "nvidia.com/gpu.present": "true", "nvidia.com/cuda.driver-version.full": "550.54.15"})
    taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    if i % 10 == 0:
        taints.append({"key": "dedicated", "value": "llm", "effect": "NoSchedule"})
    offered = {"cpu": "223", "memory": "2113412Mi", "pods": "110", "ephemeral-storage": "3518375212Ki",
               "hugepages-1Gi": "0", "hugepages-2Mi": "0", "nvidia.com/gpu": "8"}
    return {"metadata": {"name": f"gpu-{i:05d}", "uid": f"uid-{i}", "labels": labels},
            "spec": {"taints": taints},
            "status": {"capacity": offered, "allocatable": offered, "conditions": CONDITIONS}}


def pod_json(i: int) -> dict:
    svc = f"svc-{i % 100:03d}"
    labels = {"app.kubernetes.io/name": svc, "app.kubernetes.io/version": "v1", "pod-template-hash": f"h{i % 100}"}
    spec: dict = {
        "nodeName": f"gpu-{i:05d}", "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300},
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300},
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.9.0",
                        "resources": {"requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "8"},
                                      "limits": {"memory": "160Gi", "nvidia.com/gpu": "8"}}}],
    }
    if i % 4 == 0:
        selector = {"matchLabels": {"app.kubernetes.io/name": svc}}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}}
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}]
    return {"metadata": {"name": f"llm-{i:05d}", "namespace": "llm", "uid": f"pod-{i}", "labels": labels,
                         "ownerReferences": [{"kind": "ReplicaSet", "name": svc, "controller": True}]},
            "spec": spec, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def measure(pages: list[bytes], make, runs: int) -> tuple[float, float, int]:
    """(bytes per record held, µs of CPU per record built: the best of `runs` untraced builds, collector run
    before each, records)."""
    decoded = [json.loads(p)["items"] for p in pages]
    count = sum(map(len, decoded))
    gc.collect()
    tracemalloc.start()
    records = [make(obj) for items in decoded for obj in items]
    gc.collect()
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del records
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        start = time.thread_time()
        records = [make(obj) for items in decoded for obj in items]
        best = min(best, time.thread_time() - start)
        del records
    return size / count, best / count * 1e6, count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=65000)
    parser.add_argument("--runs", type=int, default=3, help="untraced builds timed (the best is kept)")
    json_option(parser)
    args = parser.parse_args()
    record = Figures("scheduling_records", settings_of(args))
    # Pages of 500, decoded as the list decodes them; the bytes are not counted.
    node_pages = [json.dumps({"items": [node_json(i) for i in range(s, min(args.nodes, s + 500))]}).encode()
                  for s in range(0, args.nodes, 500)]
    pod_pages = [json.dumps({"items": [pod_json(i) for i in range(s, min(args.nodes, s + 500))]}).encode()
                 for s in range(0, args.nodes, 500)]
    readers = (ko.node_scheduling, ko.pod_scheduling)
    for kind, pages, make in (("node", node_pages, ko.node_record), ("pod", pod_pages, ko.pod_record)):
        figures = {}
        for facts in (False, True):
            ko.node_scheduling, ko.pod_scheduling = readers if facts else (  # type: ignore[assignment]
                lambda *_a: None, lambda *_a: None)
            figures[facts] = measure(pages, make, args.runs)
        (b0, t0, n), (b1, t1, _n) = figures[False], figures[True]
        record.add(f"{kind} bytes with facts", b1, "B")
        record.add(f"{kind} bytes without facts", b0, "B")
        record.add(f"{kind} facts memory in all", (b1 - b0) * n / 2**20, "MB")
        record.add(f"{kind} build with facts", t1, "µs")
        record.add(f"{kind} build without facts", t0, "µs")
        record.add(f"{kind} facts per full list", (t1 - t0) * n / 1e6, "s")
        print(f"{n} {kind} records: {b1:.0f} bytes each with the scheduling facts, {b0:.0f} without "
              f"({(b1 - b0) * n / 2**20:+.1f} MB in all); {t1:.1f} µs CPU each to build, {t0:.1f} without "
              f"({(t1 - t0) * n / 1e6:+.2f} s per full list)")

    record.write(args.json)


if __name__ == "__main__":
    main()
