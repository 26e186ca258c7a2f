"""Who is disrupting a node, and why: the record, the actors' names, and the names each actor writes on the Node.

Every name below was read from the actor's own source; docs/disruption-actors.md says where (its section in the
comment beside each group). This module holds only what is read from the Node object itself (labels,
annotations, taints, spec.unschedulable), and the compact records of the actors' custom resources gputui reads
(NodeMaintenance, Karpenter's NodeClaims, NVSentinel's ExternalRemediationRequests and MaintenanceRequests, and its
janitor's actions, gputui.vocabulary.nvsentinel_janitor: `ActorObjects`, filled by gputui.backends.kube_actors and
.kube_nvsentinel). gputui.policy.disruptions turns a Node
into its list of these records. Pure vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gputui.vocabulary.batch_budgets import BudgetObjects
from gputui.vocabulary.eviction_requests import EvictionRecord, EvictionRequestRecord
from gputui.vocabulary.model import DRAIN_ANNOTATION_PREFIX, Condition

# The sources' states, here as every actor's module reads them (their home: gputui.vocabulary.model).
from gputui.vocabulary.model import NOT_INSTALLED as NOT_INSTALLED
from gputui.vocabulary.model import READ as READ
from gputui.vocabulary.model import UNKNOWN as UNKNOWN
from gputui.vocabulary.nvsentinel_janitor import JanitorRecord

# The actors, as the `actor` field and JSON name them.
GPUTUI = "gputui"
GPU_OPERATOR = "gpu-operator"
NVSENTINEL = "nvsentinel"
KARPENTER = "karpenter"
CLUSTER_AUTOSCALER = "cluster-autoscaler"
MAINTENANCE_OPERATOR = "maintenance-operator"  # NVIDIA's, through its NodeMaintenance objects
PERSON = "person"  # a cordon no actor above claims: `kubectl cordon`, or a tool gputui does not know

NODE_LIFECYCLE = "node-lifecycle"  # whoever wrote a node lifecycle condition (the KEP records no owner)

# Node lifecycle conditions (KEP-5683, docs/disruption-actors.md §6): condition types any authorized actor writes on
# Node.status (True: in that state; False or absent: cleared, by its writer). Kubernetes 1.37 declares the feature
# gate (alpha, off by default) but no code reads it: the apiserver accepts them whatever the gate says.
LC_DRAIN_IN_PROGRESS = "DrainInProgress"
LC_DRAINED = "Drained"
LC_MAINTENANCE_PLANNED = "MaintenancePlanned"
LC_MAINTENANCE_IN_PROGRESS = "MaintenanceInProgress"
LIFECYCLE_TYPES = frozenset({LC_DRAIN_IN_PROGRESS, LC_DRAINED, LC_MAINTENANCE_PLANNED, LC_MAINTENANCE_IN_PROGRESS})
LIFECYCLE_GATE = "NodeLifecycleConditions"
# gputui's reasons (CamelCase, as the KEP asks): the prefix tells gputui's conditions from other writers'.
LC_GPUTUI = "Gputui"
LC_DRAINING, LC_DONE, LC_STOPPED, LC_UNCORDONED = "GputuiDrain", "GputuiDrainCompleted", "GputuiDrainStopped", \
    "GputuiUncordoned"

# gputui's own threshold (no actor defines one): an actor in the same phase this long, when gputui knows since
# when, looks stuck (issue 40's example: `upgrade-required` for 3 days).
STUCK_AFTER_S = 24 * 3600.0

# Cluster autoscaler (docs/disruption-actors.md §4, cluster-autoscaler-1.36.1 utils/taints/taints.go): the value is
# the Unix seconds it tainted at. ToBeDeleted also cordons (--cordon-node-before-terminating, default true).
CA_TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"  # NoSchedule: it is deleting the node
CA_DELETION_CANDIDATE = "DeletionCandidateOfClusterAutoscaler"  # PreferNoSchedule: the node is unneeded

# Karpenter (§3, sigs.k8s.io/karpenter v1.13.0/v1.15.0 pkg/apis/v1 taints.go, labels.go). Karpenter taints rather
# than cordons: the taint has no value, so since when is the NodeClaim's to say (not read yet).
KARPENTER_DISRUPTED = "karpenter.sh/disrupted"  # NoSchedule: a disruption candidate, or terminating
KARPENTER_REBOOTING = "karpenter.sh/rebooting"  # NoSchedule, v1.15 (repair by reboot)
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"  # "true" on the node blocks voluntary disruption

# NVIDIA maintenance-operator (§2, github.com/Mellanox/maintenance-operator api@v0.3.0 api/v1alpha1
# nodemaintenance_types.go; the controller at tag v0.3.0 internal/controller/nodemaintenance_controller.go). The phase
# is the reason of condition Ready (status True only in Ready). The controller sets that condition with
# meta.SetStatusCondition, which moves lastTransitionTime only when the status changes: it dates the False of Pending
# (the operator taking the request up) and the True of Ready, not each step between (Scheduled, Cordon,
# WaitForPodCompletion, Draining), and no step records its own start except the two annotations below.
MAINTENANCE_GROUP = "maintenance.nvidia.com"
GPUTUI_REQUESTOR = "gputui.io"  # gputui's requestorID on the NodeMaintenances it creates (gputui.ops.drain.maintenance_request)
NM_READY = "Ready"  # the condition whose reason is the phase
NM_REQUESTOR_FAILED = "RequestorFailed"  # a condition the requestor sets; also a Ready reason
NM_DRAINING = "Draining"
NM_WAIT_START = "maintenance.nvidia.com/wait-pod-completion-start-time"  # RFC3339, internal/podcompletion
NM_READY_TIME = "maintenance.nvidia.com/ready-time"  # RFC3339, set on entering Ready
NM_PHASES = ("", "Pending", "Scheduled", "Cordon", "WaitForPodCompletion", "Draining", "Ready", "RequestorFailed")

# Karpenter's NodeClaim (§3, sigs.k8s.io/karpenter v1.13.0 pkg/apis/v1/nodeclaim_status.go, disruption/queue.go,
# nodeclaim/disruption/drift.go, node/termination/controller.go). A chosen disruption is DisruptionReason=True with
# reason = message = Underutilized | Empty | Drifted; Drifted=True marks a node drift will replace; termination sets
# Drained Unknown/Draining, then True. Consolidatable=True only says the node may be consolidated (most idle nodes
# are): not a hold, not shown. There is no Expired or Empty condition (expiry deletes the NodeClaim).
KARPENTER_GROUP = "karpenter.sh"
KC_DISRUPTION_REASON = "DisruptionReason"
KC_DRIFTED = "Drifted"
KC_DRAINED = "Drained"
KC_INSTANCE_TERMINATING = "InstanceTerminating"

# NVSentinel (§1, NVIDIA/NVSentinel fault-quarantine pkg/common/common.go, commons statemanager, pkg/managed).
NVSENTINEL_STATE = "dgxc.nvidia.com/nvsentinel-state"
NVSENTINEL_FAILED_STATES = ("drain-failed", "remediation-failed")
NVSENTINEL_LABEL_PREFIX = "k8saas.nvidia.com/"  # the chart's default labelPrefix (configurable: other prefixes unseen)
NVSENTINEL_CORDON_BY = NVSENTINEL_LABEL_PREFIX + "cordon-by"  # "NVSentinel", or <agent>-<creator_id> when forced
NVSENTINEL_CORDON_REASON = NVSENTINEL_LABEL_PREFIX + "cordon-reason"  # at most 63 characters
NVSENTINEL_CORDON_TIMESTAMP = NVSENTINEL_LABEL_PREFIX + "cordon-timestamp"  # UTC, Go layout 2006-01-02T15-04-05Z
NVSENTINEL_TIMESTAMP_FORMAT = "%Y-%m-%dT%H-%M-%SZ"
NVSENTINEL_EVENT = "quarantineHealthEvent"  # JSON list of the HealthEvents that quarantined it (older: one object)
NVSENTINEL_APPLIED_TAINTS = "quarantineHealthEventAppliedTaints"  # JSON [{"Key","Value","Effect"}]
NVSENTINEL_IS_CORDONED = "quarantineHealthEventIsCordoned"  # "True": NVSentinel cordoned it
NVSENTINEL_CORDON_PRE_EXISTING = "quarantineHealthEventCordonPreExisting"  # "True": cordoned before the quarantine
NVSENTINEL_UNCORDONED_MANUALLY = "quarantinedNodeUncordonedManually"  # "True": a person undid the quarantine
NVSENTINEL_REMEDIATION_STATE = "latestFaultRemediationState"
NVSENTINEL_EXTERNAL_REMEDIATION = "nvsentinel.dgxc.nvidia.com/external-remediation"  # taint, value = the ERR's name
NVSENTINEL_MAINTENANCE_REQUEST = "nvsentinel.dgxc.nvidia.com/active-maintenance-request"  # annotation = the MR's name

# NVSentinel's custom resources (§1; both cluster-scoped, v1, generated by protoc-gen-crd from its protos; the CRDs
# gputui's tests install are transcribed: tests/support/crds/*.nvsentinel.dgxc.nvidia.com.yaml). The ERR: janitor
# (janitor/pkg/controller/externalremediationrequest_controller.go) seeds NVSentinelOwnershipReleased=Unknown/
# Initializing and ExternalRemediationComplete=Unknown/AwaitingExternalSystem, then releases the node (its taint,
# managed=false) and sets Released=True/ReleaseTaintApplied (False/NodeNotFound when the node is gone); the external
# system sets Complete True (janitor takes the node back) or False (it stopped: the node stays released until a
# person deletes the ERR). The MR (lifecycle-manager/internal/controller/maintenancerequest_controller.go): one
# condition, HealthEventEmitted Unknown/Initializing -> True/Emitted, or False/EmitFailed or False/Blocked (another
# MR holds the node); present = the node is under maintenance, deleting it clears the fault.
NVSENTINEL_GROUP = "nvsentinel.dgxc.nvidia.com"
ERR_RELEASED = "NVSentinelOwnershipReleased"
ERR_COMPLETE = "ExternalRemediationComplete"
MR_EMITTED = "HealthEventEmitted"
# Bounds on what gputui keeps of a HealthEvent's text (anyone who may create an MR writes it): enough for any
# real check name, message, action and error code; a 10 kB message cannot fill a screen.
EVENT_TEXT_MAX = 400
EVENT_CODES_MAX = 5

# GPU Operator (§7, NVIDIA/k8s-operator-libs pkg/upgrade/consts.go): Unix seconds when the state began, for the
# two states that record one (the state label itself records no time).
UPGRADE_WAIT_START = "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time"  # wait-for-jobs-required
UPGRADE_VALIDATION_START = "nvidia.com/gpu-driver-upgrade-validation-start-time"  # validation-required
UPGRADE_INITIAL_UNSCHEDULABLE = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"  # cordoned before

# gputui's own drain record (gputui.ops.drain.options and .lease write these; a unit test holds them equal: the
# policy layer may not import ops).
DRAIN_BY = DRAIN_ANNOTATION_PREFIX + "by"
DRAIN_STARTED = DRAIN_ANNOTATION_PREFIX + "started"  # UTC, %Y-%m-%dT%H:%M:%SZ
DRAIN_LEASE = DRAIN_ANNOTATION_PREFIX + "lease"  # JSON with "renewed" (epoch seconds)
DRAIN_LEASE_S = 60.0  # a lease not renewed this long has expired (lease.LEASE_S)
DRAIN_IN_PROGRESS = ("cordoned", "waiting", "evicting", "paused")  # options.IN_PROGRESS

# gputui's own cordon record (issue 40 item 2): who cordoned the node through gputui, why, the ticket, since when
# and until when, as compact JSON ({"by","reason","ticket","since","expires"}; gputui.policy.cordon_record reads and
# writes it, gputui.ops.cordon sends it in the cordon's own write and removes it in the uncordon's). Kept by the
# node parser with every gputui.io/ annotation.
CORDON_RECORD = "gputui.io/cordon"
CORDON_REASON_MAX = 200  # characters of the reason
CORDON_TICKET_MAX = 80  # characters of the ticket (an ID or a URL)
CORDON_BY_MAX = 253  # characters of the identity read back (a user name or a service account's full name)
CORDON_EXPIRY_MAX_S = 365 * 86400.0  # an expiry further ahead than a year is a typo

# The annotations other than gputui's that the node parser keeps (it drops every other annotation: 65,000 nodes).
ACTOR_ANNOTATIONS = frozenset({
    KARPENTER_DO_NOT_DISRUPT, NVSENTINEL_EVENT, NVSENTINEL_APPLIED_TAINTS, NVSENTINEL_IS_CORDONED,
    NVSENTINEL_CORDON_PRE_EXISTING, NVSENTINEL_UNCORDONED_MANUALLY, NVSENTINEL_REMEDIATION_STATE,
    NVSENTINEL_MAINTENANCE_REQUEST, UPGRADE_WAIT_START, UPGRADE_VALIDATION_START, UPGRADE_INITIAL_UNSCHEDULABLE,
})


@dataclass(frozen=True, slots=True)
class Disruption:
    """One actor's hold on one node: who, in which of its phases, since when, why, and whether it looks stuck."""

    actor: str  # one of the names above
    phase: str  # the actor's own word for where it is (its state label's value, or gputui's for a taint)
    since: float | None  # epoch seconds the actor recorded; None: it records none that gputui reads
    why: str
    stuck: str = ""  # why it looks stuck; "" when it does not (or gputui cannot tell)
    cordons: bool = False  # this actor is what holds the node's cordon (spec.unschedulable)
    # The object behind the hold where one is ("namespace/name" of a NodeMaintenance) and who asked for it (its
    # requestorID): gputui's own request is withdrawn by an uncordon, another's is another actor's hold.
    ref: str = ""
    requestor: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"actor": self.actor, "phase": self.phase, "since": self.since, "why": self.why,
                "stuck": self.stuck or None}


