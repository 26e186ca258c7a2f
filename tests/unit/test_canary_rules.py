"""The guided canary's rules, fast: the gates at their edges, the plan's steps and its words, the operator's hand
(CanaryControl), and the paths the demo tests do not reach: a rollback the apiserver refuses ("rollback failed",
what to do), no audit log (the canary does not start), read-only."""

from __future__ import annotations

import threading

import pytest

from gputui.backends.base import BackendError
from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditError, AuditLog
from gputui.ops.canary import (
    DEFAULT_STEPS,
    CanaryControl,
    CanaryOptions,
    CanaryPlan,
    CanaryReport,
    Gates,
    judge,
    plan_canary,
    run_canary,
)
from gputui.ops.context import OpContext
from gputui.ops.errors import ReadOnlyError
from gputui.ops.steps import run_steps
from gputui.ops.traffic.vocabulary import ShiftError
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferenceService, ServiceVersion
from gputui.vocabulary.signals import VersionSignals
from tests.demo_clock import ManualClock
from tests.support.audit_lines import written

G = Gates()


def sig(error: float | None, p95: float | None) -> VersionSignals:
    return VersionSignals(10.0, error, p95, 1)


# -- judge ------------------------------------------------------------------------------------------------------

def test_the_default_gates_in_words():
    assert (G.error_ratio_x, G.error_floor, G.latency_x, G.window_s, G.hold_s) == (2.0, 0.01, 1.5, 300.0, 300.0)
    assert G.describe() == ("gates: error ratio ≤ max(2× old, old + 0.01), p95 latency ≤ 1.5× old, over 300s; "
                            "300s per step")


def test_an_error_ratio_exactly_at_the_gate_passes_and_above_it_fails():
    old = sig(0.02, 1.0)
    at = judge({"new": sig(0.04, 1.0), "old": old}, "new", "old", G)
    assert at == (True, "new: errors 4.00%, p95 1.00s; old: errors 2.00%, p95 1.00s")
    over = judge({"new": sig(0.0401, 1.0), "old": old}, "new", "old", G)
    assert over == (False, "error ratio beyond the gate (new: errors 4.01%, p95 1.00s; old: errors 2.00%, p95 1.00s)")


def test_a_clean_old_version_allows_the_floor_not_zero():
    """max(2 × 0, 0 + 0.01): a new version with 0.5% errors passes against one with none; 1.5% does not."""
    assert judge({"new": sig(0.005, 1.0), "old": sig(0.0, 1.0)}, "new", "old", G)[0] is True
    assert judge({"new": sig(0.01, 1.0), "old": sig(0.0, 1.0)}, "new", "old", G)[0] is True
    assert judge({"new": sig(0.015, 1.0), "old": sig(0.0, 1.0)}, "new", "old", G)[0] is False


def test_the_larger_of_the_two_error_gates_applies():
    old = sig(0.2, 1.0)  # 2 × 0.2 = 0.4 beats 0.2 + 0.01
    assert judge({"new": sig(0.39, 1.0), "old": old}, "new", "old", G)[0] is True
    assert judge({"new": sig(0.41, 1.0), "old": old}, "new", "old", G)[0] is False


def test_latency_exactly_at_the_gate_passes_and_above_it_fails():
    old = sig(0.0, 2.0)
    assert judge({"new": sig(0.0, 3.0), "old": old}, "new", "old", G)[0] is True
    slow = judge({"new": sig(0.0, 3.01), "old": old}, "new", "old", G)
    assert slow == (False, "p95 latency beyond the gate (new: errors 0.00%, p95 3.01s; old: errors 0.00%, p95 2.00s)")


@pytest.mark.parametrize("new, old, missing", [
    (sig(None, 1.0), sig(0.0, 1.0), "new"), (sig(0.0, None), sig(0.0, 1.0), "new"),
    (sig(0.0, 1.0), sig(None, 1.0), "old"), (sig(0.0, 1.0), sig(0.0, None), "old"),
    (sig(None, None), sig(None, None), "new, old"),
])
def test_a_gate_it_cannot_read_is_unknown_never_a_pass(new, old, missing):
    assert judge({"new": new, "old": old}, "new", "old", G) == (
        None, f"no error ratio or latency for {missing} (no finished requests read)")


def test_a_version_with_no_signals_at_all_is_unknown():
    assert judge({"old": sig(0.0, 1.0)}, "new", "old", G)[0] is None
    assert judge({}, "new", "old", G) == (None, "no error ratio or latency for new, old (no finished requests read)")


# -- plan_canary -------------------------------------------------------------------------------------------------

