"""What a drain would do, before it does anything: kubectl's filters plus session awareness. Pure.

kubectl's pod filters, in its order (the first that says "keep" wins):
DaemonSet-managed (error unless ignore-daemonsets, then skipped with a
warning), mirror pods (skipped silently), emptyDir volumes (error unless
delete-emptydir-data, then a warning), no controller (error unless force,
then a warning). Finished pods pass the checks. Any error stops the drain of
that node before its first eviction.

Then gputui's rule, by the pod's session state (model.SessionState): a known
count is waited on; an unknown one is waited on too (never read as zero), and
at the deadline evicted only if the options say so; no signal is evicted at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum

from gputui.ops.drain.capacity import (  # the names the batch and the tests import from the plan
    CapacityCheck,
    _free_outside,  # noqa: F401
    _offered,  # noqa: F401
    capacity_after,
    pod_count,
    units_needed,
)
from gputui.ops.drain.eviction_api import NOTHING, EvictionApiView, PodEvictionApi, pod_json
from gputui.ops.drain.gpu_target import UNKNOWN_GPU, fence_words
from gputui.ops.drain.maintenance_request import SOURCE as MAINTENANCE_SOURCE
from gputui.ops.drain.maintenance_request import RequestPlan, request_plan
from gputui.ops.drain.options import DEFAULT_SESSION_DEADLINE_S, DrainOptions
from gputui.ops.drain.out_of_rotation import OutOfRotation, choose
from gputui.ops.drain.placement import Placement
from gputui.ops.drain.plan_placement import (
    eviction_order,
    placement_json,
    previewed,
    with_placement,
)
from gputui.ops.drain.whole_versions import whole_version_warnings
from gputui.policy.rotation import Rotation, RotationState, rotation_of
from gputui.policy.upgrades import owner_warning
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.disruptions import NOT_INSTALLED
from gputui.vocabulary.label_selectors import selector_matches
from gputui.vocabulary.model import Budget, InferencePod
from gputui.vocabulary.sessions import PodSessions, SessionState

__all__ = ["DEFAULT_SESSION_DEADLINE_S", "CapacityCheck", "DrainOptions", "DrainPlan", "PodPlan", "Step",
           "capacity_after", "classify", "plan_drain", "plan_json", "pod_count", "units_needed"]


class Step(str, Enum):
    EVICT = "evict"  # no session signal: evict now (retrying while a PDB blocks)
    WAIT_SESSIONS = "wait"  # inference pod: wait for its sessions (known or unknown), then evict
    SKIP = "skip"  # left alone (DaemonSet, mirror pod, finished)
    ERROR = "error"  # blocks the whole node's drain


NO_BUDGET = "no PodDisruptionBudget"


@dataclass(frozen=True, slots=True)
class PodPlan:
    pod: InferencePod
    sessions: PodSessions  # as the plan's snapshot read them
    step: Step
    note: str = ""  # warning or error, in kubectl's words where kubectl has them
    budgets: tuple[Budget, ...] = ()
    # Waited on: what the drain takes out of rotation before it waits (None: it stays in), and why.
    rotation: OutOfRotation | None = None
    rotation_note: str = ""
    # A label can take it out (gputui.policy.rotation): the run takes it out later when capacity kept it in.
    switch: Rotation | None = None
    # Where its replacement can go (gputui.ops.drain.placement); None: it is not recreated, or not previewed.
    placement: Placement | None = None
    # Its pending EvictionRequests, and another responder handling its eviction (gputui.ops.drain.eviction_api).
    eviction_api: PodEvictionApi = NOTHING

    @property
    def budget_note(self) -> str:
        if not self.budgets:
            return NO_BUDGET if self.unguarded else ""
        if len(self.budgets) > 1:
            return "more than one PodDisruptionBudget: the eviction will fail"
        return self.budgets[0].describe()

    @property
    def unguarded(self) -> bool:
        """An inference pod the drain moves with no PodDisruptionBudget over it: nothing limits how many of
        its service's pods go at once (this drain's own capacity rule aside)."""
        p = self.pod
        return not self.budgets and self.recreated and bool(p.service or p.session_signal)

    @property
    def pdb_blocks_now(self) -> bool:
        return len(self.budgets) == 1 and self.budgets[0].disruptions_allowed <= 0 and self.pod.phase == "Running"

    def max_seconds(self, options: DrainOptions) -> float:
        """The longest this pod can take to go: its session wait (to the deadline), then its preStop sleep
        and grace period (the API's default 30 s when unset)."""
        wait = options.session_deadline_s if self.step is Step.WAIT_SESSIONS else 0.0
        grace = self.pod.termination_grace_s if self.pod.termination_grace_s is not None else 30
        if options.grace_seconds is not None:
            grace = options.grace_seconds
        return wait + grace

    def grace_warning(self, options: DrainOptions) -> str:
        """A grace period too short for the pod to stop cleanly: the kubelet kills it mid-shutdown."""
        grace = options.grace_seconds if options.grace_seconds is not None else self.pod.termination_grace_s
        needed = self.pod.prestop_sleep_s + options.engine_shutdown_s
        if self.step is not Step.WAIT_SESSIONS or grace is None or not needed or grace >= needed:
            return ""
        return (f"terminationGracePeriodSeconds {grace} is shorter than its preStop sleep {self.pod.prestop_sleep_s}s "
                f"+ engine shutdown {options.engine_shutdown_s:g}s: it is killed before it stops cleanly")

    @property
    def recreated(self) -> bool:
        """Evicted while it runs, and a controller makes a replacement the scheduler must place."""
        p = self.pod
        return self.step in (Step.EVICT, Step.WAIT_SESSIONS) and not p.terminated and not p.deleting \
            and bool(p.owner_kind)

    @property
    def moves(self) -> bool:
        """Its GPUs need a new home: evicted, running, and recreated by a controller elsewhere."""
        p = self.pod
        return self.step in (Step.EVICT, Step.WAIT_SESSIONS) and p.gpu_request > 0 and not p.terminated \
            and not p.deleting and bool(p.owner_kind)


@dataclass(frozen=True, slots=True)
class DrainPlan:
    node: str
    options: DrainOptions
    pods: tuple[PodPlan, ...]
    capacity: CapacityCheck
    already_cordoned: bool
    warnings: tuple[str, ...] = ()  # lint: PDBs that can never allow an eviction
    fence: str = ""  # one GPU's drain: what keeps new pods off that GPU (gputui.ops.drain.gpu_target.fence_words)
    eviction_state: str = NOT_INSTALLED  # the EvictionRequest API as the plan read it: read, not installed, unknown
    request: RequestPlan | None = None  # a drain as the maintenance-operator's requestor (None: gputui cordons)

    @property
    def title(self) -> str:
        """"node/n1", or "node/n1 GPU 1" for one GPU's drain."""
        return f"node/{self.node}" + (f" GPU {self.options.gpu}" if self.options.gpu else "")

    @property
    def errors(self) -> list[str]:
        request = [self.request.error] if self.request is not None and self.request.error else []
        return request + [f"{p.pod.key}: {p.note}" for p in self.pods if p.step is Step.ERROR]

    @property
    def blocked(self) -> bool:
        return bool(self.errors)

    @property
    def blockers(self) -> list[str]:
        """Pods gputui will not evict because another responder handles their eviction: the rest of the node
        drains; the drain ends only when they are gone (or, at the deadline, leaves them in place, unfinished)."""
        return [f"{p.pod.key}: {h.words()}" for p in self.to_evict if (h := p.eviction_api.handler) is not None]

    @property
    def stranded(self) -> list[PodPlan]:
        """Pods whose replacement would have nowhere to go (the placement preview's "nowhere")."""
        return [p for p in self.pods if p.placement is not None and p.placement.stranded]

    @property
    def to_evict(self) -> list[PodPlan]:
        return [p for p in self.pods if p.step in (Step.EVICT, Step.WAIT_SESSIONS)]

    @property
    def live_sessions(self) -> int:
        """Known live sessions to wait for (unknown ones are counted apart: unknown_pods)."""
        return sum(p.sessions.live or 0 for p in self.pods if p.step is Step.WAIT_SESSIONS)

    @property
    def unknown_pods(self) -> list[PodPlan]:
        return [p for p in self.pods if p.step is Step.WAIT_SESSIONS and p.sessions.state is SessionState.UNKNOWN]

    def describe_sessions(self) -> str:
        text = f"{self.live_sessions} live sessions to wait for"
        unknown = len(self.unknown_pods)
        if unknown:
            text += f", {unknown} pods with sessions unknown"
        return text


def classify(pod: InferencePod, sessions: PodSessions, options: DrainOptions, why_unknown: str = "",
             ) -> tuple[Step, str]:
    """kubectl drain's filters in its order, then gputui's: wait on a pod's sessions, known or unknown."""
    if pod.owner_kind == "DaemonSet":
        if not options.ignore_daemonsets:
            return Step.ERROR, "DaemonSet-managed pod (use ignore-daemonsets)"
        return Step.SKIP, "ignoring DaemonSet-managed pod"
    if pod.mirror:
        return Step.SKIP, "mirror pod"
    if pod.terminated:
        return Step.EVICT, ""  # finished pods pass the checks; the apiserver deletes them at once
    warnings = []
    if pod.has_emptydir:
        if not options.delete_emptydir_data:
            return Step.ERROR, "has local storage (emptyDir); use delete-emptydir-data"
        warnings.append("deleting emptyDir data")
    if not pod.owner_kind:
        if not options.force:
            return Step.ERROR, "not managed by a controller (use force)"
        warnings.append("not managed by a controller: it will not come back")
    state = sessions.state
    if state is SessionState.UNKNOWN:
        at_deadline = ("evicted at its deadline, its sessions possibly cut (chosen)"
                       if options.evict_unknown_at_deadline else "left in place at its deadline")
        warnings.append(f"sessions unknown ({why_unknown or 'no readable session series'}): waits for a count; "
                        f"{at_deadline}")
    step = Step.EVICT if state is SessionState.NONE else Step.WAIT_SESSIONS
    return step, "; ".join(warnings)


def _unguarded_warnings(snapshot: ClusterSnapshot, plans: Iterable[PodPlan]) -> list[str]:
    """One line per service whose moving pods no PodDisruptionBudget covers. An API that failed to answer
    may have failed on the budgets too: then that is what is said, not that there are none."""
    by_service: dict[str, list[str]] = {}
    for p in plans:
        if p.unguarded:
            by_service.setdefault(f"{p.pod.namespace}/{p.pod.service or p.pod.name}", []).append(p.pod.name)
    if not by_service:
        return []
    api = snapshot.source("API")
    if api is not None and api.error:
        return [f"PodDisruptionBudgets not known ({api.error}): {len(by_service)} service"
                f"{'s' if len(by_service) != 1 else ''} may have none: {', '.join(sorted(by_service))}"]
    return [f"{svc}: {NO_BUDGET} covers {'its pod' if len(names) == 1 else f'its {len(names)} pods'} here: "
            "nothing but this drain limits how many of its pods go at once (a driver upgrade or another drain "
            "may take the rest)" for svc, names in sorted(by_service.items())]


def why_unknown(snapshot: ClusterSnapshot) -> str:
    """Why session counts may be unreadable right now, for the plan's notes."""
    metrics = snapshot.source("metrics")
    if metrics is None:
        return ""
    if metrics.error:
        return f"metrics {metrics.error}"
    return "" if metrics.fetched_at else "metrics not read yet"


def _on_gpu(pod: InferencePod, options: DrainOptions) -> bool:
    """One GPU's drain takes the pods bound to it and those whose GPU is unknown (the plan shows them)."""
    return not options.gpu or pod.key in options.gpu_pods or pod.key in options.unattributed


def _unknown_gpu(pod: InferencePod, options: DrainOptions, step: Step, note: str) -> tuple[Step, str]:
    """A pod that may be on the GPU: an error until the operator chooses to move it too (never silently left)."""
    if not options.gpu or pod.key not in options.unattributed or step is Step.SKIP:
        return step, note
    if not options.include_unattributed:
        return Step.ERROR, (f"{UNKNOWN_GPU}: no DCGM series or ResourceClaim says which GPU it holds; it may be on "
                            f"GPU {options.gpu} (choose: --include-unattributed moves it too)")
    return step, "; ".join(filter(None, [f"{UNKNOWN_GPU}: moved too (chosen)", note]))


def selected(pod: InferencePod, selector: Mapping[str, str]) -> bool:
    return selector_matches(selector, pod.labels, empty_matches=True)  # kubectl drain without -l: every pod


def _with_rotation(plans: list[PodPlan], snapshot: ClusterSnapshot) -> list[PodPlan]:
    """Each pod waited on with what the drain takes out of rotation first (ops.drain.out_of_rotation)."""
    waited = [(p.pod, rotation_of(p.pod, snapshot)) for p in plans if p.step is Step.WAIT_SESSIONS]
    if not waited:
        return plans
    states = {pod.key: r.state for pod, r in waited}
    chosen = choose(snapshot, waited, snapshot.taken_at)
    switches = {pod.key: r for pod, r in waited if r.state is RotationState.SWITCH}
    out = []
    for p in plans:
        if p.pod.key in chosen:
            entry, why = chosen[p.pod.key]
            # New sessions keep reaching a pod no label can take out, or one kept in for capacity: its count
            # need not fall before the deadline. Said before anything is written. (Unknown says nothing more
            # than the plan's session notes do.)
            if entry is None and states[p.pod.key] is RotationState.NO_SWITCH:
                why = (f"new sessions keep arriving: {why}; the wait may run to its deadline "
                       f"(gputui check: services.rotation says how to fix it)")
            p = replace(p, rotation=entry, rotation_note=why, switch=switches.get(p.pod.key))
        out.append(p)
    return out


def _arrivals_warning(plan: PodPlan) -> str:
    if plan.rotation is None and ("new sessions keep arriving" in plan.rotation_note):
        return plan.rotation_note
    return ""


def plan_drain(
    snapshot: ClusterSnapshot, node: str, options: DrainOptions = DrainOptions(), batch: set[str] | None = None,
    preview: bool = True,
) -> DrainPlan:
    """The node's plan; `preview`: with where each replacement can go (plan_batch previews the whole batch)."""
    target = snapshot.node(node)
    if target is None:
        raise KeyError(node)
    reason = why_unknown(snapshot)
    plans = []
    for pod in sorted(snapshot.pods_on(node), key=lambda p: (p.namespace, p.name)):
        if (options.pod_selector and not selected(pod, options.pod_selector)) or not _on_gpu(pod, options):
            continue
        sessions = snapshot.sessions(pod)
        step, note = _unknown_gpu(pod, options, *classify(pod, sessions, options, reason))
        plans.append(PodPlan(pod, sessions, step, note, tuple(snapshot.budget_for(pod))))
    plans = _with_rotation(plans, snapshot)
    evictions = EvictionApiView.of(snapshot)
    if evictions.served:  # each pod to move: its pending EvictionRequests, and whether another responder has it
        plans = [replace(p, eviction_api=evictions.pod(p.pod.namespace, p.pod.name, p.pod.uid))
                 if p.step in (Step.EVICT, Step.WAIT_SESSIONS) else p for p in plans]
    away = (batch or set()) | {node}
    checks = [capacity_after(snapshot, away, target.gpu_product, units, resource)
              for resource, units in sorted(units_needed(plans).items())]
    # The plan shows one check: the first that does not fit, else the first (a node rarely mixes schemes).
    capacity = next((c for c in checks if not c.fits), checks[0] if checks else
                    capacity_after(snapshot, away, target.gpu_product, []))
    owner = owner_warning(target)
    warnings = tuple(dict.fromkeys(
        ([owner] if owner else [])
        + [f"{p.pod.key}: {d}" for p in plans if p.step is not Step.SKIP and len(p.budgets) == 1
           and (d := p.budgets[0].deadlock())]
        + [f"{p.pod.key}: {w}" for p in plans if (w := p.grace_warning(options))]
        + [f"{p.pod.key}: {w}" for p in plans if (w := _arrivals_warning(p))]
        + whole_version_warnings(snapshot, [p.pod for p in plans if p.moves], away)
        + _unguarded_warnings(snapshot, plans)
        + [w for w in [evictions.warning(sum(p.step in (Step.EVICT, Step.WAIT_SESSIONS) for p in plans))] if w]))
    pods = tuple(plans)
    if preview:
        pods = with_placement(pods, previewed(snapshot, away, [p.pod for p in eviction_order(pods)]))
    fence = fence_words(options, target) if options.gpu else ""
    return DrainPlan(node, options, pods, capacity, target.unschedulable, warnings, fence, evictions.state,
                     _request(snapshot, node, options, pods))


def _request(snapshot: ClusterSnapshot, node: str, options: DrainOptions, pods: tuple[PodPlan, ...],
             ) -> RequestPlan | None:
    """The NodeMaintenance a drain through the maintenance-operator would request (None: gputui cordons)."""
    if not options.maintenance_namespace or options.gpu:  # one GPU's drain leaves the node schedulable: no request
        return None
    source = snapshot.actors.reads.get(MAINTENANCE_SOURCE) if snapshot.actors is not None else None
    moved = {p.pod.key for p in pods if p.step in (Step.EVICT, Step.WAIT_SESSIONS)}
    sessions = {p.pod.key for p in pods if p.step is Step.WAIT_SESSIONS}
    return request_plan(options.maintenance_namespace, node, snapshot.pods_on(node), moved, sessions, source)


def plan_json(plan: DrainPlan) -> dict:
    out = _node_json(plan)
    if plan.options.gpu:  # one GPU's drain: which, its pods, the unknown ones, and what fences it
        out["gpu"] = {"gpu": plan.options.gpu, "device": plan.options.gpu_device or None, "fence": plan.fence,
                      "pods": list(plan.options.gpu_pods), "unattributed": list(plan.options.unattributed),
                      "include_unattributed": plan.options.include_unattributed}
    if plan.request is not None or not plan.options.gpu:  # how the node is taken (one GPU's drain does not take it)
        out["via"] = plan.request.to_json() if plan.request is not None else {"via": "cordon"}
    if plan.eviction_state != NOT_INSTALLED:  # the EvictionRequest API served: its state, blockers, and per pod
        out["eviction_requests"], out["blockers"] = plan.eviction_state, plan.blockers
        for i, p in enumerate(plan.pods):  # out["pods"] holds one entry per pod, in order (_node_json)
            out["pods"][i]["eviction_requests"] = pod_json(p.eviction_api)
    return out


def _node_json(plan: DrainPlan) -> dict:
    return {
        "node": plan.node,
        "blocked": plan.blocked,
        "errors": plan.errors,
        "warnings": list(plan.warnings),
        "already_cordoned": plan.already_cordoned,
        "live_sessions": plan.live_sessions,
        "pods_with_sessions_unknown": len(plan.unknown_pods),
        "options": {"selector": dict(plan.options.pod_selector), "disable_eviction": plan.options.disable_eviction,
                    "session_threshold": plan.options.session_threshold,
                    "session_deadline_s": plan.options.session_deadline_s,
                    "evict_unknown_at_deadline": plan.options.evict_unknown_at_deadline},
        "capacity": {"product": plan.capacity.product, "resource": plan.capacity.resource,
                     "needed_gpus": list(plan.capacity.needed),
                     "free_gpus": plan.capacity.free_total, "fits": plan.capacity.fits},
        "pods": [
            {"namespace": p.pod.namespace, "name": p.pod.name, "step": p.step.value, "note": p.note,
             "gpus": p.pod.gpu_request, "service": p.pod.service, "version": p.pod.version,
             "session_state": p.sessions.state.value, "live_sessions": p.sessions.live,
             "max_seconds": None if p.step in (Step.SKIP, Step.ERROR) else p.max_seconds(plan.options),
             "placement": placement_json(p.placement),
             "budgets": [{"name": b.name, "disruptions_allowed": b.disruptions_allowed,
                          "current_healthy": b.current_healthy, "desired_healthy": b.desired_healthy}
                         for b in p.budgets]}
            for p in plan.pods
        ],
    }
