"""Raw Kubernetes JSON -> small, immutable records (what the join needs and no more).

Kept small on purpose: at 10,000 nodes the caches hold every pod, and the full
objects would cost gigabytes.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from sys import intern
from typing import Any

from gputui.backends.kube_scheduling import node_scheduling, pod_scheduling
from gputui.policy.upgrades import STATE_LABEL  # the GPU Operator's upgrade state label: its one home
from gputui.vocabulary.disruptions import ACTOR_ANNOTATIONS, LIFECYCLE_TYPES
from gputui.vocabulary.gpu_resources import GpuResource, node_resources, quantity, request_units
from gputui.vocabulary.label_selectors import Requirement
from gputui.vocabulary.model import Budget, Condition, PodProbes, Rollout
from gputui.vocabulary.router_kinds import (  # noqa: F401 - a route is read by its kind's row (RouterKind.record)
    POOL_GROUP,
    ROUTER_KINDS,
    RouteBackend,
    RouteRecord,
)
from gputui.vocabulary.scheduling import NodeScheduling, PodScheduling

# Labels that name a node's GPUs (GPU Feature Discovery); older spellings as fallbacks.
PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"
DRIVER_LABELS = ("nvidia.com/cuda.driver-version.full",)
CUDA_LABELS = ("nvidia.com/cuda.runtime-version.full",)


def _labels(raw: Any) -> dict[str, str]:
    """Labels with their strings interned: 10,000 nodes carry the same few dozen keys and mostly
    the same values, so each record points at one shared copy instead of its own."""
    return {intern(str(k)): intern(str(v)) for k, v in (raw or {}).items()}


def rfc3339(text: object) -> float | None:
    """A Kubernetes time ("2026-12-03T22:28:01Z", metav1.Time; fractions tolerated, as protojson writes them) ->
    epoch seconds; None when absent or not one."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return float(calendar.timegm(time.strptime(text.split(".")[0].rstrip("Z") + "Z", "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


# Nodes report the same conditions with the same words: records share them (bounded, in case they do not). Their
# times are left out (they differ per node), but for the lifecycle conditions, whose "since" says how long a
# node has been draining or drained (KEP-5683): few nodes carry them.
_CONDITIONS: dict[tuple[tuple[str, str, str, str, str], ...], tuple[Condition, ...]] = {}
_CONDITIONS_MAX = 4096


def _conditions(raw: Any) -> tuple[Condition, ...]:
    key = tuple(
        (str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason", "") or ""),
         str(c.get("message", "") or "")[:200],
         str(c.get("lastTransitionTime") or "") if c.get("type") in LIFECYCLE_TYPES else "")
        for c in raw or []
    )
    shared = _CONDITIONS.get(key)
    if shared is None:
        if len(_CONDITIONS) >= _CONDITIONS_MAX:
            _CONDITIONS.clear()
        shared = _CONDITIONS[key] = tuple(Condition(t, st, r, m, rfc3339(since)) for t, st, r, m, since in key)
    return shared


def _driver(labels: Mapping[str, str]) -> str:
    for key in DRIVER_LABELS:
        if labels.get(key):
            return labels[key]
    parts = [labels.get(f"nvidia.com/cuda.driver.{p}") for p in ("major", "minor", "rev")]
    return ".".join(p for p in parts if p) if parts[0] else ""


def _cuda(labels: Mapping[str, str]) -> str:
    for key in CUDA_LABELS:
        if labels.get(key):
            return labels[key]
    major, minor = labels.get("nvidia.com/cuda.runtime.major"), labels.get("nvidia.com/cuda.runtime.minor")
    return f"{major}.{minor}" if major and minor else ""


NODE_INFO_KEYS = ("kubeletVersion", "containerRuntimeVersion", "kernelVersion", "osImage")


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    unschedulable: bool
    ready: bool
    conditions: tuple[Condition, ...]
    gpu_capacity: int
    gpu_allocatable: int
    gpu_product: str
    gpu_memory_mib: int
    driver_version: str
    cuda_version: str
    upgrade_state: str
    gpu_resources: tuple[GpuResource, ...] = ()  # every GPU resource it advertises (capacity/allocatable: their sums)
    node_info: Mapping[str, str] = field(default_factory=dict)  # status.nodeInfo's versions (NODE_INFO_KEYS)
    scheduling: NodeScheduling | None = None  # taints and allocatable other than GPUs (shared: kube_scheduling)

    @property
    def is_gpu_node(self) -> bool:
        return self.gpu_capacity > 0 or self.labels.get("nvidia.com/gpu.present") == "true"


