"""The node lifecycle conditions (KEP-5683) a drain sets and an uncordon clears (gputui.ops.drain.lifecycle,
gputui.ops.cordon), and the holds another writer's conditions make (gputui.policy.lifecycle_holds), on a recording
API: when they are set (the setting, the apiserver's gate, unknown), in which order, once each, and that a write
refused leaves the drain going."""

from __future__ import annotations

import dataclasses

import pytest

from gputui.backends.base import BackendError
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.cordon import plan_cordon, run_cordon
from gputui.ops.drain.events import DrainControl, EventKind
from gputui.ops.drain.lifecycle import NodeLifecycle
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.run import run_drain
from gputui.policy.cordon_owner import cordon_owner
from gputui.policy.lifecycle_holds import lifecycle_holds
from gputui.settings import Settings
from gputui.vocabulary.model import Condition, Node
from tests.support.audit_lines import written
from tests.support.drain_api import Api, Drain, pod


class LifecycleApi(Api):
    """Api, plus the apiserver's gate as its /metrics says it, and the node conditions set (in order)."""

    def __init__(self, *args, gate: tuple[bool | None, str] = (True, ""), refuse: bool = False, **kw) -> None:
        super().__init__(*args, **kw)
        self.gate, self.refuse = gate, refuse
        self.conditions: list[tuple[str, str, str]] = []
        self.messages: list[str] = []  # each condition's message, in the same order
        self.nodes: set[str] = set()  # the nodes they were set on

    def feature_gate(self, name: str) -> tuple[bool | None, str]:
        assert name == "NodeLifecycleConditions"
        return self.gate

    def set_node_condition(self, node: str, kind: str, status: str, reason: str, message: str) -> None:
        if self.refuse:
            raise BackendError("nodes/status is forbidden")
        self.conditions.append((kind, status, reason))
        self.messages.append(message)
        self.nodes.add(node)


def drain(api: Api, tmp_path, mode: str = "auto", options: DrainOptions = DrainOptions()) -> Drain:
    d = Drain(api, tmp_path / "a.jsonl", options)
    d.ctx = dataclasses.replace(d.ctx, settings=Settings(lifecycle_conditions=mode))
    from gputui.ops.drain.run import run_drain

    d.gen = run_drain(d.plan, d.ctx)
    return d


def test_a_drain_sets_draining_then_drained_each_once_in_order_and_says_so(tmp_path):
    api = LifecycleApi((pod("a"), pod("b")), {"a": 0, "b": 0})
    d = drain(api, tmp_path)
    assert d.run().outcome is Outcome.DRAINED
    assert api.conditions == [("DrainInProgress", "True", "GputuiDrain"),
                              ("DrainInProgress", "False", "GputuiDrainCompleted"),
                              ("Drained", "True", "GputuiDrainCompleted")]
    assert "node lifecycle condition DrainInProgress set" in d.events[0].message
    assert [(a, p) for a, _t, p, _r in d.entries() if a == "node-condition"] == [
        ("node-condition", {"type": t, "status": s, "reason": r}) for t, s, r in api.conditions]


def test_a_drain_left_unfinished_is_no_longer_in_progress_and_not_drained(tmp_path):
    api = LifecycleApi((pod("a"),), {"a": None})  # unknown sessions at the deadline: left in place
    d = drain(api, tmp_path, options=DrainOptions(session_deadline_s=30))
    assert d.run().outcome is Outcome.UNFINISHED
    assert api.conditions == [("DrainInProgress", "True", "GputuiDrain"),
                              ("DrainInProgress", "False", "GputuiDrainStopped")]


@pytest.mark.parametrize("mode, gate, written, words", [
    ("auto", (False, ""), False, ""),  # the cluster's default: nothing set, nothing said
    ("auto", (None, "your identity may not read the apiserver's /metrics"), False,
     "not set (your identity may not read the apiserver's /metrics; lifecycle_conditions: on sets them)"),
    ("on", (False, ""), True, "DrainInProgress set"),  # the setting wins: 1.37 accepts them whatever the gate
    ("off", (True, ""), False, ""),
])
def test_when_they_are_set(tmp_path, mode, gate, written, words):
    api = LifecycleApi((pod("a"),), {"a": 0}, gate=gate)
    d = drain(api, tmp_path, mode)
    assert d.run().outcome is Outcome.DRAINED
    assert bool(api.conditions) is written
    assert (words in d.events[0].message) if words else "lifecycle" not in d.events[0].message


