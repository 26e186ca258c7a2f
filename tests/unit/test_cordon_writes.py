"""The cordon's newer writes, exactly as sent and audited (fast; mutation of gputui/ops/cordon.py found them
reached by no fast test): the cordon and its record as one node patch, the uncordon that withdraws gputui's own
NodeMaintenance, the DCGM diagnostic named in the uncordon's audit entry, the Drained condition cleared on a node
back in service (KEP-5683), and the plan's words for a cordon's record."""

from __future__ import annotations

import json

from gputui.backends.base import BackendError
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.cordon import CordonPlan, plan_cordon, run_cordon
from gputui.policy.cordon_owner import CordonOwner
from gputui.policy.cordon_record import CordonRecord
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.disruptions import CORDON_RECORD
from gputui.vocabulary.model import Condition, Node


class Writer:
    """Every call with every argument; it can delete objects (a JobWriter) and set node conditions (a
    LifecycleWriter), the live writer's optional protocols."""

    identity = "ops@example"

    def __init__(self, condition_error: str = "") -> None:
        self.calls: list[tuple] = []
        self.condition_error = condition_error

    def set_unschedulable(self, node, unschedulable):
        self.calls.append(("unschedulable", node, unschedulable))

    def annotate_node(self, node, values, resource_version=None):
        self.calls.append(("annotate", node, dict(values)))

    def patch_object(self, group, version, plural, namespace, name, patch, patch_type="merge", subresource=""):
        self.calls.append(("patch", group, version, plural, namespace, name, patch, patch_type, subresource))
        return {}

    # JobWriter
    def get_object(self, group, version, plural, namespace, name):
        return {}

    def list_objects(self, group, version, plural, namespace, label_selector=""):
        return []

    def create_object(self, group, version, plural, namespace, body):
        return body

    def delete_object(self, group, version, plural, namespace, name, propagation="Foreground"):
        self.calls.append(("delete", group, version, plural, namespace, name, propagation))

    def pod_log(self, namespace, name, container="", limit_bytes=8_000_000):
        return ""

    # LifecycleWriter
    def feature_gate(self, name):
        return True, ""

    def set_node_condition(self, node, kind, status, reason, message):
        if self.condition_error:
            raise BackendError(self.condition_error)
        self.calls.append(("condition", node, kind, status, reason, message))


class PlainWriter:
    """A writer with neither optional protocol (the demo's kind): it cannot set a node's conditions."""

    identity = "ops@example"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def set_unschedulable(self, node, unschedulable):
        self.calls.append(("unschedulable", node, unschedulable))


def entries(path) -> list[tuple]:
    return [(e["phase"], e["action"], e["target"], e.get("params"), e.get("result"))
            for e in map(json.loads, path.read_text().splitlines())]


def ctx(writer, tmp_path, clock=lambda: 1_800_000_000.5) -> OpContext:
    return OpContext(None, writer, AuditLog(tmp_path / "audit.jsonl", "ops@example", "prod"), clock=clock)


def uncordon(**kw) -> CordonPlan:
    return CordonPlan("gpu-1", False, False, 0, **kw)


def test_a_cordon_with_a_reason_is_one_node_patch_holding_the_cordon_and_its_record(tmp_path):
    writer = Writer()
    plan = CordonPlan("gpu-1", True, False, 2, reason="XID 79 on GPU 3", ticket="OPS-1", expires=1_800_003_600.0)
    assert run_cordon(plan, ctx(writer, tmp_path)) == "node/gpu-1 cordoned"
    record = CordonRecord("ops@example", "XID 79 on GPU 3", 1_800_000_000.0, "OPS-1", 1_800_003_600.0)
    assert writer.calls == [("patch", "", "v1", "nodes", "", "gpu-1",
                             {"spec": {"unschedulable": True}, "metadata": {"annotations": {
                                 CORDON_RECORD: record.to_annotation()}}}, "merge", "")]
    assert entries(tmp_path / "audit.jsonl") == [
        ("intent", "cordon", "node/gpu-1", {"record": record.to_dict()}, None),
        ("result", "cordon", "node/gpu-1", {"record": record.to_dict()}, "ok")]


