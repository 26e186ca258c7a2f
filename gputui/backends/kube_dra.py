"""Dynamic Resource Allocation (`resource.k8s.io/v1`) as gputui reads it: the GPUs a DRA driver publishes per
node in ResourceSlices, and the claims allocated to pods. GPUs handed out this way appear in no container's
resource limits, so without this a DRA node looks idle and empty. Pure record functions for the watch
caches, and the arithmetic that turns slices and claims into per-node and per-pod units."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gputui.vocabulary.gpu_resources import DEVICE_TAINT_CONDITION, DRA_PREFIX, GpuResource, Scheme
from gputui.vocabulary.model import Condition

DRA_GROUP = "resource.k8s.io"


def is_gpu_driver(driver: str) -> bool:
    """gpu.nvidia.com, gpu.intel.com, gpu.amd.com…: a DRA driver handing out GPUs (or slices of them)."""
    return "gpu" in driver


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    device: str
    key: str
    value: str
    effect: str  # NoSchedule | NoExecute | None


@dataclass(frozen=True, slots=True)
class SliceRecord:
    driver: str
    pool: str
    node: str  # "" when the slice is not tied to one node (node selector or all nodes)
    devices: tuple[str, ...]
    taints: tuple[DeviceTaint, ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    namespace: str
    name: str
    devices: tuple[tuple[str, str, str], ...]  # allocated (driver, pool, device)
    reserved_for: tuple[str, ...]  # pod UIDs (names when no UID is given)


def slice_record(obj: dict[str, Any]) -> SliceRecord:
    spec = obj.get("spec") or {}
    devices, taints = [], []
    for d in spec.get("devices") or []:
        name = str(d.get("name", ""))
        devices.append(name)
        # v1 keeps a device's fields at its top level (v1beta1 nested them under `basic`).
        for t in d.get("taints") or (d.get("basic") or {}).get("taints") or []:
            taints.append(DeviceTaint(name, str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", ""))))
    return SliceRecord(str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")),
                       str(spec.get("nodeName") or ""), tuple(devices), tuple(taints))


def claim_record(obj: dict[str, Any]) -> ClaimRecord:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    reserved = [str(r.get("uid") or r.get("name") or "") for r in status.get("reservedFor") or []
                if r.get("resource", "pods") == "pods"]
    return ClaimRecord(str(meta.get("namespace", "")), str(meta.get("name", "")),
                       tuple((str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
                             for r in results),
                       tuple(r for r in reserved if r))


@dataclass(frozen=True, slots=True)
class DraView:
    """What the slices and claims say, per node and per pod (keyed by pod UID)."""

    capacity: Mapping[str, Mapping[str, int]]  # node -> dra:<driver> -> devices
    pod_units: Mapping[str, Mapping[str, int]]  # pod UID -> dra:<driver> -> devices allocated to it
    taints: Mapping[str, tuple[DeviceTaint, ...]]  # node -> its devices' taints
    by_node: Mapping[str, tuple[GpuResource, ...]]  # node -> its DRA resources (built once per view)

    def resources(self, node: str) -> tuple[GpuResource, ...]:
        return self.by_node.get(node, ())


def dra_view(slices: Iterable[SliceRecord], claims: Iterable[ClaimRecord]) -> DraView:
    capacity: dict[str, dict[str, int]] = {}
    taints: dict[str, list[DeviceTaint]] = {}
    node_of_pool: dict[tuple[str, str], str] = {}
    for s in slices:
        if not is_gpu_driver(s.driver) or not s.node:
            continue
        node_of_pool[(s.driver, s.pool)] = s.node
        per = capacity.setdefault(s.node, {})
        per[DRA_PREFIX + s.driver] = per.get(DRA_PREFIX + s.driver, 0) + len(s.devices)
        taints.setdefault(s.node, []).extend(s.taints)
    pod_units: dict[str, dict[str, int]] = {}
    for c in claims:
        gpu = [(d, p) for d, p, _dev in c.devices if is_gpu_driver(d) and (d, p) in node_of_pool]
        for pod in c.reserved_for:
            units = pod_units.setdefault(pod, {})
            for driver, _pool in gpu:
                units[DRA_PREFIX + driver] = units.get(DRA_PREFIX + driver, 0) + 1
    by_node = {node: tuple(GpuResource(name, Scheme.DRA, n, n) for name, n in sorted(per.items()))
               for node, per in capacity.items()}
    return DraView(capacity, pod_units, {k: tuple(v) for k, v in taints.items()}, by_node)


def device_taint_conditions(taints: Iterable[DeviceTaint]) -> tuple[Condition, ...]:
    """A node's tainted DRA devices as problem conditions (its GPU health). NoExecute gets the warning that
    matters on call: the device-taint eviction controller deletes the pods using it, past PodDisruptionBudgets
    and any session wait."""
    out = []
    for t in taints:
        if t.effect == "NoExecute":
            message = (f"device {t.device} tainted {t.key}={t.value}:NoExecute: its pods are deleted, past "
                       "PodDisruptionBudgets and session waits")
        else:
            message = f"device {t.device} tainted {t.key}={t.value}:{t.effect or 'None'}"
        out.append(Condition(DEVICE_TAINT_CONDITION, "True", t.effect or "None", message))
    return tuple(out)
