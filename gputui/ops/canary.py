"""The guided canary of seed 001 §7: the new version's share raised step by step (default 5 → 25 → 50 → 100),
each step gated on its ready pods against its share (the shift's own capacity rule) and, while it holds, on
its error ratio and p95 latency against the old version's; a failing gate sends traffic back to where it
was at the start at once (a route patch only: the old version is never deleted or scaled down). A gate
that cannot be read holds the canary where it is; unknown is never a pass. Each step is audited. The
operator's hand on a running canary is a CanaryControl: pause, stop where it is, or roll back now."""

from __future__ import annotations

import threading
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from functools import partial

from gputui.backends.base import BackendError, Writer
from gputui.ops.audit import AuditError
from gputui.ops.canary_steps import step_blocker
from gputui.ops.context import OpContext
from gputui.ops.errors import ReadOnlyError
from gputui.ops.traffic.adapters import ADAPTERS
from gputui.ops.traffic.apply import apply_shift
from gputui.ops.traffic.plans import find_service, on_route_now, plan_shift
from gputui.ops.traffic.vocabulary import ShiftError, fmt_pct
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferenceService
from gputui.vocabulary.signals import VersionSignals

DEFAULT_STEPS = (5.0, 25.0, 50.0, 100.0)
FORCE_WORDS = " (rollout --force, or f on the service screen, takes it anyway)"  # both exist


@dataclass(frozen=True, slots=True)
class Gates:
    """How much worse than the old version the new one may be (both shown to the operator)."""

    error_ratio_x: float = 2.0  # new error ratio ≤ this × old's ...
    error_floor: float = 0.01  # ... or old's + this, whichever is larger (a clean old version is not 0 × 2)
    latency_x: float = 1.5  # new p95 ≤ this × old's
    window_s: float = 300.0  # the rate window of the metrics
    hold_s: float = 300.0  # how long each step is watched before the next

    def describe(self) -> str:
        return (f"gates: error ratio ≤ max({self.error_ratio_x:g}× old, old + {self.error_floor:g}), "
                f"p95 latency ≤ {self.latency_x:g}× old, over {self.window_s:g}s; {self.hold_s:g}s per step")


def judge(signals: Mapping[str, VersionSignals], new: str, old: str, gates: Gates) -> tuple[bool | None, str]:
    """(True: within the gates, False: beyond them, None: cannot tell) and the figures in words."""
    n, o = signals.get(new, VersionSignals()), signals.get(old, VersionSignals())
    # A gate over no traffic has no evidence (issue 35: a canary with no session showed 0.20% errors and passed):
    # no finished request over the window is "cannot tell", never a pass.
    quiet = [v for v, s in ((new, n), (old, o)) if s.requests_per_s is not None and s.requests_per_s * gates.window_s < 1]
    if quiet:
        return None, (f"no evidence: {', '.join(quiet)} finished no request over {gates.window_s:g}s "
                      "(no traffic: a gate over nothing proves nothing)")
    if n.error_ratio is None or o.error_ratio is None or n.p95_latency_s is None or o.p95_latency_s is None:
        missing = [v for v, s in ((new, n), (old, o)) if s.error_ratio is None or s.p95_latency_s is None]
        return None, f"no error ratio or latency for {', '.join(missing)} (no finished requests read)"
    words = (f"{new}: errors {n.error_ratio:.2%}, p95 {n.p95_latency_s:.2f}s; "
             f"{old}: errors {o.error_ratio:.2%}, p95 {o.p95_latency_s:.2f}s")
    if n.error_ratio > max(gates.error_ratio_x * o.error_ratio, o.error_ratio + gates.error_floor):
        return False, f"error ratio beyond the gate ({words})"
    if n.p95_latency_s > gates.latency_x * o.p95_latency_s:
        return False, f"p95 latency beyond the gate ({words})"
    return True, words


@dataclass(frozen=True, slots=True)
class CanaryPlan:
    service: InferenceService
    new: str
    old: str  # the version it is compared with: the one carrying the most now
    steps: tuple[float, ...]
    start: Mapping[str, float]  # each version's share before the canary: where a rollback returns

    def describe(self) -> str:
        return (f"Canary of {self.service.key}: {self.new} to " + " → ".join(fmt_pct(s) for s in self.steps)
                + f", compared with {self.old}; on a failing gate, back to "
                + ", ".join(f"{k} {fmt_pct(v)}" for k, v in self.start.items()))

    def back(self) -> str:
        """The command that puts traffic back where it was before the canary: what the operator types when the
        canary's own rollback could not (each share to 6 digits: shift takes targets within 0.01% of 100)."""
        return f"gputui shift {self.service.key} " + " ".join(f"--to {k}={v:g}" for k, v in self.start.items())


