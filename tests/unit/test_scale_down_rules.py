"""Session-aware scale-down, fast: which pods go (unready first, then the idlest, then by name), the deletion cost
each pod gets, what blocks, what must be typed back, and the writes (every pod's cost, then the scale), audited."""

from __future__ import annotations

import json

import pytest

from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.errors import ReadOnlyError
from gputui.ops.scale_down import DELETION_COST, KEEP_UNKNOWN, REMOVE_FIRST, plan_scale_down, run_scale_down
from gputui.ops.traffic.vocabulary import ShiftError
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, InferenceService, ServiceVersion

SERVICE = InferenceService("llm", "chat", (ServiceVersion("v1", workload="chat-v1-deploy"), ServiceVersion("v2")),
                           router_kind="HTTPRoute", router_name="chat")


def pod(name, version="v1", ready=True, phase="Running", deleting=False, owner="ReplicaSet", service="chat"):
    return InferencePod(namespace="llm", name=name, uid=f"u-{name}", node="n1", phase=phase, ready=ready,
                        service=service, version=version, deleting=deleting, owner_kind=owner, session_signal=True)


def snap(pods, counts, services=(SERVICE,)) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=0.0, context="t", pods=tuple(pods), services=tuple(services),
                           session_counts={("llm", k): v for k, v in counts.items()})


class Writer:
    identity = "ops@example"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def patch_object(self, group, version, plural, namespace, name, patch, patch_type="merge", subresource=""):
        self.calls.append((group, version, plural, namespace, name, patch, patch_type, subresource))
        return {}


FOUR = [pod("a"), pod("b"), pod("c"), pod("d")]


def test_the_idlest_go_first_and_ties_by_name():
    plan = plan_scale_down(snap(FOUR, {"a": 5, "b": 0, "c": 2, "d": 0}), "llm/chat", "v1", 2)
    assert [p.name for p in plan.victims] == ["b", "d"] and [p.name for p in plan.keep] == ["c", "a"]
    assert (plan.current, plan.target, plan.threshold, plan.blockers) == (4, 2, 0, ())
    assert plan.sessions == {"a": 5, "b": 0, "c": 2, "d": 0}
    assert (plan.service, plan.version, plan.namespace, plan.workload) == ("llm/chat", "v1", "llm", "chat-v1-deploy")
    assert plan.cut == 0


def test_unready_pods_go_before_any_ready_one_and_unknown_counts_after_known_ones():
    pods = [pod("a"), pod("b", ready=False), pod("c"), pod("d")]
    plan = plan_scale_down(snap(pods, {"a": 9, "b": 40, "d": 1}), "llm/chat", "v1", 1)
    # b: unready; then the known counts, fewest first (d 1, a 9); c (unknown) kept last
    assert [p.name for p in plan.victims] == ["b", "d", "a"] and [p.name for p in plan.keep] == ["c"]


def test_pods_ending_or_ended_are_not_counted_and_other_versions_are_not_touched():
    pods = [pod("a"), pod("b", phase="Succeeded"), pod("c", deleting=True), pod("d"), pod("e", version="v2")]
    plan = plan_scale_down(snap(pods, {"a": 0, "d": 0, "e": 0}), "llm/chat", "v1", 1)
    assert plan.current == 2 and {p.name for p in (*plan.victims, *plan.keep)} == {"a", "d"}


def test_a_version_without_a_workload_name_is_the_service_and_version():
    plan = plan_scale_down(snap([pod("x", "v2"), pod("y", "v2")], {"x": 0, "y": 0}), "llm/chat", "v2", 1)
    assert plan.workload == "chat-v2"


def test_a_pod_above_the_threshold_or_unknown_blocks_naming_it():
    plan = plan_scale_down(snap(FOUR, {"a": 3, "b": 2, "d": 0}), "llm/chat", "v1", 1, threshold=2)
    assert [p.name for p in plan.victims] == ["d", "b", "a"]
    assert plan.blockers == (
        "a holds 3 live sessions (threshold 2): wait for them to end, or force and confirm the count",)
    unknown = plan_scale_down(snap(FOUR, {"a": 3, "b": 2, "d": 0}), "llm/chat", "v1", 0, threshold=5)
    assert unknown.blockers == ("c holds an unknown number of live sessions (threshold 5): wait for them to end, "
                                "or force and confirm the count",)
    at = plan_scale_down(snap(FOUR, {"a": 2, "b": 2, "c": 2, "d": 2}), "llm/chat", "v1", 0, threshold=2)
    assert at.blockers == ()  # at the threshold is allowed


def test_what_a_plan_cuts_and_the_costs_it_writes():
    plan = plan_scale_down(snap(FOUR, {"a": 7, "b": 1, "c": None, "d": 2}), "llm/chat", "v1", 2)
    assert plan.cut == 3
    assert plan.costs() == {"b": REMOVE_FIRST, "d": REMOVE_FIRST - 1, "a": 7, "c": KEEP_UNKNOWN}
    assert (REMOVE_FIRST, KEEP_UNKNOWN) == (-1000, 2**31 - 1)
    assert plan.describe() == ("Scale llm/chat-v1-deploy (llm/chat v1) from 4 to 2: removes b (1 sessions), "
                               "d (2 sessions); cuts 3 live sessions")


def test_an_unknown_count_among_the_removed_makes_the_cut_unknown():
    plan = plan_scale_down(snap(FOUR, {"a": 7, "b": 1, "d": 2}), "llm/chat", "v1", 0)
    assert plan.cut is None
    assert plan.describe().endswith("c (unknown sessions); cuts an unknown number of live sessions")


