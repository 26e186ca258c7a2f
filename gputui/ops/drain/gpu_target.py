"""One GPU's drain (issue 37 item 3): which GPU, which pods, and what keeps new pods off it. Pure.

The node's drain plans and runs it (gputui.ops.drain.plan, run) with the options this fills: the pods bound to the
GPU (each backend's reader reads them: gputui.backends.base.bindings_for), the node's other GPU pods whose GPU nobody can tell (never left out
silently: the plan refuses to start unless the operator chose to move them too), and the DRA device to fence.
The node is never cordoned: its other GPUs keep serving."""

from __future__ import annotations

import re
from dataclasses import replace

from gputui.ops.drain.options import DrainOptions
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_bindings import BoundGpu, GpuBindings
from gputui.vocabulary.gpu_resources import Scheme
from gputui.vocabulary.model import InferencePod, Node

FENCE_KEY = "gputui.io/fenced"  # the DeviceTaintRule's taint key; its value names the drain's node and GPU
UNKNOWN_GPU = "unknown GPU"


class GpuNotFound(ValueError):
    """The GPU named is not one of the node's (the message lists those it has)."""


def holds_gpu(pod: InferencePod) -> bool:
    return not pod.terminated and (pod.gpu_request > 0 or any(n > 0 for n in pod.gpu_units.values()))


def gpu_label(gpu: BoundGpu) -> str:
    """"GPU 1", or the DRA device's name when no index is known."""
    if gpu.index is not None:
        return f"GPU {gpu.index}"
    return f"GPU {gpu.device.rsplit('/', 1)[-1] or gpu.uuid}"


def find_gpu(bindings: GpuBindings, node: str, spec: str) -> BoundGpu:
    """The GPU named by its index, its UUID (GPU-…), or its DRA device name."""
    wanted = spec.strip()
    for g in bindings.gpus:
        if (wanted.isdigit() and g.index == int(wanted)) or (g.uuid and g.uuid.lower() == wanted.lower()) \
                or (g.device and g.device.rsplit("/", 1)[-1] == wanted):
            return g
    have = ", ".join(f"{g.index if g.index is not None else g.device}" + (f" ({g.uuid})" if g.uuid else "")
                     for g in bindings.gpus)
    why = "; ".join(w for w in (bindings.dcgm, bindings.dra) if w)
    raise GpuNotFound(f"node {node} has no GPU {spec!r}" + (f"; its GPUs: {have}" if have else
                                                            f"; none could be read ({why or 'no source'})"))


def unattributed(snapshot: ClusterSnapshot, node: str, bindings: GpuBindings) -> tuple[str, ...]:
    """The node's pods that hold GPU units no source ties to a GPU: they may be on the bad one."""
    known = bindings.attributed
    return tuple(sorted(p.key for p in snapshot.pods_on(node) if holds_gpu(p) and p.key not in known))


def gpu_options(options: DrainOptions, snapshot: ClusterSnapshot, node: str, spec: str, bindings: GpuBindings,
                include_unattributed: bool = False) -> DrainOptions:
    """The node drain's options narrowed to one GPU (GpuNotFound when the node has no such GPU)."""
    gpu = find_gpu(bindings, node, spec)
    return replace(options, gpu=gpu_label(gpu).removeprefix("GPU "), gpu_pods=tuple(sorted(gpu.pods)),
                   unattributed=tuple(k for k in unattributed(snapshot, node, bindings) if k not in gpu.pods),
                   include_unattributed=include_unattributed, gpu_device=gpu.device)


def why_unattributed(bindings: GpuBindings) -> str:
    reasons = [f"DCGM: {bindings.dcgm}" if bindings.dcgm else "", f"DRA: {bindings.dra}" if bindings.dra else ""]
    return "; ".join(r for r in reasons if r) or "no DCGM series or ResourceClaim names the pod"


def fence_words(options: DrainOptions, target: Node) -> str:
    """What keeps new pods off the GPU while and after it is drained, said before anything is written."""
    gpu = f"GPU {options.gpu}"
    if options.gpu_device:
        return (f"{gpu} ({options.gpu_device}) is fenced first: a DeviceTaintRule with effect None (a dry run: "
                "the pods it would touch), then NoSchedule, before any eviction; never NoExecute")
    whole = [r for r in target.gpu_resources if r.scheme in (Scheme.WHOLE, Scheme.SHARED, Scheme.MIG)]
    if not whole:
        return f"how many GPUs the device plugin offers is unknown: a new pod could land on {gpu}"
    cap, alloc = sum(r.capacity for r in whole), sum(r.allocatable for r in whole)
    names = ", ".join(sorted({r.name for r in whole}))
    if alloc < cap:
        return (f"the device plugin has removed {cap - alloc} of {cap} units from allocatable ({names}: capacity "
                f"{cap}, allocatable {alloc}): an unhealthy GPU it reported is not offered to new pods")
    return (f"the device plugin still offers every GPU ({names}: capacity {cap} = allocatable {alloc}): "
            f"a new pod could land on {gpu}")


def rule_name(node: str, device: str) -> str:
    """A DNS subdomain naming this node's device fence (one per device: a second drain of it finds it)."""
    raw = re.sub(r"[^a-z0-9.-]+", "-", f"gputui-fence-{node}-{device.rsplit('/', 1)[-1]}".lower()).strip("-.")
    return raw[:253]