@dataclass(frozen=True, slots=True)
class NodeMaintenanceRecord:
    """A NodeMaintenance (maintenance.nvidia.com/v1alpha1), compact: only what gputui shows."""

    namespace: str
    name: str
    node: str  # spec.nodeName
    requestor: str  # spec.requestorID
    additional_requestors: tuple[str, ...] = ()
    created: float | None = None  # metadata.creationTimestamp
    deleting: bool = False  # metadata.deletionTimestamp set: the operator is undoing it
    cordon: bool = True  # spec.cordon (the CRD's default: true)
    conditions: tuple[Condition, ...] = ()
    drain_timeout_s: int | None = None  # spec.drainSpec.timeoutSeconds; None: no drainSpec (no drain); 0: forever
    wait_timeout_s: int | None = None  # spec.waitForPodCompletion.timeoutSeconds; None: no wait
    wait_started: float | None = None  # the wait-pod-completion-start-time annotation
    ready_at: float | None = None  # the ready-time annotation
    drain_progress: int | None = None  # status.drain.drainProgress (percent); None: no drain status
    eviction_pods: int | None = None  # status.drain.evictionPods
    waiting_pods: tuple[str, ...] = ()  # status.waitForCompletion + status.drain.waitForEviction ("ns/name")

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    @property
    def phase(self) -> str:
        """The reason of condition Ready, as the operator's printer column "Phase" reads it ("" before it set one)."""
        ready = self.condition(NM_READY)
        return ready.reason if ready is not None else ""


