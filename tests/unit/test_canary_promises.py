"""The guided canary promises only what it will do (issue 35): before it starts it says each step it will take and
the first it would hold at, and why; `rollout --dry-run` exits 1 when a step would be held; `rollout --force`
exists and passes the capacity rule (never a gate, never pods waiting to be evicted); a gate over no traffic is
no evidence, never a pass; traffic is not raised towards canary pods waiting to be evicted; in the TUI a held
canary waits, keys live, and a force takes its step."""

from __future__ import annotations

import dataclasses

from gputui.backends.demo import DemoCluster
from gputui.cli.main import main
from gputui.ops.audit import AuditLog
from gputui.ops.canary import CanaryControl, CanaryOptions, CanaryReport, Gates, judge, plan_canary, run_canary
from gputui.ops.canary_steps import preview, preview_lines, step_blocker
from gputui.ops.context import OpContext
from gputui.vocabulary.model import DRAIN_PHASE_ANNOTATION, NodeState
from gputui.vocabulary.signals import VersionSignals
from tests.demo_clock import ManualClock

MISTRAL = "llm/mistral-7b"  # the demo's canary: 20% of new sessions on 1 of 7 ready pods
LLAMA = "llm/llama-3-70b-instruct"  # v2 at 10% on 1 of 8
GOOD = VersionSignals(10.0, 0.002, 1.2, 1)
GATES = Gates(window_s=300, hold_s=30)


def test_a_gate_over_no_traffic_is_no_evidence_never_a_pass():
    """The demo gave a version at 0% figures (0.20% errors, a p95) as if it had served: the gates passed."""
    quiet = VersionSignals(0.0, 0.002, 1.5, 1)
    verdict, words = judge({"v1": GOOD, "v2": quiet}, "v2", "v1", GATES)
    assert verdict is None and words.startswith("no evidence: v2 finished no request over 300s")
    trickle = VersionSignals(0.5 / 300, 0.002, 1.2, 1)  # half a request over the window: still nothing finished
    assert judge({"v1": GOOD, "v2": trickle}, "v2", "v1", GATES)[0] is None
    assert judge({"v1": GOOD, "v2": VersionSignals(1.0, 0.002, 1.2, 1)}, "v2", "v1", GATES)[0] is True


def test_the_preview_says_which_steps_it_will_take_and_where_it_holds():
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    plan = plan_canary(snap, MISTRAL, "canary")
    steps = preview(snap, MISTRAL, "canary", plan.steps)
    assert [(s.step, bool(s.held), s.forceable) for s in steps] == [(25.0, True, True), (50.0, True, False),
                                                                    (100.0, True, False)]
    lines = preview_lines(steps)
    assert lines[0].startswith("25%: held now: canary would get 25% of new sessions on 14.3% of the ready pods")
    assert lines[0].endswith("(--force passes it)") and lines[1] == "50%: not reached while 25% is held"
    forced = preview(snap, MISTRAL, "canary", plan.steps, force=True)
    assert not any(s.held for s in forced) and all(s.forced for s in forced)
    small = preview(snap, LLAMA, "v2", (11.0, 12.0))  # within its share of the ready pods (and the slack)
    assert preview_lines(small) == ["11%: will be taken, its gates then decide the next",
                                    "12%: will be taken, its gates then decide the next"]


def _home(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def test_rollout_dry_run_is_honest_and_force_exists(tmp_path, monkeypatch, capsys):
    _home(tmp_path, monkeypatch)
    assert main(["rollout", MISTRAL, "canary", "--dry-run", "--demo"]) == 1  # it exited 0, promising 25 → 50 → 100
    out = capsys.readouterr()
    assert "25%: held now: canary would get 25%" in out.out and "50%: not reached while 25% is held" in out.out
    assert out.err.strip() == "gputui: error: the canary would hold before 25%: --force passes the capacity rule"
    assert main(["rollout", MISTRAL, "canary", "--dry-run", "--force", "--demo"]) == 0  # an unknown argument before
    assert "25%: will be taken (forced past the capacity rule)" in capsys.readouterr().out
    assert main(["rollout", LLAMA, "v2", "--steps", "11,12", "--dry-run", "--demo"]) == 0


class _Draining:
    """The demo cluster, with the node of the new version's pods being drained (as a drain's record says)."""

    def __init__(self, cluster: DemoCluster, service: str, version: str) -> None:
        self.cluster, self.service, self.version = cluster, service, version

    def snapshot(self):
        snap = self.cluster.snapshot()
        svc = snap.service(self.service)
        nodes = {p.node for p in snap.pods_of(svc, self.version)}
        drained = tuple(dataclasses.replace(n, annotations={**n.annotations, DRAIN_PHASE_ANNOTATION: "running"})
                        if n.name in nodes else n for n in snap.nodes)
        return dataclasses.replace(snap, nodes=drained)


def test_traffic_is_not_raised_towards_canary_pods_waiting_to_be_evicted(tmp_path):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    draining = _Draining(cluster, LLAMA, "v2")
    snap = draining.snapshot()
    assert any(n.state is NodeState.DRAINING for n in snap.nodes)
    blocked = step_blocker(snap, LLAMA, "v2", 11.0)
    assert blocked is not None and blocked[1] is False  # no force passes it
    assert blocked[0].startswith("every ready pod of v2 is waiting to be evicted (1 on ")
    plan = plan_canary(cluster.snapshot(), LLAMA, "v2", (11.0, 12.0))
    audit = AuditLog(tmp_path / "audit.jsonl", "tester", "demo")
    report = _run(plan, draining, cluster, audit, clock, force=True)
    assert report.outcome == "held" and "waiting to be evicted" in report.reason and report.reached is None
    assert cluster.snapshot().service(LLAMA).share_pct("v2") == 10.0  # nothing was shifted


def _run(plan, reader, cluster, audit, clock, control=None, force=False, wait=False, looks=None) -> CanaryReport:
    class Signals:
        def version_signals(self, snapshot, service, window_s):
            return {v.name: GOOD for v in service.versions}

    report = CanaryReport(plan)
    gen = run_canary(plan,
                     OpContext(reader, cluster, audit, clock=clock, sleep=clock.advance, poll_s=10, signals=Signals()),
                     CanaryOptions(GATES, force=force, wait_when_held=wait), control=control, report=report)
    for n, _line in enumerate(gen):
        if looks is not None:
            looks(n, report)
    return report


def test_a_held_canary_in_the_tui_waits_and_a_force_takes_its_step(tmp_path):
    """It ended at once ("held"), and space then said no canary was running."""
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    plan = plan_canary(cluster.snapshot(), MISTRAL, "canary", (25.0,))
    audit = AuditLog(tmp_path / "audit.jsonl", "tester", "demo")
    control = CanaryControl()
    seen: list[str] = []

    def looks(n: int, report: CanaryReport) -> None:
        seen.append(report.held)
        if n == 0:  # held, and still running: the operator forces the step
            assert report.held.startswith("step 25% not taken: canary would get 25%") and not report.outcome
            assert report.held.endswith("(rollout --force, or f on the service screen, takes it anyway)")
            control.request("force")

    report = _run(plan, cluster, cluster, audit, clock, control=control, wait=True, looks=looks)
    assert report.outcome == "done" and report.reached == 25.0 and report.held == ""
    assert cluster.snapshot().service(MISTRAL).share_pct("canary") == 25.0
