"""Where each evicted pod's replacement can go: the drain's placement preview. Pure.

The batch's pods are placed one after another, in the order the batch evicts them, on the nodes outside the
batch, by the scheduler's filters (gputui.ops.drain.placement_rules): two replacements never count the same
free GPU. Each gets the nodes it can go to, or "nowhere" with the first rule that excludes each kind of node,
in words (placement_words). The scheduler's scoring and preferred rules are not simulated: the preview says
"can go", never "will go".

Which node the scheduler picks, and when each pod is evicted (one waits for its sessions), are not known in
advance, and a pod placed earlier can take the room of one placed later. So each verdict also says whether it
holds whatever the batch's other pods do ("sure"), or depends on them ("contended", with whom):
- a pod can surely go when, beside no pod whose labels its affinity or spread counts, it has more nodes than
  the other pods (the batch's, and those already waiting for a node) together could close to it (each lands
  on one node, closing it by resources where the room could run out, and a domain by anti-affinity);
- a pod surely has nowhere to go when no node takes it with none of the others placed (more pods only close
  nodes by resources, taints and anti-affinity), its affinity and spread count none of theirs, and its own
  pod, while it is being deleted, opens no node either.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from gputui.ops.drain.placement_rules import Filtered, candidates, gpu_units, needs
from gputui.ops.drain.placement_state import Cluster, Shared
from gputui.ops.drain.placement_words import Exclusion, exclusions, headline
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, Node
from gputui.vocabulary.scheduling import UNREAD_COMPARING, UNREAD_SCHEDULER

CAVEAT = ("can go: the scheduler's filters pass there now; not where it will go (its scoring and preferred "
          "rules are not simulated)")
SHORT_CAVEAT = "Can go: where the scheduler's filters pass now, not where it will go"
NAMED = 3  # nodes named per pod that can go
WAITING_READ = 50  # pods waiting for a node whose reach is worked out (the others: anywhere)


class Verdict(str, Enum):
    CAN_GO = "can go"
    NOWHERE = "nowhere"
    UNKNOWN = "unknown"  # its rules were not read, or include one the preview does not model


@dataclass(frozen=True, slots=True)
class Placement:
    pod: InferencePod
    verdict: Verdict
    count: int = 0  # nodes it can go to
    nodes: tuple[str, ...] = ()  # the first few of them
    sure: bool = True  # holds whatever the batch's other pods do
    why: str = ""  # nowhere, unknown: in one line
    excluded: tuple[Exclusion, ...] = ()
    contended: tuple[str, ...] = ()  # the pods it may compete with (keys)
    chosen: str = ""  # where the simulation put it to place the next pods: not a prediction

    @property
    def stranded(self) -> bool:
        return self.verdict is Verdict.NOWHERE

    def short(self) -> str:
        """A few characters for a table: `10 nodes`, `2 nodes?` (contended), `NOWHERE`, `unknown`."""
        if self.verdict is Verdict.CAN_GO:
            return f"{self.count} node{'s' if self.count != 1 else ''}" + ("" if self.sure else "?")
        return "NOWHERE" + ("" if self.sure else "?") if self.stranded else "unknown"

    def text(self) -> str:
        if self.verdict is Verdict.CAN_GO:
            names = ", ".join(self.nodes) + (", …" if self.count > len(self.nodes) else "")
            text = f"can go: {self.count} node{'s' if self.count != 1 else ''} ({names})"
        elif self.verdict is Verdict.NOWHERE:
            text = f"NOWHERE: {self.why}"
        else:
            text = f"unknown: {self.why}"
        if not self.sure and self.contended:
            shown = ", ".join(self.contended[:2]) + (f" +{len(self.contended) - 2}" if len(self.contended) > 2 else "")
            text += f" (contended with {shown}: depends on where they land first)"
        elif not self.sure:
            text += " (contended: depends on where the batch's other pods land first)"
        return text


@dataclass(frozen=True, slots=True)
class Preview:
    placements: tuple[Placement, ...] = ()

    def of(self, key: str) -> Placement | None:
        return next((p for p in self.placements if p.pod.key == key), None)

    @property
    def stranded(self) -> list[Placement]:
        return [p for p in self.placements if p.stranded]

    @property
    def unknown(self) -> list[Placement]:
        return [p for p in self.placements if p.verdict is Verdict.UNKNOWN]

    def lost(self, snapshot: ClusterSnapshot) -> list[tuple[str, int, int]]:
        """(service, replicas left Pending, replicas it runs now) per service a stranded pod belongs to (its
        namespace/service; a pod of no service by itself)."""
        by: Counter[str] = Counter(_service(p.pod) for p in self.stranded)
        running = Counter(_service(p) for p in snapshot.pods if not p.terminated and not p.deleting and p.node)
        return [(key, n, running.get(key, n)) for key, n in sorted(by.items())]

    def describe(self, snapshot: ClusterSnapshot) -> list[str]:
        """The preview's summary lines: where pods can go, what is stranded, what each service loses."""
        if not self.placements:
            return []
        sure = sum(1 for p in self.placements if p.verdict is Verdict.CAN_GO)
        lines = [f"placement: {sure} of {len(self.placements)} replacements can go elsewhere; {CAVEAT}"]
        if self.stranded:
            lines.append(f"{len(self.stranded)} would be stranded (Pending): "
                         + ", ".join(f"{svc} loses {n} of {of} replica{'s' if of != 1 else ''}"
                                     for svc, n, of in self.lost(snapshot)))
        if self.unknown:
            lines.append(f"{len(self.unknown)} where it goes is unknown (the GPU capacity check still applies)")
        contended = [p for p in self.placements if not p.sure]
        if contended:
            lines.append(f"{len(contended)} contended: where they land depends on where the others land first")
        return lines


