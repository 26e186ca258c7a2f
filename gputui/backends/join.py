"""Kubernetes records + Prometheus samples -> one ClusterSnapshot. Pure: no I/O.

Services are found two ways: each traffic route is a service whose backends
are its versions; GPU workloads no route covers are grouped by their
service label, one version per workload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from gputui.backends.kube_objects import NodeRecord, PodRecord, RouteRecord, ServiceRecord, WorkloadRecord
from gputui.model import (
    Budget,
    ClusterSnapshot,
    Gpu,
    GpuSummary,
    Health,
    InferencePod,
    InferenceService,
    Node,
    Rollout,
    ServiceVersion,
    SourceStatus,
)

# Where a pod or workload says which service and version it is (first found wins).
SERVICE_LABELS = ("app.kubernetes.io/name", "serving.kserve.io/inferenceservice", "llm-d.ai/model", "app")
VERSION_LABELS = ("app.kubernetes.io/version", "version", "serving.kserve.io/revision")


@dataclass(frozen=True, slots=True)
class GpuSample:
    host: str
    index: int
    uuid: str = ""
    util: float | None = None
    fb_used: float | None = None
    fb_free: float | None = None
    fb_reserved: float | None = None
    temp: float | None = None
    power: float | None = None
    xid: int = 0
    health: int | None = None  # DCGM health: 0 pass, 10 warn, 20 fail


@dataclass(frozen=True, slots=True)
class Metrics:
    gpus: Mapping[tuple[str, int], GpuSample] = field(default_factory=dict)
    # Fleet mode: per-node aggregates from Prometheus; `gpus` then holds only GPUs with a problem.
    nodes: Mapping[str, GpuSummary] = field(default_factory=dict)
    sessions: Mapping[tuple[str, str], tuple[int | None, int | None]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class KubeState:
    nodes: tuple[NodeRecord, ...] = ()
    pods: tuple[PodRecord, ...] = ()
    workloads: tuple[WorkloadRecord, ...] = ()
    budgets: tuple[Budget, ...] = ()
    services: tuple[ServiceRecord, ...] = ()
    routes: tuple[RouteRecord, ...] = ()


def _first(labels: Mapping[str, str], keys: Iterable[str]) -> str:
    return next((labels[k] for k in keys if labels.get(k)), "")


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _health(code: int | None) -> Health:
    if code is None:
        return Health.UNKNOWN
    return Health.PASS if code == 0 else Health.WARN if code < 20 else Health.FAIL


def _gpus(node: NodeRecord, metrics: Metrics | None, by_host: Mapping[str, list[GpuSample]]) -> tuple[Gpu, ...]:
    if metrics is None:
        return ()
    out = []
    for s in sorted(by_host.get(node.name, ()), key=lambda s: s.index):
        # The node label is the card's size; used + free misses the driver's reserve.
        total = None
        if node.gpu_memory_mib:
            total = float(node.gpu_memory_mib)
        elif s.fb_used is not None and s.fb_free is not None:
            total = s.fb_used + s.fb_free + (s.fb_reserved or 0.0)
        out.append(Gpu(
            index=s.index, uuid=s.uuid, util_pct=s.util, mem_used_mib=s.fb_used, mem_total_mib=total,
            temp_c=s.temp, power_w=s.power, xid=s.xid,
            health=_health(s.health) if s.health is not None else (Health.PASS if s.util is not None else Health.UNKNOWN),
        ))
    return tuple(out)


def join_gpus(node: NodeRecord, metrics: Metrics) -> tuple[Gpu, ...]:
    """One node's GPUs from a per-GPU fetch (the detail screen of a summarised fleet)."""
    by_host: dict[str, list[GpuSample]] = {}
    for sample in metrics.gpus.values():
        by_host.setdefault(sample.host, []).append(sample)
    return _gpus(node, metrics, by_host)


def _summary(node: NodeRecord, metrics: Metrics | None) -> GpuSummary | None:
    summary = metrics.nodes.get(node.name) if metrics is not None else None
    if summary is None or summary.mem_total_mib is not None or not node.gpu_memory_mib:
        return summary
    # As per GPU: the card size from the node label beats used + free.
    from dataclasses import replace

    return replace(summary, mem_total_mib=float(node.gpu_memory_mib * summary.count))


def _versions_for_route(
    route: RouteRecord, services: Mapping[tuple[str, str], ServiceRecord], workloads: list[WorkloadRecord],
) -> list[tuple[ServiceVersion, Mapping[str, str]]]:
    """Each backend of the route, with the pod selector that finds its pods."""
    out = []
    for backend in route.backends:
        svc = services.get((route.namespace, backend.service))
        selector: dict[str, str] = dict(svc.selector) if svc else {}
        if backend.subset:  # Istio subsets select by version label on top of the host's selector
            selector.setdefault("version", backend.subset)
        workload = next(
            (w for w in workloads if w.namespace == route.namespace and _selects(selector, w.template_labels)), None,
        )
        name = backend.subset or (workload and _first(workload.template_labels, VERSION_LABELS)) or backend.service
        out.append((
            ServiceVersion(
                name=name, weight=backend.weight,
                rollout=workload.rollout if workload else Rollout(),
                backend=backend.service, workload=workload.name if workload else "",
            ),
            selector,
        ))
    return out


