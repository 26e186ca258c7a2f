"""The guided canary on the demo cluster with a clock the test moves and gates it is fed: steps taken in
order and audited, a failing gate rolls back at once to where it started (a route patch; the old version's
pods untouched), an unreadable gate holds instead of advancing, and Prometheus' histogram_quantile."""

from __future__ import annotations

import pytest

from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.canary import CanaryControl, CanaryOptions, Gates, judge, plan_canary, run_canary
from gputui.ops.context import OpContext
from gputui.ops.steps import run_steps
from gputui.ops.traffic.vocabulary import ShiftError
from gputui.vocabulary.signals import VersionSignals, quantile
from tests.demo_clock import ManualClock
from tests.support.audit_lines import written

LLAMA = "llm/llama-3-70b-instruct"
GOOD = VersionSignals(10.0, 0.002, 1.2, 1)
GATES = Gates(window_s=60, hold_s=30)


class Fed:
    """Gates as the test wants them, step by step (what Prometheus would say)."""

    def __init__(self, new_by_look: list[VersionSignals | None]):
        self.looks = list(new_by_look)

    def version_signals(self, snapshot, service, window_s):
        new = self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]
        return {"v1": GOOD, "v2": new or VersionSignals()}


class Hand(Fed):
    """Good gates, and the operator's keys pressed at given looks (look number -> what the key does)."""

    def __init__(self, control: CanaryControl, keys: dict[int, str]):
        super().__init__([GOOD])
        self.control, self.keys, self.look = control, keys, 0

    def version_signals(self, snapshot, service, window_s):
        self.look += 1
        key = self.keys.get(self.look)
        if key in ("pause", "continue"):
            self.control.set_paused(key == "pause")
        elif key:
            self.control.request(key)
        return super().version_signals(snapshot, service, window_s)


def run(tmp_path, fed: Fed, steps=(11.0, 12.0, 13.0), control=None):  # the demo's v2 has 10% and 1 of 8 ready pods
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    v1_pods = {p.uid for p in cluster.snapshot().pods if p.service == "llama-3-70b-instruct" and p.version == "v1"}
    plan = plan_canary(cluster.snapshot(), LLAMA, "v2", steps)
    audit = AuditLog(tmp_path / "audit.jsonl", "tester", "demo")
    gen = run_canary(plan,
                     OpContext(cluster, cluster, audit, clock=clock, sleep=clock.advance, poll_s=10, signals=fed),
                     CanaryOptions(GATES), control=control)
    lines: list[str] = []
    report = run_steps(gen, lines.append)
    weights = {v.name: v.weight for v in cluster.snapshot().service(LLAMA).versions}
    entries = written(tmp_path / "audit.jsonl")
    still = {p.uid for p in cluster.snapshot().pods if p.service == "llama-3-70b-instruct" and p.version == "v1"}
    return report, lines, weights, entries, v1_pods <= still


def test_healthy_gates_take_every_step_each_audited(tmp_path):
    report, lines, weights, entries, _ = run(tmp_path, Fed([GOOD]))
    assert report.outcome == "done" and report.reached == 13.0
    assert weights == {"v1": 87, "v2": 13}
    assert [e["action"] for e in entries] == ["canary-start", "shift", "shift", "shift", "canary-end"]
    assert lines[0].startswith("step 11%") and any("holding at 11%" in x for x in lines)


def test_a_failing_gate_rolls_back_at_once_and_never_touches_the_old_version(tmp_path):
    bad = VersionSignals(10.0, 0.30, 1.2, 1)  # 30% of its requests abort
    report, lines, weights, entries, v1_kept = run(tmp_path, Fed([GOOD, GOOD, GOOD, bad]))
    assert report.outcome == "rolled back" and report.reached == 12.0 and "error ratio beyond the gate" in report.reason
    assert weights == {"v1": 90, "v2": 10}  # where it started
    assert v1_kept  # v1's pods are the same pods: nothing deleted or scaled
    assert entries[-2]["action"] == "shift" and entries[-2]["params"]["force"] is True  # the rollback is never held up
    assert any(x.startswith("gate failed at 12%") for x in lines)


def test_gates_that_cannot_be_read_hold_the_canary_instead_of_advancing(tmp_path):
    report, _lines, weights, _entries, _ = run(tmp_path, Fed([None]))
    assert report.outcome == "held" and report.reached == 11.0 and "cannot tell" in report.reason
    assert weights == {"v1": 89, "v2": 11}