@pytest.mark.parametrize("replicas", [-1, 4, 5])
def test_replicas_outside_the_range_are_refused(replicas):
    with pytest.raises(ShiftError, match=r"llm/chat v1 runs 4 pods: scale down to 0\.\.3"):
        plan_scale_down(snap(FOUR, {}), "llm/chat", "v1", replicas)


def test_an_unknown_version_a_rollout_and_a_statefulset_are_refused():
    with pytest.raises(ShiftError, match='llm/chat has no version "v9" \\(v1, v2\\)'):
        plan_scale_down(snap(FOUR, {}), "llm/chat", "v9", 1)
    rollout = InferenceService("llm", "chat", SERVICE.versions, router_kind="Rollout")
    with pytest.raises(ShiftError, match="is an Argo Rollout: its controller scales it"):
        plan_scale_down(snap(FOUR, {}, services=(rollout,)), "llm/chat", "v1", 1)
    with pytest.raises(ShiftError, match="llm/chat v1 is not a Deployment's"):
        plan_scale_down(snap([pod("a"), pod("b", owner="StatefulSet")], {}), "llm/chat", "v1", 1)


def audit_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_writes_every_cost_then_the_scale_audited_once(tmp_path):
    plan = plan_scale_down(snap(FOUR, {"a": 7, "b": 0, "c": 3, "d": 0}), "llm/chat", "v1", 2)
    writer, log = Writer(), tmp_path / "audit.jsonl"
    line = run_scale_down(plan, OpContext(None, writer, AuditLog(log, "t", "c")))
    assert line == "deployment/llm/chat-v1-deploy scaled 4 → 2, idlest first"
    assert writer.calls == [
        ("", "v1", "pods", "llm", "b", {"metadata": {"annotations": {DELETION_COST: "-1000"}}}, "merge", ""),
        ("", "v1", "pods", "llm", "d", {"metadata": {"annotations": {DELETION_COST: "-1001"}}}, "merge", ""),
        ("", "v1", "pods", "llm", "c", {"metadata": {"annotations": {DELETION_COST: "3"}}}, "merge", ""),
        ("", "v1", "pods", "llm", "a", {"metadata": {"annotations": {DELETION_COST: "7"}}}, "merge", ""),
        ("apps", "v1", "deployments", "llm", "chat-v1-deploy", {"spec": {"replicas": 2}}, "merge", "scale")]
    entries = audit_lines(log)
    assert [(e["phase"], e["action"], e["target"]) for e in entries] == [
        ("intent", "scale-down", "deployment/llm/chat-v1-deploy"), ("result", "scale-down", "deployment/llm/chat-v1-deploy")]
    assert entries[0]["params"] == {"service": "llm/chat", "version": "v1", "from": 4, "to": 2,
                                    "costs": {"b": -1000, "d": -1001, "c": 3, "a": 7}, "cut": 0, "force": False}


def test_read_only_writes_nothing():
    plan = plan_scale_down(snap(FOUR, {"a": 0, "b": 0, "c": 0, "d": 0}), "llm/chat", "v1", 2)
    with pytest.raises(ReadOnlyError, match=r"^read-only: scale-down is unavailable$"):
        run_scale_down(plan, OpContext(None, None, AuditLog(None, "t", "c")))


def test_a_blocked_plan_needs_force_and_the_count_typed_back(tmp_path):
    plan = plan_scale_down(snap(FOUR, {"a": 0, "b": 0, "c": 0, "d": 4}), "llm/chat", "v1", 0)
    writer = Writer()
    with pytest.raises(ShiftError, match="d holds 4 live sessions"):
        run_scale_down(plan, OpContext(None, writer, AuditLog(None, "t", "c")), confirm_sessions=4)
    with pytest.raises(ShiftError, match="it cuts 4 live sessions: confirm that number"):
        run_scale_down(plan, OpContext(None, writer, AuditLog(None, "t", "c")), force=True)
    with pytest.raises(ShiftError, match="confirm that number"):
        run_scale_down(plan, OpContext(None, writer, AuditLog(None, "t", "c")), force=True, confirm_sessions=3)
    assert writer.calls == []
    run_scale_down(plan, OpContext(None, writer, AuditLog(tmp_path / "a.jsonl", "t", "c")), force=True,
                   confirm_sessions=4)
    assert writer.calls[-1][5] == {"spec": {"replicas": 0}}
    assert audit_lines(tmp_path / "a.jsonl")[0]["params"]["force"] is True


def test_cutting_sessions_under_the_threshold_is_still_confirmed():
    plan = plan_scale_down(snap(FOUR, {"a": 1, "b": 1, "c": 0, "d": 0}), "llm/chat", "v1", 1, threshold=3)
    assert plan.blockers == () and plan.cut == 1
    with pytest.raises(ShiftError, match="it cuts 1 live sessions"):
        run_scale_down(plan, OpContext(None, Writer(), AuditLog(None, "t", "c")))


def test_an_unknown_cut_is_refused_even_when_forced():
    plan = plan_scale_down(snap(FOUR, {"a": 0, "b": 0, "d": 0}), "llm/chat", "v1", 0)
    writer = Writer()
    with pytest.raises(ShiftError, match=r"^it would cut an unknown number of live sessions: refused \(wait until "
                                         r"they can be read\)$"):
        run_scale_down(plan, OpContext(None, writer, AuditLog(None, "t", "c")), force=True, confirm_sessions=0)
    assert writer.calls == []
