"""Cordon and uncordon, fast: what the plan says, what is sent (nothing when there already), and the pods a drain
took out of rotation put back before an uncordon, each write audited."""

from __future__ import annotations

import json

import pytest

from gputui.backends.base import BackendError, ConflictError
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.cordon import CordonPlan, plan_cordon, run_cordon
from gputui.ops.drain.out_of_rotation import RECORD, OutOfRotation
from gputui.ops.errors import ReadOnlyError
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, Node


class Writer:
    """Records the writes; pods it knows by UID (what put_back asks before it patches)."""

    identity = "ops@example"

    def __init__(self, uids: dict[str, str] | None = None, conflict_on: set[str] | None = None) -> None:
        self.calls: list[tuple] = []
        self.uids = uids or {}
        self.conflict_on = conflict_on or set()

    def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        self.calls.append(("unschedulable", node, unschedulable))

    def annotate_node(self, node, values, resource_version=None):
        self.calls.append(("annotate", node, dict(values)))

    def pod_uid(self, namespace, name):
        return self.uids.get(f"{namespace}/{name}")

    def patch_object(self, group, version, plural, namespace, name, patch, patch_type="merge", subresource=""):
        if f"{namespace}/{name}" in self.conflict_on:
            raise ConflictError("replaced")
        self.calls.append(("patch", f"{namespace}/{name}", patch_type, patch))
        return {}


def node(name="gpu-1", unschedulable=False, upgrade_state="", annotations=None) -> Node:
    return Node(name=name, ready=True, unschedulable=unschedulable, gpu_product="H100", gpu_capacity=8,
                gpu_allocatable=8, upgrade_state=upgrade_state, annotations=annotations or {})


def pod(name, phase="Running", on="gpu-1") -> InferencePod:
    return InferencePod(namespace="llm", name=name, uid=f"uid-{name}", node=on, phase=phase)


def snap(*nodes: Node, pods=()) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=0.0, context="t", nodes=nodes, pods=tuple(pods))


def record(*entries: OutOfRotation) -> dict[str, str]:
    return {RECORD: json.dumps({e.key: {"uid": e.uid, "labels": dict(e.labels), "since": e.since} for e in entries})}


def audit_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


A = OutOfRotation("llm/a", "uid-a", {"serving": "true"}, 10.0)
B = OutOfRotation("llm/b", "uid-b", {"serving": "true", "pool": "x"}, 11.0)


def test_cordon_plan_counts_the_pods_still_running_there():
    s = snap(node(), node("gpu-2"), pods=[pod("a"), pod("b", phase="Succeeded"), pod("c", phase="Failed"),
                                          pod("d", phase="Pending"), pod("e", on="gpu-2"), pod("f")])
    plan = plan_cordon(s, "gpu-1")
    assert plan == CordonPlan("gpu-1", True, False, 3, "", ())
    assert plan.verb == "cordon"
    assert plan.describe() == "Cordon gpu-1: no new pods will be scheduled on it. Its 3 running pods stay."


def test_an_unknown_node_is_one_line():
    with pytest.raises(BackendError, match='node "nope" not found'):
        plan_cordon(snap(node()), "nope")


def test_already_there_in_either_direction():
    assert plan_cordon(snap(node(unschedulable=True)), "gpu-1").already
    assert plan_cordon(snap(node()), "gpu-1", cordon=False).already
    assert not plan_cordon(snap(node()), "gpu-1").already
    assert not plan_cordon(snap(node(unschedulable=True)), "gpu-1", cordon=False).already
    assert plan_cordon(snap(node(unschedulable=True)), "gpu-1").describe() == "gpu-1 is already cordoned"
    assert plan_cordon(snap(node()), "gpu-1", cordon=False).describe() == "gpu-1 is already schedulable"


def test_a_schedulable_node_with_pods_out_of_rotation_still_has_work_to_uncordon():
    """Uncordon is never "already there" while its drain record names pods to put back."""
    plan = plan_cordon(snap(node(annotations=record(A, B))), "gpu-1", cordon=False)
    assert not plan.already and plan.verb == "uncordon"
    assert {e.key for e in plan.back_in_rotation} == {"llm/a", "llm/b"}
    assert plan.describe() == ("Uncordon gpu-1: new pods may be scheduled on it again. 2 pods a drain took out of "
                               "rotation go back in first (llm/a, llm/b).")


def test_one_pod_to_put_back_is_said_in_the_singular():
    """It said "1 pods a drain took out of rotation go back in first" (cordon.py before this test)."""
    plan = plan_cordon(snap(node(annotations=record(A))), "gpu-1", cordon=False)
    assert plan.describe() == ("Uncordon gpu-1: new pods may be scheduled on it again. 1 pod a drain took out of "
                               "rotation goes back in first (llm/a).")


def test_cordon_ignores_the_rotation_record():
    plan = plan_cordon(snap(node(unschedulable=True, annotations=record(A))), "gpu-1")
    assert plan.already and plan.back_in_rotation == ()


