"""What one node watch event costs gputui to digest, for the benchmarks' nodes and for a real GPU node's shape.

The scale and fleet harnesses create small nodes (benchmarks/scale.py's node_body: 6 labels, one condition, about
0.7 kB of JSON). A real GPU node is much larger: GPU feature discovery's and node feature discovery's labels,
four conditions with messages, addresses, nodeInfo, the images it holds and the managed fields a watch sends
with it, about 16 kB. Every kubelet report sends the whole object to every watcher (N/300 a second), so the
harnesses' figures for the node watch are a lower bound: this prints by how much, per event, for the decoding
(json.loads), the record (kube_objects.node_record) and the equality check that keeps an unchanged record
(kube_cache.ListWatchCache).

    python benchmarks/node_decode.py [--events 3000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from benchmarks.scale import node_body
from gputui.backends import kube_objects as ko

GFD = {  # GPU feature discovery's and the GPU Operator's labels on an 8 x H100 node
    "cuda.driver-version.full": "550.54.15", "cuda.driver-version.major": "550", "cuda.driver-version.minor": "54",
    "cuda.driver-version.revision": "15", "cuda.driver.major": "550", "cuda.driver.minor": "54",
    "cuda.driver.rev": "15", "cuda.runtime-version.full": "12.4", "cuda.runtime-version.major": "12",
    "cuda.runtime-version.minor": "4", "cuda.runtime.major": "12", "cuda.runtime.minor": "4",
    "gfd.timestamp": "1733300000", "gpu-driver-upgrade-state": "upgrade-done", "gpu.compute.major": "9",
    "gpu.compute.minor": "0", "gpu.count": "8", "gpu.deploy.container-toolkit": "true", "gpu.deploy.dcgm": "true",
    "gpu.deploy.dcgm-exporter": "true", "gpu.deploy.device-plugin": "true", "gpu.deploy.driver": "true",
    "gpu.deploy.gpu-feature-discovery": "true", "gpu.deploy.node-status-exporter": "true",
    "gpu.deploy.operator-validator": "true", "gpu.family": "hopper", "gpu.machine": "PowerEdge-XE9680",
    "gpu.memory": "81559", "gpu.mode": "compute", "gpu.present": "true", "gpu.product": "NVIDIA-H100-80GB-HBM3",
    "gpu.replicas": "1", "gpu.sharing-strategy": "none", "mig.capable": "true", "mig.strategy": "single",
    "mps.capable": "false", "vgpu.present": "false",
}
NFD = ("cpu-cpuid.ADX", "cpu-cpuid.AESNI", "cpu-cpuid.AVX", "cpu-cpuid.AVX2", "cpu-cpuid.AVX512BW",
       "cpu-cpuid.AVX512CD", "cpu-cpuid.AVX512DQ", "cpu-cpuid.AVX512F", "cpu-cpuid.AVX512VL", "cpu-cpuid.FMA3",
       "cpu-hardware_multithreading", "kernel-config.NO_HZ", "kernel-config.NO_HZ_IDLE", "pci-10de.present",
       "pci-15b3.present", "rdma.available", "rdma.capable", "storage-nonrotationaldisk", "memory-numa")


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "lastHeartbeatTime": "2026-12-04T10:00:00Z",
            "lastTransitionTime": "2026-11-01T10:00:00Z", "reason": reason, "message": message}


def real_shaped_node(i: int) -> dict[str, Any]:
    """A GPU node as a cloud's apiserver sends it in a watch event (managed fields included)."""
    name = f"gpu-node-{i:05d}"
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/region": "us-east-1",
              "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/nodepool": "gpu-h100",
              **{f"nvidia.com/{k}": v for k, v in GFD.items()},
              **{f"feature.node.kubernetes.io/{k}": "true" for k in NFD}}
    resources = {"cpu": "192", "ephemeral-storage": "3749722316Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                 "memory": "2097138176Ki", "nvidia.com/gpu": "8", "pods": "110", "vpc.amazonaws.com/efa": "32"}
    managers = ("kubelet", "nfd-master", "gpu-feature-discovery", "kube-controller-manager")
    return {"kind": "Node", "apiVersion": "v1", "metadata": {
        "name": name, "uid": f"0f3e2a1b-1111-2222-3333-{i:012d}", "resourceVersion": "123456789",
        "creationTimestamp": "2026-11-01T10:00:00Z", "labels": labels,
        "annotations": {"alpha.kubernetes.io/provided-node-ip": "10.0.0.1", "node.alpha.kubernetes.io/ttl": "0",
                        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                        "nfd.node.kubernetes.io/feature-labels": ",".join(NFD)},
        "managedFields": [{"manager": m, "operation": "Update", "apiVersion": "v1", "time": "2026-12-04T10:00:00Z",
                           "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in list(labels)[:25]}}}}
                          for m in managers]},
        "spec": {"providerID": f"aws:///us-east-1a/i-0{i:016x}"},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [
                _condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                _condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                _condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "ab" * 16, "systemUUID": "ec2" + "a" * 33, "bootID": "b" * 36,
                         "kernelVersion": "6.1.0", "osImage": "Amazon Linux 2023",
                         "containerRuntimeVersion": "containerd://1.7.11", "kubeletVersion": "v1.31.2",
                         "kubeProxyVersion": "v1.31.2", "operatingSystem": "linux", "architecture": "amd64"},
            "images": [{"names": [f"nvcr.io/nvidia/image-{k}@sha256:{'ab' * 32}", f"nvcr.io/nvidia/image-{k}:v1.{k}.0"],
                        "sizeBytes": 1_000_000_000 + k} for k in range(30)]}}


def per_event_us(obj: dict[str, Any], events: int) -> tuple[int, float, float, float]:
    """Bytes of the event, then microseconds per event to decode it, make its record, and compare that record
    with the one kept."""
    raw = json.dumps({"type": "MODIFIED", "object": obj}).encode()
    kept = ko.node_record(json.loads(raw)["object"])
    started = time.perf_counter()
    for _ in range(events):
        decoded = json.loads(raw)
    decode = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(events):
        record = ko.node_record(decoded["object"])
    make = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(events):
        same = record == kept
    compare = time.perf_counter() - started
    assert same, "a record made twice from one object differs"
    return len(raw), decode / events * 1e6, make / events * 1e6, compare / events * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=3000)
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("node_decode", settings_of(args))
    harness = node_body(7)
    harness["metadata"].update(uid="0f3e2a1b-1111-2222-3333-000000000007", resourceVersion="123456789")
    totals = {}
    for label, obj in (("harness node", harness), ("real-shaped node", real_shaped_node(7))):
        size, decode, make, compare = per_event_us(obj, args.events)
        totals[label] = figures.add(f"{label} per event", decode + make + compare, "us")
        figures.add(f"{label} bytes", size, "B", better="")
        print(f"{label:17s} {size:6d} bytes: decode {decode:5.1f} us, record {make:5.1f} us, compare {compare:4.1f} us "
              f"= {decode + make + compare:5.1f} us an event")
    ratio = figures.add("real-shaped / harness", totals["real-shaped node"] / totals["harness node"], "x", better="")
    extra = totals["real-shaped node"] - totals["harness node"]
    print(f"real-shaped / harness: {ratio:.1f}x; at 65,000 nodes' reports (217 a second) the real shape costs "
          f"{extra * 217 / 1e4:.1f}% of a core more than the harness measures")
    figures.write(args.json)


if __name__ == "__main__":
    main()
