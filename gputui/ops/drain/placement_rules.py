"""The scheduler's filters, applied to every node at once for one pod: the rules the drain's placement preview
(gputui.ops.drain.placement) follows, each from the Kubernetes scheduler's documented behaviour (its plugins
NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit, InterPodAffinity, PodTopologySpread, and
DRA counted by driver). Pure.

`candidates` filters the nodes of a cluster as a replacement finds it (placement_state.Cluster) in stages, one
rule after another, and records how many nodes each rule excluded first, and why: the preview's words for
"nowhere".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gputui.vocabulary.gpu_resources import WHOLE_GPU
from gputui.vocabulary.model import InferencePod, Node
from gputui.vocabulary.scheduling import (
    NOT_READY_TAINT_KEY,
    PODS,
    UNREACHABLE_TAINT_KEY,
    UNSCHEDULABLE_TAINT_KEY,
    PodScheduling,
    PodTerm,
    Spread,
    Taint,
    tolerated,
)

if TYPE_CHECKING:
    from gputui.ops.drain.placement_state import Cluster

# The stages, in the order they are applied (each node is excluded by the first that fails it).
BATCH, CORDONED, NOT_READY, TAINT, SELECTOR, UNREAD, RESOURCES = (
    "batch", "cordoned", "not ready", "taint", "selector", "unread", "resources")
EXISTING_ANTI, ANTI, AFFINITY, SPREAD = "existing anti-affinity", "anti-affinity", "affinity", "spread"
STATIC = (BATCH, CORDONED, NOT_READY, TAINT, SELECTOR, UNREAD)
UNSCHEDULABLE_TAINT = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")


@dataclass(slots=True)
class Stage:
    """The nodes one rule excluded first, grouped by what in the rule excluded them (a taint, a resource)."""

    rule: str
    by_detail: dict[str, list[str]] = field(default_factory=dict)

    def add(self, detail: str, node: str) -> None:
        self.by_detail.setdefault(detail, []).append(node)

    @property
    def count(self) -> int:
        return sum(map(len, self.by_detail.values()))


@dataclass(slots=True)
class Filtered:
    """One pod's pass over the nodes: those left, and what each rule excluded."""

    left: list[Node]
    stages: list[Stage]
    best: dict[str, int] = field(default_factory=dict)  # resource -> the most any excluded node had free
    static: int = 0  # nodes that pass the static rules, the batch's included
    monotone: list[Node] = field(default_factory=list)  # left by the rules more pods only make stricter

    def stage(self, rule: str) -> Stage | None:
        return next((s for s in self.stages if s.rule == rule), None)


def node_taints(node: Node) -> tuple[Taint, ...]:
    """Its taints, with those the node lifecycle controller sets for a node that is not Ready (not-ready when
    Ready is False, unreachable when Unknown), should the snapshot's taints predate them."""
    taints = node.scheduling.taints if node.scheduling is not None else ()
    if node.ready:
        return taints
    status = next((c.status for c in node.conditions if c.type == "Ready"), "False")
    key = UNREACHABLE_TAINT_KEY if status == "Unknown" else NOT_READY_TAINT_KEY
    if any(t.key == key and t.effect == "NoSchedule" for t in taints):
        return taints
    return (*taints, Taint(key, "", "NoSchedule"))


def static_stage(spec: PodScheduling, node: Node, batch: frozenset[str], selector: bool = True,
                 ) -> tuple[str, str] | None:
    """The first static rule that excludes the node for a pod of this spec, and its detail; None: none does.
    `selector`: the node selector and affinity too (else the caller applies them, per node)."""
    if node.name in batch:
        return BATCH, ""
    if node.unschedulable and not tolerated(spec.tolerations, UNSCHEDULABLE_TAINT):
        return CORDONED, ""
    taints = node_taints(node)
    if not node.ready:
        ready_taint = next(t for t in reversed(taints) if t.key in (NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY))
        if not tolerated(spec.tolerations, ready_taint):
            return NOT_READY, ""
    for taint in taints:
        if taint.repels and not tolerated(spec.tolerations, taint):
            return TAINT, str(taint)
    if selector and not spec.matches_node(node.name, node.labels):
        return SELECTOR, ""
    if selector and node.scheduling is None:
        return UNREAD, ""
    return None