def service(kind="HTTPRoute", weights=(90, 10, 0)) -> InferenceService:
    return InferenceService("llm", "chat", tuple(ServiceVersion(f"v{i + 1}", w) for i, w in enumerate(weights)),
                            router_kind=kind, router_name="chat")


def snap(svc: InferenceService) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=0.0, context="t", services=(svc,))


def test_default_steps_are_those_above_the_share_now():
    plan = plan_canary(snap(service()), "llm/chat", "v2")
    assert plan.steps == (25.0, 50.0, 100.0) and DEFAULT_STEPS == (5.0, 25.0, 50.0, 100.0)
    assert plan.start == {"v1": 90.0, "v2": 10.0, "v3": 0.0}
    assert plan.old == "v1" and plan.new == "v2"
    assert plan_canary(snap(service(weights=(100, 0))), "llm/chat", "v2").steps == DEFAULT_STEPS


def test_the_old_version_is_the_one_carrying_the_most_now():
    plan = plan_canary(snap(service(weights=(20, 0, 80))), "llm/chat", "v2")
    assert plan.old == "v3"


def test_a_version_at_100_has_no_default_step_left():
    with pytest.raises(ShiftError, match="v2 has 100% already: nothing left to step through"):
        plan_canary(snap(service(weights=(0, 100))), "llm/chat", "v2")


@pytest.mark.parametrize("steps", [(), (0.0, 50.0), (50.0, 101.0), (50.0, 25.0), (25.0, 25.0, 50.0), (-5.0, 10.0)])
def test_steps_must_rise_within_0_and_100(steps):
    with pytest.raises(ShiftError, match=r"^steps must rise, each above 0 and at most 100 \(e\.g\. 5,25,50,100\)$"):
        plan_canary(snap(service(weights=(100, 0))), "llm/chat", "v2", steps)


def test_steps_up_to_100_included_are_taken_as_given():
    assert plan_canary(snap(service(weights=(100, 0))), "llm/chat", "v2", (0.5, 100.0)).steps == (0.5, 100.0)


def test_the_first_step_must_be_above_the_share_now():
    with pytest.raises(ShiftError, match="v2 has 10% already: the first step must be above it"):
        plan_canary(snap(service()), "llm/chat", "v2", (10.0, 50.0))
    assert plan_canary(snap(service()), "llm/chat", "v2", (10.5, 50.0)).steps == (10.5, 50.0)


def test_a_canary_needs_a_router_it_can_weight_and_a_version_it_has():
    for kind in ("Rollout", "Ingress", ""):
        with pytest.raises(ShiftError) as err:
            plan_canary(snap(service(kind=kind)), "llm/chat", "v2")
        assert str(err.value) == (f"llm/chat is routed by {kind or 'nothing'}: a guided canary shifts weights on an "
                                  "HTTPRoute, VirtualService or TrafficSplit (an Argo Rollout runs its own)")
    for kind in ("HTTPRoute", "VirtualService", "TrafficSplit"):
        assert plan_canary(snap(service(kind=kind)), "llm/chat", "v2").new == "v2"
    with pytest.raises(ShiftError, match='llm/chat has no version "v9" \\(v1, v2, v3\\)'):
        plan_canary(snap(service()), "llm/chat", "v9")


def test_the_plan_in_words():
    plan = plan_canary(snap(service()), "llm/chat", "v2", (12.5, 50.0, 100.0))
    assert plan.describe() == ("Canary of llm/chat: v2 to 12.5% → 50% → 100%, compared with v1; on a failing gate, "
                               "back to v1 90%, v2 10%, v3 0%")


# -- the operator's hand -----------------------------------------------------------------------------------------

def test_a_fresh_control_asks_nothing_and_is_not_paused():
    control = CanaryControl()
    assert control.take() is None and control.paused is False


def test_a_request_is_taken_once():
    control = CanaryControl()
    control.request("stop")
    assert control.take() == "stop" and control.take() is None


def test_a_rollback_wins_over_a_stop_asked_after_it_but_not_before():
    control = CanaryControl()
    control.request("rollback")
    control.request("stop")
    assert control.take() == "rollback"
    control.request("stop")
    control.request("rollback")
    assert control.take() == "rollback"


def test_pause_and_continue():
    control = CanaryControl()
    control.set_paused(True)
    assert control.paused
    control.set_paused(False)
    assert not control.paused


