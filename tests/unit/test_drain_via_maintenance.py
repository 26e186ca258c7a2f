"""A drain as the maintenance-operator's requestor (issue 40 item 4), fast: the plan (which way, the wait's selector,
refusals), and the run against an operator stepped as v0.3.0's controller steps a NodeMaintenance (phase = Ready's
reason: Pending → Scheduled → Cordon → WaitForPodCompletion → Draining → Ready, Draining at once with no drainSpec; it cordons at Cordon and moves
on from WaitForPodCompletion when no pod its selector picks is left on the node). gputui never cordons, evicts
nothing before WaitForPodCompletion, and is done only at Ready; an abort deletes the request; a request deleted under
it stops the drain. The real apiserver and CRD: tests/integration/test_drain_via_maintenance_real.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputui.backends.base import BackendError
from gputui.ops.cordon import plan_cordon, run_cordon
from gputui.ops.drain.events import DrainControl, EventKind
from gputui.ops.drain.maintenance_request import request_body, request_name, wait_selector
from gputui.ops.drain.options import DrainOptions, settings_options
from gputui.ops.drain.plan import plan_drain, plan_json
from gputui.ops.drain.report import Outcome
from gputui.settings import Settings
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.disruptions import ActorObjects, NodeMaintenanceRecord
from gputui.vocabulary.model import Condition
from tests.support.drain_api import Api, Drain, pod
from tests.support.maintenance_api import GVR, OperatorApi

VIA = DrainOptions(maintenance_namespace="maint", rotation_settle_s=0)
NAME = "gputui-n1"


# -- the plan --------------------------------------------------------------------------------------------------

def test_the_plan_says_which_way_and_selects_exactly_the_session_pods():
    api = OperatorApi((pod("chat-0", labels={"app": "llm", "tier": "a"}), pod("batch-0", session_signal=False,
                                                                              labels={"app": "etl"})),
                      counts={"chat-0": 2})
    plan = plan_drain(api.snapshot(), "n1", VIA, preview=False)
    assert not plan.blocked and plan.request is not None
    assert plan.request.selector == "app in (llm)"
    assert "NodeMaintenance maint/gputui-n1" in plan.request.words() and "WaitForPodCompletion" in plan.request.words()
    assert plan_json(plan)["via"] == {"via": "nodemaintenance", "namespace": "maint", "name": NAME,
                                      "requestor": "gputui.io", "wait_selector": "app in (llm)", "error": None}
    assert plan_json(plan_drain(api.snapshot(), "n1", DrainOptions(), preview=False))["via"] == {"via": "cordon"}
    body = request_body("maint", "n1", "app in (llm)")
    assert body["spec"] == {"requestorID": "gputui.io", "nodeName": "n1", "cordon": True,
                            "waitForPodCompletion": {"podSelector": "app in (llm)", "timeoutSeconds": 0}}
    assert "drainSpec" not in request_body("maint", "n1", "")["spec"]  # the operator evicts nothing: gputui does


def test_the_wait_selector_never_picks_a_pod_gputui_leaves():
    chat = pod("chat-0", labels={"app": "shared", "model": "llama"})
    agent = pod("ds-0", owner_kind="DaemonSet", labels={"app": "shared"})  # left on the node: it would hold the wait
    selector, why = wait_selector((chat, agent), {chat.key}, {chat.key})
    assert (selector, why) == ("model in (llama)", "")
    selector, why = wait_selector((pod("a", labels={"x": "1"}), pod("b", labels={"y": "2"})), {"ns/a", "ns/b"},
                                  {"ns/a", "ns/b"})
    assert selector == "" and "no label key selects only the pods gputui moves" in why
    assert wait_selector((chat,), set(), set()) == ("", "")
    assert len(request_name("n" * 300)) <= 253 and request_name("n1") == NAME


def test_refused_where_the_operator_is_not_installed_or_its_objects_unreadable():
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 0}, installed=False)
    plan = plan_drain(api.snapshot(), "n1", VIA, preview=False)
    assert plan.blocked and "NodeMaintenance is not installed here" in plan.errors[0]
    report = Drain(api, options=VIA).run()
    assert report.outcome is not Outcome.DRAINED and api.writes == []


def test_settings_choose_the_way_and_a_gpu_drain_never_goes_through_the_operator():
    s = Settings(drain_via="nodemaintenance", maintenance_namespace="ops")
    assert settings_options(s).maintenance_namespace == "ops"
    assert settings_options(s, "cordon").maintenance_namespace == ""
    assert settings_options(Settings(), "nodemaintenance").maintenance_namespace == "default"
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 0})
    assert plan_drain(api.snapshot(), "n1", replace(VIA, gpu="0", gpu_pods=("ns/chat-0",)),
                      preview=False).request is None


# -- the run ---------------------------------------------------------------------------------------------------

def test_gputui_waits_for_the_operators_cordon_evicts_in_its_wait_and_is_done_only_at_ready(tmp_path):
    api = OperatorApi((pod("chat-0"), pod("etl-0", session_signal=False, labels={"app": "etl"})),
                      counts={"chat-0": 3}, lag=3)
    drain = Drain(api, tmp_path / "audit.jsonl", options=VIA)
    seen: list[tuple[str, str]] = []  # (phase, what gputui wrote) at each write
    original = api.evict_pod

    def evict(namespace, name, grace=None, uid=None):
        seen.append((api.phases[-1], name))
        assert api.cordoned, "evicted before the operator cordoned"
        return original(namespace, name, grace, uid)
    api.evict_pod = evict  # type: ignore[method-assign]
    api.on_read = lambda a: a.counts.update({"chat-0": 0}) if a.reads > 6 else None
    report = drain.run()
    assert report.outcome is Outcome.DRAINED, report.describe()
    assert ("unschedulable", True) not in api.writes, "gputui cordoned by itself"
    assert [w for w in api.writes if w[0] == "create"] == [("create", NAME)]
    assert {phase for phase, _ in seen} == {"WaitForPodCompletion"}  # every eviction inside the operator's wait
    assert sorted(name for _, name in seen) == ["chat-0", "etl-0"]
    assert api.phases[-1] == "Ready" and "Pending" in api.phases
    waits = [e for e in drain.events if e.kind is EventKind.WAITING and e.pod == "ns/chat-0"]
    assert waits and waits[0].sessions == 3  # the session-aware wait ran inside it
    actions = [a for a, _, _, r in drain.entries() if r != "intent"]
    assert actions.count("nodemaintenance-create") == 1 and "cordon" not in actions
    assert NAME in api.objects[("maint", NAME)]["metadata"]["name"]  # left in place: the node stays held


def test_nothing_moves_while_the_operators_scheduler_keeps_it_pending():
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 0}, stop_at="Pending")
    drain = Drain(api, options=VIA)
    for _ in range(60):
        drain.events.append(next(drain.gen))
    assert [w for w in api.writes if w[0] in ("evict", "unschedulable")] == []
    assert any("maintenance-operator: Pending" in e.message for e in drain.events)


def test_no_phase_for_a_minute_asks_whether_the_controller_runs():
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 0}, stop_at="nothing")
    api._step = lambda obj: None  # type: ignore[method-assign]  # nobody sets a phase
    drain = Drain(api, options=VIA)
    for _ in range(200):
        drain.events.append(next(drain.gen))
    assert any("is the maintenance-operator's controller running?" in e.message for e in drain.events)
    assert not any(w[0] == "evict" for w in api.writes)


def test_an_abort_deletes_the_request_and_never_uncordons_by_itself():
    control = DrainControl()
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 5})
    drain = Drain(api, options=VIA, control=control)
    api.on_read = lambda a: control.abort(uncordon=True) if a.reads > 8 else None
    report = drain.run()
    assert report.outcome is Outcome.ABORTED
    assert ("delete", NAME) in api.writes and ("unschedulable", False) not in api.writes
    assert "deleted: the operator uncordons" in drain.events[-1].message


def test_a_request_deleted_under_the_drain_stops_it_with_nothing_more_evicted():
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 5})
    drain = Drain(api, options=VIA)
    api.on_read = lambda a: a.objects.clear() if a.reads > 8 else None
    report = drain.run()
    assert report.outcome is not Outcome.DRAINED and "was deleted" in report.reason
    assert not any(w[0] == "evict" for w in api.writes)
    assert drain.events[-1].kind is EventKind.FAILED


def test_a_resumed_drain_adopts_gputuis_request_and_another_requestors_is_refused():
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 0})
    api.create_object("maintenance.nvidia.com", "v1alpha1", "nodemaintenances", "maint",
                      request_body("maint", "n1", "app in (llm)"))
    api.writes.clear()
    assert Drain(api, options=VIA).run().outcome is Outcome.DRAINED
    assert not any(w[0] == "create" for w in api.writes)
    other = OperatorApi((pod("chat-0"),), counts={"chat-0": 0})
    body = request_body("maint", "n1", "")
    body["spec"]["requestorID"] = "network.nvidia.com"
    other.create_object("maintenance.nvidia.com", "v1alpha1", "nodemaintenances", "maint", body)
    report = Drain(other, options=VIA).run()
    assert report.outcome is not Outcome.DRAINED and "requested by network.nvidia.com, not gputui" in report.reason
    assert not any(w[0] == "evict" for w in other.writes)


def test_a_pod_left_in_place_leaves_the_request_and_says_how_to_give_the_node_back():
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": None}, metrics_ok=False)
    drain = Drain(api, options=replace(VIA, session_deadline_s=60))
    report = drain.run()
    assert report.outcome is Outcome.UNFINISHED
    assert any("left in place, the node cordoned by the operator: gputui uncordon n1 withdraws it" in h
               for h in report.held)
    assert ("maint", NAME) in api.objects


# -- the uncordon ----------------------------------------------------------------------------------------------

def _held(requestor: str) -> ClusterSnapshot:
    record = NodeMaintenanceRecord("maint", NAME, "n1", requestor, created=1000.0, conditions=(
        Condition("Ready", "False", "WaitForPodCompletion", "", 1000.0),))
    snap = Api((), cordoned=True).snapshot()
    return replace(snap, actors=ActorObjects(maintenances=(record,), reads={"NodeMaintenance": d.READ}))


@pytest.mark.parametrize("requestor, foreign", [("network.nvidia.com", True), ("gputui.io", False)])
def test_an_uncordon_asks_over_another_requestors_maintenance_and_withdraws_gputuis_own(requestor, foreign, tmp_path):
    snap = _held(requestor)
    plan = plan_cordon(snap, "n1", False, identity="alice")
    assert plan.foreign is foreign
    if foreign:
        assert "the maintenance-operator holds it: NodeMaintenance maint/gputui-n1 requested by network" \
            in plan.describe()
        return
    assert "the uncordon deletes it" in plan.describe()
    api = OperatorApi((), cordoned=True)
    api.create_object("maintenance.nvidia.com", "v1alpha1", "nodemaintenances", "maint", request_body("maint", "n1", ""))
    drain = Drain(api, tmp_path / "audit.jsonl")
    assert run_cordon(plan, drain.ctx) == "node/n1 uncordoned"
    assert ("delete", NAME) in api.writes and ("unschedulable", False) in api.writes
    assert [a for a, _, _, r in drain.entries() if r != "intent"] == ["nodemaintenance-delete", "uncordon"]


# -- its words and its audit entries, exactly (what an operator reads, and what the log keeps) ---------------------

def test_the_request_body_and_name_exactly():
    assert request_body("maint", "n1", "app in (llm)") == {
        "apiVersion": "maintenance.nvidia.com/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": NAME, "namespace": "maint", "labels": {"app.kubernetes.io/managed-by": "gputui"}},
        "spec": {"requestorID": "gputui.io", "nodeName": "n1", "cordon": True,
                 "waitForPodCompletion": {"podSelector": "app in (llm)", "timeoutSeconds": 0}}}
    assert request_name("n" * 246) == "gputui-" + "n" * 246  # 253: still the plain name
    long = request_name("n" * 247)
    assert long.startswith("gputui-") and len(long) == 23 and long != request_name("m" * 247)


def test_each_step_is_said_in_words_and_audited_once(tmp_path):
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 0})
    drain = Drain(api, tmp_path / "audit.jsonl", options=VIA)
    assert drain.run().outcome is Outcome.DRAINED
    said = [e.message for e in drain.events if e.kind is EventKind.INFO]
    assert said[:1] == ["nodemaintenance/maint/gputui-n1 created; waiting for the maintenance-operator"]
    assert "maintenance-operator: Pending" in said and "maintenance-operator: Ready" in said
    assert "maintenance-operator: WaitForPodCompletion; gputui moves the pods now" in said
    assert "maintenance-operator: Draining; gputui moves the pods now" in said
    assert not any(m.startswith("maintenance-operator: Ready;") for m in said)  # nothing more moves at Ready
    created = [(t, p, r) for a, t, p, r in drain.entries() if a == "nodemaintenance-create"]
    assert created == [("nodemaintenance/maint/gputui-n1", {"requestor": "gputui.io", "wait_selector": "app in (llm)"},
                        "ok")]
    # The object itself, in the request's namespace, waiting on exactly the session pods.
    assert api.created == [("maint", request_body("maint", "n1", "app in (llm)"))]


def test_adopting_and_refusing_are_said_in_words():
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 0})
    api.create_object(*GVR, "maint", request_body("maint", "n1", "app in (llm)"))
    drain = Drain(api, options=VIA)
    drain.run()
    assert drain.events[0].message == "nodemaintenance/maint/gputui-n1: gputui's request adopted (Pending)"
    other = OperatorApi((pod("chat-0"),), counts={"chat-0": 0})
    body = request_body("maint", "n1", "")
    del body["spec"]["requestorID"]
    other.create_object(*GVR, "maint", body)
    report = Drain(other, options=VIA).run()
    assert "nodemaintenance/maint/gputui-n1 exists, requested by nobody, not gputui" in report.reason


def test_the_abort_deletes_exactly_its_request_and_audits_why(tmp_path):
    control = DrainControl()
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 5})
    drain = Drain(api, tmp_path / "audit.jsonl", options=VIA, control=control)
    api.on_read = lambda a: control.abort(uncordon=True) if a.reads > 8 else None
    drain.run()
    assert api.deleted == ["maint/gputui-n1"]
    deleted = [(t, p, r) for a, t, p, r in drain.entries() if a == "nodemaintenance-delete"]
    assert deleted == [("nodemaintenance/maint/gputui-n1", {"reason": "drain aborted"}, "ok")]


def test_a_writer_that_cannot_delete_objects_is_one_clear_line():
    from gputui.ops.audit import AuditLog
    from gputui.ops.drain.maintenance_request import withdraw

    with pytest.raises(BackendError, match=r"^this cluster's writer cannot delete a NodeMaintenance$"):
        withdraw(object(), AuditLog(None, "t", "demo"), "maint/x", "uncordon")


def test_no_phase_is_said_once_only_after_a_minute():
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 0})
    api._step = lambda obj: None  # type: ignore[method-assign]
    drain = Drain(api, options=VIA, poll_s=10.0)
    for _ in range(60):
        drain.events.append(next(drain.gen))
    asked = [i for i, e in enumerate(drain.events) if "controller running?" in e.message]
    assert len(asked) == 1
    assert asked[0] > 0 and drain.events[asked[0]].message == \
        "nodemaintenance/maint/gputui-n1 has no phase after 60s: is the maintenance-operator's controller running?"
    ticks = [e for e in drain.events[:asked[0]] if e.kind is EventKind.TICK]
    assert len(ticks) >= 6  # 60 s of 10 s polls went by first


def test_the_plans_refusals_and_the_selector_over_several_values_exactly():
    from gputui.ops.drain.maintenance_request import request_plan

    a, b = pod("a", labels={"app": "llm-a"}), pod("b", labels={"app": "llm-b"})
    assert wait_selector((a, b), {a.key, b.key}, {a.key, b.key}) == ("app in (llm-a,llm-b)", "")
    gone = request_plan("maint", "n1", (a,), {a.key}, {a.key}, d.NOT_INSTALLED)
    assert (gone.namespace, gone.node, gone.error) == (
        "maint", "n1", "--via nodemaintenance: the maintenance-operator's NodeMaintenance is not installed here")
    hidden = request_plan("maint", "n1", (a,), {a.key}, {a.key}, "unknown: forbidden")
    assert hidden.error == "--via nodemaintenance: the maintenance-operator's NodeMaintenance is unknown: forbidden"
    ok = request_plan("maint", "n1", (a,), {a.key}, {a.key}, d.READ)
    assert (ok.selector, ok.error) == ("app in (llm-a)", "")
    mixed = request_plan("maint", "n1", (pod("x", labels={"p": "1"}), pod("y", labels={"q": "2"})), {"ns/x", "ns/y"},
                         {"ns/x", "ns/y"}, d.READ)
    assert mixed.error == ("--via nodemaintenance: no label key selects only the pods gputui moves among 2 pods "
                           "holding sessions (the operator's waitForPodCompletion takes one label selector); "
                           "--via cordon drains it")
    idle = request_plan("maint", "n1", (a,), {a.key}, set(), d.READ)
    assert idle.selector == "" and "no pod holds sessions: nothing for it to wait on" in idle.words()


def test_a_failed_or_deleting_request_stops_the_drain_naming_why():
    for status, words in (({"conditions": [{"type": "Ready", "status": "False", "reason": "RequestorFailed"}]},
                           "nodemaintenance/maint/gputui-n1: RequestorFailed"),
                          (None, "nodemaintenance/maint/gputui-n1 is being deleted: the maintenance-operator is "
                                 "giving the node back")):
        api = OperatorApi((pod("chat-0"),), counts={"chat-0": 5}, stop_at="WaitForPodCompletion")

        def spoil(a, status=status):
            obj = a.objects.get(("maint", NAME))
            if a.reads > 8 and obj is not None:
                if status is None:
                    obj["metadata"]["deletionTimestamp"] = "2026-12-04T10:01:00Z"
                else:
                    obj["status"] = status
        api.on_read = spoil
        report = Drain(api, options=VIA).run()
        assert report.reason == words and not any(w[0] == "evict" for w in api.writes)


# -- run_drain's requestor paths, exactly (mutants of gputui/ops/drain/run.py) ----------------------------------

def test_the_start_names_the_request_not_a_cordon():
    """Kills: the STARTED words' `if request is not None` → `and False` ("cordoned" said of a node gputui did not
    cordon), and the words " requested" changed."""
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 0})
    drain = Drain(api, options=VIA)
    assert drain.run().outcome is Outcome.DRAINED
    started = next(e for e in drain.events if e.kind is EventKind.STARTED)
    assert started.message.startswith("nodemaintenance/maint/gputui-n1 requested; 1 pods to move"), started.message


def test_a_request_gone_under_the_drain_stops_it_exactly_once_and_drops_the_lease(tmp_path):
    """Kills: the stopped path's phase ("stopped" → None or other words), its report.failed entry (None, or "None"),
    its FAILED event's node or message, and the lease kept."""
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 5})
    drain = Drain(api, tmp_path / "audit.jsonl", options=VIA)
    api.on_read = lambda a: a.objects.clear() if a.reads > 8 else None
    report = drain.run()
    assert "was deleted" in report.reason and report.failed == [report.reason]
    last = drain.events[-1]
    assert (last.node, last.kind, last.message) == ("n1", EventKind.FAILED, report.reason)
    phases = [p["phase"] for a, _t, p, _r in drain.entries() if a == "annotate" and "phase" in p]
    assert phases[-1] == "stopped" and phases.count("stopped") == 1
    assert [a for a, _t, _p, r in drain.entries() if r != "intent"][-1] == "lease-release"


