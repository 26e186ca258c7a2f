"""A maintenance batch planned as a whole, before anything is done: every node's drain plan, then per GPU model
everything the batch moves against what is free outside it (drains already running counted first), where the
capacity guard and the placement preview would stop a run that drains the nodes in this order, whether the
batch goes beyond the GPU Operator's maxUnavailable, and how many of its nodes may drain at once: the minimum
over every budget that governs them (gputui.policy.batch_budgets), the limiting one named. Pure, over one snapshot
(and the pods' do-not-disrupt annotations, read by the caller: gputui.ops.drain.pod_guards)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace

from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.plan import (
    CapacityCheck,
    DrainPlan,
    PodPlan,
    capacity_after,
    plan_drain,
    plan_json,
    pod_count,
    units_needed,
)
from gputui.ops.drain.plan_placement import (
    batch_lines,
    batch_placement_json,
    eviction_order,
    previewed,
    reached_notes,
    strands,
    with_placement,
)
from gputui.ops.drain.pod_guards import GUARDS_SOURCE, with_guards
from gputui.policy.batch_budgets import (
    CAPACITY,
    GPU_OPERATOR,
    PDB,
    UNREAD,
    BatchBudget,
    budgets_of,
    disrupted,
    parallelism,
    pdb_budgets,
)
from gputui.policy.upgrades import max_unavailable
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_resources import WHOLE_GPU


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """The batch as a whole: per GPU model, everything it moves against what is free outside it, and
    where the capacity guard would stop a run that drains the nodes in this order."""

    plans: tuple[DrainPlan, ...]
    capacity: tuple[CapacityCheck, ...]  # one per GPU model, the whole batch's pods
    stop_before: str | None  # the first node the capacity guard would not start; None: all of them
    unavailable_note: str = ""  # beyond the GPU Operator's maxUnavailable once these nodes are drained
    # The first node whose drain would strand a pod the operator did not accept (the guard stops there too).
    placement_stop: str | None = None
    accepted: frozenset[str] = frozenset()  # pods the operator accepts to leave Pending (their keys)
    placement_notes: tuple[str, ...] = ()  # the preview's summary (placement.Preview.describe)
    # Drains already running, and what their pods still there move: counted before this batch's (plan_batch).
    ahead: tuple[str, ...] = ()
    ahead_needed: tuple[CapacityCheck, ...] = ()
    # Every budget over the batch's nodes (gputui.policy.batch_budgets), how many nodes start at once under them
    # (and under the parallelism asked, `parallel`), and the budget that stops one more (None: none does).
    budgets: tuple[BatchBudget, ...] = ()
    at_once: int = 0
    limiting: BatchBudget | None = None
    parallel: int | None = None

    @property
    def budget_stops(self) -> bool:
        """No node may start now: a budget allows none, or one is unknown (fail closed)."""
        return self.at_once == 0 and self.limiting is not None

    @property
    def fits(self) -> bool:
        return self.stop_before is None

    @property
    def stranded(self) -> list[PodPlan]:
        return [p for plan in self.plans for p in plan.stranded]

    @property
    def stranding(self) -> list[PodPlan]:
        """Pods with nowhere to go, not accepted, on the nodes the run starts (before the capacity guard's stop)."""
        names = [p.node for p in self.plans]
        reached = names[: names.index(self.stop_before)] if self.stop_before in names else names
        return [p for plan in self.plans if plan.node in reached for p in plan.stranded if p.pod.key not in self.accepted]

    @property
    def blocked_by_placement(self) -> bool:
        """A pod the run would move would have nowhere to go, not accepted: the plan does not start."""
        return bool(self.stranding)

    @property
    def first_stop(self) -> str | None:
        """Where the run's guard stops: the first node of the capacity's and the placement's stops."""
        names = [p.node for p in self.plans]
        stops = [n for n in (self.stop_before, self.placement_stop) if n in names]
        return min(stops, key=names.index) if stops else None

    @property
    def cordon_first(self) -> list[str]:
        """The nodes a run cordons before its first eviction, as kubectl drain does: those the guard lets
        start (a pod evicted from one must not land on another it drains later)."""
        names = [p.node for p in self.plans]
        stop = self.first_stop
        return names[: names.index(stop)] if stop is not None else names

    def describe(self) -> list[str]:
        lines = [f"the drains running on {', '.join(self.ahead)} still move {sum(c.needed)} "
                 + (f"{c.product or 'GPUs'} GPUs" if c.resource == WHOLE_GPU else f"{c.resource} on {c.product}")
                 + f" ({pod_count(len(c.needed))}): counted below, before this batch's" for c in self.ahead_needed]
        lines += [f"this batch needs {sum(c.needed)} "
                 + (f"{c.product or 'GPUs'} GPUs" if c.resource == WHOLE_GPU else f"{c.resource} on {c.product}")
                 + f" ({pod_count(len(c.needed))}); {c.free_total} are free outside it: {'fits' if c.fits else 'does NOT fit'}"
                 for c in self.capacity if c.needed]
        if len(self.plans) > 1 and self.cordon_first:
            lines.append(f"cordons {', '.join(self.cordon_first)} before the first eviction: no pod moves onto a "
                         f"node this batch drains")
        if self.unavailable_note:
            lines.append(self.unavailable_note)
        lines.extend(self.budget_lines())
        lines.extend(batch_lines(self))
        if self.stop_before is not None:
            done = [p.node for p in self.plans][: [p.node for p in self.plans].index(self.stop_before)]
            lines.append(f"the capacity guard would stop before {self.stop_before}: "
                         f"{len(done)} of {len(self.plans)} nodes drained" + (f" ({', '.join(done)})" if done else ""))
        return lines


    def budget_lines(self) -> list[str]:
        """How many nodes drain at once and why, then each budget that governs them."""
        # One node, under only its own free GPUs and PDBs, needs no word on parallelism (a plain drain's plan).
        if not self.budgets or (len(self.plans) < 2 and not self.budget_stops
                                and all(b.kind in (CAPACITY, PDB) for b in self.budgets)):
            return []
        total = len(self.plans)
        if self.limiting is None:
            head = f"nodes at once: {self.at_once} of {total}" + (
                f" (--parallel {self.parallel}; every budget allows it)" if self.parallel is not None
                and self.at_once < total else ": every budget allows it")
        elif self.at_once == 0:
            head = f"nodes at once: NONE may start now: {self.limiting.words()}"
        else:
            head = f"nodes at once: {self.at_once} of {total}, limited by {self.limiting.words()}"
        return [head] + [f"  budget {b.words()}" for b in self.budgets if b is not self.limiting]


def plan_batch(snapshot: ClusterSnapshot, nodes: list[str], options: Mapping[str, DrainOptions] | DrainOptions,
               accept_stranded: Collection[str] = (), draining: Collection[str] = (), parallel: int | None = None,
               guards: Mapping[str, str] | None = None, guards_error: str = "") -> BatchPlan:
    """Every node's plan, the batch's capacity per GPU model, where each replacement can go (the batch's pods
    placed in its order), and the guard's predicted stops. Capacity outside the batch only: a pod moved onto a
    node the batch drains later would have to move again. `accept_stranded`: pods the operator accepts to
    leave with nowhere to go. `draining`: nodes other drains are running on. Their pods still there go first:
    they take free GPUs and places before this batch's pods do, so two drains never count the same GPU.
    `parallel`: the nodes at once asked for (None: as many as the budgets allow). `guards`: the batch's pods'
    karpenter.sh/do-not-disrupt annotations (pod key -> value), each a blocker; `guards_error`: why they could not
    be read (the batch then starts nothing: fail closed)."""
    members = set(nodes)
    ahead = [n for n in dict.fromkeys(draining) if n not in members and snapshot.node(n) is not None]
    away = members | set(ahead)
    per_node = options if isinstance(options, Mapping) else {n: options for n in nodes}
    plans = tuple(with_guards(plan_drain(snapshot, n, per_node[n], batch=away, preview=False), guards or {})
                  for n in nodes)
    # A running drain moves all its pods (kubectl's filters passed when it started). Only the pods a controller
    # recreates need room, so force (which lets a bare pod go, never to come back) changes nothing counted here.
    moving = DrainOptions(delete_emptydir_data=True)
    before = tuple(plan_drain(snapshot, n, moving, preview=False) for n in ahead)  # only their pods are read
    placements = previewed(snapshot, away, [p.pod for plan in before + plans for p in eviction_order(plan.pods)])
    plans = tuple(replace(plan, pods=with_placement(plan.pods, placements)) for plan in plans)
    accepted = frozenset(accept_stranded)
    needed = _needs(before)
    stop_before = None
    for plan in plans:
        product = plan.capacity.product
        for resource, units in units_needed(plan.pods).items():
            needed.setdefault((product, resource), []).extend(units)
            if stop_before is None and not capacity_after(snapshot, away, product, needed[(product, resource)],
                                                          resource).fits:
                stop_before = plan.node
    checks = tuple(capacity_after(snapshot, away, product, units, resource)
                   for (product, resource), units in sorted(needed.items()))
    # Only the nodes the run starts (those before the capacity guard's stop) move pods: a pod stranded past
    # the stop blocks nothing and stops nothing; the preview still says where it could go.
    reached = [plan.node for plan in plans][: [plan.node for plan in plans].index(stop_before)] \
        if stop_before is not None else [plan.node for plan in plans]
    placement_stop = next((plan.node for plan in plans if plan.node in reached
                           and strands((p.placement for p in plan.pods), accepted)), None)
    ahead_needed = tuple(capacity_after(snapshot, away, product, list(units), resource)
                         for (product, resource), units in sorted(_needs(before).items()))
    budgets = _budgets(snapshot, nodes, plans, stop_before, guards_error)
    at_once, limiting = parallelism(budgets, list(nodes), parallel if parallel is not None else len(nodes))
    return BatchPlan(plans, checks, stop_before, _beyond_max_unavailable(snapshot, members), placement_stop, accepted,
                     tuple(reached_notes(snapshot, placements, reached)), tuple(ahead), ahead_needed,
                     tuple(budgets), at_once, limiting, parallel)


def _budgets(snapshot: ClusterSnapshot, nodes: list[str], plans: tuple[DrainPlan, ...], stop_before: str | None,
             guards_error: str) -> list[BatchBudget]:
    """Every budget over the batch: the pods' guards when unread, the other controllers' (gputui.policy.batch_budgets),
    the GPU Operator's maxUnavailable, free GPUs per model, and PodDisruptionBudgets. Before the batch starts, a node of
    its own that another actor holds counts as taken (draining it costs that budget nothing more); the rest are in
    no one's hands yet, so nothing is left out of what others disrupt."""
    taken = disrupted(snapshot)
    out = [BatchBudget(GUARDS_SOURCE, f"not readable ({guards_error})", None, kind=UNREAD)] if guards_error else []
    out += [b for b in budgets_of(snapshot) if any(b.governs(n) for n in nodes)]  # only those over its nodes
    policy = snapshot.upgrade_policy
    if policy is not None:  # as parallel_hold counts: unschedulable or NotReady; never holds the batch's first node
        down = {n.name: taken[n.name] for n in snapshot.nodes if n.unschedulable or not n.ready}  # all in `taken`
        limit = max_unavailable(policy, len(snapshot.nodes))
        out.append(BatchBudget("the GPU Operator's maxUnavailable", f"{policy.max_unavailable} of "
                               f"{len(snapshot.nodes)} GPU nodes → {limit} node{'s' * (limit != 1)}", limit, None, down,
                               holds_first=False, kind=GPU_OPERATOR))
    names = [p.node for p in plans]
    reached = names.index(stop_before) if stop_before in names else len(names)
    for product in sorted({p.capacity.product for p in plans if p.to_evict}):
        of_model = [p.node for p in plans if p.capacity.product == product]
        fits = sum(1 for n in of_model if names.index(n) < reached)
        out.append(BatchBudget(f"free {product or 'GPU'} GPUs", f"the pods of {fits} of the batch's {len(of_model)} "
                               f"{product or 'GPU'} nodes fit outside it → {fits} node{'s' * (fits != 1)}", fits,
                               frozenset(of_model), kind=CAPACITY))
    return out + pdb_budgets(snapshot, nodes)


def _needs(plans: Iterable[DrainPlan]) -> dict[tuple[str, str], list[int]]:
    """(GPU model, resource) -> each moving pod's units, over these plans in order."""
    needed: dict[tuple[str, str], list[int]] = {}
    for plan in plans:
        product = plan.capacity.product  # the node's GPU model
        for resource, units in units_needed(plan.pods).items():
            needed.setdefault((product, resource), []).extend(units)
    return needed


def _beyond_max_unavailable(snapshot: ClusterSnapshot, batch: set[str]) -> str:
    """The GPU Operator upgrades drivers only while fewer than maxUnavailable GPU nodes are unavailable: a
    batch that takes the fleet past it stalls the operator's upgrades until nodes come back. Said, with the
    figures; the operator chooses."""
    policy = snapshot.upgrade_policy
    if policy is None:
        return ""
    limit = max_unavailable(policy, len(snapshot.nodes))
    after = {n.name for n in snapshot.nodes if n.unschedulable or not n.ready} | batch
    if len(after) <= limit:
        return ""
    return (f"draining these leaves {len(after)} of {len(snapshot.nodes)} GPU nodes unavailable, beyond the GPU "
            f"Operator's maxUnavailable {policy.max_unavailable} ({limit}): its driver upgrades wait meanwhile")


def batch_json(batch: BatchPlan) -> dict:
    return {
        "nodes": [plan_json(p) for p in batch.plans],
        "capacity": [{"product": c.product, "resource": c.resource, "needed_gpus": sum(c.needed), "pods": len(c.needed),
                      "free_gpus": c.free_total, "fits": c.fits} for c in batch.capacity],
        "guard_stops_before": batch.first_stop,
        "placement_stops_before": batch.placement_stop,
        "beyond_max_unavailable": batch.unavailable_note or None,
        "nodes_at_once": batch.at_once,
        "limiting_budget": batch.limiting.to_dict() if batch.limiting is not None else None,
        "budgets": [b.to_dict() for b in batch.budgets],
        "placement": batch_placement_json(batch),
    }