def node_record(obj: dict[str, Any]) -> NodeRecord:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels = _labels(meta.get("labels"))
    conditions = _conditions(status.get("conditions"))
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    # gputui's own and the disruption actors' (gputui.vocabulary.disruptions): the rest is dropped, 65,000 nodes.
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k.startswith("gputui.io/") or k in ACTOR_ANNOTATIONS}
    resources = node_resources(status.get("capacity") or {}, status.get("allocatable") or {}, labels)
    return NodeRecord(
        name=meta.get("name", ""), uid=meta.get("uid", ""), labels=labels, annotations=annotations,
        unschedulable=bool(spec.get("unschedulable")), ready=ready, conditions=conditions,
        gpu_capacity=sum(r.capacity for r in resources), gpu_allocatable=sum(r.allocatable for r in resources),
        gpu_resources=resources,
        node_info={k: intern(str(v)) for k, v in (status.get("nodeInfo") or {}).items() if k in NODE_INFO_KEYS and v},
        gpu_product=labels.get(PRODUCT_LABEL, ""), gpu_memory_mib=quantity(labels.get(MEMORY_LABEL)),
        driver_version=_driver(labels), cuda_version=_cuda(labels),
        upgrade_state=labels.get(STATE_LABEL, ""),
        scheduling=node_scheduling(spec, status.get("allocatable") or {}),
    )


@dataclass(frozen=True, slots=True)
class PodRecord:
    namespace: str
    name: str
    uid: str
    node: str
    phase: str
    ready: bool
    gpu_request: int
    labels: Mapping[str, str]
    owner_kind: str
    owner_name: str
    deleting: bool
    restarts: int
    has_emptydir: bool
    mirror: bool
    grace_seconds: int | None
    pending_reason: str = ""
    prestop_sleep_s: int = 0  # the longest preStop sleep of its containers (sleep action or `sleep N`)
    probes: PodProbes | None = None
    gpu_units: Mapping[str, int] = field(default_factory=dict)  # by resource name; gpu_request is their sum
    images: tuple[str, ...] = ()  # its containers' images (versions of engines and GPU Operator components)
    gpus_unrequested: bool = False  # a container sets NVIDIA_VISIBLE_DEVICES to GPUs, and the pod requests none
    scheduling: PodScheduling | None = None  # what the scheduler reads of its spec (shared: kube_scheduling)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _probe_window(probe: dict[str, Any]) -> int:
    """Seconds before a failing probe acts: its initial delay, then failureThreshold periods (the API's
    defaults: 0 s, 3, 10 s)."""
    def num(key: str, default: int) -> int:
        try:
            return int(probe.get(key, default))
        except (TypeError, ValueError):
            return default
    return num("initialDelaySeconds", 0) + num("failureThreshold", 3) * num("periodSeconds", 10)


def _probes(spec: dict[str, Any]) -> PodProbes:
    """Readiness, liveness and startup allowance over the containers (seed 001 §6.2, §10.1)."""
    containers = spec.get("containers") or []
    allowances = []
    for c in containers:
        if c.get("startupProbe"):  # liveness waits until the startup probe passes
            allowances.append(_probe_window(c["startupProbe"]))
        elif c.get("livenessProbe"):
            allowances.append(_probe_window(c["livenessProbe"]))
    return PodProbes(
        readiness=bool(containers) and all(c.get("readinessProbe") for c in containers),
        readiness_is_liveness=any(c.get("readinessProbe") and c.get("readinessProbe") == c.get("livenessProbe")
                                  for c in containers),
        startup_allowance_s=min(allowances) if allowances else None,
        memory_limited=bool(containers) and all(((c.get("resources") or {}).get("limits") or {}).get("memory")
                                                for c in containers),
    )


def _gpu_units(spec: dict[str, Any]) -> dict[str, int]:
    """GPU units by resource as the scheduler counts them: per resource, max(sum of containers, any init
    container)."""
    def of(container: dict[str, Any]) -> dict[str, int]:
        res = container.get("resources") or {}
        return request_units(res.get("requests") or {}, res.get("limits") or {})

    main: dict[str, int] = {}
    for c in spec.get("containers") or []:
        for name, n in of(c).items():
            main[name] = main.get(name, 0) + n
    for c in spec.get("initContainers") or []:
        for name, n in of(c).items():
            main[name] = max(main.get(name, 0), n)
    return main


def _gpu_request(spec: dict[str, Any]) -> int:
    return sum(_gpu_units(spec).values())


_SLEEP = re.compile(r"\bsleep\s+(\d{1,6})\b")


def _prestop_sleep(spec: dict[str, Any]) -> int:
    """Seconds a container's preStop hook sleeps before SIGTERM (Kubernetes' sleep action, or an exec of
    `sleep N`, the usual way to let endpoints catch up); the longest over the containers."""
    longest = 0
    for c in spec.get("containers") or []:
        hook = ((c.get("lifecycle") or {}).get("preStop")) or {}
        seconds = (hook.get("sleep") or {}).get("seconds")
        if seconds is None:
            m = _SLEEP.search(" ".join(str(a) for a in (hook.get("exec") or {}).get("command") or []))
            seconds = int(m.group(1)) if m else 0
        try:
            longest = max(longest, int(seconds))
        except (TypeError, ValueError):
            continue
    return longest

