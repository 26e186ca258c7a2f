"""What the Kubernetes scheduler reads of a pod and of a node to decide whether one can go on the other, as
facts: a pod's node selector, required node affinity, tolerations, required pod (anti-)affinity, hard topology
spread constraints and resource requests; a node's taints and allocatable resources.

Pure vocabulary with the matching the scheduler documents (component-helpers' nodeaffinity and taint helpers,
apimachinery's label selectors, the scheduler's AffinityTerm): the drain's placement preview
(gputui.ops.drain.placement) applies them. Records are shared: the pods of one workload carry the very same
PodScheduling object, the nodes of one pool the same NodeScheduling (gputui.backends.kube_scheduling interns
them), so 65,000 nodes cost one slot each."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gputui.vocabulary.label_selectors import Requirement

# Taints the node lifecycle controller (or the kubelet) puts on a node, which the scheduler then reads.
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"
HOSTNAME_LABEL = "kubernetes.io/hostname"
PODS = "pods"  # the allocatable resource that counts pods
# Rules the preview does not model that leave a pod's place unbounded by what was read (PodScheduling.unread
# starts with one of these): another scheduler, a toleration that compares numbers (it may tolerate more).
UNREAD_SCHEDULER = "scheduled by"
UNREAD_COMPARING = "a toleration that compares numbers"
CPU = "cpu"  # counted in millicores, as the scheduler does (Quantity.MilliValue)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | PreferNoSchedule | NoExecute

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"

    @property
    def repels(self) -> bool:
        """The scheduler's filter reads NoSchedule and NoExecute taints only (PreferNoSchedule is scoring)."""
        return self.effect in ("NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # "" with Exists: every key
    operator: str = "Equal"  # Equal | Exists (Lt, Gt behind a feature gate: see `unread`)
    value: str = ""
    effect: str = ""  # "": every effect

    def tolerates(self, taint: Taint) -> bool:
        """As core/v1 Toleration.ToleratesTaint (comparison operators off, their default)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False

    def __str__(self) -> str:
        if self.operator == "Exists":
            what = self.key or "every taint"
        else:
            what = f"{self.key}={self.value}"
        return what + (f":{self.effect}" if self.effect else "")


def tolerated(tolerations: tuple[Toleration, ...], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


@dataclass(frozen=True, slots=True)
class NodeTerm:
    """One nodeSelectorTerm of a required node affinity: its label expressions and its fields (metadata.name),
    all of which must hold. A term with neither is dropped when read: it matches no node."""

    labels: tuple[Requirement, ...] = ()
    names: tuple[Requirement, ...] = ()  # matchFields on metadata.name, evaluated as a label "metadata.name"

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not all(r.matches(labels) for r in self.labels):
            return False
        return all(r.matches({"metadata.name": name}) for r in self.names)

    def __str__(self) -> str:
        parts = [str(r) for r in self.labels] + [str(r).replace("metadata.name", "name") for r in self.names]
        return ",".join(parts)


@dataclass(frozen=True, slots=True)
class PodTerm:
    """A required pod (anti-)affinity term, or a spread constraint's selector: which pods it selects
    (scheduler framework's AffinityTerm.Matches) and the node label that makes a domain."""

    selector: tuple[Requirement, ...] | None  # None: no labelSelector, which selects no pod
    topology_key: str
    namespaces: frozenset[str] | None  # None: every namespace (namespaceSelector {})

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        return self.selector is not None and all(r.matches(labels) for r in self.selector)

    def describe(self) -> str:
        if self.selector is None:
            return "no pod"
        return ",".join(str(r) for r in self.selector) or "every pod"


@dataclass(frozen=True, slots=True)
class Spread:
    """A topologySpreadConstraint with whenUnsatisfiable: DoNotSchedule (ScheduleAnyway is scoring)."""

    max_skew: int
    topology_key: str
    selector: tuple[Requirement, ...] | None  # matchLabelKeys merged in; None: no labelSelector (counts nothing)
    min_domains: int = 1
    honor_affinity: bool = True  # nodeAffinityPolicy (default Honor): domains of nodes its node affinity allows
    honor_taints: bool = False  # nodeTaintsPolicy (default Ignore)

    def counts(self, labels: Mapping[str, str]) -> bool:
        """Whether a pod with these labels (in the pod's namespace) is counted: an empty selector counts none
        (the scheduler's countPodsMatchSelector skips an empty one), no selector none."""
        return bool(self.selector) and all(r.matches(labels) for r in self.selector)  # type: ignore[union-attr]

    def self_match(self, labels: Mapping[str, str]) -> bool:
        """The incoming pod counts itself when the selector matches it (an empty selector matches every pod)."""
        return self.selector is not None and all(r.matches(labels) for r in self.selector)

    def describe(self) -> str:
        what = ",".join(str(r) for r in self.selector or ()) or "its pods"
        return f"maxSkew {self.max_skew} of {what} over {self.topology_key}"


@dataclass(frozen=True, slots=True)
class PodScheduling:
    """What the scheduler's filters read of a pod (its replacement has the same spec and labels)."""

    node_selector: tuple[tuple[str, str], ...] = ()
    node_terms: tuple[NodeTerm, ...] | None = None  # None: no required node affinity; (): one that matches nothing
    tolerations: tuple[Toleration, ...] = ()
    affinity: tuple[PodTerm, ...] = ()  # requiredDuringSchedulingIgnoredDuringExecution
    anti_affinity: tuple[PodTerm, ...] = ()
    spread: tuple[Spread, ...] = ()
    # Resources other than GPUs (those are InferencePod.gpu_units), as the scheduler sums them: containers,
    # then the largest init container (sidecars added), pod-level requests, overhead. cpu in millicores.
    requests: tuple[tuple[str, int], ...] = ()
    # A rule the preview does not model (a PersistentVolumeClaim's node affinity, a hostPort, another
    # scheduler, a namespaceSelector, a comparison toleration): where it can go is unknown, said with this.
    unread: str = ""

    @property
    def node_restricted(self) -> bool:
        return bool(self.node_selector) or self.node_terms is not None

    def matches_node(self, name: str, labels: Mapping[str, str]) -> bool:
        """nodeSelector and required node affinity (its terms ORed), as the NodeAffinity filter."""
        for key, value in self.node_selector:
            if labels.get(key) != value:
                return False
        if self.node_terms is None:
            return True
        return any(t.matches(name, labels) for t in self.node_terms)

    def describe_nodes(self) -> str:
        """Its node selection in words: `zone=z1`, `zone=z1 and (gpu in (h100,h200) or …)`; "" when none."""
        parts = [f"{k}={v}" for k, v in self.node_selector]
        if self.node_terms is not None:
            terms = [str(t) for t in self.node_terms] or ["no node"]
            parts.append(terms[0] if len(terms) == 1 else "(" + " or ".join(terms) + ")")
        return " and ".join(parts)

    def request(self, resource: str) -> int:
        for name, n in self.requests:
            if name == resource:
                return n
        return 0


@dataclass(frozen=True, slots=True)
class NodeScheduling:
    """What the scheduler's filters read of a node besides its labels, readiness and cordon: its taints and
    its allocatable resources other than GPUs (cpu in millicores, memory in bytes, pods, ephemeral-storage,
    hugepages, other extended resources)."""

    taints: tuple[Taint, ...] = ()
    allocatable: tuple[tuple[str, int], ...] = ()

    def offers(self, resource: str) -> int:
        """Allocatable units of a resource; 0 when the node does not list it (the scheduler reads it so)."""
        for name, n in self.allocatable:
            if name == resource:
                return n
        return 0


EMPTY_POD = PodScheduling()