def test_a_node_the_gpu_operator_is_upgrading_is_warned_about():
    plan = plan_cordon(snap(node(upgrade_state="drain-required")), "gpu-1")
    assert "mid driver upgrade under the GPU Operator" in plan.warning
    assert "manual recovery" in plan_cordon(snap(node(upgrade_state="upgrade-failed")), "gpu-1").warning
    assert plan.describe().endswith(f"Its 0 running pods stay. Warning: {plan.warning}.")
    back = plan_cordon(snap(node(unschedulable=True, upgrade_state="upgrade-failed")), "gpu-1", cordon=False)
    assert back.describe() == f"Uncordon gpu-1: new pods may be scheduled on it again. Warning: {back.warning}."


def test_read_only_sends_nothing_and_says_which_verb():
    with pytest.raises(ReadOnlyError, match=r"^read-only: uncordon is unavailable$"):
        run_cordon(plan_cordon(snap(node(unschedulable=True)), "gpu-1", cordon=False), OpContext(None, None,
                                                                                                 AuditLog(None, "t",
                                                                                                          "c")))


def test_already_there_sends_and_logs_nothing(tmp_path):
    writer, log = Writer(), tmp_path / "audit.jsonl"
    line = run_cordon(plan_cordon(snap(node(unschedulable=True)), "gpu-1"), OpContext(None, writer, AuditLog(log, "t",
                                                                                                             "c")))
    assert line == "gpu-1 is already cordoned" and writer.calls == [] and not log.exists()


def test_cordon_sends_one_write_audited_before_and_after(tmp_path):
    writer, log = Writer(), tmp_path / "audit.jsonl"
    ctx = OpContext(None, writer, AuditLog(log, "t", "c"))  # a cordon reads nothing: no reader
    assert run_cordon(plan_cordon(snap(node()), "gpu-1"), ctx) == "node/gpu-1 cordoned"
    assert writer.calls == [("unschedulable", "gpu-1", True)]
    assert [(e["phase"], e["action"], e["target"], e.get("result")) for e in audit_lines(log)] == [
        ("intent", "cordon", "node/gpu-1", None), ("result", "cordon", "node/gpu-1", "ok")]


def test_uncordon_puts_pods_back_then_clears_the_record_then_uncordons(tmp_path):
    writer, log = Writer(uids={"llm/a": "uid-a", "llm/b": "uid-b"}), tmp_path / "audit.jsonl"
    plan = plan_cordon(snap(node(unschedulable=True, annotations=record(A, B))), "gpu-1", cordon=False)
    line = run_cordon(plan, OpContext(None, writer, AuditLog(log, "t", "c")))
    assert line == "node/gpu-1 uncordoned; 2 pods back in rotation"
    assert [c[0] for c in writer.calls] == ["patch", "patch", "annotate", "unschedulable"]
    assert writer.calls[2] == ("annotate", "gpu-1", {RECORD: None})
    assert writer.calls[3] == ("unschedulable", "gpu-1", False)
    entries = audit_lines(log)
    assert [(e["phase"], e["action"]) for e in entries] == [
        ("intent", "rotation-in"), ("result", "rotation-in"), ("intent", "rotation-in"), ("result", "rotation-in"),
        ("intent", "annotate"), ("result", "annotate"), ("intent", "uncordon"), ("result", "uncordon")]
    assert entries[0]["target"] == "pod/llm/a"
    assert entries[0]["params"] == {"node": "gpu-1", "labels": {"serving": "true"}, "why": "uncordon"}
    assert entries[4]["target"] == "node/gpu-1" and entries[4]["params"] == {RECORD: None}
    assert all(e["result"] == "ok" for e in entries if e["phase"] == "result")


def test_a_pod_gone_or_replaced_is_not_put_back_and_the_log_says_so(tmp_path):
    writer, log = Writer(uids={"llm/a": "uid-new"}, conflict_on={"llm/b"}), tmp_path / "audit.jsonl"
    writer.uids["llm/b"] = "uid-b"
    plan = plan_cordon(snap(node(unschedulable=True, annotations=record(A, B))), "gpu-1", cordon=False)
    assert run_cordon(plan, OpContext(None, writer, AuditLog(log, "t", "c"))) == "node/gpu-1 uncordoned"
    results = [e["result"] for e in audit_lines(log) if e["phase"] == "result" and e["action"] == "rotation-in"]
    assert results == ["ok: the pod is gone or replaced; nothing to put back"] * 2
    assert ("annotate", "gpu-1", {RECORD: None}) in writer.calls  # the record is cleared all the same


def test_one_pod_back_is_counted_in_the_singular(tmp_path):
    """It said "1 pods back in rotation" (cordon.py before this test)."""
    writer = Writer(uids={"llm/a": "uid-a"})
    plan = plan_cordon(snap(node(annotations=record(A, B))), "gpu-1", cordon=False)
    assert run_cordon(plan, OpContext(None, writer, AuditLog(tmp_path / "a.jsonl", "t", "c"))) == \
        "node/gpu-1 uncordoned; 1 pod back in rotation"
