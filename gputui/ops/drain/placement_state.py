"""The cluster as a replacement finds it, for the placement preview (gputui.ops.drain.placement): every pod
but those the batch moves (they are gone by then), plus the replacements placed so far; what each node has
free, the pods each pod term selects per domain, the anti-affinity of the pods in place. Pure.

Terminated pods count for nothing (the scheduler does not watch them); pods being deleted still hold their
resources and count for pod (anti-)affinity, not for spreading (as the scheduler counts them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gputui.ops.drain.placement_rules import BATCH, SELECTOR, UNREAD, gpu_units, static_stage
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_resources import DEVICE_TAINT_CONDITION, DRA_PREFIX, WHOLE_GPU
from gputui.vocabulary.model import InferencePod, Node
from gputui.vocabulary.scheduling import PODS, PodScheduling, PodTerm, Spread


def offered(node: Node, resource: str) -> int:
    """GPU units of a resource the node offers; a node known only by its count offers whole cards. A DRA
    device tainted NoSchedule or NoExecute is not offered (the claims' tolerations are not read)."""
    if not node.gpu_resources:
        return node.gpu_allocatable if resource == WHOLE_GPU else 0
    units = sum(r.allocatable for r in node.gpu_resources if r.name == resource)
    if resource.startswith(DRA_PREFIX):
        units -= sum(1 for c in node.conditions if c.type == DEVICE_TAINT_CONDITION and c.reason in ("NoSchedule",
                                                                                                      "NoExecute"))
    return max(0, units)


def _counted(pod: InferencePod) -> bool:
    return not pod.terminated and bool(pod.node)


class Shared:
    """What depends on a pod's spec and the nodes alone, worked out once per preview and shared by its
    clusters: the static rules' verdicts, the domains a spread counts. Nodes alike for the static rules (one
    taints-and-resources record, readiness, cordon; outside the batch) are judged once per spec."""

    def __init__(self, nodes: tuple[Node, ...], batch: frozenset[str]) -> None:
        self.nodes, self.batch = nodes, batch
        self.static: dict[int, tuple[list[Node], list[tuple[str, str, list[str]]], int]] = {}
        self.spread: dict[tuple[int, Spread], set[str]] = {}
        self.kept: list[object] = []  # the specs keyed by id above, kept alive while keyed
        self.alike: dict[tuple, list[Node]] = {}
        for node in nodes:
            if node.name not in batch:
                key = (id(node.scheduling), node.scheduling, node.unschedulable, node.ready,
                       node.ready or next((c.status for c in node.conditions if c.type == "Ready"), ""))
                self.alike.setdefault(key, []).append(node)
        self.in_batch = [n for n in nodes if n.name in batch]

    def static_pass(self, spec: PodScheduling) -> tuple[list[Node], list[tuple[str, str, list[str]]], int]:
        """The nodes outside the batch a pod of this spec passes the static rules on; those it does not, by
        (rule, detail): a batch node's detail is "" when it would pass them otherwise; how many pass them, the
        batch's nodes included."""
        found = self.static.get(id(spec))
        if found is None:
            self.kept.append(spec)
            passed: list[Node] = []
            failed: dict[tuple[str, str], list[str]] = {}
            eligible = 0
            for group in self.alike.values():
                stage = static_stage(spec, group[0], frozenset(), selector=False)
                if stage is not None:
                    failed.setdefault(stage, []).extend(n.name for n in group)
                elif spec.node_restricted:
                    for node in group:
                        if spec.matches_node(node.name, node.labels):
                            passed.append(node)
                        else:
                            failed.setdefault((SELECTOR, ""), []).append(node.name)
                else:
                    passed.extend(group)
            for node in self.in_batch:
                stage = static_stage(spec, node, frozenset())
                failed.setdefault((BATCH, "" if stage is None else stage[0]), []).append(node.name)
                eligible += stage is None
            eligible += len(passed)
            # An unread node passes the rules before it; it is counted apart, after the selector.
            unread = [n.name for n in passed if n.scheduling is None]
            if unread:
                passed = [n for n in passed if n.scheduling is not None]
                failed.setdefault((UNREAD, ""), []).extend(unread)
            found = self.static[id(spec)] = (passed, [(r, d, names) for (r, d), names in failed.items()], eligible)
        return found

    def spread_domains(self, spread: Spread, spec: PodScheduling, ok: Callable[[Node], bool]) -> set[str]:
        """The domains a spread constraint counts for a pod of this spec: its key's values on the nodes it
        admits (the batch's and cordoned nodes too: the scheduler counts every node)."""
        key = (id(spec), spread)
        found = self.spread.get(key)
        if found is None:
            self.kept.append(spec)
            found = self.spread[key] = {n.labels[spread.topology_key] for n in self.nodes if ok(n)}
        return found


class Cluster:
    """The cluster a replacement finds: the snapshot without the pods the batch moves, and the replacements
    placed so far. Per node, what is free is worked out on first need and kept up to date."""

    def __init__(self, snapshot: ClusterSnapshot, batch: Iterable[str], moving: Iterable[InferencePod],
                 shared: Shared | None = None) -> None:
        self.snapshot = snapshot
        self.batch = frozenset(batch)
        self.gone = {p.key for p in moving}
        self.nodes = snapshot.nodes
        self.by_name = snapshot.by_name()
        self.shared = shared or Shared(self.nodes, self.batch)
        self.placed: dict[str, list[InferencePod]] = {}  # node -> replacements placed there
        self._free: dict[str, dict[str, int]] = {}  # node -> resource -> units free (GPUs, others, pods)
        self.unread: set[str] = set()  # nodes running a pod whose requests were not read (known once free())
        self._domains: dict[tuple, dict[str, int]] = {}  # (term, spreading, node filter) -> value -> pods
        self._holders: dict[PodTerm, dict[str, int]] | None = None  # anti-affinity of pods in place
        self._live: list[tuple[InferencePod, Node]] | None = None
        self._index: dict[tuple[str, str], list[tuple[InferencePod, Node]]] | None = None

    # --- what is on the nodes -----------------------------------------------------------------------
    def live(self) -> list[tuple[InferencePod, Node]]:
        """Every pod in place (with its node), the moving ones gone, replacements placed so far included."""
        if self._live is None:
            self._live = [(p, n) for p in self.snapshot.pods if _counted(p) and p.key not in self.gone
                          and (n := self.by_name.get(p.node)) is not None]
        return self._live

    def _by_label(self) -> dict[tuple[str, str], list[tuple[InferencePod, Node]]]:
        if self._index is None:
            self._index = {}
            for pair in self.live():
                for item in pair[0].labels.items():
                    self._index.setdefault(item, []).append(pair)
        return self._index

    def selected(self, term: PodTerm) -> Iterable[tuple[InferencePod, Node]]:
        """The pods in place a term may select: those carrying one of an In requirement's values."""
        first = next((r for r in term.selector or () if r.operator == "In"), None)
        if first is None:
            return self.live()
        index = self._by_label()
        return [pair for v in first.values for pair in index.get((first.key, v), ())]

    def free(self, node: Node) -> dict[str, int]:
        found = self._free.get(node.name)
        if found is None:
            found = {r.name: offered(node, r.name) for r in node.gpu_resources} or \
                {WHOLE_GPU: node.gpu_allocatable}
            for name, n in (node.scheduling.allocatable if node.scheduling is not None else ()):
                found[name] = n
            for p in self.snapshot.pods_on(node.name):
                if _counted(p) and p.key not in self.gone:
                    self._take(found, node.name, p)
            for p in self.placed.get(node.name, ()):
                self._take(found, node.name, p)
            self._free[node.name] = found
        return found

    def _take(self, free: dict[str, int], node: str, pod: InferencePod) -> None:
        for name, n in gpu_units(pod).items():
            free[name] = free.get(name, 0) - n
        if pod.scheduling is None:
            self.unread.add(node)
        else:
            for name, n in pod.scheduling.requests:
                free[name] = free.get(name, 0) - n
        free[PODS] = free.get(PODS, 0) - 1

    def place(self, pod: InferencePod, node: Node) -> None:
        """The replacement goes there: its units are used, its labels count for the terms and spreads."""
        free = self.free(node)
        self.placed.setdefault(node.name, []).append(pod)
        self._take(free, node.name, pod)
        pair = (pod, node)
        if self._live is not None:
            self._live.append(pair)
        if self._index is not None:
            for item in pod.labels.items():
                self._index.setdefault(item, []).append(pair)
        for (term, _spreading, node_ok), counts in self._domains.items():
            value = node.labels.get(term.topology_key)
            if value is not None and term.selects(pod.namespace, pod.labels) and node_ok(node):
                counts[value] = counts.get(value, 0) + 1
        if self._holders is not None and pod.scheduling is not None:
            for term in pod.scheduling.anti_affinity:
                value = node.labels.get(term.topology_key)
                if value is not None:
                    per = self._holders.setdefault(term, {})
                    per[value] = per.get(value, 0) + 1

    # --- per term ----------------------------------------------------------------------------------
    def domains(self, term: PodTerm, *, spreading: bool = False,
                node_ok: Callable[[Node], bool] = lambda _n: True) -> dict[str, int]:
        """Pods the term selects per value of its topology key (on nodes node_ok admits). Spreading counts no
        pod being deleted, as the scheduler's spread filter; (anti-)affinity counts them."""
        key = (term, spreading, node_ok)
        found = self._domains.get(key)
        if found is None:
            found = {}
            for p, n in self.selected(term):
                if spreading and p.deleting:
                    continue
                value = n.labels.get(term.topology_key)
                if value is not None and term.selects(p.namespace, p.labels) and node_ok(n):
                    found[value] = found.get(value, 0) + 1
            self._domains[key] = found
        return found

    def holders(self) -> dict[PodTerm, dict[str, int]]:
        """The required anti-affinity terms of pods in place, each with the domains they hold."""
        if self._holders is None:
            self._holders = {}
            for p, n in self.live():
                for term in (p.scheduling.anti_affinity if p.scheduling else ()):
                    value = n.labels.get(term.topology_key)
                    if value is not None:
                        per = self._holders.setdefault(term, {})
                        per[value] = per.get(value, 0) + 1
        return self._holders