def test_a_key_wakes_the_wait_at_once_and_the_next_wait_sleeps_again():
    control = CanaryControl()
    assert control.wait(0.0) is False
    control.request("rollback")
    assert control.wait(30.0) is True  # would block the test for 30 s if the key did not wake it
    assert control.wait(0.0) is False  # the wake-up was used
    control.set_paused(True)
    assert control.wait(30.0) is True


def test_a_key_from_another_thread_wakes_a_waiting_canary():
    control = CanaryControl()
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(control.wait(60.0)))
    waiter.start()
    control.request("stop")
    waiter.join(timeout=60.0)
    assert woke == [True]


# -- the run's other ends ---------------------------------------------------------------------------------------

LLAMA = "llm/llama-3-70b-instruct"  # the demo's: v1 90%, v2 10%
GOOD = VersionSignals(10.0, 0.002, 1.2, 1)
BAD = VersionSignals(10.0, 0.5, 1.2, 1)


class Fed:
    def __init__(self, new: VersionSignals) -> None:
        self.new = new

    def version_signals(self, snapshot, service, window_s):
        return {"v1": GOOD, "v2": self.new}


class RefusesAfter:
    """The demo cluster as the writer, refusing every route patch after the first `allowed`."""

    def __init__(self, cluster: DemoCluster, allowed: int) -> None:
        self.cluster, self.allowed = cluster, allowed
        self.identity = cluster.identity

    def __getattr__(self, name):
        return getattr(self.cluster, name)

    def patch_object(self, *args, **kwargs):
        if self.allowed <= 0:
            raise BackendError('httproutes "llama" is forbidden: admission webhook denied the request')
        self.allowed -= 1
        return self.cluster.patch_object(*args, **kwargs)


def canary(tmp_path, fed, writer_of=lambda c: c, audit_path="audit.jsonl", steps=(11.0, 12.0)):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    plan = plan_canary(cluster.snapshot(), LLAMA, "v2", steps)
    audit = AuditLog(tmp_path / audit_path, "tester", "demo")
    lines: list[str] = []
    gen = run_canary(plan,
                     OpContext(cluster, writer_of(cluster), audit, clock=clock, sleep=clock.advance, poll_s=10,
                               signals=fed),
                     CanaryOptions(Gates(window_s=60, hold_s=30)))
    report = run_steps(gen, lines.append)
    weights = {v.name: v.weight for v in cluster.snapshot().service(LLAMA).versions}
    return report, lines, weights


def test_a_rollback_the_apiserver_refuses_says_rollback_failed_and_what_to_do(tmp_path):
    report, lines, weights = canary(tmp_path, Fed(BAD), lambda c: RefusesAfter(c, 1))
    assert report.outcome == "rollback failed"
    assert report.reason.startswith("error ratio beyond the gate (")
    assert "; the rollback failed: " in report.reason and "admission webhook denied the request" in report.reason
    assert report.reason.endswith("(shift it back by hand)")
    assert report.reached == 11.0 and weights["v2"] != 10  # the step stands: nothing put it back
    assert not any(line.startswith("rolled back:") for line in lines)
    ends = [e for e in written(tmp_path / "audit.jsonl") if e["action"] == "canary-end"]
    assert [e["result"] for e in ends] == ["rollback failed"]
    assert ends[0]["params"] == {"reached": 11.0, "reason": report.reason}


def test_a_rollback_that_goes_through_is_said_and_audited(tmp_path):
    report, lines, weights = canary(tmp_path, Fed(BAD))
    assert report.outcome == "rolled back" and report.reason.startswith("error ratio beyond the gate")
    assert [line for line in lines if line.startswith("rolled back: ")]
    assert weights["v2"] == 10
    ends = [e for e in written(tmp_path / "audit.jsonl") if e["action"] == "canary-end"]
    assert [(e["result"], e["target"]) for e in ends] == [("rolled back", f"service/{LLAMA}")]


def test_a_canary_without_an_audit_log_does_not_start(tmp_path):
    (tmp_path / "log").mkdir()
    with pytest.raises(AuditError):
        canary(tmp_path, Fed(GOOD), audit_path="log")  # a directory: the log cannot be written


def test_a_canary_is_unavailable_read_only():
    cluster = DemoCluster(seed=7, clock=ManualClock())
    plan = plan_canary(cluster.snapshot(), LLAMA, "v2", (11.0,))
    with pytest.raises(ReadOnlyError, match=r"^read-only: the canary is unavailable$"):
        next(run_canary(plan,
                        OpContext(cluster, None, AuditLog(None, "t", "demo"), clock=lambda: 0.0, sleep=lambda s: None,
                                  poll_s=5.0, signals=Fed(GOOD)),
                        CanaryOptions(G)))


