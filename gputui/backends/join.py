"""Kubernetes records + Prometheus samples -> one ClusterSnapshot. No I/O.

Services are found two ways: each traffic route is a service whose backends
are its versions; GPU workloads no route covers are grouped by their
service label, one version per workload. A Joiner keeps its last result so
that a refresh where only metrics moved rebuilds only what they touch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from gputui.backends.kube_dra import ClaimRecord, DraView, SliceRecord, device_taint_conditions, dra_view
from gputui.gpu_resources import physical_gpus
from gputui.backends.kube_objects import NodeRecord, PodRecord, RouteRecord, ServiceRecord, SubsetRule, WorkloadRecord
from gputui.model import UpgradePolicy, SESSION_SIGNAL_LABEL, Budget, Gpu, GpuSummary, Health, InferencePod, InferenceService, Node, Rollout, ServiceVersion, selector_matches
from gputui.snapshot import ClusterSnapshot, PodIndexes, SourceStatus, pod_indexes
from gputui.settings import DEFAULT_SERVICE_LABELS, DEFAULT_VERSION_LABELS


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
    # Live requests per (namespace, pod): (running, waiting), either None when that gauge is absent,
    # UNREADABLE when NaN. A key with (None, None) is a pod whose series vanished or could not be read:
    # it had a session signal, so its count is unknown, never zero.
    sessions: Mapping[tuple[str, str], tuple[int | None, int | None]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class KubeState:
    nodes: tuple[NodeRecord, ...] = ()
    pods: tuple[PodRecord, ...] = ()
    workloads: tuple[WorkloadRecord, ...] = ()
    budgets: tuple[Budget, ...] = ()
    services: tuple[ServiceRecord, ...] = ()
    routes: tuple[RouteRecord, ...] = ()
    subset_rules: tuple[SubsetRule, ...] = ()  # Istio DestinationRules, when the cluster serves them
    pools: tuple[ServiceRecord, ...] = ()  # InferencePools, when the cluster serves them
    resource_slices: tuple[SliceRecord, ...] = ()  # DRA, when the cluster serves resource.k8s.io
    resource_claims: tuple[ClaimRecord, ...] = ()
    upgrade_policies: tuple[UpgradePolicy, ...] = ()  # the GPU Operator's ClusterPolicies (one, as a rule)


def _first(labels: Mapping[str, str], keys: Iterable[str]) -> str:
    return next((labels[k] for k in keys if labels.get(k)), "")


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return selector_matches(selector, labels, empty_matches=False)  # a Service without a selector has no pods


def _health(code: int | None) -> Health:
    if code is None:
        return Health.UNKNOWN
    return Health.PASS if code == 0 else Health.WARN if code < 20 else Health.FAIL


def _gpus(node: NodeRecord, samples: Iterable[GpuSample]) -> tuple[Gpu, ...]:
    out = []
    for s in samples:
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
    return _gpus(node, sorted((s for s in metrics.gpus.values() if s.host == node.name), key=lambda s: s.index))


def _summary(node: NodeRecord, summary: GpuSummary | None) -> GpuSummary | None:
    if summary is None or summary.mem_total_mib is not None or not node.gpu_memory_mib:
        return summary
    # As per GPU: the card size from the node label beats used + free.
    return GpuSummary(summary.count, summary.util_mean, summary.mem_used_mib,
                      float(node.gpu_memory_mib * summary.count), summary.temp_max, summary.power_w)


def _versions_for_route(
    route: RouteRecord, services: Mapping[tuple[str, str], ServiceRecord], workloads: list[WorkloadRecord],
    version_labels: tuple[str, ...], subsets: Mapping[tuple[str, str], Mapping[str, Mapping[str, str]]],
    pools: Mapping[tuple[str, str], ServiceRecord] | None = None,
) -> list[tuple[ServiceVersion, Mapping[str, str]]]:
    """Each backend of the route, with the pod selector that finds its pods (a Service's or an
    InferencePool's)."""
    out: list[tuple[ServiceVersion, Mapping[str, str]]] = []
    for backend in route.backends:
        svc = ((pools or {}) if backend.pool else services).get((route.namespace, backend.service))
        selector: dict[str, str] = dict(svc.selector) if svc else {}
        if backend.subset:
            # An Istio subset selects the labels its DestinationRule gives it, on top of the host's
            # selector; without a rule in sight, Istio's convention: the subset is the version label.
            labels = subsets.get((route.namespace, backend.service), {}).get(backend.subset)
            selector.update(labels if labels is not None else {"version": backend.subset})
        workload = next(
            (w for w in workloads if w.namespace == route.namespace and _selects(selector, w.template_labels)), None,
        )
        name = backend.subset or (workload and _first(workload.template_labels, version_labels)) or backend.service
        out.append((
            ServiceVersion(
                name=name, weight=backend.weight,
                rollout=workload.rollout if workload else Rollout(),
                backend=backend.service, workload=workload.name if workload else "", pool=backend.pool,
            ),
            selector,
        ))
    return out


class _Identities:
    """Which service and version a pod belongs to: selectors indexed by one of their labels,
    so a pod is checked against the few selectors that could match, not all of them."""

    def __init__(self, entries: list[tuple[str, Mapping[str, str], str, str]]) -> None:
        self.entries = entries  # namespace, selector, service, version; the first match wins
        self.index: dict[tuple[str, str, str], list[int]] = {}
        for i, (ns, selector, _svc, _ver) in enumerate(entries):
            if selector:  # an empty selector selects nothing
                key, value = next(iter(selector.items()))
                self.index.setdefault((ns, key, value), []).append(i)

    def find(self, pod: PodRecord) -> tuple[str, str] | None:
        candidates: set[int] = set()
        for key, value in pod.labels.items():
            hits = self.index.get((pod.namespace, key, value))
            if hits:
                candidates.update(hits)
        for i in sorted(candidates):
            _ns, selector, service, version = self.entries[i]
            if _selects(selector, pod.labels):
                return service, version
        return None


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


class Joiner:
    """The join, remembering its last result: a refresh rejoins only what changed.

    Cache records are immutable and replaced on every change, so identity says
    "unchanged". Services and pod identities are rebuilt only when a workload,
    Service or route changed; a node or pod whose record and metrics are both
    unchanged keeps its object from the previous snapshot.
    """

    def __init__(self, service_labels: Iterable[str] = DEFAULT_SERVICE_LABELS,
                 version_labels: Iterable[str] = DEFAULT_VERSION_LABELS) -> None:
        self.service_labels = tuple(service_labels)
        self.version_labels = tuple(version_labels)
        self._service_inputs: tuple[tuple, ...] | None = None
        self._services: tuple[InferenceService, ...] = ()
        self._identities = _Identities([])
        # Keyed by id(record); the record is kept too, so an id is never reused while it is cached.
        # Plain dicts of existing objects, no tuple per entry: a refresh then allocates little for the
        # garbage collector to scan, which at 10,000 nodes costs more than the join itself.
        self._node_records: dict[int, NodeRecord] = {}
        self._node_metrics: dict[int, GpuSummary | None] = {}
        self._node_samples: dict[int, tuple[GpuSample, ...]] = {}  # only nodes with per-GPU samples
        self._nodes: dict[int, Node] = {}
        self._pod_records: dict[int, PodRecord] = {}
        self._pods: dict[int, InferencePod] = {}
        # The inputs of the last node and pod joins, and their results: a quiet refresh hands over the
        # same tuples and maps, and gets the same tuples back without a walk over the fleet.
        self._node_inputs: tuple = ()
        self._node_result: tuple[tuple[Node, ...], frozenset[str]] = ((), frozenset())
        self._pod_inputs: tuple = ()
        self._pod_result: tuple[InferencePod, ...] = ()
        self._dra_inputs: tuple = ()
        self._dra: DraView = dra_view((), ())
        # The pod indexes of _pod_result, kept while the pods tuple is the same (a quiet refresh reuses them).
        self._indexes: tuple[tuple[InferencePod, ...], PodIndexes] = ((), ({}, {}))

    def join(
        self,
        state: KubeState,
        metrics: Metrics | None,
        *,
        now: float,
        context: str,
        sources: tuple[SourceStatus, ...],
    ) -> ClusterSnapshot:
        inputs = (state.workloads, state.services, state.routes, state.subset_rules, state.pools)
        if self._service_inputs is None or not all(map(_same, inputs, self._service_inputs)):
            self._services, self._identities = self._join_services(state)
            self._service_inputs = inputs
            self._pod_records, self._pods = {}, {}  # pod identities depend on the services
            self._pod_inputs = ()
        if not _same((state.resource_slices, state.resource_claims), self._dra_inputs):
            self._dra_inputs = (state.resource_slices, state.resource_claims)
            self._dra = dra_view(state.resource_slices, state.resource_claims)
        dra = self._dra
        node_inputs = (state.nodes, metrics.nodes if metrics else None, metrics.gpus if metrics else None, dra)
        if not _same(node_inputs, self._node_inputs):
            gpu_nodes = sorted((n for n in state.nodes if n.is_gpu_node or n.name in dra.capacity),
                               key=lambda n: n.name)
            self._node_result = (self._join_nodes(gpu_nodes, metrics, dra), frozenset(n.name for n in gpu_nodes))
            self._node_inputs = node_inputs
        nodes, node_names = self._node_result
        pod_inputs = (state.pods, node_names, metrics.sessions if metrics else None, dra)
        if not _same(pod_inputs, self._pod_inputs):
            self._pod_result = self._join_pods(state.pods, node_names, metrics)
            self._pod_inputs = pod_inputs
        if self._indexes[0] is not self._pod_result:  # the pods moved: index them once, here
            self._indexes = (self._pod_result, pod_indexes(self._pod_result))
        return ClusterSnapshot(
            taken_at=now, context=context, nodes=nodes, pods=self._pod_result,
            services=self._services, budgets=state.budgets, sources=sources, indexes=self._indexes[1],
            upgrade_policy=state.upgrade_policies[0] if state.upgrade_policies else None,
        )

    def with_claims(self, record: PodRecord) -> PodRecord:
        """The pod with its DRA devices among its GPUs: they are in no container's limits."""
        claimed = self._dra.pod_units.get(record.uid)
        if not claimed:
            return record
        return replace(record, gpu_units={**record.gpu_units, **claimed},
                       gpu_request=record.gpu_request + sum(claimed.values()))

    def identity(self, p: PodRecord) -> tuple[str, str]:
        """The service and version the last join gave this record ("" when it has not seen it)."""
        pod = self._pods.get(id(p)) if self._pod_records.get(id(p)) is p else None
        return (pod.service, pod.version) if pod is not None else ("", "")

    def _join_services(self, state: KubeState) -> tuple[tuple[InferenceService, ...], _Identities]:
        """Services from routes, then from GPU workloads no route covers."""
        services_by_key = {(s.namespace, s.name): s for s in state.services}
        pools_by_key = {(p.namespace, p.name): p for p in state.pools}
        subsets = {(r.namespace, r.host): r.subsets for r in state.subset_rules}
        workloads = list(state.workloads)
        inference: list[InferenceService] = []
        pod_identity: list[tuple[str, Mapping[str, str], str, str]] = []  # ns, selector, service, version
        covered: set[tuple[str, str]] = set()
        # A route an Argo Rollout drives is that Rollout's: its controller sets the weights, and gputui shows
        # (and acts on) the Rollout, with the route's backends telling its stable pods from its canary's.
        driven = {(w.namespace, r): w for w in workloads if w.kind == "Rollout" for r in w.routes}
        route_weights: dict[tuple[str, str], dict[str, int]] = {}
        for route in sorted(state.routes, key=lambda r: (r.namespace, r.name)):
            routed = _versions_for_route(route, services_by_key, workloads, self.version_labels, subsets, pools_by_key)
            if not routed:
                continue
            owner = driven.get((route.namespace, route.name))
            if owner is not None:
                service = self._service_name(owner)
                for (routed_version, selector), backend in zip(routed, route.backends):
                    role = owner.roles.get(backend.subset or backend.service)
                    if role:
                        pod_identity.append((route.namespace, selector, service, role))
                        if routed_version.weight is not None:
                            route_weights.setdefault((owner.namespace, owner.name), {})[role] = routed_version.weight
                continue
            inference.append(InferenceService(route.namespace, route.name, tuple(v for v, _ in routed),
                                              route.kind, route.name))
            for routed_version, selector in routed:
                pod_identity.append((route.namespace, selector, route.name, routed_version.name))
                if routed_version.workload:
                    covered.add((route.namespace, routed_version.workload))
        grouped: dict[tuple[str, str], list[ServiceVersion]] = {}
        for w in sorted(workloads, key=lambda w: (w.namespace, w.name)):
            if w.gpu_request <= 0 or (w.namespace, w.name) in covered:
                continue
            service = self._service_name(w)
            weights = w.canary_weights or route_weights.get((w.namespace, w.name), {})
            if w.kind == "Rollout" and weights:
                for role, weight in weights.items():
                    grouped.setdefault((w.namespace, service), []).append(
                        ServiceVersion(role, weight, w.rollout, workload=w.name))
                pod_identity.append((w.namespace, w.template_labels, service, ""))
                continue
            version = _first(w.template_labels, self.version_labels) or w.name
            grouped.setdefault((w.namespace, service), []).append(
                ServiceVersion(version, None, w.rollout, workload=w.name))
            pod_identity.append((w.namespace, w.template_labels, service, version))
        for (ns, name), versions in grouped.items():
            kind = "Rollout" if any(v.weight is not None for v in versions) else ""
            inference.append(InferenceService(ns, name, tuple(versions), kind, name if kind else ""))
        return tuple(inference), _Identities(pod_identity)

    def _service_name(self, w: WorkloadRecord) -> str:
        return _first(w.template_labels, self.service_labels) or _first(w.labels, self.service_labels) or w.name

    def _join_nodes(self, gpu_nodes: list[NodeRecord], metrics: Metrics | None, dra: DraView) -> tuple[Node, ...]:
        by_host: dict[str, list[GpuSample]] = {}
        summaries: Mapping[str, GpuSummary] = {}
        if metrics is not None:
            summaries = metrics.nodes
            for sample in metrics.gpus.values():
                by_host.setdefault(sample.host, []).append(sample)
        old_records, old_metrics, old_samples, old_nodes = (
            self._node_records, self._node_metrics, self._node_samples, self._nodes)
        records: dict[int, NodeRecord] = {}
        node_metrics: dict[int, GpuSummary | None] = {}
        node_samples: dict[int, tuple[GpuSample, ...]] = {}
        nodes: dict[int, Node] = {}
        for n in gpu_nodes:
            key = id(n)
            summary = summaries.get(n.name)
            group = by_host.get(n.name)  # in fleet mode only GPUs with a problem: mostly none
            samples = tuple(sorted(group, key=lambda s: s.index)) if group else ()
            claimed = dra.resources(n.name)
            resources = n.gpu_resources + claimed if claimed else n.gpu_resources  # the same tuple when no DRA
            if old_records.get(key) is n and old_metrics.get(key) == summary and old_samples.get(key, ()) == samples \
                    and old_nodes[key].gpu_resources == resources:
                node = old_nodes[key]
            else:
                taints = dra.taints.get(n.name, ())
                node = Node(
                    name=n.name, ready=n.ready, unschedulable=n.unschedulable, gpu_product=n.gpu_product,
                    gpu_capacity=sum(r.capacity for r in resources),
                    gpu_allocatable=sum(r.allocatable for r in resources),
                    driver_version=n.driver_version, cuda_version=n.cuda_version, upgrade_state=n.upgrade_state,
                    gpu_memory_mib=n.gpu_memory_mib, conditions=n.conditions + device_taint_conditions(taints),
                    gpus=_gpus(n, samples), labels=n.labels, annotations=n.annotations, summary=_summary(n, summary),
                    gpu_resources=resources, node_info=n.node_info,
                    gpu_count=physical_gpus(n.labels, n.gpu_resources, sum(r.capacity for r in claimed)),
                )
            records[key], node_metrics[key], nodes[key] = n, summary, node
            if samples:
                node_samples[key] = samples
        self._node_records, self._node_metrics, self._node_samples, self._nodes = (
            records, node_metrics, node_samples, nodes)
        return tuple(nodes.values())

    def _join_pods(self, pods: Iterable[PodRecord], node_names: frozenset[str], metrics: Metrics | None,
                   ) -> tuple[InferencePod, ...]:
        sessions = metrics.sessions if metrics is not None else {}
        old_records, old_pods = self._pod_records, self._pods
        records: dict[int, PodRecord] = {}
        out: dict[int, InferencePod] = {}
        claimed_by = self._dra.pod_units
        for record in pods:
            claimed = claimed_by.get(record.uid)
            if record.node not in node_names and not (not record.node and (record.gpu_request > 0 or claimed)):
                continue  # only what runs on GPU nodes, and GPU pods still waiting for one
            key = id(record)
            counts = sessions.get((record.namespace, record.name))
            running, waiting = counts if counts is not None else (None, None)
            pod = old_pods.get(key) if old_records.get(key) is record else None
            if pod is not None and (pod.gpu_units is not record.gpu_units if not claimed else
                                    len(pod.gpu_units) != len(record.gpu_units) + len(claimed)
                                    or any(pod.gpu_units.get(k) != v for k, v in claimed.items())):
                pod = None  # its DRA devices moved (claimed, released, or other devices)
            if pod is not None:
                # Same record, same services, same DRA devices: only the session counts may have moved.
                if pod.sessions_running != running or pod.sessions_waiting != waiting \
                        or (counts is not None and not pod.session_signal):
                    pod = inference_pod(self.with_claims(record), pod.service, pod.version, running, waiting,
                                        counts is not None)
            else:
                p = self.with_claims(record)  # keyed and cached by the record as read
                found = self._identities.find(p)
                service, version = found if found else ("", "")
                if found and not version:
                    version = _first(p.labels, self.version_labels)
                pod = inference_pod(p, service, version, running, waiting, counts is not None)
            records[key], out[key] = record, pod
        self._pod_records, self._pods = records, out
        return tuple(out.values())


def session_signal(labels: Mapping[str, str], service: str, has_series: bool) -> bool:
    """Whether a pod is an inference pod, whose missing session count is *unknown* rather than absent:
    its label says so, or it belongs to an inference service, or a session series names it (or named
    it earlier: the reader keeps a vanished series' key with no counts)."""
    override = labels.get(SESSION_SIGNAL_LABEL, "").strip().lower()
    if override in ("true", "false"):
        return override == "true"
    return bool(service) or has_series


def inference_pod(p: PodRecord, service: str, version: str, running: int | None, waiting: int | None,
                  has_series: bool = False) -> InferencePod:
    return InferencePod(
        namespace=p.namespace, name=p.name, uid=p.uid, node=p.node, phase=p.phase, ready=p.ready,
        gpu_request=p.gpu_request, gpu_units=p.gpu_units, images=p.images, service=service, version=version, restarts=p.restarts,
        deleting=p.deleting, owner_kind=p.owner_kind, labels=p.labels, has_emptydir=p.has_emptydir,
        mirror=p.mirror, sessions_running=running, sessions_waiting=waiting,
        session_signal=session_signal(p.labels, service, has_series), pending_reason=p.pending_reason,
        termination_grace_s=p.grace_seconds, prestop_sleep_s=p.prestop_sleep_s, probes=p.probes,
        gpus_unrequested=p.gpus_unrequested,
    )


def join(
    state: KubeState,
    metrics: Metrics | None,
    *,
    now: float,
    context: str,
    sources: tuple[SourceStatus, ...],
    service_labels: Iterable[str] = DEFAULT_SERVICE_LABELS,
    version_labels: Iterable[str] = DEFAULT_VERSION_LABELS,
) -> ClusterSnapshot:
    """One join from scratch (a Joiner that remembers nothing)."""
    return Joiner(service_labels, version_labels).join(state, metrics, now=now, context=context, sources=sources)
