"""The injected-fault drill of seed 000 §6, on one node the operator names: cordon it, evict one inference
pod through the Eviction API, time how long until a replacement is Ready elsewhere and until the router
sends it traffic (its live sessions above zero), then undo the cordon. Planned first, like every op: the
plan says what it will write and how many live sessions the eviction cuts, and refuses a drill that would
take a service down (its only ready replica) before anything is written."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

from gputui.backends.base import BackendError, EvictionOutcome
from gputui.ops.audit import outcome
from gputui.ops.context import OpContext
from gputui.ops.errors import ReadOnlyError
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod
from gputui.vocabulary.sessions import SessionState

REPLACED_BY_CONTROLLER = ("ReplicaSet", "StatefulSet", "Rollout")  # an evicted pod of these comes back


class DrillError(BackendError):
    """The drill cannot be run as asked (one line, nothing written)."""


@dataclass(frozen=True, slots=True)
class DrillPlan:
    node: str
    pod: InferencePod
    already_cordoned: bool
    serving: int  # the other ready replicas of the same version: what serves during the drill
    sessions: int | None  # the pod's live sessions when planned (None: unknown, or not an inference pod)

    def describe(self) -> str:
        cut = ("an unknown number of live sessions (cannot be read now)" if self.sessions is None
               else f"{self.sessions} live sessions")
        steps = [] if self.already_cordoned else [f"cordon {self.node}"]
        steps += [f"evict {self.pod.key} ({self.pod.service} {self.pod.version}; cuts {cut})",
                  "time its replacement until Ready elsewhere and serving traffic"]
        if not self.already_cordoned:
            steps.append(f"uncordon {self.node}")
        return "Drill: " + ", then ".join(steps) + f". {self.serving} other ready replicas serve meanwhile."


def _candidates(snapshot: ClusterSnapshot, node: str) -> list[InferencePod]:
    return [p for p in snapshot.pods_on(node) if p.service and p.ready and p.phase == "Running" and not p.deleting
            and p.owner_kind in REPLACED_BY_CONTROLLER]


def _peers(snapshot: ClusterSnapshot, pod: InferencePod) -> list[InferencePod]:
    return [p for p in snapshot.pods if (p.namespace, p.service, p.version) == (pod.namespace, pod.service, pod.version)
            and p.uid != pod.uid and not p.deleting and not p.terminated]


def plan_drill(snapshot: ClusterSnapshot, node: str, pod_key: str | None = None) -> DrillPlan:
    found = snapshot.node(node)
    if found is None:
        raise DrillError(f'node "{node}" not found')
    if not found.ready:
        raise DrillError(f"{node} is not Ready: a drill needs a healthy node to fail on purpose")
    candidates = _candidates(snapshot, node)
    if pod_key is not None:
        candidates = [p for p in candidates if p.key == pod_key]
        if not candidates:
            raise DrillError(f"{pod_key} is not a ready inference pod of a controller on {node}")
    if not candidates:
        raise DrillError(f"no ready inference pod of a controller on {node}: nothing to drill with")

    def cost(p: InferencePod) -> tuple[bool, int, str]:  # fewest known sessions first; unknown last
        live = snapshot.sessions(p).live
        return (live is None, live or 0, p.key)

    pod = min(candidates, key=cost)
    serving = sum(1 for p in _peers(snapshot, pod) if p.ready)
    if not serving:
        raise DrillError(f"{pod.key} is the only ready replica of {pod.namespace}/{pod.service} {pod.version}: "
                         "evicting it takes the service down, which is an outage, not a drill")
    return DrillPlan(node, pod, found.unschedulable, serving, snapshot.sessions(pod).live)


@dataclass
class DrillReport:
    plan: DrillPlan
    replacement: str = ""
    ready_after_s: float | None = None  # from the eviction to the replacement's Ready
    traffic_after_s: float | None = None  # ... to its first live session; None: not seen (or unknown)
    traffic_unknown: bool = False  # the replacement's sessions could not be read
    failure: str = ""
    undone: bool = False
    log: list[str] = field(default_factory=list)

    @property
    def recovered(self) -> bool:
        return self.ready_after_s is not None and self.traffic_after_s is not None and not self.failure


def _replacement(snap: ClusterSnapshot, plan: DrillPlan, before: set[str]) -> InferencePod | None:
    fresh = [p for p in _peers(snap, plan.pod) if p.uid not in before and p.node and p.node != plan.node]
    return min(fresh, key=lambda p: (not p.ready, p.key)) if fresh else None


def run_drill(plan: DrillPlan, ctx: OpContext, timeout_s: float = 600.0) -> Generator[str, None, DrillReport]:
    """Progress lines as the drill moves; the report is the generator's return value. The cordon is undone
    whatever happens (a failure, a timeout, the operator's interrupt)."""
    writer = ctx.writer
    if writer is None:
        raise ReadOnlyError("the drill")
    reader, audit, clock, sleep, poll_s = ctx.reader, ctx.audit, ctx.clock, ctx.sleep, ctx.poll_s
    report = DrillReport(plan)
    before = {p.uid for p in _peers(reader.snapshot(), plan.pod)} | {plan.pod.uid}
    target = f"node/{plan.node}"
    cordoned = False  # by this drill: what the undo takes back
    # One intent for the eviction and its retries while a PDB says 429; its result says how it ended.
    evict = None
    try:
        if not plan.already_cordoned:
            with audit.writing("cordon", target, {"reason": "drill"}):
                writer.set_unschedulable(plan.node, True)
            cordoned = True
            yield f"cordoned {plan.node}"
        started = clock()
        deadline = started + timeout_s
        evict = audit.intent("evict", f"pod/{plan.pod.key}",
                             {"node": plan.node, "reason": "drill", "sessions": plan.sessions})
        tries = 0
        while True:
            try:
                result = writer.evict_pod(plan.pod.namespace, plan.pod.name, uid=plan.pod.uid)
            except BaseException as exc:
                audit.result(evict, outcome(exc))
                raise
            tries += 1
            if result.outcome in (EvictionOutcome.EVICTED, EvictionOutcome.GONE):
                audit.result(evict, result.outcome.value, {"tries": tries})
                break
            # REPLACED: another pod stands under its name (the planned one is gone, nothing evicted): no drill.
            if result.outcome in (EvictionOutcome.FAILED, EvictionOutcome.REPLACED) or clock() >= deadline:
                word = "error" if result.outcome is EvictionOutcome.FAILED else "refused"
                audit.result(evict, f"{word}: {result.reason}", {"tries": tries})
                report.failure = f"eviction of {plan.pod.key} {result.outcome.value}: {result.reason}"
                return report
            yield f"eviction blocked, retrying: {result.reason}"
            sleep(poll_s)
        evicted = clock()
        yield f"evicted {plan.pod.key} (cut {'unknown' if plan.sessions is None else plan.sessions} sessions)"
        while clock() < deadline:
            sleep(poll_s)
            try:
                snap = reader.snapshot()
            except BackendError as exc:  # a failed read says nothing about recovery: wait for the next
                yield f"read failed, waiting: {exc}"
                continue
            new = _replacement(snap, plan, before)
            if new is None:
                continue
            if new.key != report.replacement:
                report.replacement = new.key
                yield f"replacement {new.key} scheduled on {new.node}"
            if new.ready and report.ready_after_s is None:
                report.ready_after_s = clock() - evicted
                yield f"{new.key} Ready after {report.ready_after_s:.0f}s"
            if report.ready_after_s is not None:
                read = snap.sessions(new)
                report.traffic_unknown = read.state is SessionState.UNKNOWN
                if (read.live or 0) > 0:
                    report.traffic_after_s = clock() - evicted
                    yield f"{new.key} serving traffic after {report.traffic_after_s:.0f}s"
                    return report
        report.failure = (f"not recovered within {timeout_s:.0f}s: " +
                          ("no replacement scheduled" if not report.replacement else
                           "the replacement never became Ready" if report.ready_after_s is None else
                           "its sessions cannot be read" if report.traffic_unknown else "no traffic reached it"))
        return report
    finally:
        if evict is not None:  # left while blocked (the operator's interrupt): said so, once
            audit.result(evict, "interrupted: not evicted while a PodDisruptionBudget refused it")
        if cordoned:
            try:
                with audit.writing("uncordon", target, {"reason": "drill undone"}):
                    writer.set_unschedulable(plan.node, False)
                report.undone = True
            except BackendError as exc:  # the write failed, or the audit log refused it: undo by hand
                report.failure = report.failure or f"could not uncordon {plan.node}: {exc} (uncordon it by hand)"
        else:
            report.undone = True  # nothing of ours to take back (it was cordoned before, or the cordon failed)