def test_one_gpus_drain_and_a_writer_without_them_set_nothing():
    api = LifecycleApi()
    assert NodeLifecycle(api, AuditLog(None, "t", "x"), "n1", "on", one_gpu=True).writer is None
    plain = NodeLifecycle(object(), AuditLog(None, "t", "x"), "n1", "on")
    assert plain.writer is None and "cannot set them" in plain.words


def test_a_refused_condition_is_said_once_and_the_drain_goes_on(tmp_path):
    api = LifecycleApi((pod("a"),), {"a": 0}, refuse=True)
    d = drain(api, tmp_path)
    assert d.run().outcome is Outcome.DRAINED
    said = [e.message for e in d.events if e.kind is EventKind.INFO and "lifecycle" in e.message]
    assert said == ["node lifecycle condition DrainInProgress not set: nodes/status is forbidden",
                    "node lifecycle condition DrainInProgress not set: nodes/status is forbidden",
                    "node lifecycle condition Drained not set: nodes/status is forbidden"]
    assert [r.split(":")[0] for a, _t, _p, r in d.entries() if a == "node-condition"] == ["error"] * 3


NOW = 2_000_000_000.0


def lifecycle_node(*conditions: Condition, cordoned: bool = True) -> Node:
    return Node("n1", True, cordoned, "H100", 8, 8, conditions=conditions)


def test_another_writers_conditions_are_holds_gputuis_own_are_not():
    theirs = Condition("DrainInProgress", "True", "AdminRequested", "kernel", NOW - 3 * 86400)
    ours = Condition("Drained", "True", "GputuiDrainCompleted", "", NOW)
    cleared = Condition("MaintenanceInProgress", "False", "Done", "", NOW)
    holds = lifecycle_holds(lifecycle_node(theirs, ours, cleared), NOW)
    assert [(h.actor, h.phase, h.since) for h in holds] == [("node-lifecycle", "DrainInProgress", NOW - 3 * 86400)]
    assert holds[0].why == "node lifecycle condition DrainInProgress (AdminRequested: kernel)"
    assert holds[0].stuck.startswith("DrainInProgress for 72h")  # a drain three days under way
    drained = lifecycle_holds(lifecycle_node(Condition("Drained", "True", "", "", NOW - 3 * 86400)), NOW)
    assert drained[0].stuck == "" and drained[0].why.endswith("(no reason given)")  # drained for repair: rightly long


def test_an_uncordon_asks_first_over_a_drain_in_progress_not_over_a_drained_mark():
    draining = lifecycle_node(Condition("DrainInProgress", "True", "AdminRequested", ""))
    assert cordon_owner(draining, "alice", NOW).foreign
    assert not cordon_owner(lifecycle_node(Condition("Drained", "True", "DrainCompleted", "")), "alice", NOW).foreign


def test_an_uncordon_clears_gputuis_drained_mark_only(tmp_path):
    from gputui.snapshot import ClusterSnapshot

    ours = lifecycle_node(Condition("Drained", "True", "GputuiDrainCompleted", ""), cordoned=False)
    theirs = lifecycle_node(Condition("Drained", "True", "DrainCompleted", ""), cordoned=False)
    api = LifecycleApi()
    ctx = OpContext(api, api, AuditLog(tmp_path / "a.jsonl", "alice", "x"))
    plan = plan_cordon(ClusterSnapshot(NOW, "t", nodes=(ours,)), "n1", cordon=False, identity="alice")
    assert plan.already and plan.clears_drained  # uncordoned already, still marked drained: only the mark goes
    assert run_cordon(plan, ctx).endswith("its Drained condition cleared")
    assert api.conditions == [("Drained", "False", "GputuiUncordoned")]
    assert not any(w[0] == "unschedulable" for w in api.writes)  # no second uncordon sent
    other = plan_cordon(ClusterSnapshot(NOW, "t", nodes=(theirs,)), "n1", cordon=False, identity="alice")
    assert other.already and not other.clears_drained  # another writer's: theirs to clear


class Recorder:
    """A LifecycleWriter that records every call whole, and refuses when told to."""

    def __init__(self, refuse: bool = False) -> None:
        self.calls: list[tuple[str, str, str, str, str]] = []
        self.refuse = refuse

    def feature_gate(self, name: str) -> tuple[bool | None, str]:
        return True, ""

    def set_node_condition(self, node: str, kind: str, status: str, reason: str, message: str) -> None:
        self.calls.append((node, kind, status, reason, message))
        if self.refuse:
            raise BackendError("nodes/status is forbidden")


