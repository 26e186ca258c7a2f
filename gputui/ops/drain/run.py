"""Running one node's drain: lease, cordon, evict what holds no sessions, wait on what does, then evict it.

The run is a generator of events, so the TUI, the headless command and the tests drive the same code.
It reads fresh pod views for live session counts, writes only through the writer (evictions; deletes
only when the plan says so), records its progress and options on the node so an interrupted drain can
be seen and resumed, holds the node's lease while it runs, and audits each state change once: its
intent before the write (an unwritable log refuses the write: the drain pauses and tries again), its
result after (an eviction's retries while a PDB says 429 are one intent and one result).

Fail closed: a pod is gone only when the API says so (404, or another UID under its name); a failed
read (API down, reader closed, token expired) pauses the drain with the reason and retries with
backoff; an unknown session count is waited on, never read as zero.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

from gputui.backends.base import BackendError, EvictionOutcome, PodsReader
from gputui.ops.audit import outcome as audit_outcome
from gputui.ops.context import OpContext
from gputui.ops.drain import lease
from gputui.ops.drain.events import DrainControl, DrainEvent
from gputui.ops.drain.events import EventKind as K
from gputui.ops.drain.eviction_api import EvictionApiView
from gputui.ops.drain.gpu_fence import fence_device
from gputui.ops.drain.lifecycle import NodeLifecycle
from gputui.ops.drain.maintenance_request import MaintenanceRequest, RequestGone
from gputui.ops.drain.options import PHASE, record_values
from gputui.ops.drain.plan import DrainPlan, Step
from gputui.ops.drain.pod_progress import PodProgress, PodState
from gputui.ops.drain.pod_progress import close_intent as _close
from gputui.ops.drain.pod_progress import delete_as_eviction as _delete
from gputui.ops.drain.report import DrainReport, Outcome
from gputui.ops.drain.rotation_run import RotationHold
from gputui.ops.drain.start import DrainStart
from gputui.ops.errors import ReadOnlyError
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.sessions import SessionState

RETRY_BLOCKED_S = 5.0  # kubectl's retry period while a PDB says 429
PAUSE_MAX_S = 30.0  # longest wait between tries while the API or a reader is failing


def run_drain(plan: DrainPlan, ctx: OpContext, control: DrainControl | None = None,
              start: DrainStart = DrainStart()) -> Generator[DrainEvent, None, DrainReport]:
    """Drain one node by its plan. Yields events; returns a DrainReport (run_steps hands it back)."""
    writer = ctx.writer
    if writer is None:
        raise ReadOnlyError("drain")
    reader, audit, clock, sleep, poll_s = ctx.reader, ctx.audit, ctx.clock, ctx.sleep, ctx.poll_s
    take_over = start.take_over
    control = control or DrainControl()
    node, opts = plan.node, plan.options
    report = DrainReport(node)
    if plan.blocked:
        for error in plan.errors:
            yield DrainEvent(node, K.FAILED, message=error)
        report.failed, report.reason = plan.errors, "plan blocked"
        return report
    target = f"node/{node}"
    me = start.holder or lease.Holder.me(writer.identity)
    try:  # the lease first: a node another gputui drains is not touched at all (and its refusal is audited)
        with audit.writing("lease", target, {"holder": f"{me.who}@{me.host}:{me.pid}", "take_over": take_over},
                           refused=(lease.LeaseHeld,)):
            me = lease.acquire(writer, node, me, take_over=take_over, clock=clock)
    except BackendError as exc:
        yield DrainEvent(node, K.FAILED, message=str(exc))
        report.reason = str(exc)
        return report
    began = clock()
    deadline = start.deadline if start.deadline is not None else began + opts.session_deadline_s
    done: set[str] = set()  # the writes of this drain that happen once (a retry after a pause skips them)

    def once(what: str, action: str, params: dict, write: Callable[[], object]) -> None:
        if what not in done:
            with audit.writing(action, target, params):
                write()
            done.add(what)

    def phase(name: str, extra: dict[str, str] | None = None) -> None:
        once(f"phase {name}", "annotate", {"phase": name},
             lambda: writer.annotate_node(node, {PHASE: name, **(extra or {})}))

    def release() -> None:  # a renewal changes no state (the same holder) and is not audited; dropping it is
        if "release" not in done:
            with audit.writing("lease-release", target, {"holder": f"{me.who}@{me.host}:{me.pid}"}) as entry:
                if not lease.release(writer, node, me):
                    entry.result = "ok: nothing to drop (the lease is no longer this drain's)"
            done.add("release")

    rotation = RotationHold(writer, audit, node, clock)
    lifecycle = NodeLifecycle(writer, audit, node, ctx.settings.lifecycle_conditions, one_gpu=bool(opts.gpu))
    request: MaintenanceRequest | None = None  # the maintenance-operator cordons instead (its requestor)
    try:
        rotation.adopt()  # a resumed drain owns the pods its predecessor took out of rotation
        if opts.gpu_device:  # one DRA GPU: fenced before any eviction (None first: what it would touch)
            yield from fence_device(writer, audit, plan, clock, sleep, poll_s)
        if plan.request is not None:
            request = MaintenanceRequest(writer, audit, plan.request, clock)
            yield from request.open()
        elif not plan.already_cordoned and not opts.gpu:  # one GPU's drain leaves the node serving
            once("cordon", "cordon", {"reason": "drain"}, lambda: writer.set_unschedulable(node, True))
        phase("cordoned", record_values(opts, writer.identity, began, deadline))
    except BackendError as exc:  # nothing evicted yet: say so and leave, dropping the lease no one will renew
        why = f"could not start: {exc}"
        try:
            release()
        except BackendError as dropped:
            why += f"; its lease stays on the node until it expires ({dropped})"
        yield DrainEvent(node, K.FAILED, message=why)
        report.reason = why
        return report
    held = (f"GPU {opts.gpu} only, the node left schedulable" if opts.gpu else request.target + " requested"
            if request is not None else "cordoned")
    said = f"; {lifecycle.words}" if lifecycle.words else ""
    yield DrainEvent(node, K.STARTED,
                     message=f"{held}; {len(plan.to_evict)} pods to move, {plan.describe_sessions()}{said}")
    yield from lifecycle.started(f"gputui drain by {writer.identity}: {len(plan.to_evict)} pods to move")
    pods = {p.pod.key: PodProgress(p.pod.key, p.pod.uid, p.step, p.pod.gpu_request, deadline,
                                   sessions=p.sessions.live) for p in plan.to_evict}
    # The live backend re-reads just these pods and their sessions; a whole refresh each second would
    # repeat the UI's poll (probe, every fleet metric) for nothing.
    pods_view = reader.pods_snapshot if isinstance(reader, PodsReader) else None
    # Taking a pod out of rotation counts the serving pods around it: its namespace's, read fresh.
    neighbourhood = sorted({p.pod.namespace for p in plan.to_evict if p.switch is not None})

    def around() -> ClusterSnapshot:
        return pods_view(list(pods), neighbourhood) if pods_view is not None else reader.snapshot()
    renewed, backoff, paused = clock(), 0.0, ""

    def leave(why: str) -> None:
        """Each eviction still refused by its PDB as the drain ends: its result, before the drain's last writes."""
        for prog in pods.values():
            _close(prog, audit, f"not evicted: {why}")

    try:
        while True:
            try:
                phase("waiting")
                if control.aborted:
                    leave("the drain was aborted")
                    yield from rotation.put_back_all("the drain was aborted", pods)
                    phase("aborted")
                    yield from lifecycle.ended(False, "the drain was aborted")
                    if control.uncordon_on_abort and request is not None:  # the operator uncordons what it cordoned
                        if "withdraw" not in done:
                            request.withdraw("drain aborted")
                            done.add("withdraw")
                    elif control.uncordon_on_abort and not opts.gpu:  # one GPU's drain never cordoned it
                        once("uncordon", "uncordon", {"reason": "drain aborted"},
                             lambda: writer.set_unschedulable(node, False))
                    release()
                    report.outcome = Outcome.ABORTED
                    yield DrainEvent(node, K.ABORTED, message="the node left schedulable" if opts.gpu else
                                     f"{request.target} deleted: the operator uncordons" if request is not None
                                     and control.uncordon_on_abort else
                                     "uncordoned" if control.uncordon_on_abort else "left cordoned")
                    return report
                if clock() - renewed >= lease.RENEW_S:
                    me, renewed = lease.renew(writer, node, me, clock), clock()
                snap = pods_view(list(pods)) if pods_view is not None else reader.snapshot()
                if paused:
                    yield DrainEvent(node, K.RESUMED, message=f"resumed after: {paused}")
                    audit.record("drain-resumed", target, "ok", {"after": paused})
                    paused, backoff = "", 0.0
                asked = control.take_put_backs()
                if asked:  # the operator's choice: back in rotation, and this drain leaves them there
                    rotation.tried |= asked
                    yield from rotation.put_back_all("asked by the operator", pods, keys=asked)
                if request is not None:  # nothing moves before the operator has cordoned (its scheduler first)
                    yield from request.look()
                if request is None or request.evicting:
                    yield from rotation.take_out_due(plan, pods, around)
                    yield from _poll(_Look(plan, ctx, control, report, rotation, pods), snap, clock())
                # A pod left in place goes back into rotation: nothing owns it out of rotation any more.
                yield from rotation.put_back_all("left in place", pods, only=(PodState.HELD.value, PodState.FAILED.value))
                drained = all(p.finished for p in pods.values()) and not report.failed and not any(
                    p.state is PodState.HELD for p in pods.values())
                if drained and request is not None and not request.ready:
                    pass  # every pod gone: done when the operator says Ready (it moves on once the wait's pods are)
                elif all(p.finished for p in pods.values()):
                    yield from rotation.put_back_all("the drain ended", pods)
                    report.held = [f"{p.key}: {p.message}" for p in pods.values() if p.state is PodState.HELD]
                    if request is not None and not drained:
                        report.held.append(f"{request.target} left in place, the node cordoned by the operator: "
                                           f"gputui uncordon {node} withdraws it")
                    phase("done" if drained else "stopped")
                    report.outcome = Outcome.DRAINED if drained else Outcome.UNFINISHED
                    yield from lifecycle.ended(drained, report.describe())
                    release()
                    yield DrainEvent(node, K.DONE if drained else K.FAILED, message=report.describe())
                    return report
            except RequestGone as exc:  # the operator no longer holds the node for this drain: nothing more moves
                leave(str(exc))
                yield from rotation.put_back_all("the drain stopped", pods)
                phase("stopped")
                yield from lifecycle.ended(False, str(exc))
                release()
                report.failed.append(str(exc))
                report.reason = str(exc)
                yield DrainEvent(node, K.FAILED, message=str(exc))
                return report
            except lease.LeaseHeld as exc:  # someone took the node over: stop without another write
                leave(f"the drain stopped: {exc}")
                yield DrainEvent(node, K.FAILED, message=str(exc))
                report.reason = str(exc)
                return report
            except BackendError as exc:  # an unwritable audit log too: the write refused, tried again later
                backoff = min(PAUSE_MAX_S, backoff * 2 if backoff else poll_s)
                if str(exc) != paused:
                    paused = str(exc)
                    report.pauses += 1
                    audit.record("drain-paused", target, "paused", {"reason": paused})
                yield DrainEvent(node, K.PAUSED, message=f"{paused}; trying again in {backoff:.0f}s")
                yield DrainEvent(node, K.TICK, deadline=clock() + backoff)
                sleep(backoff)
                continue
            # A tick lets a batch driver interleave several drains; it says when this one wants to look again.
            yield DrainEvent(node, K.TICK, deadline=clock() + poll_s)
            sleep(poll_s)
    finally:  # quitting gputui, Ctrl-C, a bug: whatever was under way is said to be left so
        leave("the drain was interrupted")
        rotation.forget()