def test_a_step_beyond_the_ready_pods_is_not_taken(tmp_path):
    report, _lines, weights, _entries, _ = run(tmp_path, Fed([GOOD]), steps=(11.0, 50.0))
    assert report.outcome == "held" and "scale it up first" in report.reason and weights == {"v1": 89, "v2": 11}


def test_the_operator_rolls_back_at_any_step_with_one_key(tmp_path):
    control = CanaryControl()
    report, _lines, weights, entries, v1_kept = run(tmp_path, Hand(control, {4: "rollback"}), control=control)
    assert report.outcome == "rolled back" and report.reached == 12.0 and report.reason == "by the operator at 12%"
    assert weights == {"v1": 90, "v2": 10} and v1_kept
    assert [e["action"] for e in entries] == ["canary-start", "shift", "shift", "shift", "canary-end"]
    assert entries[-2]["params"]["to"] == {"v1": 90, "v2": 10} and entries[-1]["result"] == "rolled back"


def test_stop_leaves_traffic_where_it_is(tmp_path):
    control = CanaryControl()
    report, _lines, weights, entries, _ = run(tmp_path, Hand(control, {2: "stop"}), control=control)
    assert report.outcome == "stopped" and "traffic left as it is" in report.reason
    assert weights == {"v1": 89, "v2": 11} and entries[-1]["result"] == "stopped"


def test_a_pause_holds_the_step_and_its_watch_resumes_where_it_was(tmp_path):
    """Hold 30 s at a look every 10 s: three looks per step unpaused. Paused from look 2 to look 8, the step
    is watched (six more looks) and then finishes its own three."""
    control = CanaryControl()
    report, lines, weights, _entries, _ = run(tmp_path, Hand(control, {2: "pause", 8: "continue"}), control=control)
    assert report.outcome == "done" and weights == {"v1": 87, "v2": 13}
    at_11 = [x for x in lines if "at 11%" in x]
    assert at_11[2] == "  paused at 11%" and "  continuing at 11%" in at_11
    assert sum(1 for x in at_11 if "holding at 11%" in x) == 9  # 3 unpaused + 6 paused looks
    assert sum(1 for x in lines if "holding at 12%" in x) == 3


def test_a_failing_gate_rolls_back_even_while_paused(tmp_path):
    control = CanaryControl()
    control.set_paused(True)
    bad = VersionSignals(10.0, 0.30, 1.2, 1)
    report, _lines, weights, _entries, _ = run(tmp_path, Fed([GOOD, GOOD, GOOD, GOOD, GOOD, bad]), control=control)
    assert report.outcome == "rolled back" and report.reached == 11.0 and weights == {"v1": 90, "v2": 10}


def test_judge_and_plan_words():
    assert judge({"v1": GOOD, "v2": VersionSignals(5.0, 0.003, 1.3, 1)}, "v2", "v1", GATES)[0] is True
    slow = judge({"v1": GOOD, "v2": VersionSignals(5.0, 0.002, 2.0, 1)}, "v2", "v1", GATES)
    assert slow[0] is False and "p95 latency beyond the gate" in slow[1]
    assert judge({"v1": GOOD, "v2": VersionSignals()}, "v2", "v1", GATES)[0] is None
    cluster = DemoCluster(seed=7, clock=ManualClock())
    with pytest.raises(ShiftError, match="steps must rise"):
        plan_canary(cluster.snapshot(), LLAMA, "v2", (50.0, 25.0))
    with pytest.raises(ShiftError, match=r"an Argo Rollout runs its own|routed by nothing"):
        plan_canary(cluster.snapshot(), "llm/qwen2-72b", "v3")


def test_quantile_follows_histogram_quantile():
    buckets = {0.5: 0.0, 1.0: 50.0, 2.5: 100.0, float("inf"): 100.0}
    assert quantile(0.5, buckets) == pytest.approx(1.0)
    assert quantile(0.95, buckets) == pytest.approx(1.0 + 1.5 * 45 / 50)
    assert quantile(0.95, {1.0: 0.0, float("inf"): 0.0}) is None
    assert quantile(0.99, {1.0: 10.0, float("inf"): 20.0}) == 1.0  # in +Inf: the last finite bound
