from gputui.backends.demo import DemoCluster
from gputui.policy.health import diagnose
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary.model import InferencePod, Node
from tests.demo_clock import ManualClock


def test_demo_findings_cover_each_kind():
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    found = {(f.kind, f.subject) for f in diagnose(snap)}
    kinds = {k for k, _ in found}
    assert {"Pending", "GpuLost", "Drift", "NotReady"} <= kinds
    assert ("GpuLost", "gpu-h100-07") in found
    assert ("Drift", "gpu-a100-05") in found
    pending = next(f for f in diagnose(snap) if f.kind == "Pending")
    assert "Insufficient nvidia.com/gpu" in pending.detail


def test_no_metrics_only_when_metrics_are_healthy():
    node = Node("n", True, False, "X", 8, 8)
    ok = ClusterSnapshot(0, "c", nodes=(node,), sources=(SourceStatus("metrics", 0.0),))
    down = ClusterSnapshot(0, "c", nodes=(node,), sources=(SourceStatus("metrics", 0.0, "connection refused"),))
    assert [f.kind for f in diagnose(ok)] == ["NoMetrics"]
    assert diagnose(down) == []


def test_restarting_inference_pod():
    pod = InferencePod("llm", "p", "u", "n", service="s", version="v", restarts=5)
    snap = ClusterSnapshot(0, "c", pods=(pod,))
    assert [(f.kind, f.subject) for f in diagnose(snap)] == [("Restarts", "llm/p")]