@dataclass(frozen=True, slots=True)
class NodeClaimRecord:
    """A Karpenter NodeClaim (karpenter.sh/v1), compact: the node it backs and its disruption conditions."""

    name: str
    node: str  # status.nodeName; "" before the node registers
    nodepool: str = ""  # label karpenter.sh/nodepool
    deleting_since: float | None = None  # metadata.deletionTimestamp: being terminated
    conditions: tuple[Condition, ...] = ()  # only the types above (KC_*)

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)


@dataclass(frozen=True, slots=True)
class HealthEventWhy:
    """What an NVSentinel request's spec.healthEvent says about why (HealthEvent, data-models health_event.proto):
    cut to EVENT_TEXT_MAX characters (EVENT_CODES_MAX codes), raw otherwise (made visible where shown)."""

    check: str = ""  # checkName
    message: str = ""
    action: str = ""  # recommendedAction, as protojson writes the enum ("RESTART_VM"; a number if written so)
    custom_action: str = ""  # customRecommendedAction (with action CUSTOM)
    error_codes: tuple[str, ...] = ()  # errorCode

    def words(self) -> str:
        """`GpuXidError: XID 79 ...; recommended action RESTART_VM; error codes 79`, the parts that are there."""
        head = ": ".join(p for p in (self.check, self.message) if p)
        action = self.action + (f" ({self.custom_action})" if self.custom_action else "")
        parts = [head, f"recommended action {action}" if action else "",
                 f"error code{'s' * (len(self.error_codes) != 1)} {', '.join(self.error_codes)}"
                 if self.error_codes else ""]
        return "; ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class RemediationRecord:
    """An NVSentinel ExternalRemediationRequest (nvsentinel.dgxc.nvidia.com/v1, cluster-scoped), compact."""

    name: str
    node: str  # spec.healthEvent.nodeName (else the label nvsentinel.dgxc.nvidia.com/node)
    created: float | None = None  # metadata.creationTimestamp: when fault-remediation handed the node over
    deleting: bool = False  # metadata.deletionTimestamp: janitor is returning the node to NVSentinel
    completed: float | None = None  # status.completionTime: janitor is done with it
    conditions: tuple[Condition, ...] = ()  # ERR_RELEASED, ERR_COMPLETE
    event: HealthEventWhy = HealthEventWhy()

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    @property
    def open(self) -> bool:
        """It holds its node: the external system has not reported completion (ExternalRemediationComplete is
        not True). Unknown is open: an unread condition is never taken for done."""
        done = self.condition(ERR_COMPLETE)
        return done is None or done.status != "True"


