"""What one refresh saw: the snapshot every screen and command draws from, how fresh each source was, and
the one staleness rule. Immutable; the indexes a consumer needs are built once per snapshot."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gputui.vocabulary.batch_budgets import BudgetObjects
from gputui.vocabulary.disruptions import ActorObjects
from gputui.vocabulary.gauges import Gauges, gauges, util_sum
from gputui.vocabulary.gpu_resources import WHOLE_GPU, GpuUse
from gputui.vocabulary.model import Budget, GpuSummary, InferencePod, InferenceService, Node, PodSelector, UpgradePolicy
from gputui.vocabulary.sessions import PodSessions, SessionCounts, read_sessions

T = TypeVar("T")


def stale(age: float | None, every: float) -> bool:
    """The one staleness rule: older than three of its own reads (a read or two may fail first)."""
    return age is not None and age > 3 * every


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """How fresh one source (the API, the metrics) is, and why not if it is not."""

    name: str
    fetched_at: float | None = None
    error: str | None = None
    every: float | None = None  # seconds between reads when slower than the refresh (fleet-wide DCGM)
    mode: str = ""  # how it is read, when there is a choice (the metrics: recorded rules or raw series)

    def age(self, now: float) -> float | None:
        return None if self.fetched_at is None else max(0.0, now - self.fetched_at)

    def stale(self, now: float, refresh: float) -> bool:
        """Older than three of its own reads: a refresh or two may fail before it counts as stale."""
        return stale(self.age(now), max(refresh, self.every or 0.0))


PodIndexes = tuple[Mapping[str, Mapping[str, int]], Mapping[str, tuple["InferencePod", ...]]]


def pod_indexes(pods: tuple[InferencePod, ...]) -> PodIndexes:
    """GPU units allocated per node and resource, and pods per node, computed from the pods. Pure: a backend
    that keeps its pods tuple across quiet refreshes keeps these too and hands them to the snapshot (see
    join.Joiner)."""
    by_node: dict[str, list[InferencePod]] = {}
    for pod in pods:
        if pod.node:
            by_node.setdefault(pod.node, []).append(pod)
    allocated = {node: units for node, on in by_node.items() if (units := node_allocated(on))}
    return allocated, {k: tuple(v) for k, v in by_node.items()}


def node_allocated(pods: Iterable[InferencePod]) -> dict[str, int]:
    """GPU units the pods on one node hold, per resource (empty when they hold none): what pod_indexes counts
    for each node, and what an incremental join counts again for a node whose pods moved."""
    per: dict[str, int] = {}
    for pod in pods:
        if not pod.terminated and pod.gpu_request:
            # A pod that names no resource (built by hand, in tests) asks for whole cards.
            for name, n in (pod.gpu_units or {WHOLE_GPU: pod.gpu_request}).items():
                per[name] = per.get(name, 0) + n
    return per


# A nodes tuple and what was worked out from it alone (ClusterSnapshot.of_nodes).
NodesDerived = tuple[tuple[Node, ...], dict[Hashable, Any]]


def _once(done: dict[Hashable, Any], key: Hashable, compute: Callable[[], T]) -> T:
    """done[key], computed and kept the first time it is asked for."""
    try:
        return done[key]
    except KeyError:
        value = done[key] = compute()
        return value


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    taken_at: float
    context: str
    nodes: tuple[Node, ...] = ()
    pods: tuple[InferencePod, ...] = ()
    services: tuple[InferenceService, ...] = ()
    budgets: tuple[Budget, ...] = ()
    sources: tuple[SourceStatus, ...] = ()
    simulated: bool = False
    upgrade_policy: UpgradePolicy | None = None  # the GPU Operator's, when its ClusterPolicy was read
    # The disrupting actors' own objects (NodeMaintenances, NodeClaims) and whether each could be read; None when
    # the backend reads none (the demo): their holds are then not read, never "none".
    actors: ActorObjects | None = None
    # The limits other controllers set on nodes disrupted at once (Karpenter's NodePools, the maintenance-operator's
    # config) and whether each could be read; None when the backend reads none (the demo, unless it says otherwise).
    # The live backend hands them in with its actors (ActorObjects.budgets): taken from there when not given.
    batch_budgets: BudgetObjects | None = None
    # Every pod's live-session counts as the metrics read gave them (gputui.vocabulary.sessions): `sessions(pod)` reads one.
    session_counts: SessionCounts = field(default_factory=dict)
    # The Services and InferencePools that select pods, and the workloads that own them (gputui.policy.rotation);
    # None when the backend did not read them: whether a pod can leave rotation is then unknown.
    selectors: tuple[PodSelector, ...] | None = None
    # Every node's DCGM figures in aggregate by node name, in a fleet read that way (gputui.vocabulary.gauges): `gauges(node)`.
    summaries: Mapping[str, GpuSummary] = field(default_factory=dict)
    # The pod indexes when the backend already holds them for this very pods tuple (None: built here).
    indexes: PodIndexes | None = field(default=None, repr=False, compare=False)
    # What the last snapshot worked out from its nodes alone (`of_nodes`), with those nodes: used when they are this
    # snapshot's very tuple (a refresh that moved no node), else ignored (a `replace` with other nodes carries it too).
    nodes_derived: NodesDerived | None = field(default=None, repr=False, compare=False)
    # Indexes built once per snapshot; every consumer shares them.
    _allocated: Mapping[str, Mapping[str, int]] = field(init=False, repr=False, compare=False)
    _pods_by_node: Mapping[str, tuple[InferencePod, ...]] = field(
        init=False, repr=False, compare=False
    )
    # Figures derived from the whole snapshot (gputui.policy.figures), each worked out once by whoever asks first.
    _derived: dict[Hashable, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        allocated, by_node = self.indexes if self.indexes is not None else pod_indexes(self.pods)
        object.__setattr__(self, "_allocated", allocated)
        object.__setattr__(self, "_pods_by_node", by_node)
        object.__setattr__(self, "_derived", {})
        if self.nodes_derived is None or self.nodes_derived[0] is not self.nodes:
            object.__setattr__(self, "nodes_derived", (self.nodes, {}))
        if self.batch_budgets is None and self.actors is not None and self.actors.budgets is not None:
            object.__setattr__(self, "batch_budgets", self.actors.budgets)

    def derived(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()`, once per snapshot and key. Two threads asking at once may both compute it: it is a
        pure function of the snapshot, so either answer is the answer."""
        return _once(self._derived, key, compute)

    def of_nodes(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()`, a function of the nodes alone: once per nodes tuple, shared by the snapshots that follow while
        no node moves (the backend hands each its predecessor's: `nodes_derived`). At 65,000 nodes each walk of them
        in Python is milliseconds, every refresh."""
        assert self.nodes_derived is not None  # set by __post_init__
        return _once(self.nodes_derived[1], key, compute)

    def by_name(self) -> dict[str, Node]:
        """Every node by name, built once per nodes tuple: node detail asks on every draw (a walk over 65,000
        nodes was 2 ms each time), the filter with no words shows it all."""
        return self.of_nodes("by_name", lambda: {n.name: n for n in self.nodes})

    def node(self, name: str) -> Node | None:
        return self.by_name().get(name)

    def node_names(self) -> Collection[str]:
        """Every node's name."""
        return self.by_name().keys()

    def service(self, key: str) -> InferenceService | None:
        return next((s for s in self.services if s.key == key), None)

    def pods_on(self, node: str) -> tuple[InferencePod, ...]:
        return self._pods_by_node.get(node, ())

    def gpus_allocated(self, node: str) -> int:
        """GPU units allocated on the node, every resource together."""
        return sum(self._allocated.get(node, {}).values())

    def allocated_by_resource(self, node: str) -> Mapping[str, int]:
        """GPU units allocated on the node per resource name ("" for pods that name none: the demo's)."""
        return self._allocated.get(node, {})

    def source(self, name: str) -> SourceStatus | None:
        return next((s for s in self.sources if s.name == name), None)

    def pods_of(self, service: InferenceService, version: str | None = None) -> list[InferencePod]:
        return [
            p
            for p in self.pods
            if p.namespace == service.namespace
            and p.service == service.name
            and (version is None or p.version == version)
        ]

    def sessions(self, pod: InferencePod) -> PodSessions:
        """The pod's live sessions in this snapshot: a count, unknown, or none (not an inference pod)."""
        return read_sessions(pod.session_signal, pod.session_opt_out,
                             self.session_counts.get((pod.namespace, pod.name)))

    def sessions_of(self, service: InferenceService, version: str | None = None) -> int | None:
        counts = [self.sessions(p).live for p in self.pods_of(service, version) if not p.terminated]
        known = [c for c in counts if c is not None]
        return sum(known) if known else None

    def summary(self, node: Node) -> GpuSummary | None:
        return self.summaries.get(node.name)

    def gauges(self, node: Node) -> Gauges:
        """The node's utilisation, memory, temperature and power (gputui.vocabulary.gauges)."""
        return gauges(node, self.summaries.get(node.name))

    def budget_for(self, pod: InferencePod) -> list[Budget]:
        return [b for b in self.budgets if b.matches(pod)]

    def node_use(self, node: Node) -> GpuUse:
        """The node's GPU units in use and offered, per scheme."""
        return GpuUse.of_node(node.gpu_resources, node.gpu_allocatable, self.allocated_by_resource(node.name))

    def gpu_use(self) -> GpuUse:
        """Every node's, a walk over them all (figures.figures keeps the sum from one snapshot to the next; this
        is what it is tested against)."""
        return sum(map(self.node_use, self.nodes), GpuUse())

    @property
    def allocation(self) -> Mapping[str, Mapping[str, int]]:
        """GPU units allocated per node and resource (the pod index: allocated_by_resource for each node)."""
        return self._allocated

    @property
    def mean_util(self) -> float | None:
        """Mean over every GPU reporting, whether a node came per GPU or summarised."""
        total, count = 0.0, 0
        summaries = self.summaries
        for n in self.nodes:
            t, c = util_sum(n, summaries.get(n.name))
            total += t
            count += c
        return total / count if count else None