def pod_record(obj: dict[str, Any]) -> PodRecord:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None) or {}
    conditions = status.get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    pending = next(
        (c.get("message") or c.get("reason") or "" for c in conditions
         if c.get("type") == "PodScheduled" and c.get("status") == "False"), "",
    )
    units = _gpu_units(spec)
    return PodRecord(
        namespace=intern(meta.get("namespace", "")), name=meta.get("name", ""), uid=meta.get("uid", ""),
        node=intern(spec.get("nodeName") or ""), phase=intern(status.get("phase") or "Pending"), ready=ready,
        gpu_request=sum(units.values()), gpu_units=units, labels=_labels(meta.get("labels")),
        images=tuple(intern(str(c.get("image") or "")) for c in spec.get("containers") or []),
        owner_kind=intern(owner.get("kind", "")), owner_name=intern(owner.get("name", "")),
        deleting=bool(meta.get("deletionTimestamp")),
        restarts=sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []),
        has_emptydir=any("emptyDir" in v for v in spec.get("volumes") or []),
        mirror="kubernetes.io/config.mirror" in (meta.get("annotations") or {}),
        grace_seconds=spec.get("terminationGracePeriodSeconds"),
        pending_reason=str(pending)[:200], prestop_sleep_s=_prestop_sleep(spec), probes=_probes(spec),
        gpus_unrequested=not units and _sees_gpus(spec),
        scheduling=pod_scheduling(spec, meta.get("namespace", ""), meta.get("labels") or {}),
    )


def _sees_gpus(spec: dict[str, Any]) -> bool:
    """A container the NVIDIA runtime gives GPUs by environment (`all`, indices or UUIDs): without a resource
    request the scheduler and the device plugin know nothing of it, and it holds the driver open."""
    for c in spec.get("containers") or []:
        for env in c.get("env") or []:
            if isinstance(env, dict) and env.get("name") == "NVIDIA_VISIBLE_DEVICES":
                return str(env.get("value") or "").strip().lower() not in ("", "void", "none")
    return False


@dataclass(frozen=True, slots=True)
class WorkloadRecord:
    """A Deployment (or Argo Rollout): its template's labels and rollout status."""

    kind: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    template_labels: Mapping[str, str]
    gpu_request: int
    rollout: Rollout
    canary_weights: Mapping[str, int] = field(default_factory=dict)  # Argo: stable/canary
    routes: tuple[str, ...] = ()  # Argo: the routes its trafficRouting names (its controller owns their weights)
    roles: Mapping[str, str] = field(default_factory=dict)  # Argo: canary/stable Service or subset -> role
    selector: Mapping[str, str] = field(default_factory=dict)  # spec.selector.matchLabels: the pods it owns
    selector_keys: frozenset[str] = frozenset()  # every key spec.selector uses, matchExpressions' too


def deployment_record(obj: dict[str, Any]) -> WorkloadRecord:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    template = spec.get("template") or {}
    progressing: dict[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "Progressing"), {})
    rollout = Rollout(
        generation=int(meta.get("generation") or 0),
        observed_generation=int(status.get("observedGeneration") or 0),
        replicas_desired=int(spec.get("replicas", 1) or 0),
        replicas=int(status.get("replicas") or 0),
        updated=int(status.get("updatedReplicas") or 0),
        ready=int(status.get("readyReplicas") or 0),
        available=int(status.get("availableReplicas") or 0),
        progress_deadline_exceeded=progressing.get("reason") == "ProgressDeadlineExceeded",
        revision=(meta.get("annotations") or {}).get("deployment.kubernetes.io/revision", ""),
    )
    weights: dict[str, int] = {}
    routes: tuple[str, ...] = ()
    roles: dict[str, str] = {}
    if obj.get("kind") == "Rollout":
        canary = (status.get("canary") or {}).get("weights") or {}
        for role in ("stable", "canary"):
            if isinstance(canary.get(role), dict) and "weight" in canary[role]:
                weights[role] = int(canary[role]["weight"])
        routes, roles = _argo_routing(meta.get("name", ""), ((spec.get("strategy") or {}).get("canary") or {}))
    return WorkloadRecord(
        kind=obj.get("kind") or "Deployment", namespace=meta.get("namespace", ""), name=meta.get("name", ""),
        labels=dict(meta.get("labels") or {}),
        template_labels=dict((template.get("metadata") or {}).get("labels") or {}),
        gpu_request=_gpu_request(template.get("spec") or {}), rollout=rollout, canary_weights=weights,
        routes=routes, roles=roles, **_selector(spec.get("selector")),
    )