def gpu_units(pod: InferencePod) -> Mapping[str, int]:
    return pod.gpu_units or ({WHOLE_GPU: pod.gpu_request} if pod.gpu_request else {})


def needs(pod: InferencePod) -> tuple[tuple[str, int], ...]:
    """What a replacement asks of a node: its GPU units, its other requests, and a pod's room."""
    return (*gpu_units(pod).items(), *(pod.scheduling.requests if pod.scheduling else ()), (PODS, 1))


def _spread_ok(spread: Spread, spec: PodScheduling, pod: InferencePod) -> Callable[[Node], bool]:
    """The nodes whose domains a spread constraint counts (nodeAffinityPolicy, nodeTaintsPolicy)."""
    keys = [s.topology_key for s in spec.spread]

    def ok(node: Node) -> bool:
        if not all(k in node.labels for k in keys):  # a node lacking any constraint's key counts for none
            return False
        if spread.honor_affinity and not spec.matches_node(node.name, node.labels):
            return False
        return not (spread.honor_taints and any(t.repels and not tolerated(spec.tolerations, t)
                                                for t in node_taints(node)))
    return ok


_SPREAD_FILTERS: dict[tuple[Spread, PodScheduling], Callable[[Node], bool]] = {}


def spread_filter(spread: Spread, spec: PodScheduling, pod: InferencePod) -> Callable[[Node], bool]:
    """One function per (constraint, spec), so its domain counts are kept per cluster (bounded)."""
    key = (spread, spec)
    found = _SPREAD_FILTERS.get(key)
    if found is None:
        if len(_SPREAD_FILTERS) > 1024:
            _SPREAD_FILTERS.clear()
        found = _SPREAD_FILTERS[key] = _spread_ok(spread, spec, pod)
    return found


def candidates(cluster: Cluster, pod: InferencePod, *, monotone_only: bool = False,
               own: InferencePod | None = None) -> Filtered:
    """The nodes a replacement of `pod` passes every filter on, in the cluster as it is now, with what each
    rule excluded. `monotone_only`: the rules more pods can only make stricter (the others are skipped).
    `own`: the pod itself still in place, being deleted (it counts for (anti-)affinity until it is gone)."""
    spec = pod.scheduling
    assert spec is not None
    passed, failed, outside = cluster.shared.static_pass(spec)
    stages = {rule: Stage(rule) for rule in (*STATIC, RESOURCES, EXISTING_ANTI, ANTI, AFFINITY, SPREAD)}
    for rule, detail, names in failed:
        stages[rule].by_detail.setdefault(detail, []).extend(names)
    best: dict[str, int] = {}
    pairs = [(n, cluster.free(n)) for n in passed]  # each node with what it has free
    if spec.requests:  # a node running a pod whose requests were not read cannot say it has room
        unread = [n.name for n, _f in pairs if n.name in cluster.unread]
        if unread:
            stages[RESOURCES].by_detail["unread"] = unread
            pairs = [(n, f) for n, f in pairs if n.name not in cluster.unread]
    for name, need in needs(pod):  # one pass per resource asked for: GPU units first, then the others
        short = [(n, f) for n, f in pairs if f.get(name, 0) < need]
        if short:
            stages[RESOURCES].by_detail.setdefault(name, []).extend(n.name for n, _f in short)
            best[name] = max(f.get(name, 0) for _n, f in short)
            pairs = [(n, f) for n, f in pairs if f.get(name, 0) >= need]
    left = [n for n, _f in pairs]
    left = _anti_affinity(cluster, pod, left, stages, own)
    monotone = left
    if not monotone_only:
        left = _affinity(cluster, pod, left, stages, own)
        left = _spread(cluster, pod, left, stages)
    return Filtered(left, [s for s in stages.values() if s.by_detail], best, outside, monotone)


def _own_domains(term: PodTerm, own: InferencePod | None, cluster: Cluster) -> dict[str, int]:
    counts = cluster.domains(term)
    if own is None or not term.selects(own.namespace, own.labels):
        return counts
    node = cluster.by_name.get(own.node)
    value = node.labels.get(term.topology_key) if node is not None else None
    if value is None:
        return counts
    return {**counts, value: counts.get(value, 0) + 1}


