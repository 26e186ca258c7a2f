"""The vocabulary of gputui: immutable facts about a GPU cluster at one moment.

No I/O here, no Textual, no Kubernetes client: backends build these, the UI and
the ops read them. Derived facts are properties or pure functions so they are
computed the same way everywhere (table, headless JSON, wallboard, drain plan).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from gputui.base.frozen_init import fast_init
from gputui.vocabulary.gpu_metrics import NO_VALUES, Figures
from gputui.vocabulary.gpu_resources import GpuResource
from gputui.vocabulary.label_selectors import Requirement, selector_matches
from gputui.vocabulary.scheduling import NodeScheduling, PodScheduling

# Driver upgrade states (GPU Operator) that mean "in progress", in the
# operator's order. `upgrade-done` and an empty label are idle; failed is an alert.
UPGRADE_IN_PROGRESS = (
    "upgrade-required",
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "drain-required",
    "node-maintenance-required",  # with an external maintenance operator
    "post-maintenance-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
)
UPGRADE_FAILED = "upgrade-failed"


@dataclass(frozen=True, slots=True)
class UpgradePolicy:
    """The GPU Operator's ClusterPolicy spec.driver.upgradePolicy (its CRD's defaults when a field is unset)."""

    auto_upgrade: bool = False
    max_parallel: int = 1  # 0: no limit
    max_unavailable: str = "25%"  # a count or a percentage of the GPU nodes, rounded up

# Conditions every kubelet reports; any other condition that is True is a
# problem raised by a GPU health agent (NVSentinel and friends).
STANDARD_CONDITIONS = frozenset(
    {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"}
)

# Annotations gputui writes on a node while it drains it (resumable, visible to others).
DRAIN_ANNOTATION_PREFIX = "gputui.io/drain-"
DRAIN_PHASE_ANNOTATION = DRAIN_ANNOTATION_PREFIX + "phase"

class NodeState(str, Enum):
    READY = "Ready"
    NOT_READY = "NotReady"
    CORDONED = "Cordoned"
    DRAINING = "Draining"
    UPGRADING = "Upgrading"


class Health(str, Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU's figures, named as gputui.vocabulary.gpu_metrics names them: the typed ones as attributes, the others in
    `extra` (gpu_metrics.value_of reads either)."""

    index: int
    uuid: str
    util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    xid: int = 0
    health: Health = Health.UNKNOWN
    extra: Figures = NO_VALUES  # the table's other figures, known ones only

    @property
    def mem_pct(self) -> float | None:
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return 100.0 * self.mem_used_mib / self.mem_total_mib


@fast_init  # built per node in bulk: every DCGM read (frozen_init)
@dataclass(frozen=True, slots=True)
class GpuSummary:
    """A node's GPUs in aggregate, as Prometheus computes them for a large fleet: held beside the nodes, in the
    snapshot's `summaries` (gputui.vocabulary.gauges), so a DCGM read builds no Node. Each figure is named as a GPU's and
    aggregated as gputui.vocabulary.gpu_metrics says (util_pct the mean, temp_c the hottest, power_w the sum...)."""

    count: int
    util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    extra: Figures = NO_VALUES  # the table's other figures aggregated per node, known ones only


# How one optional source of objects was read (the disrupting actors' kinds, their budgets, EvictionRequests), as the
# sources name it (never "none": an actor unread is not an actor absent).
READ = "read"
NOT_INSTALLED = "not installed"  # its CRD is not served: the actor cannot be acting here
UNKNOWN = "unknown"  # served but not readable (forbidden, failing): its holds are not known


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    since: float | None = None  # lastTransitionTime, where it is read (an actor's own, a lifecycle condition)


@dataclass(frozen=True, slots=True)
class Event:
    """A Kubernetes event about a node or a pod, as `kubectl describe` lists it."""

    type: str  # Normal, Warning
    reason: str
    message: str
    object: str  # Kind/name
    count: int = 1
    last_seen: float | None = None  # epoch seconds


@dataclass(frozen=True, slots=True)
class NodeDescription:
    """What describe reads on demand (never every refresh): taints, the last heartbeat, recent events."""

    taints: tuple[str, ...] = ()
    heartbeat: float | None = None  # the Ready condition's lastHeartbeatTime, epoch seconds
    events: tuple[Event, ...] = ()