def test_an_abort_whose_lease_release_fails_once_deletes_the_request_once(tmp_path):
    """The abort's release refused once: the drain pauses and comes back through the abort, which must not delete
    the request a second time. Kills: `if "withdraw" not in done` with another key, and `done.add("withdraw")`
    with another key (each deletes it twice: two audit entries, two DELETEs)."""
    from gputui.ops.drain import lease

    control = DrainControl()
    api = OperatorApi((pod("chat-0"),), counts={"chat-0": 5})
    original, refused = api.annotate_node, []

    def annotate(node, values, resource_version=None):
        if values.get(lease.LEASE, "") is None and not refused:
            refused.append(values)
            raise BackendError("the apiserver is gone")
        return original(node, values, resource_version)

    api.annotate_node = annotate  # type: ignore[method-assign]
    drain = Drain(api, tmp_path / "audit.jsonl", options=VIA, control=control)
    api.on_read = lambda a: control.abort(uncordon=True) if a.reads > 8 else None
    report = drain.run()
    assert report.outcome is Outcome.ABORTED and refused
    assert api.deleted == ["maint/gputui-n1"]
    assert [a for a, _t, _p, _r in drain.entries()].count("nodemaintenance-delete") == 1


class LifecycleOperatorApi(OperatorApi):
    """OperatorApi whose apiserver serves the node lifecycle conditions (gputui.ops.drain.lifecycle)."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.conditions: list[tuple[str, str, str, str]] = []

    def feature_gate(self, name: str) -> tuple[bool | None, str]:
        return True, ""

    def set_node_condition(self, node: str, kind: str, status: str, reason: str, message: str) -> None:
        self.conditions.append((kind, status, reason, message))


def test_a_request_gone_closes_the_refused_eviction_and_the_drains_condition_with_why(tmp_path):
    """A pod a PDB holds (its eviction's audit intent open) when the request goes: the intent is closed "not
    evicted" with the reason, and the node's DrainInProgress is False, stopped, with the same words. Kills:
    `leave(str(exc))` → `leave(None)` / `str(None)`, and the stopped path's `lifecycle.ended` arguments."""
    api = LifecycleOperatorApi((pod("chat-0"), pod("etl-0", session_signal=False, labels={"app": "etl"})),
                               counts={"chat-0": 5})
    api.blocked = {"etl-0"}
    drain = Drain(api, tmp_path / "audit.jsonl", options=VIA)
    api.on_read = lambda a: a.objects.clear() if a.reads > 12 else None
    report = drain.run()
    assert "was deleted" in report.reason
    evicts = [r for a, t, _p, r in drain.entries() if a == "evict" and t == "pod/ns/etl-0" and r != "intent"]
    assert evicts == [f"refused: Cannot evict pod; not evicted: {report.reason}"], drain.entries()
    assert api.conditions[-1] == ("DrainInProgress", "False", "GputuiDrainStopped", report.reason)
