"""The drill (seed 000 §6) on the demo cluster with a clock the test moves: planned and refused before any
write, timed to the replacement's Ready and first traffic, the cordon undone whatever happens, each write
audited once; and `gputui check --drill` refusing a real cluster without its confirmation."""

from __future__ import annotations

import pytest

from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drill import DrillError, DrillReport, plan_drill, run_drill
from gputui.ops.steps import run_steps
from tests.demo_clock import ManualClock
from tests.support.audit_lines import written
from tests.support.gputui_cli import run

NODE = "gpu-a100-01"  # six mistral-7b stable pods


def drill(tmp_path, timeout_s: float = 600.0) -> tuple[DemoCluster, list[str], DrillReport, list[dict]]:
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    plan = plan_drill(cluster.snapshot(), NODE)
    audit = AuditLog(tmp_path / "audit.jsonl", "tester", "demo")
    steps = run_drill(plan, OpContext(cluster, cluster, audit, clock=clock, sleep=clock.advance), timeout_s=timeout_s)
    lines: list[str] = []
    report = run_steps(steps, lines.append)
    entries = written(tmp_path / "audit.jsonl")
    return cluster, lines, report, entries


def test_a_drill_is_timed_to_ready_and_traffic_and_its_cordon_undone(tmp_path):
    cluster, lines, report, entries = drill(tmp_path)
    assert report.recovered and report.undone, report
    evicted = report.plan.pod
    assert evicted.service == "mistral-7b" and report.plan.sessions is not None  # the count it cut, said first
    assert report.ready_after_s is not None and report.ready_after_s >= 40  # the demo's model load time
    assert report.traffic_after_s is not None and report.traffic_after_s >= report.ready_after_s
    after = cluster.snapshot()
    new = next(p for p in after.pods if p.key == report.replacement)
    assert new.node != NODE and new.ready and (after.sessions(new).live or 0) > 0
    assert not cluster.snapshot().node(NODE).unschedulable  # undone
    assert [(e["action"], e["target"]) for e in entries] == [
        ("cordon", f"node/{NODE}"), ("evict", f"pod/{evicted.key}"), ("uncordon", f"node/{NODE}")]
    assert lines[0] == f"cordoned {NODE}" and lines[-1].endswith("serving traffic after %ds" % report.traffic_after_s)


def test_a_drill_that_does_not_recover_in_time_says_why_and_still_undoes_its_cordon(tmp_path):
    cluster, _lines, report, entries = drill(tmp_path, timeout_s=10)  # a replacement loads its model for 40 s
    assert not report.recovered and "the replacement never became Ready" in report.failure
    assert report.undone and not cluster.snapshot().node(NODE).unschedulable
    assert entries[-1]["action"] == "uncordon"


@pytest.mark.parametrize("node, pod, says", [
    ("gpu-nope-01", None, 'node "gpu-nope-01" not found'),
    ("gpu-l40s-06", None, "is not Ready"),
    ("gpu-a100-01", "llm/nowhere", "is not a ready inference pod of a controller on gpu-a100-01"),
])
def test_a_drill_that_cannot_be_run_is_refused_before_any_write(node, pod, says):
    cluster = DemoCluster(seed=7, clock=ManualClock())
    with pytest.raises(DrillError, match=says):
        plan_drill(cluster.snapshot(), node, pod)


def test_evicting_the_only_ready_replica_is_an_outage_not_a_drill():
    cluster = DemoCluster(seed=7, clock=ManualClock())
    snap = cluster.snapshot()
    canary = [p for p in snap.pods if p.service == "mistral-7b" and p.version == "canary"]
    ready = [p for p in canary if p.ready]
    assert len(canary) == 2 and len(ready) == 1  # the demo's canary: one pod still loading
    with pytest.raises(DrillError, match="only ready replica"):
        plan_drill(snap, ready[0].node, ready[0].key)


def test_the_command_refuses_read_only_and_says_simulated_on_the_demo(tmp_path):
    refused = run("check", "--demo", "--read-only", "--drill", NODE, home=tmp_path)
    assert refused.returncode == 2 and "read-only" in refused.stderr and "Traceback" not in refused.stderr
    bad = run("check", "--demo", "--drill", "gpu-nope-01", home=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip() == 'gputui: error: node "gpu-nope-01" not found'