def _anti_affinity(cluster: Cluster, pod: InferencePod, nodes: list[Node], stages: dict[str, Stage],
                   own: InferencePod | None) -> list[Node]:
    spec = pod.scheduling
    assert spec is not None
    # Pods in place whose anti-affinity selects this pod: their domains are closed to it.
    closed = [(term.topology_key, values) for term, values in cluster.holders().items()
              if values and term.selects(pod.namespace, pod.labels)]
    if own is not None and own.scheduling is not None:
        node = cluster.by_name.get(own.node)
        for term in own.scheduling.anti_affinity:
            if node is not None and term.selects(pod.namespace, pod.labels) and term.topology_key in node.labels:
                closed.append((term.topology_key, {node.labels[term.topology_key]: 1}))
    if closed:
        kept = []
        for node in nodes:
            hit = next((k for k, values in closed if node.labels.get(k) in values), None)
            if hit is None:
                kept.append(node)
            else:
                stages[EXISTING_ANTI].add(hit, node.name)
        nodes = kept
    for term in spec.anti_affinity:
        counts = _own_domains(term, own, cluster)
        if not counts:
            continue
        kept = []
        for node in nodes:
            value = node.labels.get(term.topology_key)
            if value is not None and counts.get(value, 0) > 0:
                stages[ANTI].add(f"{term.topology_key}\x00{term.describe()}", node.name)
            else:
                kept.append(node)
        nodes = kept
    return nodes


def _together(terms: tuple[PodTerm, ...], key: str) -> PodTerm:
    """The pods that match every term (the scheduler counts only those for affinity), by one term's key."""
    selectors = [t.selector for t in terms]
    namespaces = [t.namespaces for t in terms if t.namespaces is not None]
    common = frozenset.intersection(*namespaces) if namespaces else None
    selector = None if any(s is None for s in selectors) else tuple(r for s in selectors for r in s or ())
    return PodTerm(selector, key, common)


def _affinity(cluster: Cluster, pod: InferencePod, nodes: list[Node], stages: dict[str, Stage],
              own: InferencePod | None) -> list[Node]:
    """Required pod affinity: every term's domain holds a pod matching all the terms; or, when no pod anywhere
    matches them and the pod matches its own terms, any node with every topology key (a series' first pod)."""
    spec = pod.scheduling
    assert spec is not None
    terms = spec.affinity
    if not terms:
        return nodes
    itself = all(t.selects(pod.namespace, pod.labels) for t in terms)
    held = [(t, _own_domains(_together(terms, t.topology_key), own, cluster)) for t in terms]
    anywhere = any(counts for _t, counts in held)
    kept = []
    for node in nodes:
        missing = next((t for t, counts in held if node.labels.get(t.topology_key) is None
                        or (anywhere and not counts.get(node.labels[t.topology_key], 0))), None)
        if missing is None and (anywhere or itself):
            kept.append(node)
        else:
            missing = missing or terms[0]
            stages[AFFINITY].add(f"{missing.topology_key}\x00{missing.describe()}", node.name)
    return kept


def _spread(cluster: Cluster, pod: InferencePod, nodes: list[Node], stages: dict[str, Stage]) -> list[Node]:
    """Hard topology spread: the domain's matching pods, plus this one if it matches, less the fewest in any
    counted domain (0 with fewer domains than minDomains), at most maxSkew."""
    spec = pod.scheduling
    assert spec is not None
    for spread in spec.spread:
        ok = spread_filter(spread, spec, pod)
        term = PodTerm(spread.selector if spread.selector else None, spread.topology_key,
                       frozenset((pod.namespace,)))
        counts = cluster.domains(term, spreading=True, node_ok=ok)
        domains = cluster.shared.spread_domains(spread, spec, ok)
        low = min((counts.get(d, 0) for d in domains), default=0) if len(domains) >= spread.min_domains else 0
        me = 1 if spread.self_match(pod.labels) else 0
        kept = []
        for node in nodes:
            value = node.labels.get(spread.topology_key)
            if value is None:
                stages[SPREAD].add(f"{spread.topology_key}\x00no {spread.topology_key} label", node.name)
            elif counts.get(value, 0) + me - low > spread.max_skew:
                stages[SPREAD].add(f"{spread.topology_key}\x00{spread.describe()}", node.name)
            else:
                kept.append(node)
        nodes = kept
    return nodes