def _selector(raw: Any) -> dict[str, Any]:
    """A workload's label selector: its matchLabels, and every key it uses (a key only in matchExpressions
    still decides which pods it keeps)."""
    if not isinstance(raw, dict):
        return {}
    match = {str(k): str(v) for k, v in (raw.get("matchLabels") or {}).items()} \
        if isinstance(raw.get("matchLabels"), dict) else {}
    keys = set(match) | {str(e.get("key")) for e in raw.get("matchExpressions") or () if isinstance(e, dict)}
    return {"selector": match, "selector_keys": frozenset(keys)}


def _argo_routing(name: str, canary: Mapping[str, Any]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The routes a Rollout's canary drives (Istio VirtualServices, SMI TrafficSplit, the Gateway API plugin's
    HTTPRoutes) and which of their backends is which role: its canary/stable Services, or Istio subsets."""
    routing = canary.get("trafficRouting") or {}
    routes: list[str] = []
    istio = routing.get("istio") or {}
    routes += [v.get("name", "") for v in [istio.get("virtualService") or {}, *(istio.get("virtualServices") or [])]]
    if "smi" in routing:
        routes.append((routing.get("smi") or {}).get("trafficSplitName") or name)
    gateway = (routing.get("plugins") or {}).get("argoproj-labs/gatewayAPI") or {}
    routes += [gateway.get("httpRoute") or "", *((r or {}).get("name", "") for r in gateway.get("httpRoutes") or [])]
    rule = istio.get("destinationRule") or {}
    roles = {canary.get("canaryService"): "canary", canary.get("stableService"): "stable",
             rule.get("canarySubsetName"): "canary", rule.get("stableSubsetName"): "stable"}
    return tuple(r for r in routes if r), {k: v for k, v in roles.items() if k}


def pdb_record(obj: dict[str, Any]) -> Budget:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    raw = spec.get("selector")
    selector = raw if isinstance(raw, dict) else {}
    expressions = tuple(Requirement(str(e.get("key") or ""), str(e.get("operator") or ""),
                                    tuple(str(v) for v in e.get("values") or ()))
                        for e in selector.get("matchExpressions") or () if isinstance(e, dict))
    fresh = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
    return Budget(
        namespace=meta.get("namespace", ""), name=meta.get("name", ""),
        selector={str(k): str(v) for k, v in (selector.get("matchLabels") or {}).items()},
        expressions=expressions, selects_none=raw is None,
        min_available=None if spec.get("minAvailable") is None else str(spec["minAvailable"]),
        max_unavailable=None if spec.get("maxUnavailable") is None else str(spec["maxUnavailable"]),
        disruptions_allowed=int(status.get("disruptionsAllowed") or 0) if fresh else 0,
        current_healthy=int(status.get("currentHealthy") or 0),
        desired_healthy=int(status.get("desiredHealthy") or 0),
        expected_pods=int(status.get("expectedPods") or 0),
        unhealthy_pod_eviction_policy=str(spec.get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"),
    )


@dataclass(frozen=True, slots=True)
class ServiceRecord:
    namespace: str
    name: str
    selector: Mapping[str, str]


def inferencepool_record(obj: dict[str, Any]) -> ServiceRecord:
    """An InferencePool selects its model-server pods as a Service does (spec.selector.matchLabels)."""
    meta = obj.get("metadata") or {}
    selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ServiceRecord(meta.get("namespace", ""), meta.get("name", ""), dict(selector))


def service_record(obj: dict[str, Any]) -> ServiceRecord:
    meta = obj.get("metadata") or {}
    return ServiceRecord(meta.get("namespace", ""), meta.get("name", ""), dict((obj.get("spec") or {}).get("selector") or {}))


def httproute_record(obj: dict[str, Any]) -> RouteRecord:
    """An HTTPRoute (what benchmarks/join.py builds its fleet's routes with)."""
    return ROUTER_KINDS["HTTPRoute"].record(obj)


@dataclass(frozen=True, slots=True)
class SubsetRule:
    """An Istio DestinationRule: which pod labels each named subset of a host selects."""

    namespace: str
    host: str  # the Service's short name, as RouteBackend.service
    subsets: Mapping[str, Mapping[str, str]]


def destinationrule_record(obj: dict[str, Any]) -> SubsetRule:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    subsets = {}
    for subset in spec.get("subsets") or []:
        labels = subset.get("labels") if isinstance(subset, dict) else None
        if isinstance(subset, dict) and subset.get("name") and isinstance(labels, dict):
            subsets[str(subset["name"])] = {str(k): str(v) for k, v in labels.items()}
    return SubsetRule(meta.get("namespace", ""), str(spec.get("host", "")).split(".")[0], subsets)