def _service(pod: InferencePod) -> str:
    return f"{pod.namespace}/{pod.service}" if pod.service else pod.key


def _unknown_why(pod: InferencePod) -> str:
    if pod.scheduling is None:
        return "its scheduling rules were not read"
    return f"it has {pod.scheduling.unread}"


def _opaque(pod: InferencePod) -> bool:
    """Where it can land is not bounded by what was read (no rules read, another scheduler, a toleration
    that compares numbers): it may take room anywhere and close any domain."""
    spec = pod.scheduling
    return spec is None or spec.unread.startswith((UNREAD_SCHEDULER, UNREAD_COMPARING))


def _choose(pod: InferencePod, nodes: list[Node], cluster: Cluster) -> Node:
    """Where the simulation puts it: the most free units of what it asks for, then name. Not the scheduler's
    choice (its scoring is not simulated): only a place, so the next pods do not count the same room."""
    units = list(gpu_units(pod)) or ["pods"]
    free = cluster.free
    if len(units) == 1:
        (unit,) = units
        return min(nodes, key=lambda n: (-free(n).get(unit, 0), n.name))
    return min(nodes, key=lambda n: (-sum(free(n).get(u, 0) for u in units), n.name))


def _counts_on(pod: InferencePod, other: InferencePod) -> bool:
    """Its affinity or spread counts the other's replacement (or the other still in place): the non-monotone
    rules, where another pod's place can open or close nodes."""
    spec = pod.scheduling
    assert spec is not None
    if any(t.selects(other.namespace, other.labels) for t in spec.affinity):
        return True
    return other.namespace == pod.namespace and any(s.counts(other.labels) for s in spec.spread)


def _anti_keys(pod: InferencePod, other: InferencePod) -> set[str]:
    """The topology keys over which one of the two pods' anti-affinity keeps the other out."""
    keys = {t.topology_key for t in pod.scheduling.anti_affinity if t.selects(other.namespace, other.labels)} \
        if pod.scheduling else set()
    if other.scheduling is not None:
        keys |= {t.topology_key for t in other.scheduling.anti_affinity if t.selects(pod.namespace, pod.labels)}
    return keys


def _tight(pod: InferencePod, alone: list[Node], others: list[InferencePod], reach: dict[str, set[str]],
           cluster: Cluster) -> set[str]:
    """Its nodes where the room could run out: what it asks, with what every other pod that could land there
    asks, is more than the node has free in some resource. Elsewhere no one can close a node by resources."""
    asked = needs(pod)
    tight = set()
    for node in alone:
        free = cluster.free(node)
        demand = dict(asked)
        for other in others:
            landing = reach.get(other.key)
            if landing is None or node.name in landing:
                for name, n in needs(other):
                    demand[name] = demand.get(name, 0) + n
        if any(free.get(name, 0) < n for name, n in demand.items()):
            tight.add(node.name)
    return tight


def _could_close(pod: InferencePod, alone: list[Node], others: list[InferencePod],
                 reach: dict[str, set[str]], cluster: Cluster) -> int:
    """At most how many of the nodes it can go to alone the other pods could close to it: each lands on one
    node (closing it by resources, where the room could run out) and closes, by anti-affinity, the domains of
    that node. A first bound counts every other pod; when it is not enough, only those that can reach a node
    where the room could run out, or whose anti-affinity meets its own."""
    histograms: dict[str, Counter[str]] = {}

    def widest(key: str) -> int:
        hist = histograms.get(key)
        if hist is None:
            hist = histograms[key] = Counter(n.labels[key] for n in alone if key in n.labels)
        return max(hist.values(), default=0)

    quick = sum(1 + sum(widest(k) for k in _anti_keys(pod, other)) for other in others)
    if len(alone) > quick:
        return quick
    tight = _tight(pod, alone, others, reach, cluster)
    total = 0
    for other in others:
        landing = reach.get(other.key)
        keys = _anti_keys(pod, other)
        closes = landing is None or not tight.isdisjoint(landing)
        total += (1 if closes else 0) + sum(widest(k) for k in keys)
    return total


