"""How many nodes a maintenance batch may disrupt at once, and whether one more may start: the minimum over every
budget that governs its nodes (issue 40 item 3). Each budget is a name, its figures in words, how many nodes of
its scope may be disrupted at once (None: unknown), and the nodes of its scope other actors already disrupt (they
count against it). Pure arithmetic over the snapshot.

The budgets built here: Karpenter NodePool disruption budgets in force now, NVIDIA maintenance-operator's
MaintenanceOperatorConfig limits, PodDisruptionBudgets over the batch's pods, and any budget source that could not be
read (fail closed: the batch starts nothing while a budget is unknown). The batch plan adds its own two (free GPUs
per model, the GPU Operator's maxUnavailable) with the same record (gputui.ops.drain.batch_plan).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from gputui.policy.disruptions import node_disruptions
from gputui.policy.karpenter_schedule import ScheduleError, window_open
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.batch_budgets import (
    MAINTENANCE_CONFIG,
    MAINTENANCE_CONFIG_NAME,
    NODEPOOL,
    NODEPOOL_LABEL,
    MaintenanceConfigRecord,
    NodePoolRecord,
)

# Holds that are no disruption yet: the actor has only noted the node (a scale-down candidate, a drifted NodeClaim
# not chosen, an upgrade not taken, a NodeMaintenance not scheduled). The maintenance-operator's own count is the same
# ("under maintenance" = Ready's reason not in {"", Pending}: nodemaintenancescheduler_controller.go).
_NOT_YET = frozenset({(d.CLUSTER_AUTOSCALER, "deletion-candidate"), (d.KARPENTER, d.KC_DRIFTED),
                      (d.GPU_OPERATOR, "upgrade-required"), (d.MAINTENANCE_OPERATOR, "Pending"),
                      (d.MAINTENANCE_OPERATOR, "Uninitialized")})
NOT_READY = "NotReady"
# The kinds of budget (BatchBudget.kind, the JSON's "kind")
KARPENTER, MAINTENANCE, PDB, CAPACITY, GPU_OPERATOR, UNREAD = (
    "karpenter", "maintenance-operator", "pdb", "free-gpus", "gpu-operator", "unread")
_WHO = {d.GPUTUI: "another gputui drain", d.GPU_OPERATOR: "the GPU Operator", d.NVSENTINEL: "NVSentinel",
        d.KARPENTER: "Karpenter", d.CLUSTER_AUTOSCALER: "the cluster autoscaler",
        d.MAINTENANCE_OPERATOR: "a NodeMaintenance", d.PERSON: "a cordon", NOT_READY: "NotReady"}


@dataclass(frozen=True, slots=True)
class BatchBudget:
    """One limit on the nodes disrupted at once: `allowed` nodes of its scope (None: unknown), of which the nodes in
    `taken` are disrupted by others already; `scope` None governs every node."""

    name: str  # "Karpenter NodePool gpu-h100"
    figures: str  # "10% of 10 nodes → 1 node"
    allowed: int | None
    scope: frozenset[str] | None = None
    taken: Mapping[str, str] = field(default_factory=dict)  # node -> the actor disrupting it
    # False: it holds back parallelism, never the batch's first node (the GPU Operator's limit, PDBs: see batch_plan)
    holds_first: bool = True
    kind: str = ""  # whose: KARPENTER, MAINTENANCE, PDB, CAPACITY, GPU_OPERATOR, UNREAD
    # False: said, not held to: the Eviction API holds each eviction to it already (PDBs; see pdb_budgets)
    binds: bool = True

    @property
    def room(self) -> int | None:
        """Nodes this batch may disrupt at once under it now; None: unknown."""
        return None if self.allowed is None else max(0, self.allowed - len(self.taken))

    def governs(self, node: str) -> bool:
        return self.scope is None or node in self.scope

    def words(self) -> str:
        if self.allowed is None:
            return f"{self.name}: {self.figures}: batch size unknown, no node starts until it is read"
        text = f"{self.name}: {self.figures}"
        if self.taken:
            text += f"; {already(self.taken)}"
        if not self.binds:
            return text + ": its evictions wait their turn, the drains do not"
        return text + f": {self.room} more at once now"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "figures": self.figures, "allowed": self.allowed, "room": self.room,
                "already_disrupted": dict(sorted(self.taken.items())), "words": self.words()}


def already(taken: Mapping[str, str]) -> str:
    """"1 already disrupted by NVSentinel"; several actors: "3 already disrupted (2 by NVSentinel, 1 NotReady)"."""
    counts = Counter(taken.values())
    if len(counts) == 1:
        (who, n), = counts.items()
        return f"{n} already disrupted" + (" (NotReady)" if who == NOT_READY else f" by {_WHO.get(who, who)}")
    parts = [f"{n} NotReady" if who == NOT_READY else f"{n} by {_WHO.get(who, who)}"
             for who, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return f"{len(taken)} already disrupted ({', '.join(parts)})"


def refusing(budgets: Iterable[BatchBudget], node: str, running: Collection[str]) -> BatchBudget | None:
    """The first budget that does not let `node` start beside the batch's `running` nodes; None when all do. A node
    another actor already disrupts costs a budget nothing more; an unknown budget refuses every node it governs."""
    for b in budgets:
        if not b.binds or not b.governs(node) or node in b.taken:
            continue
        if b.room is None:
            return b
        if not b.holds_first and not running:
            continue
        busy = sum(1 for n in running if b.governs(n) and n not in b.taken)
        if busy + 1 > b.room:
            return b
    return None


def parallelism(budgets: Iterable[BatchBudget], nodes: list[str], requested: int) -> tuple[int, BatchBudget | None]:
    """How many of `nodes` start at once, in order, and the budget that stops the next one (None: all of them, or
    the `requested` parallelism, start)."""
    budgets = list(budgets)
    running: list[str] = []
    for node in nodes:
        if len(running) >= max(1, requested):
            return len(running), None
        stop = refusing(budgets, node, running)
        if stop is not None:
            return len(running), stop
        running.append(node)
    return len(running), None


def disrupted(snapshot: ClusterSnapshot, leave_out: Collection[str] = ()) -> dict[str, str]:
    """Every node some actor disrupts now (a hold that is no mere notice, a cordon, or NotReady) -> who, but the
    nodes left out (this batch's own). Worked out once per snapshot."""
    every = snapshot.derived(("batch_budgets.disrupted",), lambda: _disrupted(snapshot))
    return {n: who for n, who in every.items() if n not in leave_out} if leave_out else every


def _disrupted(snapshot: ClusterSnapshot) -> dict[str, str]:
    objects = snapshot.derived("actors_by_node", snapshot.actors.by_node) if snapshot.actors is not None else {}
    out = {}
    for node in snapshot.nodes:
        taints = node.scheduling.taints if node.scheduling is not None else ()
        if not (node.unschedulable or not node.ready or taints or node.annotations or node.upgrade_state
                or node.name in objects or d.NVSENTINEL_STATE in node.labels or d.NVSENTINEL_CORDON_BY in node.labels):
            continue  # nothing any actor writes is on it (node_disruptions reads only these): most of a fleet
        holds = [h for h in node_disruptions(node, snapshot.taken_at, snapshot) if (h.actor, h.phase) not in _NOT_YET]
        if holds:
            out[node.name] = holds[0].actor
        elif node.unschedulable:
            out[node.name] = d.PERSON
        elif not node.ready:
            out[node.name] = NOT_READY
    return out


def scaled(value: str, total: int, round_up: bool) -> int:
    """k8s.io/apimachinery intstr.GetScaledValueFromIntOrPercent: "N%" of total, rounded up or down; "N" as is.
    ValueError when it is neither."""
    text = value.strip()
    if text.endswith("%"):
        percent = int(text[:-1])
        exact = percent * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(text)


def budgets_of(snapshot: ClusterSnapshot, leave_out: Collection[str] = ()) -> list[BatchBudget]:
    """The budgets other controllers set (Karpenter's NodePools, the maintenance-operator's config), and an unknown
    one per source that could not be read. `leave_out`: the batch's own nodes that are not disrupted by anyone else
    (the nodes it cordoned itself, and those it drains): they count as the batch's, not as taken."""
    objects = snapshot.batch_budgets
    if objects is None:  # a backend that reads no budget objects (the demo): no such controller runs there
        return []
    actor_reads = snapshot.actors.reads if snapshot.actors is not None else {}
    out = [BatchBudget(source, f"not readable ({state.partition(': ')[2] or state})", None, kind=UNREAD)
           for source, state in objects.reads.items() if state.startswith(d.UNKNOWN)]
    pools = objects.nodepools if objects.reads.get(NODEPOOL) == d.READ else ()
    configs = [c for c in objects.configs if c.name == MAINTENANCE_CONFIG_NAME] \
        if objects.reads.get(MAINTENANCE_CONFIG) == d.READ else []
    if not pools and not configs:
        return out  # no fleet walk for who disrupts what (a batch start asks on every poll)
    taken = disrupted(snapshot, leave_out)
    out += [nodepool_budget(pool, snapshot, taken, actor_reads) for pool in pools]
    for config in configs:
        out += maintenance_budgets(config, len(snapshot.nodes), taken, actor_reads)
    return out


def nodepool_budget(pool: NodePoolRecord, snapshot: ClusterSnapshot, taken: Mapping[str, str],
                    actor_reads: Mapping[str, str], reason: str | None = None) -> BatchBudget:
    """Karpenter's GetAllowedDisruptionsByReason (v1.13.0 pkg/apis/v1/nodepool.go) for a disruption of `reason`
    (gputui's own maintenance is none of Karpenter's reasons: only budgets without `reasons` bind it): the least
    `nodes` over the budgets in force now, a percentage of the NodePool's nodes rounded up
    (intstr.GetScaledValueFromIntOrPercent(..., numNodes, true)); any budget that does not parse makes it 0 (its
    MustGetAllowedDisruptions). The NodePool's nodes: those labelled karpenter.sh/nodepool=<name>, less those whose
    NodeClaim is InstanceTerminating (BuildDisruptionBudgetMapping, pkg/controllers/disruption/helpers.go; it also
    leaves out nodes not yet initialized, which gputui does not read)."""
    name = f"Karpenter NodePool {pool.name}"
    members = snapshot.derived(("batch_budgets.pools",), lambda: _pools(snapshot)).get(pool.name, frozenset())
    mine = {n: who for n, who in taken.items() if n in members}
    if actor_reads.get("NodeClaim", d.READ).startswith(d.UNKNOWN):
        return BatchBudget(name, "its NodeClaims are not readable: the nodes Karpenter disrupts are unknown", None,
                           members, mine, kind=KARPENTER)
    if pool.problem:
        return BatchBudget(name, f"{pool.problem}: Karpenter allows none (fail closed)", 0, members, mine,
                           kind=KARPENTER)
    count = len(members)
    best: tuple[int, str] | None = None
    closed = []
    for b in pool.budgets:
        try:
            active = (b.schedule is None and b.duration is None) or window_open(b.schedule or "", b.duration or "",
                                                                              snapshot.taken_at)
            allowed = scaled(b.nodes, count, round_up=True)
        except (ScheduleError, ValueError) as exc:
            return BatchBudget(name, f"budget {b.nodes!r} does not parse ({exc}): Karpenter allows none (fail closed)",
                               0, members, mine, kind=KARPENTER)
        if b.reasons is not None and reason not in b.reasons:
            continue  # another reason's budget (Karpenter's Underutilized, Empty, Drifted): not this disruption's
        window = f" (window {b.schedule} for {b.duration}" if b.schedule is not None else ""
        if not active:
            closed.append(f"{b.nodes}{window}, not open now)")
            continue
        figures = f"{b.nodes}" + (f" of {count} node{'s' * (count != 1)}" if b.nodes.strip().endswith("%") else "") + \
            f" → {allowed} node{'s' * (allowed != 1)}" + (f"{window}, open now)" if window else "")
        if best is None or allowed < best[0]:
            best = (allowed, figures)
    if best is None:
        figures = "no budget in force now" + (f" ({'; '.join(closed)})" if closed else "")
        return BatchBudget(name, figures, count, members, mine, kind=KARPENTER)
    return BatchBudget(name, best[1], best[0], members, mine, kind=KARPENTER)


def _pools(snapshot: ClusterSnapshot) -> dict[str, frozenset[str]]:
    """Each NodePool's nodes as Karpenter counts them, once per snapshot (a walk of the fleet)."""
    claims = snapshot.derived("actors_by_node", snapshot.actors.by_node) if snapshot.actors is not None else {}
    out: dict[str, set[str]] = {}
    for n in snapshot.nodes:
        pool = n.labels.get(NODEPOOL_LABEL)
        if pool and not any((c := k.condition(d.KC_INSTANCE_TERMINATING)) is not None and c.status == "True"
                            for k in claims.get(n.name, ([], []))[1]):
            out.setdefault(pool, set()).add(n.name)
    return {k: frozenset(v) for k, v in out.items()}


def maintenance_budgets(config: MaintenanceConfigRecord, nodes: int, taken: Mapping[str, str],
                        actor_reads: Mapping[str, str]) -> list[BatchBudget]:
    """The maintenance-operator's scheduler (v0.3.0 internal/controller/nodemaintenancescheduler_controller.go,
    preSchedule): maxParallelOperations (unset: 1; a percentage of the nodes rounded up; 0 gives no slot, whatever
    its doc says) and maxUnavailable (unset: no limit; a percentage rounded down, getMaxUnavailableNodes). Its
    node count is the whole cluster's; gputui reads only GPU nodes, so a percentage here is of those (fewer or as
    many allowed: never more)."""
    where = f"MaintenanceOperatorConfig {config.namespace}/{config.name}"
    if actor_reads.get("NodeMaintenance", d.READ).startswith(d.UNKNOWN):
        return [BatchBudget(where, "its NodeMaintenances are not readable: the nodes under maintenance are unknown",
                            None, None, taken, kind=MAINTENANCE)]
    out = []
    for field_name, value, round_up, default in (("maxParallelOperations", config.max_parallel, True, "1"),
                                                 ("maxUnavailable", config.max_unavailable, False, None)):
        text = value if value is not None else default
        if text is None:
            continue  # maxUnavailable unset: no limit
        try:
            allowed = scaled(text, nodes, round_up)
        except ValueError:
            out.append(BatchBudget(f"{where} {field_name}", f"{text!r} is not a count or a percentage: the operator "
                                   "schedules none (fail closed)", 0, None, taken, kind=MAINTENANCE))
            continue
        figures = f"{text}" + (f" of {nodes} GPU nodes" if text.endswith("%") else "") + \
            f" → {allowed} node{'s' * (allowed != 1)}" + (" (unset: its default)" if value is None else "")
        out.append(BatchBudget(f"{where} {field_name}", figures, allowed, None, taken, kind=MAINTENANCE))
    return out


def pdb_budgets(snapshot: ClusterSnapshot, nodes: list[str]) -> list[BatchBudget]:
    """Each PodDisruptionBudget over pods on two or more of the batch's nodes: its evictions pass
    disruptionsAllowed at a time, so that many of those nodes move its pods at once (one, when it allows none now:
    the evictions wait for it). Said in the plan, not held to (`binds` False): the Eviction API already holds every
    eviction to it, and holding whole drains back would make their session waits, the long part, run one after
    another."""
    where: dict[tuple[str, str], set[str]] = {}
    by_key = {}
    for node in nodes:
        for pod in snapshot.pods_on(node):
            if pod.terminated or pod.owner_kind == "DaemonSet" or pod.mirror:
                continue
            for b in snapshot.budget_for(pod):
                where.setdefault((b.namespace, b.name), set()).add(node)
                by_key[(b.namespace, b.name)] = b
    out = []
    for key, on in sorted(where.items()):
        if len(on) < 2:
            continue
        b = by_key[key]
        allowed = max(1, b.disruptions_allowed)
        figures = (f"{b.disruptions_allowed} disruption{'s' * (b.disruptions_allowed != 1)} allowed, its pods on "
                   f"{len(on)} of the batch's nodes → {allowed} node{'s' * (allowed != 1)}")
        out.append(BatchBudget(f"PodDisruptionBudget {key[0]}/{key[1]}", figures, allowed, frozenset(on),
                               holds_first=False, kind=PDB, binds=False))
    return out


def with_taken(budget: BatchBudget, taken: Mapping[str, str]) -> BatchBudget:
    """The budget with the nodes of its scope others disrupt (for budgets built without them)."""
    return BatchBudget(budget.name, budget.figures, budget.allowed, budget.scope,
                       {n: w for n, w in taken.items() if budget.governs(n)}, budget.holds_first, budget.kind,
                       budget.binds)
