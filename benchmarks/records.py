"""Memory of the node records the caches hold, for nodes shaped like real GPU nodes.

Real nodes carry ~50 labels (Node Feature Discovery, GPU Feature Discovery,
topology) and four or five conditions worded the same on every node; the
scale benchmark's nodes carry six labels, so its RSS says little about this.
Pages of 500 nodes are decoded as the list does, then turned into records;
--plain turns the sharing of strings and conditions off, for comparison.

    python benchmarks/records.py [--nodes 10000] [--plain]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from gputui.backends import kube_objects as ko

CONDITIONS = [{"type": t, "status": "False", "reason": f"KubeletHas{t}", "message": f"kubelet has no {t}"}
              for t in ("MemoryPressure", "DiskPressure", "PIDPressure")] + [
    {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]


def page(start: int, size: int) -> bytes:
    items = []
    for i in range(start, start + size):
        labels = {f"feature.node.kubernetes.io/cpu-cpuid.F{k}": "true" for k in range(30)}
        labels.update({f"nvidia.com/gpu.attr{k}": "H100-SXM5-80GB" for k in range(18)})
        labels.update({"kubernetes.io/hostname": f"gpu-{i:05d}", "topology.kubernetes.io/zone": f"zone-{i % 3}",
                       "nvidia.com/gpu.present": "true", "nvidia.com/cuda.driver-version.full": "550.54.15"})
        items.append({"metadata": {"name": f"gpu-{i:05d}", "uid": f"uid-{i}", "labels": labels},
                      "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"},
                                 "conditions": CONDITIONS}})
    return json.dumps({"items": items}).encode()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--plain", action="store_true", help="no interning, no shared conditions")
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("records", settings_of(args))
    if args.plain:
        ko.intern = lambda s: s  # type: ignore[assignment]
        ko._CONDITIONS_MAX = 0
    pages = [page(start, 500) for start in range(0, args.nodes, 500)]
    tracemalloc.start()
    records = []
    for data in pages:
        records += [ko.node_record(obj) for obj in json.loads(data)["items"]]
    gc.collect()
    size = tracemalloc.get_traced_memory()[0]
    figures.add("node records", len(records), "", "")
    figures.add("records memory", size / 2**20, "MB")
    figures.add("bytes per node", size / len(records), "B")
    print(f"{len(records)} node records, 52 labels and 4 conditions each{' (plain)' if args.plain else ''}: "
          f"{size / 2**20:.1f} MB, {size / len(records):.0f} bytes per node")

    figures.write(args.json)


if __name__ == "__main__":
    main()