def plan_canary(snapshot: ClusterSnapshot, service_key: str, new: str,
                steps: tuple[float, ...] | None = None) -> CanaryPlan:
    """`steps` None: the default steps above the version's share now (a canary at 10% goes on at 25%)."""
    service = find_service(snapshot, service_key)
    if service.router_kind not in ADAPTERS:
        raise ShiftError(f"{service.key} is routed by {service.router_kind or 'nothing'}: a guided canary shifts "
                         "weights on an HTTPRoute, VirtualService or TrafficSplit (an Argo Rollout runs its own)")
    names = [v.name for v in service.versions]
    if new not in names:
        raise ShiftError(f'{service.key} has no version "{new}" ({", ".join(names)})')
    start = {v.name: service.share_pct(v.name) or 0.0 for v in service.versions}
    if steps is None:
        steps = tuple(s for s in DEFAULT_STEPS if s > start[new])
        if not steps:
            raise ShiftError(f"{new} has {fmt_pct(start[new])} already: nothing left to step through")
    if not steps or any(not 0 < s <= 100 for s in steps) or list(steps) != sorted(set(steps)):
        raise ShiftError("steps must rise, each above 0 and at most 100 (e.g. 5,25,50,100)")
    if steps[0] <= start[new]:
        raise ShiftError(f"{new} has {fmt_pct(start[new])} already: the first step must be above it")
    old = max((n for n in names if n != new), key=lambda n: start[n])
    return CanaryPlan(service, new, old, tuple(steps), start)


@dataclass
class CanaryReport:
    plan: CanaryPlan
    reached: float | None = None  # the last step applied
    outcome: str = ""  # done | rolled back | held | stopped | rollback failed
    reason: str = ""
    held: str = ""  # while a canary that waits when held (the TUI's) is held: why, and what the keys do
    log: list[str] = field(default_factory=list)


class CanaryControl:
    """Written by the UI thread, read by the canary's. Pausing holds the current step (its gates are still
    watched: a failing one still rolls back); `stop` leaves traffic where it is; `rollback` sends it back to
    the start at once. `wait` is the canary's sleep: a request wakes it, so a rollback never waits a poll."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._paused = False
        self._request: str | None = None

    @property
    def paused(self) -> bool:
        with self._lock:
            return self._paused

    def set_paused(self, paused: bool) -> None:
        with self._lock:
            self._paused = paused
        self._wake.set()

    _PRIORITY = ("retry", "force", "stop", "rollback")  # a rollback asked for wins over a stop, and so on

    def request(self, what: str) -> None:
        """"rollback", "stop", "force" (a held step, past the capacity rule) or "retry" (a held step, now)."""
        with self._lock:
            if self._request is None or self._PRIORITY.index(what) >= self._PRIORITY.index(self._request):
                self._request = what
        self._wake.set()

    def take(self) -> str | None:
        with self._lock:
            what, self._request = self._request, None
            return what

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when a key woke it early."""
        woken = self._wake.wait(seconds)
        self._wake.clear()
        return woken


@dataclass(frozen=True, slots=True)
class CanaryOptions:
    """How a canary runs beyond its plan. `force`: every step past the capacity rule (never past a gate, nor
    towards pods waiting to be evicted). `wait_when_held`: a step it cannot take, or gates it cannot read, hold
    the canary where it is until the operator retries, forces the step, stops or rolls back (the TUI); without
    it the canary ends there, held (the headless command, which exits 1)."""

    gates: Gates = Gates()
    force: bool = False
    wait_when_held: bool = False


def _shift(ctx: OpContext, writer: Writer, key: str, targets: Mapping[str, float], force: bool) -> str:
    plan = on_route_now(partial(plan_shift, ctx.reader.snapshot(), key, dict(targets)), writer)
    return apply_shift(plan, ctx, force=force)


