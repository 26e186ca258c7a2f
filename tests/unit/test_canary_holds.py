"""When the guided canary may not take a step, on the demo cluster with a clock the test moves: traffic is never
raised towards pods waiting to be evicted, forced or not; a step past the capacity rule is taken only when forced
(at the start, or by the operator's `f` while it waits); a held canary that may wait says so once, keeps looking,
and clears what it said once it moves; gates it cannot read past the hold time hold it, said, never advanced blind.
Mutation of gputui/ops/canary.py found these paths reached by no fast test."""

from __future__ import annotations

import pytest

from gputui.backends.base import BackendError
from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.canary import FORCE_WORDS, CanaryControl, CanaryOptions, CanaryReport, Gates, plan_canary, run_canary
from gputui.ops.context import OpContext
from gputui.ops.drain.options import PHASE
from gputui.ops.steps import run_steps
from gputui.vocabulary.signals import VersionSignals
from tests.demo_clock import ManualClock

LLAMA = "llm/llama-3-70b-instruct"
GOOD = VersionSignals(10.0, 0.002, 1.2, 1)
GATES = Gates(window_s=60, hold_s=30)


class Looks:
    """v1 good; v2 as the script says, look by look (the last one repeats)."""

    def __init__(self, *v2: VersionSignals | None) -> None:
        self.v2 = list(v2)

    def version_signals(self, snapshot, service, window_s):
        new = self.v2.pop(0) if len(self.v2) > 1 else self.v2[0]
        return {"v1": GOOD, "v2": new or VersionSignals()}


def canary(tmp_path, steps, *, force=False, wait=False, looks=None, on_sleep=None, cluster=None, clock=None,
           gates=GATES):
    """Runs it; returns the report, its lines, what report.held was at each line, the weights after, and naps."""
    clock = clock or ManualClock()
    cluster = cluster or DemoCluster(seed=7, clock=clock)
    plan = plan_canary(cluster.snapshot(), LLAMA, "v2", steps)
    control, naps = CanaryControl(), []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        clock.advance(seconds)
        if on_sleep is not None:
            on_sleep(len(naps), control)

    report = CanaryReport(plan)
    held_at: list[str] = []
    lines: list[str] = []

    def said(line: str) -> None:
        lines.append(line)
        held_at.append(report.held)

    ctx = OpContext(cluster, cluster, AuditLog(tmp_path / "a.jsonl", "t", "demo"), clock=clock, sleep=sleep,
                    poll_s=10, signals=looks or Looks(GOOD))
    run_steps(run_canary(plan, ctx, CanaryOptions(gates, force=force, wait_when_held=wait), control=control, report=report),
              said)
    weights = {v.name: v.weight for v in cluster.snapshot().service(LLAMA).versions}
    return report, lines, held_at, weights, naps


def draining_v2(clock: ManualClock) -> tuple[DemoCluster, str]:
    """The demo with the node of v2's one ready pod being drained."""
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    (pod,) = [p for p in snap.pods_of(snap.service(LLAMA), "v2") if p.ready]
    cluster.annotate_node(pod.node, {PHASE: "waiting"})
    return cluster, pod.node


@pytest.mark.parametrize("force", [False, True])
def test_traffic_is_never_raised_towards_pods_waiting_to_be_evicted_even_forced(tmp_path, force):
    clock = ManualClock()
    cluster, node = draining_v2(clock)
    report, lines, _held, weights, _naps = canary(tmp_path, (11.0,), force=force, cluster=cluster, clock=clock)
    assert (report.outcome, report.reason) == (
        "held", f"step 11% not taken: every ready pod of v2 is waiting to be evicted (1 on {node}): traffic is not "
                "raised towards pods about to go")  # and no word of forcing it: a force does not pass this
    assert lines == [] and weights == {"v1": 90, "v2": 10} and report.reached is None


def test_a_step_past_the_capacity_rule_is_held_saying_how_to_force_it_and_taken_when_forced(tmp_path):
    report, _lines, _held, weights, _naps = canary(tmp_path, (50.0,))
    assert report.outcome == "held" and report.reason.startswith("step 50% not taken: ")
    assert report.reason.endswith(FORCE_WORDS) and weights == {"v1": 90, "v2": 10}
    report, lines, _held, weights, _naps = canary(tmp_path, (50.0,), force=True)
    assert report.reached == 50.0 and weights == {"v1": 50, "v2": 50} and lines[0].startswith("step 50%: ")


def test_a_canary_that_may_wait_says_its_hold_once_keeps_looking_and_takes_the_step_the_operator_forces(tmp_path):
    def press_f_at_the_third_look(naps: int, control: CanaryControl) -> None:
        if naps == 3:
            control.request("force")

    report, lines, held_at, weights, naps = canary(tmp_path, (50.0,), wait=True, on_sleep=press_f_at_the_third_look)
    assert lines[0].startswith("held before 50%: ") and lines[0].endswith(FORCE_WORDS)
    assert held_at[0] == "step 50% not taken: " + lines[0].removeprefix("held before 50%: ")
    assert lines[1].startswith("step 50%: ") and held_at[1] == ""  # said once, cleared once taken
    assert naps[:3] == [10, 10, 10] and report.reached == 50.0 and weights == {"v1": 50, "v2": 50}


def test_a_canary_that_may_wait_holds_on_gates_it_cannot_read_past_the_hold_time_then_moves_on(tmp_path):
    # Four looks that cannot tell (40 s, past the 30 s hold), then good ones.
    report, lines, held_at, weights, _naps = canary(tmp_path, (11.0, 12.0), wait=True,
                                                    looks=Looks(None, None, None, None, GOOD))
    holding = [i for i, line in enumerate(lines) if line.startswith("  holding at 11%")]
    assert [held_at[i] for i in holding[:2]] == ["", ""]  # within the hold time: watching, not held
    cannot = "held at 11%: cannot tell (no error ratio or latency for v2 (no finished requests read))"
    assert held_at[holding[2]] == cannot and held_at[holding[3]] == cannot
    assert held_at[holding[4]] == ""  # the gate read good: no longer held
    assert "step 12%" in " ".join(lines) and report.outcome == "done" and weights == {"v1": 88, "v2": 12}
    assert report.held == ""


def test_a_context_without_metrics_cannot_run_a_canary_and_says_so(tmp_path):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    plan = plan_canary(cluster.snapshot(), LLAMA, "v2", (11.0,))
    with pytest.raises(BackendError) as refused:
        next(run_canary(plan, OpContext(cluster, cluster, AuditLog(tmp_path / "a.jsonl", "t", "demo"), signals=None)))
    assert str(refused.value) == "the canary reads its gates from the engines' metrics, and this context has none"


def test_a_canary_is_not_said_held_while_any_of_its_hold_time_is_left(tmp_path):
    """The last look inside a 30.5 s hold has half a second left: watching, not yet held (kills `remaining <= 0`
    turned `<= 1`)."""
    _report, lines, held_at, _weights, _naps = canary(tmp_path, (11.0,), wait=True, looks=Looks(None, None, None, None, GOOD),
                                                      gates=Gates(window_s=60, hold_s=30.5))
    holding = [held_at[i] for i, line in enumerate(lines) if line.startswith("  holding at 11%")]
    assert holding[:3] == ["", "", ""]  # 20.5, 10.5 and 0.5 s left
    assert holding[3].startswith("held at 11%: cannot tell")  # none left