@fast_init  # built per node in bulk: every full join, every per-GPU read (frozen_init)
@dataclass(frozen=True, slots=True)
class Node:
    name: str
    ready: bool
    unschedulable: bool
    gpu_product: str
    gpu_capacity: int
    gpu_allocatable: int
    driver_version: str = ""
    cuda_version: str = ""
    upgrade_state: str = ""
    gpu_memory_mib: int = 0
    conditions: tuple[Condition, ...] = ()
    gpus: tuple[Gpu, ...] = ()  # every GPU, or in a summarised fleet (gputui.vocabulary.gauges) only those reporting a problem
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    # How it hands its GPUs out (gputui.vocabulary.gpu_resources): gpu_capacity/gpu_allocatable are these units summed.
    gpu_resources: tuple[GpuResource, ...] = ()
    gpu_count: int = 0  # physical cards (0: unknown, e.g. MIG slices without GFD's count)
    node_info: Mapping[str, str] = field(default_factory=dict)  # kubelet, runtime, kernel, OS (status.nodeInfo)
    # Its taints and allocatable resources other than GPUs, shared with the nodes alike (gputui.vocabulary.scheduling);
    # None: not read (the drain's placement preview then says it does not know this node).
    scheduling: NodeScheduling | None = None
    # health.node_alerts' answer for one temperature threshold, from the node alone (its summary's one alert is
    # added to it), worked out once per node object and kept on it, so it lives and dies with the node (a memo
    # beside the nodes kept replaced ones alive, for the collector to walk).
    alerts_memo: tuple[float, tuple[Any, ...]] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def drain_phase(self) -> str:
        return self.annotations.get(DRAIN_PHASE_ANNOTATION, "")

    @property
    def state(self) -> NodeState:
        if not self.ready:
            return NodeState.NOT_READY
        if self.drain_phase and self.drain_phase not in ("done", "aborted", "stopped"):
            return NodeState.DRAINING
        if self.upgrade_state in UPGRADE_IN_PROGRESS:
            return NodeState.UPGRADING
        if self.unschedulable:
            return NodeState.CORDONED
        return NodeState.READY

    @property
    def problem_conditions(self) -> tuple[Condition, ...]:
        return tuple(
            c for c in self.conditions if c.type not in STANDARD_CONDITIONS and c.status == "True"
        )


@dataclass(frozen=True, slots=True)
class PodProbes:
    """What a pod's spec says about starting and stopping (seed 001 §6.2, §10.1)."""

    readiness: bool  # every container has a readiness probe
    readiness_is_liveness: bool  # some container's readiness probe is its liveness probe: unready = killed
    startup_allowance_s: int | None  # seconds before liveness can kill a loading model; None: nothing does
    memory_limited: bool  # every container has a memory limit