def run_canary(plan: CanaryPlan, ctx: OpContext, options: CanaryOptions = CanaryOptions(),
               control: CanaryControl | None = None,
               report: CanaryReport | None = None) -> Generator[str, None, CanaryReport]:
    """`report`: filled in as the canary goes (a UI shows its step while it runs); returned at the end. The
    gates are read from `ctx.signals`; the canary looks again every `ctx.poll_s`."""
    writer = ctx.writer
    if writer is None:
        raise ReadOnlyError("the canary")
    if ctx.signals is None:  # no gates to read: never a canary stepping blind
        raise BackendError("the canary reads its gates from the engines' metrics, and this context has none")
    reader, signals, audit, clock, sleep, poll_s = ctx.reader, ctx.signals, ctx.audit, ctx.clock, ctx.sleep, ctx.poll_s
    gates, force, wait_when_held = options.gates, options.force, options.wait_when_held
    report = report if report is not None else CanaryReport(plan)
    key, target = plan.service.key, f"service/{plan.service.key}"
    # Said before its first write, and required: with no audit log to take it, the canary does not start.
    audit.record("canary-start", target, "ok", {"version": plan.new, "steps": list(plan.steps),
                                                "start": dict(plan.start), "gates": gates.describe()}, required=True)

    def end(outcome: str, reason: str) -> CanaryReport:
        report.outcome, report.reason = outcome, reason
        audit.record("canary-end", target, outcome, {"reached": report.reached, "reason": reason})
        return report

    def rollback(why: str) -> Generator[str, None, CanaryReport]:
        try:
            yield "rolled back: " + _shift(ctx, writer, key, plan.start, force=True)
        except BackendError as exc:
            return end("rollback failed", f"{why}; the rollback failed: {exc}; back to the start: {plan.back()} "
                                          "(shift it back by hand)")
        return end("rolled back", why)

    def take_step(step: float) -> Generator[str, None, CanaryReport | None]:
        """The step applied (None), or the canary's end: it was held and may not wait, or the operator ended it."""
        forced = force
        while True:
            asked = hand.take()
            if asked == "rollback":
                return (yield from rollback("by the operator"))
            if asked == "stop":
                return end("stopped", f"stopped by the operator before {fmt_pct(step)}: traffic left as it is")
            forced = forced or asked == "force"
            try:
                blocked = step_blocker(reader.snapshot(), key, plan.new, step)
                if blocked is not None and not (forced and blocked[1]):
                    raise ShiftError(blocked[0] + (FORCE_WORDS if blocked[1] else ""))
                line = _shift(ctx, writer, key, {plan.new: step}, force=forced)
            except (ShiftError, AuditError) as exc:  # the capacity rule, no ready pods, pods going, no audit log
                why = f"step {fmt_pct(step)} not taken: {exc}"
                if not wait_when_held:
                    return end("held", why)
                if report.held != why:
                    report.held = why
                    yield f"held before {fmt_pct(step)}: {exc}"
                sleep(poll_s)  # tried again at every poll: pods may come ready, a drain may end
                continue
            report.held = ""
            report.reached = step
            yield f"step {fmt_pct(step)}: {line}"
            return None

    hand = control or CanaryControl()
    for step in plan.steps:
        ended = yield from take_step(step)
        if ended is not None:
            return ended
        if step >= 100:
            break
        # The hold counts only unpaused time: a pause of ten minutes leaves the step's remaining watch as it was.
        remaining, last, verdict, words, was_paused = gates.hold_s, clock(), None, "", False
        # Held past the hold time while the gates cannot tell, when the canary may wait: never advanced blind.
        while remaining > 0 or hand.paused or (wait_when_held and verdict is not True):
            sleep(poll_s)
            now = clock()
            if not hand.paused:
                remaining -= now - last
            last = now
            if hand.paused != was_paused:
                was_paused = hand.paused
                yield f"  {'paused' if was_paused else 'continuing'} at {fmt_pct(step)}"
            asked = hand.take()
            if asked == "rollback":
                yield f"rollback asked for at {fmt_pct(step)}"
                return (yield from rollback(f"by the operator at {fmt_pct(step)}"))
            if asked == "stop":
                return end("stopped", f"stopped by the operator at {fmt_pct(step)}: traffic left as it is")
            try:
                snap = reader.snapshot()
                service = snap.service(key) or plan.service
                verdict, words = judge(signals.version_signals(snap, service, gates.window_s), plan.new, plan.old, gates)
            except BackendError as exc:
                verdict, words = None, f"metrics unreadable: {exc}"
            if verdict is False:
                yield f"gate failed at {fmt_pct(step)}: {words}; rolling back"
                return (yield from rollback(words))
            report.held = f"held at {fmt_pct(step)}: cannot tell ({words})" if verdict is None and remaining <= 0 else ""
            yield f"  holding at {fmt_pct(step)}: {words}"
        report.held = ""
        if verdict is None:
            return end("held", f"held at {fmt_pct(step)}: cannot tell ({words}); not advancing blind")
    return end("done", f"{plan.new} at {fmt_pct(report.reached)}")
