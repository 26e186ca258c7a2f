"""Running a drain: cordon, evict what holds no sessions, wait on what does, then evict it.

The run is a generator of events, so the TUI, the headless command and the
tests drive the same code. It reads fresh snapshots for live session counts,
writes only through the writer (evictions, never deletes unless the plan
says so), records its progress on the node so an interrupted drain can be
seen and resumed, and audits every write.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from gputui.backends.base import EvictionOutcome, Reader, Writer
from gputui.model import DRAIN_ANNOTATION_PREFIX, DRAIN_PHASE_ANNOTATION, ClusterSnapshot
from gputui.ops.audit import AuditLog
from gputui.ops.cordon import ReadOnlyError
from gputui.ops.drain_plan import DrainOptions, DrainPlan, Step

BY = DRAIN_ANNOTATION_PREFIX + "by"
STARTED = DRAIN_ANNOTATION_PREFIX + "started"
DEADLINE = DRAIN_ANNOTATION_PREFIX + "deadline"
OPTIONS = DRAIN_ANNOTATION_PREFIX + "options"
IN_PROGRESS = ("cordoned", "waiting", "evicting")
RETRY_BLOCKED_S = 5.0  # kubectl's retry period while a PDB says 429


@dataclass(frozen=True, slots=True)
class DrainEvent:
    node: str
    kind: str  # started, blocked, evicted, waiting, sessions-cut, gone, failed, aborted, done, info, tick
    pod: str = ""
    message: str = ""
    sessions: int | None = None


class DrainControl:
    """What the operator asks of a running drain, from another thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._evict_now: set[str] = set()
        self._extend: dict[str, float] = {}
        self.aborted = False
        self.uncordon_on_abort = False

    def evict_now(self, pod_key: str) -> None:
        with self._lock:
            self._evict_now.add(pod_key)

    def extend(self, pod_key: str, seconds: float) -> None:
        with self._lock:
            self._extend[pod_key] = self._extend.get(pod_key, 0.0) + seconds

    def abort(self, uncordon: bool = False) -> None:
        self.aborted, self.uncordon_on_abort = True, uncordon

    def take(self, pod_key: str) -> tuple[bool, float]:
        with self._lock:
            return pod_key in self._evict_now, self._extend.pop(pod_key, 0.0)


@dataclass
class PodProgress:
    key: str
    uid: str
    step: Step
    gpus: int
    state: str = "pending"  # pending, waiting, blocked, terminating, gone, failed
    sessions: int | None = None
    deadline: float = 0.0
    message: str = ""
    cut_sessions: int = 0  # sessions cut by an eviction the operator chose (evict-now, deadline, force)
    next_try: float = 0.0

    @property
    def finished(self) -> bool:
        return self.state in ("gone", "failed")


@dataclass
class DrainReport:
    node: str
    evicted: int = 0
    failed: list[str] = field(default_factory=list)
    cut_sessions: int = 0
    aborted: bool = False

    def describe(self) -> str:
        if self.aborted:
            return f"{self.node}: drain aborted after {self.evicted} evictions"
        text = f"{self.node}: drained, {self.evicted} pods evicted"
        if self.failed:
            text += f", {len(self.failed)} failed ({'; '.join(self.failed)})"
        if self.cut_sessions:
            text += f", {self.cut_sessions} live sessions cut by choice"
        return text


def resumable(snapshot: ClusterSnapshot) -> list[str]:
    """Nodes whose drain was interrupted (process killed, SSH closed): their annotations say so."""
    return [n.name for n in snapshot.nodes if n.annotations.get(DRAIN_PHASE_ANNOTATION) in IN_PROGRESS]


def options_from_node(snapshot: ClusterSnapshot, node: str) -> tuple[DrainOptions, float | None]:
    """The options and deadline an interrupted drain was started with."""
    n = snapshot.node(node)
    if n is None:
        raise KeyError(node)
    raw = n.annotations.get(OPTIONS, "")
    try:
        data = json.loads(raw) if raw else {}
        options = DrainOptions(
            ignore_daemonsets=bool(data.get("ignore_daemonsets", True)),
            delete_emptydir_data=bool(data.get("delete_emptydir_data", False)),
            force=bool(data.get("force", False)),
            grace_seconds=data.get("grace_seconds"),
            session_threshold=int(data.get("session_threshold", 0)),
            session_deadline_s=float(data.get("session_deadline_s", DrainOptions().session_deadline_s)),
        )
    except (ValueError, TypeError):
        options = DrainOptions()
    try:
        deadline = float(n.annotations.get(DEADLINE, ""))
    except ValueError:
        deadline = None
    return options, deadline


