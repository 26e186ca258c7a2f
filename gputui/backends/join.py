"""Kubernetes records + Prometheus samples -> one ClusterSnapshot. No I/O.

Services are found two ways: each traffic route is a service whose backends
are its versions; GPU workloads no route covers are grouped by their
service label, one version per workload. A Joiner keeps its last result so
that a refresh where only metrics moved rebuilds only what they touch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gputui.backends.join_fleet import GpuSample, NodeJoin, PodJoin, gpus_of, with_claims
from gputui.backends.kube_dra import ClaimRecord, DraView, SliceRecord, dra_view
from gputui.backends.kube_objects import NodeRecord, PodRecord, RouteRecord, ServiceRecord, SubsetRule, WorkloadRecord
from gputui.base.moved import same
from gputui.settings import DEFAULT_SERVICE_LABELS, DEFAULT_VERSION_LABELS
from gputui.snapshot import ClusterSnapshot, NodesDerived, SourceStatus
from gputui.vocabulary.disruptions import ActorObjects
from gputui.vocabulary.label_selectors import selector_matches
from gputui.vocabulary.model import (
    Budget,
    Gpu,
    GpuSummary,
    InferenceService,
    PodSelector,
    Rollout,
    ServiceVersion,
    UpgradePolicy,
)
from gputui.vocabulary.sessions import SessionCounts


@dataclass(frozen=True, slots=True)
class Metrics:
    gpus: Mapping[tuple[str, int], GpuSample] = field(default_factory=dict)
    # Fleet mode: per-node aggregates from Prometheus; `gpus` then holds only GPUs with a problem.
    nodes: Mapping[str, GpuSummary] = field(default_factory=dict)
    sessions: SessionCounts = field(default_factory=dict)  # the snapshot's session_counts (gputui.vocabulary.sessions)


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
    actors: ActorObjects | None = None  # NodeMaintenances, NodeClaims (gputui.backends.kube_actors), passed through


def _first(labels: Mapping[str, str], keys: Iterable[str]) -> str:
    return next((labels[k] for k in keys if labels.get(k)), "")


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return selector_matches(selector, labels, empty_matches=False)  # a Service without a selector has no pods


def join_gpus(node: NodeRecord, metrics: Metrics) -> tuple[Gpu, ...]:
    """One node's GPUs from a per-GPU fetch (the detail screen of a summarised fleet)."""
    return gpus_of(node, sorted((s for s in metrics.gpus.values() if s.host == node.name), key=lambda s: s.index))


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


def _selectors(state: KubeState) -> tuple[PodSelector, ...]:
    """Who selects pods: the Services and InferencePools traffic reaches them through, the workloads that own
    them (gputui.policy.rotation)."""
    paths = [PodSelector("Service", s.namespace, s.name, s.selector) for s in state.services] + \
        [PodSelector("InferencePool", p.namespace, p.name, p.selector) for p in state.pools]
    owners = [PodSelector(w.kind, w.namespace, w.name, w.selector, w.selector_keys) for w in state.workloads]
    return tuple(paths + owners)


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
        self._dra_inputs: tuple = ()
        self._selector_inputs: tuple = ()
        self._selectors: tuple[PodSelector, ...] = ()
        self._dra: DraView = dra_view((), ())
        self._nodes = NodeJoin()
        self._pods = PodJoin(self._identify)
        self._nodes_derived: NodesDerived | None = None

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
        if self._service_inputs is None or not all(map(same, inputs, self._service_inputs)):
            self._services, self._identities = self._join_services(state)
            self._service_inputs = inputs
            self._pods.reset()  # pod identities depend on the services
        if not same((state.resource_slices, state.resource_claims), self._dra_inputs):
            self._dra_inputs = (state.resource_slices, state.resource_claims)
            self._dra = dra_view(state.resource_slices, state.resource_claims)
        if not same((state.services, state.pools, state.workloads), self._selector_inputs):
            self._selector_inputs = (state.services, state.pools, state.workloads)
            self._selectors = _selectors(state)
        nodes, node_names = self._nodes.join(state.nodes, metrics, self._dra)
        pods, indexes = self._pods.join(state.pods, node_names, self._dra)
        snapshot = ClusterSnapshot(
            taken_at=now, context=context, nodes=nodes, pods=pods,
            services=self._services, budgets=state.budgets, sources=sources, indexes=indexes,
            upgrade_policy=state.upgrade_policies[0] if state.upgrade_policies else None,
            session_counts=metrics.sessions if metrics is not None else {},
            summaries=metrics.nodes if metrics is not None else {},
            selectors=self._selectors, actors=state.actors, nodes_derived=self._nodes_derived,
        )
        self._nodes_derived = snapshot.nodes_derived  # the next snapshot's, while no node moves
        return snapshot

    def with_claims(self, record: PodRecord) -> PodRecord:
        """The pod with its DRA devices among its GPUs: they are in no container's limits."""
        return with_claims(record, self._dra)

    def identity(self, p: PodRecord) -> tuple[str, str]:
        """The service and version the last join gave this record ("" when it has not seen it)."""
        pod = self._pods.cached(p)
        return (pod.service, pod.version) if pod is not None else ("", "")

    def _identify(self, p: PodRecord) -> tuple[str, str]:
        found = self._identities.find(p)
        service, version = found if found else ("", "")
        if found and not version:
            version = _first(p.labels, self.version_labels)
        return service, version

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
                for (routed_version, selector), backend in zip(routed, route.backends, strict=True):
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
