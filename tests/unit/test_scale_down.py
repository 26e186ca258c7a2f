"""Session-aware scale-down, planned and run on the demo cluster (whose ReplicaSets remove pods in the
controller's order: unready, then lowest pod-deletion-cost): the idlest pods go, a pod with sessions above
the threshold blocks unless forced with the count of sessions it cuts, and refusals come before any write."""

from __future__ import annotations

import pytest

from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.scale_down import DELETION_COST, plan_scale_down, run_scale_down
from gputui.ops.traffic.vocabulary import ShiftError
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, InferenceService, ServiceVersion
from tests.demo_clock import ManualClock
from tests.support.audit_lines import written

LLAMA = "llm/llama-3-70b-instruct"


def live_pods(cluster: DemoCluster, version: str = "v1") -> list[InferencePod]:
    snap = cluster.snapshot()
    return [p for p in snap.pods if p.service == "llama-3-70b-instruct" and p.version == version and not p.deleting]


def test_the_idlest_pods_go_and_nothing_is_replaced(tmp_path):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    before = sorted(live_pods(cluster), key=lambda p: (snap.sessions(p).live, p.name))
    plan = plan_scale_down(cluster.snapshot(), LLAMA, "v1", 5, threshold=1000)
    assert plan.blockers == () and [p.name for p in plan.victims] == [p.name for p in before[:2]]
    audit = AuditLog(tmp_path / "audit.jsonl", "tester", "demo")
    with pytest.raises(ShiftError, match=f"it cuts {plan.cut} live sessions: confirm"):
        run_scale_down(plan, OpContext(cluster, cluster, audit))  # below the threshold, still asked: sessions are cut
    line = run_scale_down(plan, OpContext(cluster, cluster, audit), confirm_sessions=plan.cut)
    assert line == "deployment/llm/llama-3-70b-instruct-v1 scaled 7 → 5, idlest first"
    clock.advance(120)  # past their grace period
    assert sorted(p.name for p in live_pods(cluster)) == sorted(p.name for p in before[2:])
    assert cluster.snapshot().service(LLAMA).versions[0].rollout.replicas_desired == 5
    (entry,) = written(tmp_path / "audit.jsonl")
    assert entry["action"] == "scale-down" and entry["params"]["cut"] == plan.cut
    assert entry["params"]["costs"][before[0].name] < entry["params"]["costs"][before[-1].name]


def test_a_pod_with_sessions_blocks_unless_forced_with_the_count_typed_back(tmp_path):
    cluster = DemoCluster(seed=7, clock=ManualClock())
    plan = plan_scale_down(cluster.snapshot(), LLAMA, "v1", 6)  # threshold 0: every llama pod is busy
    assert plan.cut and "live sessions (threshold 0)" in plan.blockers[0]
    audit = AuditLog(tmp_path / "audit.jsonl", "tester", "demo")
    with pytest.raises(ShiftError, match="threshold 0"):
        run_scale_down(plan, OpContext(cluster, cluster, audit))
    with pytest.raises(ShiftError, match=f"it cuts {plan.cut} live sessions"):
        run_scale_down(plan, OpContext(cluster, cluster, audit), force=True, confirm_sessions=plan.cut + 1)
    assert len(live_pods(cluster)) == 7 and not (tmp_path / "audit.jsonl").exists()  # nothing written
    run_scale_down(plan, OpContext(cluster, cluster, audit), force=True, confirm_sessions=plan.cut)
    assert len(live_pods(cluster)) == 6


def test_what_a_scale_down_cannot_do_is_refused():
    svc = InferenceService("llm", "chat", (ServiceVersion("v1", None, workload="chat"),), "", "")
    pods = tuple(InferencePod("llm", f"chat-{i}", f"u{i}", "n1", service="chat", version="v1", owner_kind="StatefulSet",
                              session_signal=True) for i in range(3))
    snap = ClusterSnapshot(0.0, "t", pods=pods, services=(svc,), session_counts={("llm", f"chat-{i}"): 0 for i in range(3)})
    with pytest.raises(ShiftError, match="highest ordinal"):
        plan_scale_down(snap, "llm/chat", "v1", 1)
    unknown = tuple(InferencePod("llm", f"chat-{i}", f"u{i}", "n1", service="chat", version="v1", session_signal=True)
                    for i in range(3))
    plan = plan_scale_down(ClusterSnapshot(0.0, "t", pods=unknown, services=(svc,)), "llm/chat", "v1", 2,
                           threshold=10 ** 6)
    assert plan.cut is None and "an unknown number of live sessions" in plan.blockers[0]  # unknown is never idle
    with pytest.raises(ShiftError, match="unknown number"):
        run_scale_down(plan, OpContext(None, object(), AuditLog(None, "t", "c")),  # type: ignore[arg-type]
                       force=True, confirm_sessions=0)
    with pytest.raises(ShiftError, match=r"0\.\.2"):
        plan_scale_down(ClusterSnapshot(0.0, "t", pods=unknown, services=(svc,)), "llm/chat", "v1", 3)
    assert DELETION_COST == "controller.kubernetes.io/pod-deletion-cost"