def test_a_report_handed_in_is_filled_as_the_canary_goes(tmp_path):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    plan = plan_canary(cluster.snapshot(), LLAMA, "v2", (11.0, 12.0))  # v2 has 1 of 8 pods ready: small steps
    mine = CanaryReport(plan)
    gen = run_canary(plan,
                     OpContext(cluster, cluster, AuditLog(tmp_path / "a.jsonl", "t", "demo"), clock=clock,
                               sleep=clock.advance, poll_s=10, signals=Fed(GOOD)),
                     CanaryOptions(Gates(window_s=60, hold_s=20)), report=mine)
    first = next(gen)
    assert first.startswith("step 11%: ") and mine.reached == 11.0
    assert run_steps(gen, lambda line: None) is mine
    assert (mine.outcome, mine.reason, mine.reached) == ("done", "v2 at 12%", 12.0)


def test_the_whole_plan_is_recorded_before_the_first_write(tmp_path):
    canary(tmp_path, Fed(GOOD), steps=(11.0,))
    step = next(e for e in written(tmp_path / "audit.jsonl") if e["action"] == "shift")
    assert step["params"]["force"] is False  # a step is never forced past the capacity rule
    first = written(tmp_path / "audit.jsonl")[0]
    assert (first["action"], first["target"], first["result"]) == ("canary-start", f"service/{LLAMA}", "ok")
    assert first["params"] == {"version": "v2", "steps": [11.0], "start": {"v1": 90.0, "v2": 10.0},
                               "gates": Gates(window_s=60, hold_s=30).describe()}


def test_plans_are_values():
    plan = plan_canary(snap(service()), "llm/chat", "v2")
    assert isinstance(plan, CanaryPlan) and plan == plan_canary(snap(service()), "llm/chat", "v2")


def asked_before_the_first_step(tmp_path, what: str):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    plan = plan_canary(cluster.snapshot(), LLAMA, "v2", (11.0, 12.0))
    control = CanaryControl()
    control.request(what)
    lines: list[str] = []
    report = run_steps(run_canary(plan,
                                  OpContext(cluster, cluster, AuditLog(tmp_path / "a.jsonl", "t", "demo"),
                                            clock=clock, sleep=clock.advance, poll_s=10, signals=Fed(GOOD)),
                                  CanaryOptions(Gates(window_s=60, hold_s=30)), control=control),
                       lines.append)
    return report, lines, {v.name: v.weight for v in cluster.snapshot().service(LLAMA).versions}


def test_a_stop_asked_before_the_first_step_takes_no_step(tmp_path):
    report, lines, weights = asked_before_the_first_step(tmp_path, "stop")
    assert (report.outcome, report.reason, report.reached) == (
        "stopped", "stopped by the operator before 11%: traffic left as it is", None)
    assert lines == [] and weights == {"v1": 90, "v2": 10}


def test_a_rollback_asked_before_the_first_step_rolls_back_at_once(tmp_path):
    report, lines, weights = asked_before_the_first_step(tmp_path, "rollback")
    assert (report.outcome, report.reason, report.reached) == ("rolled back", "by the operator", None)
    assert len(lines) == 1 and lines[0].startswith("rolled back: ") and weights == {"v1": 90, "v2": 10}


def test_a_step_the_shift_refuses_holds_the_canary_naming_the_step(tmp_path):
    report, _lines, weights = canary(tmp_path, Fed(GOOD), steps=(100.0,))  # v2 has 1 of 8 pods ready
    assert report.outcome == "held" and report.reason.startswith("step 100% not taken: ")
    assert report.reached is None and weights == {"v1": 90, "v2": 10}


def test_the_canary_looks_every_five_seconds_unless_told(tmp_path):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    plan = plan_canary(cluster.snapshot(), LLAMA, "v2", (11.0, 12.0))
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        clock.advance(seconds)

    report = run_steps(run_canary(plan,
                                  OpContext(cluster, cluster, AuditLog(tmp_path / "a.jsonl", "t", "demo"),
                                            clock=clock, sleep=sleep, poll_s=5.0, signals=Fed(GOOD)),
                                  CanaryOptions(Gates(window_s=60, hold_s=20))), lambda line: None)
    assert report.outcome == "done" and report.plan is plan
    assert naps and set(naps) == {5.0}