def join(
    state: KubeState,
    metrics: Metrics | None,
    *,
    now: float,
    context: str,
    sources: tuple[SourceStatus, ...],
) -> ClusterSnapshot:
    gpu_nodes = [n for n in state.nodes if n.is_gpu_node]
    node_names = {n.name for n in gpu_nodes}
    by_host: dict[str, list[GpuSample]] = {}
    if metrics is not None:
        for sample in metrics.gpus.values():
            by_host.setdefault(sample.host, []).append(sample)

    # Services from routes, then from GPU workloads no route covers.
    services_by_key = {(s.namespace, s.name): s for s in state.services}
    workloads = list(state.workloads)
    inference: list[InferenceService] = []
    pod_identity: list[tuple[str, Mapping[str, str], str, str]] = []  # ns, selector, service, version
    covered: set[tuple[str, str]] = set()
    for route in sorted(state.routes, key=lambda r: (r.namespace, r.name)):
        versions = _versions_for_route(route, services_by_key, workloads)
        if not versions:
            continue
        inference.append(InferenceService(route.namespace, route.name, tuple(v for v, _ in versions), route.kind, route.name))
        for version, selector in versions:
            pod_identity.append((route.namespace, selector, route.name, version.name))
            if version.workload:
                covered.add((route.namespace, version.workload))
    grouped: dict[tuple[str, str], list[ServiceVersion]] = {}
    for w in sorted(workloads, key=lambda w: (w.namespace, w.name)):
        if w.gpu_request <= 0 or (w.namespace, w.name) in covered:
            continue
        service = _first(w.template_labels, SERVICE_LABELS) or _first(w.labels, SERVICE_LABELS) or w.name
        if w.kind == "Rollout" and w.canary_weights:
            for role, weight in w.canary_weights.items():
                grouped.setdefault((w.namespace, service), []).append(
                    ServiceVersion(role, weight, w.rollout, workload=w.name))
            pod_identity.append((w.namespace, w.template_labels, service, ""))
            continue
        version = _first(w.template_labels, VERSION_LABELS) or w.name
        grouped.setdefault((w.namespace, service), []).append(ServiceVersion(version, None, w.rollout, workload=w.name))
        pod_identity.append((w.namespace, w.template_labels, service, version))
    for (ns, name), versions in grouped.items():
        kind = "Rollout" if any(v.weight is not None for v in versions) else ""
        inference.append(InferenceService(ns, name, tuple(versions), kind, name if kind else ""))

    sessions = metrics.sessions if metrics is not None else {}
    pods = []
    for p in state.pods:
        if p.node not in node_names and not (not p.node and p.gpu_request > 0):
            continue  # only what runs on GPU nodes, and GPU pods still waiting for one
        service = version = ""
        for ns, selector, svc_name, ver in pod_identity:
            if ns == p.namespace and _selects(selector, p.labels):
                service, version = svc_name, ver or _first(p.labels, VERSION_LABELS)
                break
        running, waiting = sessions.get((p.namespace, p.name), (None, None))
        pods.append(InferencePod(
            namespace=p.namespace, name=p.name, uid=p.uid, node=p.node, phase=p.phase, ready=p.ready,
            gpu_request=p.gpu_request, service=service, version=version, restarts=p.restarts,
            deleting=p.deleting, owner_kind=p.owner_kind, labels=p.labels, has_emptydir=p.has_emptydir,
            mirror=p.mirror, sessions_running=running, sessions_waiting=waiting,
            pending_reason=p.pending_reason,
        ))

    nodes = tuple(
        Node(
            name=n.name, ready=n.ready, unschedulable=n.unschedulable, gpu_product=n.gpu_product,
            gpu_capacity=n.gpu_capacity, gpu_allocatable=n.gpu_allocatable, driver_version=n.driver_version,
            cuda_version=n.cuda_version, upgrade_state=n.upgrade_state, gpu_memory_mib=n.gpu_memory_mib,
            conditions=n.conditions, gpus=_gpus(n, metrics, by_host), labels=n.labels, annotations=n.annotations,
            summary=_summary(n, metrics),
        )
        for n in sorted(gpu_nodes, key=lambda n: n.name)
    )
    return ClusterSnapshot(
        taken_at=now, context=context, nodes=nodes, pods=tuple(pods), services=tuple(inference),
        budgets=state.budgets, sources=sources,
    )