def _turn(pod: InferencePod, alone: list[Node], seq: Cluster,
          placed: list[tuple[InferencePod, Node]]) -> list[Node] | None:
    """Its nodes once the pods before it are placed, from those it has alone, when they changed only the room
    on the nodes they landed on (no anti-affinity between them and it); None: they may have changed more."""
    if any(_anti_keys(pod, q) for q, _n in placed):
        return None
    touched = {n.name for _q, n in placed}
    asked = needs(pod)
    return [n for n in alone if n.name not in touched or all(seq.free(n).get(r, 0) >= k for r, k in asked)]


def preview(snapshot: ClusterSnapshot, batch: Iterable[str], moving: Sequence[InferencePod]) -> Preview:
    """Each moving pod's replacement, in eviction order, on the nodes outside the batch (see the module's
    words). `moving`: the pods the batch evicts that a controller recreates."""
    moving = list(moving)
    batch = frozenset(batch)
    shared = Shared(snapshot.nodes, batch)
    alone_cluster = Cluster(snapshot, batch, moving, shared)  # none of the replacements placed
    seq = Cluster(snapshot, batch, moving, shared)  # each placed in turn
    known = [p for p in moving if p.scheduling is not None and not p.scheduling.unread]
    alone: dict[str, Filtered] = {p.key: candidates(alone_cluster, p) for p in known}
    reach: dict[str, set[str]] = {}  # where each could ever land (the monotone rules only); absent: anywhere
    # Pods already waiting for a node compete for the room too (their place is not previewed); past a few,
    # each is taken to be able to land anywhere (the bound stays sound, the preview cheap).
    waiting = [p for p in snapshot.pods if not p.node and not p.terminated and not p.deleting
               and p.key not in alone_cluster.gone]
    for p in moving + waiting[:WAITING_READ]:
        if p.key in alone:
            reach[p.key] = {n.name for n in alone[p.key].monotone}
        elif not _opaque(p):
            reach[p.key] = {n.name for n in candidates(alone_cluster, p, monotone_only=True).monotone}
    out: list[Placement] = []
    placed: list[tuple[InferencePod, Node]] = []  # replacements placed so far, and where
    for pod in moving:
        product = snapshot.node(pod.node).gpu_product if snapshot.node(pod.node) is not None else ""  # type: ignore[union-attr]
        if pod.key not in alone:
            out.append(Placement(pod, Verdict.UNKNOWN, why=_unknown_why(pod)))
            continue
        others = [q for q in moving if q is not pod] + waiting
        mine = alone[pod.key].left
        opaque = [q.key for q in others if _opaque(q)]
        counting = [q.key for q in others if _counts_on(pod, q)]
        left = _turn(pod, mine, seq, placed) if not counting else None
        turn = None
        if left is None:  # the pods placed before can change more than the room on their nodes: all again
            turn = candidates(seq, pod)
            left = turn.left
        if left:
            chosen = _choose(pod, left, seq)
            seq.place(pod, chosen)
            placed.append((pod, chosen))
            sure = bool(mine) and not counting and not opaque and \
                len(mine) > _could_close(pod, mine, others, reach, alone_cluster)
            if sure:
                near = []
            else:
                here = {n.name for n in left}
                near = [q.key for q in others if q.key not in reach or not here.isdisjoint(reach[q.key])]
            names = tuple(n.name for n in sorted(left, key=lambda n: n.name)[:NAMED])
            out.append(Placement(pod, Verdict.CAN_GO, len(left), names, sure,
                                 contended=() if sure else tuple(dict.fromkeys(counting + opaque + near)),
                                 chosen=chosen.name))
            continue
        turn = turn or candidates(seq, pod)  # the words need every rule's count
        if not gpu_units(pod):  # it may go to a node without GPUs, which gputui does not watch
            out.append(Placement(pod, Verdict.UNKNOWN, why="no GPU node takes it; nodes without GPUs are not "
                                                           "watched: " + headline(seq, pod, turn, product)))
            continue
        opened_by_itself = bool(pod.scheduling.affinity) and bool(  # type: ignore[union-attr]
            candidates(alone_cluster, pod, own=pod).left)
        sure = not mine and not counting and not opened_by_itself
        mine_names = {n.name for n in mine}
        taking = [q.pod.key for q in out if q.verdict is Verdict.CAN_GO
                  and (q.pod.key not in reach or not mine_names.isdisjoint(reach[q.pod.key]))]
        out.append(Placement(pod, Verdict.NOWHERE, 0, (), sure, headline(seq, pod, turn, product),
                             exclusions(pod, turn, product),
                             contended=() if sure else tuple(dict.fromkeys(counting + taking))))
    return Preview(tuple(out))