@dataclass(frozen=True, slots=True)
class MaintenanceRequestRecord:
    """An NVSentinel MaintenanceRequest (nvsentinel.dgxc.nvidia.com/v1, cluster-scoped), compact. Present = its node
    is under maintenance."""

    name: str
    node: str  # spec.healthEvent.nodeName
    created: float | None = None  # metadata.creationTimestamp
    deleting: bool = False  # metadata.deletionTimestamp: lifecycle-manager is emitting the clearing event
    start: float | None = None  # spec.startTime: when the window opens (informational: NVSentinel acts on creation)
    conditions: tuple[Condition, ...] = ()  # MR_EMITTED
    event: HealthEventWhy = HealthEventWhy()

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)


@dataclass(frozen=True, slots=True)
class NVSentinelObjects:
    """One node's NVSentinel objects: its ExternalRemediationRequests, MaintenanceRequests and janitor actions."""

    remediations: list[RemediationRecord] = field(default_factory=list)
    requests: list[MaintenanceRequestRecord] = field(default_factory=list)
    janitor: list[JanitorRecord] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ActorObjects:
    """The actors' own objects one refresh read, and the state of each source: "NodeMaintenance", "NodeClaim",
    "ExternalRemediationRequest", "MaintenanceRequest", "RebootNode", "TerminateNode", "GPUReset", "EvictionRequest",
    "Eviction" -> READ, NOT_INSTALLED, or "unknown: <why>"."""

    maintenances: tuple[NodeMaintenanceRecord, ...] = ()
    claims: tuple[NodeClaimRecord, ...] = ()
    reads: Mapping[str, str] = field(default_factory=dict)
    remediations: tuple[RemediationRecord, ...] = ()  # NVSentinel's ExternalRemediationRequests
    maintenance_requests: tuple[MaintenanceRequestRecord, ...] = ()  # NVSentinel's MaintenanceRequests
    janitor: tuple[JanitorRecord, ...] = ()  # NVSentinel janitor's RebootNodes, TerminateNodes, GPUResets
    # The limits the same controllers set on nodes disrupted at once (Karpenter's NodePools, the maintenance-operator's
    # config), read with them; None when not read (ClusterSnapshot.batch_budgets takes them from here).
    budgets: BudgetObjects | None = None
    # The EvictionRequest API's two kinds (gputui.vocabulary.eviction_requests; "EvictionRequest", "Eviction" in
    # reads): per pod, not per node, so no holder of a node; the drain plan reads them.
    eviction_requests: tuple[EvictionRequestRecord, ...] = ()
    evictions: tuple[EvictionRecord, ...] = ()

    def nvsentinel_by_node(self) -> dict[str, NVSentinelObjects]:
        """Each node's NVSentinel requests and janitor actions (built once per snapshot by its reader)."""
        out: dict[str, NVSentinelObjects] = {}
        for r in self.remediations:
            if r.node:
                out.setdefault(r.node, NVSentinelObjects()).remediations.append(r)
        for m in self.maintenance_requests:
            if m.node:
                out.setdefault(m.node, NVSentinelObjects()).requests.append(m)
        for j in self.janitor:
            if j.node:
                out.setdefault(j.node, NVSentinelObjects()).janitor.append(j)
        return out

    def by_node(self) -> dict[str, tuple[list[NodeMaintenanceRecord], list[NodeClaimRecord]]]:
        """Each node's NodeMaintenances and NodeClaims (built once per snapshot by its reader: 65,000 nodes)."""
        out: dict[str, tuple[list[NodeMaintenanceRecord], list[NodeClaimRecord]]] = {}
        for m in self.maintenances:
            out.setdefault(m.node, ([], []))[0].append(m)
        for c in self.claims:
            if c.node:
                out.setdefault(c.node, ([], []))[1].append(c)
        return out