class Watching:
    """Good gates; records what each look was given, and fails or presses keys at given looks."""

    def __init__(self, fail_at: int = 0, keys: dict[int, str] | None = None, control: CanaryControl | None = None):
        self.seen: list[tuple] = []
        self.fail_at, self.keys, self.control = fail_at, keys or {}, control

    def version_signals(self, snapshot, service, window_s):
        self.seen.append((snapshot, service, window_s))
        if len(self.seen) == self.fail_at:
            raise BackendError("prometheus: 503")
        key = self.keys.get(len(self.seen))
        if key and self.control is not None:
            self.control.request(key)
        return {"v1": GOOD, "v2": GOOD}


def watch(tmp_path, signals, new="v2", steps=(11.0, 12.0), hold_s=20.0, control=None):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    plan = plan_canary(cluster.snapshot(), LLAMA, new, steps)
    lines: list[str] = []
    report = run_steps(run_canary(plan,
                                  OpContext(cluster, cluster, AuditLog(tmp_path / "a.jsonl", "t", "demo"),
                                            clock=clock, sleep=clock.advance, poll_s=10, signals=signals),
                                  CanaryOptions(Gates(window_s=60, hold_s=hold_s)), control=control), lines.append)
    return report, lines


def test_each_look_reads_the_service_as_it_is_now_over_the_gates_window(tmp_path):
    """The gates are read on a fresh snapshot's service (the step shows in its weights), over window_s."""
    signals = Watching()
    report, _ = watch(tmp_path, signals, steps=(11.0,))
    assert report.outcome == "done" and signals.seen
    snapshot, service, window = signals.seen[0]
    assert snapshot.service(LLAMA) == service and service.key == LLAMA
    assert {v.name: v.weight for v in service.versions} == {"v1": 89, "v2": 11}
    assert window == 60


def test_metrics_that_cannot_be_read_hold_the_canary_saying_why(tmp_path):
    report, lines = watch(tmp_path, Watching(fail_at=1), steps=(11.0, 12.0), hold_s=10.0)
    assert lines[-1] == "  holding at 11%: metrics unreadable: prometheus: 503"
    assert (report.outcome, report.reason) == (
        "held", "held at 11%: cannot tell (metrics unreadable: prometheus: 503); not advancing blind")


def test_a_step_is_watched_for_its_whole_hold_even_the_last_fraction_of_a_second(tmp_path):
    """20.5 s at a 10 s poll is three looks, not two (kills `remaining > 0` made `> 1`)."""
    _, lines = watch(tmp_path, Watching(), steps=(11.0, 12.0), hold_s=20.5)
    assert sum(1 for line in lines if line.startswith("  holding at 11%")) == 3


def test_at_100_percent_the_canary_is_done_without_holding(tmp_path):
    report, lines = watch(tmp_path, Watching(), new="v1", steps=(95.0, 100.0))
    assert (report.outcome, report.reason, report.reached) == ("done", "v1 at 100%", 100.0)
    assert lines[-1].startswith("step 100%: ") and not any("holding at 100%" in line for line in lines)


def test_a_rollback_asked_while_a_step_holds_is_said_then_done(tmp_path):
    control = CanaryControl()
    report, lines = watch(tmp_path, Watching(keys={1: "rollback"}, control=control), control=control)
    assert "rollback asked for at 11%" in lines
    assert (report.outcome, report.reason) == ("rolled back", "by the operator at 11%")


def test_a_stop_asked_while_a_step_holds_leaves_traffic_there(tmp_path):
    control = CanaryControl()
    report, _ = watch(tmp_path, Watching(keys={1: "stop"}, control=control), control=control)
    assert (report.outcome, report.reason, report.reached) == (
        "stopped", "stopped by the operator at 11%: traffic left as it is", 11.0)


def test_the_command_that_puts_traffic_back_names_every_version_at_its_start():
    plan = plan_canary(snap(service(weights=(2, 1, 0))), "llm/chat", "v2", (50.0,))
    assert plan.back() == "gputui shift llm/chat --to v1=66.6667 --to v2=33.3333 --to v3=0"


def test_a_gate_over_no_traffic_proves_nothing():
    """Fewer than one finished request over the window, for either version: cannot tell, never a pass."""
    quiet = VersionSignals(0.5 / 300, 0.0, 1.0, 1)  # half a request in 300 s
    assert judge({"new": quiet, "old": sig(0.0, 1.0)}, "new", "old", G) == (
        None, "no evidence: new finished no request over 300s (no traffic: a gate over nothing proves nothing)")
    assert judge({"new": quiet, "old": quiet}, "new", "old", G)[1].startswith("no evidence: new, old finished")
    one = VersionSignals(1 / 300, 0.0, 1.0, 1)  # exactly one request in the window is evidence
    assert judge({"new": one, "old": sig(0.0, 1.0)}, "new", "old", G)[0] is True

