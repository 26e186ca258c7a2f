"""Which pods are bound to which GPU of one node, read now for a single-GPU drain (issue 37 item 3).

Two sources, either or both: dcgm-exporter's pod attribution (the `pod`/`namespace` labels it puts on a GPU's
series while a pod holds it; older builds `pod_name`/`pod_namespace`), and on DRA clusters the ResourceClaims'
allocated devices (`status.allocation.devices.results` on a ResourceSlice of this node, `status.reservedFor` the
pods). A source that cannot be read says why (`dcgm`, `dra`): its pods are then unknown, never "on no GPU"."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gputui.backends.base import BackendError, error_line
from gputui.backends.kube_dra import DRA_GROUP, claim_record, is_gpu_driver
from gputui.backends.kube_errors import ApiError
from gputui.backends.kube_http import path_of
from gputui.vocabulary.gpu_bindings import BoundGpu, GpuBindings

UTIL = "DCGM_FI_DEV_GPU_UTIL"  # every GPU has it (MIG slices too, as instances): the one series read
POD_LABELS = (("namespace", "pod"), ("pod_namespace", "pod_name"), ("exported_namespace", "exported_pod"))
DRA_VERSION = "v1"


def dcgm_gpus(series: Iterable[Mapping[str, Any]]) -> tuple[dict[int, str], dict[int, set[str]]]:
    """GPU index -> UUID, and GPU index -> pod keys, from instant-query results of a GPU series."""
    uuids: dict[int, str] = {}
    pods: dict[int, set[str]] = {}
    for s in series:
        labels = s.get("metric") or {}
        gpu = str(labels.get("gpu", ""))
        if not gpu.isdigit():
            continue
        index = int(gpu)
        uuids.setdefault(index, str(labels.get("UUID") or labels.get("uuid") or ""))
        held = pods.setdefault(index, set())
        for ns_label, pod_label in POD_LABELS:
            if labels.get(pod_label) and labels.get(ns_label):
                held.add(f"{labels[ns_label]}/{labels[pod_label]}")
                break
    return uuids, pods


def _attr(device: Mapping[str, Any], name: str) -> str:
    """A DRA device attribute's value as text (attributes are {int|string|bool|version: value})."""
    value = (device.get("attributes") or {}).get(name) or {}
    for kind in ("int", "string", "version", "bool"):
        if kind in value:
            return str(value[kind])
    return ""


def dra_gpus(slices: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]],
             pod_by_uid: Mapping[str, str]) -> list[BoundGpu]:
    """The node's DRA GPU devices (from its slices) with the pods their allocated claims are reserved for."""
    devices: dict[tuple[str, str, str], tuple[int | None, str]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        driver, pool = str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))
        if not is_gpu_driver(driver):
            continue
        for d in spec.get("devices") or []:
            index = _attr(d, "index")
            devices[(driver, pool, str(d.get("name", "")))] = (int(index) if index.isdigit() else None,
                                                               _attr(d, "uuid"))
    pods: dict[tuple[str, str, str], set[str]] = {}
    for obj in claims:
        c = claim_record(dict(obj))
        for dev in c.devices:
            if dev in devices:
                # A claim reserved for a pod the snapshot does not know (another node's, just made): by its UID
                # it is nobody here; unknown UIDs are left to the caller's unattributed count.
                pods.setdefault(dev, set()).update(pod_by_uid[u] for u in c.reserved_for if u in pod_by_uid)
    return [BoundGpu(index, uuid, "/".join(dev), frozenset(pods.get(dev, ())))
            for dev, (index, uuid) in sorted(devices.items())]


def read_bindings(reader: Any, node: str, pod_by_uid: Mapping[str, str]) -> GpuBindings:
    """What the live reader can say now: its Prometheus (`prom`) and its apiserver connection (`conn`)."""
    dcgm, dra = "", ""
    uuids: dict[int, str] = {}
    by_index: dict[int, set[str]] = {}
    prom = getattr(reader, "prom", None)
    if prom is None:
        dcgm = "no metrics source (--prometheus not given)"
    else:
        try:
            escaped = node.replace("\\", "\\\\").replace('"', '\\"')
            for label in prom.host_labels:
                uuids, by_index = dcgm_gpus(prom.query(f'{UTIL}{{{label}="{escaped}"}}'))
                if uuids:
                    break
            if not uuids:
                dcgm = f"no {UTIL} series for the node"
            elif not any(by_index.values()):
                dcgm = "its DCGM series name no pod (dcgm-exporter's pod mapping is off, or nothing holds a GPU)"
        except BackendError as exc:
            dcgm = f"metrics: {error_line(exc)}"
    dra_list: list[BoundGpu] = []
    conn = getattr(reader, "conn", None)
    if conn is None:
        dra = "no API connection"
    else:
        try:
            slices = conn.request("GET", path_of(DRA_GROUP, DRA_VERSION, "resourceslices"),
                                  {"fieldSelector": f"spec.nodeName={node}"}).get("items") or []
            claims = conn.request("GET", path_of(DRA_GROUP, DRA_VERSION, "resourceclaims")).get("items") or [] \
                if slices else []
            dra_list = dra_gpus(slices, claims, pod_by_uid)
        except ApiError as exc:
            if exc.status != 404:  # 404: the cluster serves no resource.k8s.io/v1, so no DRA device is here
                dra = f"ResourceClaims: {error_line(exc)}"
        except BackendError as exc:
            dra = f"ResourceClaims: {error_line(exc)}"
    return GpuBindings(_merge(uuids, by_index, dra_list), dcgm, dra, bool(dra_list))


def _merge(uuids: Mapping[int, str], by_index: Mapping[int, set[str]], dra: list[BoundGpu]) -> tuple[BoundGpu, ...]:
    """One row per GPU: a DRA device and DCGM's GPU of the same UUID (else index) are one."""
    out: list[BoundGpu] = []
    seen: set[int] = set()
    for d in dra:
        index = d.index
        if d.uuid:
            index = next((i for i, u in uuids.items() if u == d.uuid), index)
        pods = set(d.pods) | (by_index.get(index, set()) if index is not None else set())
        if index is not None:
            seen.add(index)
        out.append(BoundGpu(index, d.uuid or uuids.get(index, "") if index is not None else d.uuid, d.device,
                            frozenset(pods)))
    out += [BoundGpu(i, uuids.get(i, ""), "", frozenset(by_index.get(i, ()))) for i in sorted(uuids) if i not in seen]
    return tuple(out)