def test_an_uncordon_withdraws_gputuis_own_nodemaintenance_first_and_says_why_in_the_audit_log(tmp_path):
    writer = Writer()
    plan = uncordon(owner=CordonOwner((), None, requests=("nvidia-maintenance/gputui-gpu-1",)))
    assert plan.operation == "uncordon_nodemaintenance"
    assert run_cordon(plan, ctx(writer, tmp_path)) == "node/gpu-1 uncordoned"
    assert writer.calls == [
        ("delete", d.MAINTENANCE_GROUP, "v1alpha1", "nodemaintenances", "nvidia-maintenance", "gputui-gpu-1",
         "Background"),
        ("unschedulable", "gpu-1", False)]
    log = entries(tmp_path / "audit.jsonl")
    assert log[0] == ("intent", "nodemaintenance-delete", "nodemaintenance/nvidia-maintenance/gputui-gpu-1",
                      {"reason": "uncordon"}, None)


def test_the_diagnostic_that_gated_an_uncordon_is_named_in_its_audit_entry(tmp_path):
    writer = Writer()
    diag = {"job": "gputui-diag-gpu-1", "verdict": "pass", "level": 2}
    run_cordon(uncordon(), ctx(writer, tmp_path), diag=diag)
    assert entries(tmp_path / "audit.jsonl")[0] == ("intent", "uncordon", "node/gpu-1", {"diag": diag}, None)


def test_an_uncordon_clears_the_drained_mark_a_gputui_drain_set_audited_as_a_node_condition(tmp_path):
    writer = Writer()
    line = run_cordon(uncordon(clears_drained=True), ctx(writer, tmp_path))
    assert line == f"node/gpu-1 uncordoned; its {d.LC_DRAINED} condition cleared"
    assert writer.calls[-1] == ("condition", "gpu-1", d.LC_DRAINED, "False", d.LC_UNCORDONED,
                                "uncordoned by ops@example")
    assert entries(tmp_path / "audit.jsonl")[-2:] == [
        ("intent", "node-condition", "node/gpu-1", {"type": d.LC_DRAINED, "status": "False",
                                                     "reason": d.LC_UNCORDONED}, None),
        ("result", "node-condition", "node/gpu-1", {"type": d.LC_DRAINED, "status": "False",
                                                     "reason": d.LC_UNCORDONED}, "ok")]


def test_a_refused_drained_write_is_said_and_the_uncordon_stands(tmp_path):
    writer = Writer(condition_error="nodes/status is forbidden")
    line = run_cordon(uncordon(clears_drained=True), ctx(writer, tmp_path))
    assert line == f"node/gpu-1 uncordoned; its {d.LC_DRAINED} condition stays: nodes/status is forbidden"
    assert writer.calls == [("unschedulable", "gpu-1", False)]


def test_no_drained_mark_to_clear_or_no_writer_that_can_is_no_condition_write(tmp_path):
    writer = Writer()
    assert run_cordon(uncordon(), ctx(writer, tmp_path)) == "node/gpu-1 uncordoned"
    assert [c[0] for c in writer.calls] == ["unschedulable"]
    plain = PlainWriter()
    assert run_cordon(uncordon(clears_drained=True), ctx(plain, tmp_path)) == "node/gpu-1 uncordoned"
    assert plain.calls == [("unschedulable", "gpu-1", False)]


def test_a_cordon_plan_judges_no_owner_even_with_an_identity():
    """Who holds a node matters to an uncordon only (kills `cordon or identity is None` → `and`)."""
    node = Node(name="gpu-1", ready=True, unschedulable=False, gpu_product="H100", gpu_capacity=8, gpu_allocatable=8,
                annotations={CORDON_RECORD: CordonRecord("bob", "disk", 1.0).to_annotation()},
                conditions=(Condition(d.LC_DRAINED, "True", d.LC_DONE),))
    snapshot = ClusterSnapshot(taken_at=10.0, context="t", nodes=(node,))
    assert plan_cordon(snapshot, "gpu-1", identity="ops@example").owner is None
    assert plan_cordon(snapshot, "gpu-1", identity="ops@example").clears_drained is False
    held = plan_cordon(snapshot, "gpu-1", cordon=False, identity="ops@example")
    assert held.owner is not None and held.owner.record is not None and held.clears_drained


def test_a_cordons_words_give_its_reason_and_only_the_ticket_and_expiry_it_has():
    plan = CordonPlan("gpu-1", True, False, 3, reason="XID 79")
    assert plan.describe() == "Cordon gpu-1: no new pods will be scheduled on it. Its 3 running pods stay. Reason: XID 79."
    with_all = CordonPlan("gpu-1", True, False, 3, reason="XID 79", ticket="OPS-1", expires=1_800_003_600.0)
    assert with_all.describe() == ("Cordon gpu-1: no new pods will be scheduled on it. Its 3 running pods stay. "
                                   "Reason: XID 79 (ticket OPS-1); expires 2027-01-15 09:00 UTC.")