def run_drain(
    plan: DrainPlan,
    reader: Reader,
    writer: Writer | None,
    audit: AuditLog,
    control: DrainControl | None = None,
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 1.0,
    deadline: float | None = None,
) -> Iterator[DrainEvent]:
    """Drain one node by its plan. Yields events; returns (StopIteration.value) a DrainReport."""
    if writer is None:
        raise ReadOnlyError("drain")
    control = control or DrainControl()
    node, opts = plan.node, plan.options
    report = DrainReport(node)
    if plan.blocked:
        for error in plan.errors:
            yield DrainEvent(node, "failed", message=error)
        report.failed = plan.errors
        return report
    start = clock()
    deadline = deadline if deadline is not None else start + opts.session_deadline_s

    def annotate(phase: str) -> None:
        values = {DRAIN_PHASE_ANNOTATION: phase}
        if phase == "cordoned":
            values.update({
                BY: writer.identity, STARTED: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)),
                DEADLINE: f"{deadline:.0f}",
                OPTIONS: json.dumps({"ignore_daemonsets": opts.ignore_daemonsets,
                                     "delete_emptydir_data": opts.delete_emptydir_data, "force": opts.force,
                                     "grace_seconds": opts.grace_seconds,
                                     "session_threshold": opts.session_threshold,
                                     "session_deadline_s": opts.session_deadline_s}, sort_keys=True),
            })
        writer.annotate_node(node, values)
        audit.record("annotate", f"node/{node}", "ok", {"phase": phase})

    if not plan.already_cordoned:
        writer.set_unschedulable(node, True)
        audit.record("cordon", f"node/{node}", "ok", {"reason": "drain"})
    annotate("cordoned")
    yield DrainEvent(node, "started", message=f"cordoned; {len(plan.to_evict)} pods to move, "
                                             f"{plan.live_sessions} live sessions to wait for")
    pods = {
        p.pod.key: PodProgress(p.pod.key, p.pod.uid, p.step, p.pod.gpu_request, deadline=deadline,
                               sessions=p.pod.live_sessions)
        for p in plan.to_evict
    }
    annotate("waiting")
    # The live backend re-reads just these pods and their sessions; a whole refresh each second would
    # repeat the UI's poll (probe, every fleet metric) for nothing.
    pods_view = getattr(reader, "pods_snapshot", None)

    while True:
        if control.aborted:
            annotate("aborted")
            if control.uncordon_on_abort:
                writer.set_unschedulable(node, False)
                audit.record("uncordon", f"node/{node}", "ok", {"reason": "drain aborted"})
            report.aborted = True
            yield DrainEvent(node, "aborted", message="uncordoned" if control.uncordon_on_abort else "left cordoned")
            return report
        snap = pods_view(list(pods)) if pods_view is not None else reader.snapshot()
        live = {p.key: p for p in snap.pods}
        now = clock()
        for prog in pods.values():
            if prog.finished:
                continue
            current = live.get(prog.key)
            if current is None or current.uid != prog.uid:
                if prog.state != "terminating":
                    prog.state, prog.message = "gone", "no longer on the node"
                    yield DrainEvent(node, "gone", prog.key, prog.message)
                    continue
            if prog.state == "terminating":
                if writer.pod_uid(*prog.key.split("/", 1)) != prog.uid:
                    prog.state = "gone"
                    yield DrainEvent(node, "gone", prog.key, "deleted")
                continue
            now_please, extra = control.take(prog.key)
            prog.deadline += extra
            if extra:
                yield DrainEvent(node, "info", prog.key, f"deadline extended by {extra:.0f}s")
            prog.sessions = current.live_sessions if current else None
            quiet = prog.sessions is None or prog.sessions <= opts.session_threshold
            expired = now >= prog.deadline
            if prog.step is Step.WAIT_SESSIONS and not (quiet or expired or now_please):
                if prog.state != "waiting":
                    prog.state = "waiting"
                yield DrainEvent(node, "waiting", prog.key, f"{prog.sessions} live sessions", prog.sessions)
                continue
            if now < prog.next_try and not now_please:
                continue
            cut = 0 if quiet else (prog.sessions or 0)
            why = "evict now" if now_please else "deadline expired" if expired else ""
            namespace, name = prog.key.split("/", 1)
            if opts.disable_eviction:
                writer.delete_pod(namespace, name, opts.grace_seconds)
                outcome, reason = EvictionOutcome.EVICTED, "deleted (eviction disabled by force)"
            else:
                result = writer.evict_pod(namespace, name, opts.grace_seconds)
                outcome, reason = result.outcome, result.reason
            audit.record("delete" if opts.disable_eviction else "evict", f"pod/{prog.key}", outcome.value,
                         {"node": node, "sessions": prog.sessions, "why": why or "quiet", "reason": reason})
            if outcome is EvictionOutcome.EVICTED:
                prog.state = "terminating"
                report.evicted += 1
                if cut:
                    prog.cut_sessions = cut
                    report.cut_sessions += cut
                    yield DrainEvent(node, "sessions-cut", prog.key, f"{why}: {cut} live sessions cut", cut)
                yield DrainEvent(node, "evicted", prog.key, reason or "evicted")
            elif outcome is EvictionOutcome.GONE:
                prog.state = "gone"
                yield DrainEvent(node, "gone", prog.key, "already gone")
            elif outcome is EvictionOutcome.BLOCKED:
                budgets = snap.budget_for(current) if current else []
                if budgets and budgets[0].name not in reason:  # name the budget and its numbers
                    reason = f"{reason} ({'; '.join(b.describe() for b in budgets)})"
                prog.state, prog.message, prog.next_try = "blocked", reason, now + RETRY_BLOCKED_S
                yield DrainEvent(node, "blocked", prog.key, reason)
            else:
                prog.state, prog.message = "failed", reason
                report.failed.append(f"{prog.key}: {reason}")
                yield DrainEvent(node, "failed", prog.key, reason)
        if all(p.finished for p in pods.values()):
            break
        yield DrainEvent(node, "tick")  # lets a batch driver interleave several drains
        sleep(poll_s)
    annotate("done")
    yield DrainEvent(node, "done", message=report.describe())
    return report