@dataclass(frozen=True, slots=True)
class _Look:
    """What one look at the pods works with: the run's plan, context and operator's hand, the report it fills,
    the pods it holds out of rotation, and each pod's progress."""

    plan: DrainPlan
    ctx: OpContext
    control: DrainControl
    report: DrainReport
    rotation: RotationHold
    pods: dict[str, PodProgress]


def _poll(look: _Look, snap: ClusterSnapshot, now: float) -> Iterator[DrainEvent]:
    """One look at every pod still to go. Raises BackendError (the drain pauses) on any failed read."""
    plan, ctx, control, report, rotation, pods = look.plan, look.ctx, look.control, look.report, look.rotation, look.pods
    node, opts, audit = plan.node, plan.options, ctx.audit
    writer = ctx.writer
    assert writer is not None  # run_drain refused a read-only context before any look
    live = {p.key: p for p in snap.pods}
    evictions = EvictionApiView.of(snap)  # the EvictionRequest API on this fresh read (gputui.ops.drain.eviction_api)
    for prog in pods.values():
        if prog.finished:
            continue
        namespace, name = prog.key.split("/", 1)
        current = live.get(prog.key)
        if current is None or current.uid != prog.uid or prog.state is PodState.TERMINATING:
            # The view says it may be gone (or we evicted it): only the API itself may say it is.
            if writer.pod_uid(namespace, name) != prog.uid:
                prog.state, prog.message = PodState.GONE, "deleted"
                yield DrainEvent(node, K.GONE, prog.key, "gone (confirmed by the API)")
                continue
            if prog.state is PodState.TERMINATING or current is None or current.uid != prog.uid:
                continue  # still terminating, or the view lags behind the API: look again next poll
        now_please, extra = control.take(prog.key)
        if extra:
            prog.deadline += extra
            yield DrainEvent(node, K.INFO, prog.key, f"deadline extended by {extra:.0f}s")
        read = snap.sessions(current)
        state, prog.sessions = read.state, read.live
        known = state is SessionState.KNOWN
        quiet = known and (prog.sessions or 0) <= opts.session_threshold
        expired = now >= prog.deadline
        # A quiet count read too soon after the pod left rotation, or while it is kept in: not yet trusted.
        held_back = rotation.not_yet(prog.key, now, opts.rotation_settle_s) if quiet and not now_please else ""
        if prog.step is Step.WAIT_SESSIONS and not ((quiet and not held_back) or expired or now_please):
            _close(prog, audit, "not evicted: waiting on its sessions again")
            prog.state = PodState.WAITING
            text = f"{prog.sessions} live sessions" if known else "sessions unknown: waiting for a count"
            text += f"; {held_back}" if held_back else ""
            yield DrainEvent(node, K.WAITING, prog.key, text, prog.sessions, prog.deadline)
            continue
        if prog.step is Step.WAIT_SESSIONS and not known and not now_please and not opts.evict_unknown_at_deadline:
            _close(prog, audit, "not evicted: held")  # before the state changes: a PDB's last refusal is said with it
            prog.state = PodState.HELD
            prog.message = "sessions unknown at its deadline; left in place (eviction not chosen)"
            audit.record("evict", f"pod/{prog.key}", "held", {"node": node, "why": "sessions unknown at deadline"})
            yield DrainEvent(node, K.HELD, prog.key, prog.message)
            continue
        if now < prog.next_try and not now_please:
            continue
        # Another responder handling its eviction: never evicted by gputui, not even asked "now"; held at the deadline.
        holder, words = evictions.hold(namespace, name, prog.uid, plan.eviction_state)
        if holder:
            _close(prog, audit, f"not evicted: {words}")
            if now >= prog.deadline:
                prog.state, prog.message = PodState.HELD, f"left in place at its deadline: {words}"
                audit.record("evict", f"pod/{prog.key}", "held", {"node": node, "why": words})
                yield DrainEvent(node, K.HELD, prog.key, prog.message)
            elif prog.left_to != holder:
                prog.state, prog.message, prog.left_to = PodState.WAITING, words, holder
                yield DrainEvent(node, K.WAITING, prog.key, words, prog.sessions, prog.deadline)
            continue
        prog.left_to = ""
        cut = (prog.sessions or 0) if known and not quiet else 0
        unknown_cut = prog.step is Step.WAIT_SESSIONS and not known
        why = "evict now" if now_please else "deadline expired" if expired and not quiet else "quiet"
        if prog.intent is None:  # before the first try (AuditError: nothing sent, the drain pauses)
            prog.intent = audit.intent("delete" if opts.disable_eviction else "evict", f"pod/{prog.key}",
                                       {"node": node, "sessions": prog.sessions if known else state.value, "why": why})
        standing: str | None = None  # after a 409 on the UID: the UID the API holds under the name now
        try:  # only the pod planned, by its UID: a pod replaced under its name since the view was read is not it
            if opts.disable_eviction:
                outcome, reason = _delete(writer, namespace, name, opts.grace_seconds, prog.uid)
            else:
                result = writer.evict_pod(namespace, name, opts.grace_seconds, uid=prog.uid)
                outcome, reason = result.outcome, result.reason
            if outcome is EvictionOutcome.REPLACED:
                standing = writer.pod_uid(namespace, name)
        except BaseException as exc:
            _close(prog, audit, audit_outcome(exc))
            raise
        if outcome is EvictionOutcome.REPLACED and standing == prog.uid:
            # A conflict, yet the API holds the very pod: not replaced, nothing sent; tried again (the intent stays).
            prog.next_try = now + RETRY_BLOCKED_S
            yield DrainEvent(node, K.INFO, prog.key, f"conflict on its eviction, tried again: {reason}")
            continue
        if outcome is not EvictionOutcome.BLOCKED:
            word = {EvictionOutcome.EVICTED: "evicted", EvictionOutcome.GONE: "gone",
                    EvictionOutcome.REPLACED: "refused: replaced under its name; the new pod not evicted"
                    }.get(outcome, "error")
            _close(prog, audit, word, {"reason": reason, "tries": prog.tries + 1,
                                       **({"uid": prog.uid, "standing": standing} if standing is not None or
                                          outcome is EvictionOutcome.REPLACED else {})})
        if outcome is EvictionOutcome.EVICTED:
            prog.state = PodState.TERMINATING
            report.evicted += 1
            if cut:
                report.cut_sessions += cut
                yield DrainEvent(node, K.SESSIONS_CUT, prog.key, f"{why}: {cut} live sessions cut", cut)
            elif unknown_cut:
                report.unknown_cut_pods += 1
                yield DrainEvent(node, K.SESSIONS_CUT, prog.key, f"{why}: sessions unknown, possibly cut")
            yield DrainEvent(node, K.EVICTED, prog.key, reason or "evicted")
        elif outcome is EvictionOutcome.GONE:
            prog.state = PodState.GONE
            yield DrainEvent(node, K.GONE, prog.key, "already gone")
        elif outcome is EvictionOutcome.REPLACED:
            # The pod planned is gone (the API holds another UID under its name, or none): its part of the drain
            # is over. The one standing now is not the drain's: never evicted, never called gone.
            prog.state = PodState.REPLACED
            prog.message = (f"replaced under its name before its eviction (a new pod, uid {standing}, stands; "
                            "not evicted)" if standing else "gone before its eviction (replaced under its name)")
            report.replaced.append(f"{prog.key}: {prog.message}")
            yield DrainEvent(node, K.REPLACED, prog.key, prog.message)
        elif outcome is EvictionOutcome.BLOCKED:
            budgets = snap.budget_for(current)
            if budgets and budgets[0].name not in reason:  # name the budget and its numbers
                reason = f"{reason} ({'; '.join(b.describe() for b in budgets)})"
            prog.tries += 1
            prog.state, prog.message, prog.next_try = PodState.BLOCKED, reason, now + RETRY_BLOCKED_S
            yield DrainEvent(node, K.BLOCKED, prog.key, reason, count=prog.tries)
        else:
            prog.state, prog.message = PodState.FAILED, reason
            report.failed.append(f"{prog.key}: {reason}")
            yield DrainEvent(node, K.FAILED, prog.key, reason)