@fast_init  # built per pod in bulk: every full join (frozen_init)
@dataclass(frozen=True, slots=True)
class InferencePod:
    namespace: str
    name: str
    uid: str
    node: str
    phase: str = "Running"
    ready: bool = True
    gpu_request: int = 0
    service: str = ""
    version: str = ""
    restarts: int = 0
    deleting: bool = False
    owner_kind: str = "ReplicaSet"
    labels: Mapping[str, str] = field(default_factory=dict)
    has_emptydir: bool = False
    mirror: bool = False
    # An inference pod by its own say (sessions.signal_of): it belongs to an inference service or is labelled
    # so; or labelled not to be. Its counts are the snapshot's (ClusterSnapshot.sessions), not the pod's.
    session_signal: bool = False
    session_opt_out: bool = False
    pending_reason: str = ""  # the scheduler's word while it cannot place the pod
    termination_grace_s: int | None = None  # terminationGracePeriodSeconds (None: not read)
    prestop_sleep_s: int = 0  # its preStop hook's sleep before SIGTERM
    probes: PodProbes | None = None  # None: the spec was not read
    gpu_units: Mapping[str, int] = field(default_factory=dict)  # by resource (dra:<driver> for DRA devices)
    images: tuple[str, ...] = ()  # its containers' images
    gpus_unrequested: bool = False  # sees GPUs (NVIDIA_VISIBLE_DEVICES) without asking for any: see upgrades
    # What the scheduler reads of its spec, shared with every pod of the same spec (gputui.vocabulary.scheduling); None:
    # not read (the drain's placement preview then says where it goes is unknown).
    scheduling: PodScheduling | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminated(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class PodSelector:
    """Who selects pods by label: a Service or an InferencePool (the paths traffic takes to a pod), or a
    workload (the owner that keeps its pods). gputui.policy.rotation reads them to find the label that takes one pod
    out of rotation without its owner letting it go."""

    kind: str  # Service, InferencePool, Deployment, Rollout
    namespace: str
    name: str
    match: Mapping[str, str]  # matchLabels (a Service's whole selector)
    keys: frozenset[str] = frozenset()  # every key the selector uses, matchExpressions' too (workloads)

    @property
    def key(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    def selects(self, labels: Mapping[str, str]) -> bool:
        # An empty selector selects nothing here: a Service without one has no endpoints gputui could see.
        return selector_matches(self.match, labels, empty_matches=False)


@dataclass(frozen=True, slots=True)
class Rollout:
    """The fields `kubectl rollout status` reads from a Deployment."""

    generation: int = 1
    observed_generation: int = 1
    replicas_desired: int = 0
    replicas: int = 0
    updated: int = 0
    ready: int = 0
    available: int = 0
    progress_deadline_exceeded: bool = False
    revision: str = ""

    @property
    def status(self) -> str:
        return rollout_status(self)

    @property
    def complete(self) -> bool:
        return self.status == "rolled out"


def rollout_status(r: Rollout) -> str:
    """kubectl rollout status' verdict, in its order of checks."""
    if r.generation > r.observed_generation:
        return "waiting for spec update"
    if r.progress_deadline_exceeded:
        return "progress deadline exceeded"
    if r.updated < r.replicas_desired:
        return f"{r.updated} of {r.replicas_desired} updated"
    if r.replicas > r.updated:
        return f"{r.replicas - r.updated} old pending termination"
    if r.available < r.updated:
        return f"{r.available} of {r.updated} available"
    return "rolled out"


@dataclass(frozen=True, slots=True)
class ServiceVersion:
    name: str
    weight: int | None = None  # as the router holds it; None without a router
    rollout: Rollout = field(default_factory=Rollout)
    backend: str = ""  # the Service (or subset) the route points at
    workload: str = ""  # Deployment / Rollout name
    pool: bool = False  # the backend is an InferencePool: its endpoint picker (EPP) reports on it


@dataclass(frozen=True, slots=True)
class InferenceService:
    namespace: str
    name: str
    versions: tuple[ServiceVersion, ...]
    router_kind: str = ""  # HTTPRoute, VirtualService, TrafficSplit, Ingress, Rollout, ""
    router_name: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def share_pct(self, version: str) -> float | None:
        """The version's share of new traffic, relative to the other weights."""
        weights = [v.weight for v in self.versions if v.weight is not None]
        total = sum(weights)
        for v in self.versions:
            if v.name == version:
                if v.weight is None:
                    return None if self.router_kind else 100.0 / len(self.versions)
                return 100.0 * v.weight / total if total else 0.0
        return None


@dataclass(frozen=True, slots=True)
class Budget:
    """A PodDisruptionBudget and the status its controller computed."""

    namespace: str
    name: str
    selector: Mapping[str, str]
    min_available: str | None = None
    max_unavailable: str | None = None
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0
    unhealthy_pod_eviction_policy: str = "IfHealthyBudget"  # the API's default when unset
    expressions: tuple[Requirement, ...] = ()  # the selector's matchExpressions, with its matchLabels (`selector`)
    selects_none: bool = False  # no selector at all (null): policy/v1 selects no pod, where {} selects every one

    def matches(self, pod: InferencePod) -> bool:
        """As the Eviction API and the disruption controller select (policy/v1): matchLabels and matchExpressions
        all hold; an empty selector ({}) selects every pod of the namespace, a null one none."""
        if pod.namespace != self.namespace or self.selects_none:
            return False
        return selector_matches(self.selector, pod.labels, empty_matches=True) \
            and all(r.matches(pod.labels) for r in self.expressions)

    def describe(self) -> str:
        return (
            f"{self.name}: {self.disruptions_allowed} disruption{'' if self.disruptions_allowed == 1 else 's'} allowed "
            f"({self.current_healthy} healthy, {self.desired_healthy} needed)"
        )

    def deadlock(self) -> str:
        """Why no eviction this budget covers can ever pass, with the remedy; "" when one can."""
        zero = ("0", "0%")
        if self.max_unavailable in zero:
            return f"{self.name}: maxUnavailable {self.max_unavailable} never allows an eviction (raise it)"
        if self.min_available == "100%" or (
                self.min_available is not None and self.min_available.isdigit() and self.expected_pods
                and int(self.min_available) >= self.expected_pods):
            return (f"{self.name}: minAvailable {self.min_available} with {self.expected_pods} pods never allows "
                    f"an eviction (scale the workload up or lower minAvailable)")
        unhealthy = self.expected_pods - self.current_healthy
        if unhealthy > 0 and self.disruptions_allowed <= 0 and self.unhealthy_pod_eviction_policy != "AlwaysAllow":
            return (f"{self.name}: {unhealthy} unhealthy pods hold its budget at 0 under IfHealthyBudget "
                    f"(set unhealthyPodEvictionPolicy: AlwaysAllow, or fix the pods)")
        return ""