def test_each_condition_is_written_whole_once_per_state_and_audited_on_the_node(tmp_path):
    """Every argument of each write, each state once however often a run says it, and its audit entries."""
    writer, log = Recorder(), tmp_path / "a.jsonl"
    life = NodeLifecycle(writer, AuditLog(log, "t", "x"), "n1", "on")
    assert life.words == "node lifecycle condition DrainInProgress set"
    for _ in range(2):  # a resumed or retried run says it again: written once
        assert list(life.started("draining n1 for maintenance")) == []
    assert list(life.ended(True, "every pod gone")) == []
    assert list(life.ended(True, "every pod gone")) == []
    assert writer.calls == [("n1", "DrainInProgress", "True", "GputuiDrain", "draining n1 for maintenance"),
                            ("n1", "DrainInProgress", "False", "GputuiDrainCompleted", "every pod gone"),
                            ("n1", "Drained", "True", "GputuiDrainCompleted", "every pod gone")]
    entries = [e for e in written(log) if e["phase"] == "result"]
    assert [(e["action"], e["target"], e["params"]["type"]) for e in entries] == [
        ("node-condition", "node/n1", "DrainInProgress"), ("node-condition", "node/n1", "DrainInProgress"),
        ("node-condition", "node/n1", "Drained")]


def test_a_stopped_drain_says_why_on_its_condition(tmp_path):
    writer = Recorder()
    life = NodeLifecycle(writer, AuditLog(None, "t", "x"), "n1", "on")
    assert list(life.ended(False, "stopped by the operator")) == []
    assert writer.calls == [("n1", "DrainInProgress", "False", "GputuiDrainStopped", "stopped by the operator")]


def test_a_refused_write_is_said_on_the_drains_node():
    life = NodeLifecycle(Recorder(refuse=True), AuditLog(None, "t", "x"), "n1", "on")
    said = list(life.started("draining"))
    assert [(e.node, e.kind, e.message) for e in said] == [
        ("n1", EventKind.INFO, "node lifecycle condition DrainInProgress not set: nodes/status is forbidden")]


@pytest.mark.parametrize("writer, mode, one_gpu, words", [
    (Recorder(), "off", False, ""),
    (Recorder(), "on", True, ""),
    (object(), "auto", False, ""),  # nothing asked of it, nothing said
    (object(), "on", False, "node lifecycle conditions: not set (this cluster's writer cannot set them)"),
])
def test_what_the_drains_start_says_of_them(writer, mode, one_gpu, words):
    assert NodeLifecycle(writer, AuditLog(None, "t", "x"), "n1", mode, one_gpu=one_gpu).words == words


def test_each_condition_says_what_the_drain_did_and_an_aborted_one_stops_it(tmp_path):
    """The messages: who drains and how many pods, the report at the end; an aborted drain is no longer in progress
    and says it was aborted (run_drain's lifecycle calls: each argument, and the abort's `False`)."""
    api = LifecycleApi((pod("a"), pod("b")), {"a": 0, "b": 0})
    d = drain(api, tmp_path)
    report = d.run()
    assert api.messages == ["gputui drain by t: 2 pods to move", report.describe(), report.describe()]
    control = DrainControl()
    api = LifecycleApi((pod("a"),), {"a": 5})
    d = Drain(api, tmp_path / "b.jsonl", control=control)
    d.ctx = dataclasses.replace(d.ctx, settings=Settings(lifecycle_conditions="auto"))
    d.gen = run_drain(d.plan, d.ctx, control)
    api.on_read = lambda a: control.abort() if a.reads > 3 else None
    assert d.run().outcome is Outcome.ABORTED
    assert api.conditions == [("DrainInProgress", "True", "GputuiDrain"),
                              ("DrainInProgress", "False", "GputuiDrainStopped")]
    assert api.messages[-1] == "the drain was aborted"


def test_run_drain_sets_them_on_its_node_and_never_for_one_gpus_drain(tmp_path):
    """run_drain's NodeLifecycle: on the drained node (its conditions and their audit entries), and none for one
    GPU's drain, which leaves the node serving. Kills: its `node` → None and `one_gpu` → None or dropped."""
    api = LifecycleApi((pod("a"),), {"a": 0})
    d = drain(api, tmp_path)
    assert d.run().outcome is Outcome.DRAINED
    assert api.nodes == {"n1"} and {t for a, t, _p, _r in d.entries() if a == "node-condition"} == {"node/n1"}
    api = LifecycleApi((pod("a"), pod("b")), {"a": 0, "b": 0})
    d = drain(api, tmp_path, options=DrainOptions(gpu="1", gpu_pods=("ns/a",)))
    assert d.run().outcome is Outcome.DRAINED
    assert api.conditions == []
