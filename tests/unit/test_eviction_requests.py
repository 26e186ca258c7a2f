"""The EvictionRequest API's records and rules (gputui.backends.kube_evictions, gputui.vocabulary.eviction_requests)
and what the drain plan makes of them (gputui.ops.drain.eviction_api, plan). The objects are written as the
apiserver returns them, field for field from `k8s.io/api@v0.37.2` lifecycle/v1alpha1/types.go: EvictionRequest
{spec.target.pod{name,uid}, spec.requester, spec.intent, status.conditions}; Eviction {spec.target.pod,
status.requesters[]{name,intent}, status.targetResponders[]{name,priority,state}, status.responders[]{name,
startTime, heartbeatTime, ...}}; the labels an Eviction carries name its participants."""

from __future__ import annotations

import pytest

from gputui.backends.kube_evictions import eviction_record, eviction_request_record
from gputui.ops.drain.eviction_api import EvictionApiView
from gputui.ops.drain.plan import DrainOptions, Step, plan_drain, plan_json
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.disruptions import ActorObjects
from gputui.vocabulary.eviction_requests import (
    GPUTUI_RESPONDER,
    HEARTBEAT_DEADLINE_S,
    EvictionIndex,
    Handler,
    read_state,
)
from gputui.vocabulary.model import InferencePod, Node
from tests.support.eviction_objects import EVICTOR, READ, REQUESTER, RESPONDER, T0, eviction_obj, request_obj


def test_records_read_every_field_the_rules_need():
    r = eviction_request_record(request_obj("a-1", "a", "uid-a", conditions=(("Failed", "False", "AwaitingEviction"),)))
    assert (r.namespace, r.name, r.pod, r.pod_uid, r.requester, r.intent, r.created) == \
        ("ns", "a-1", "a", "uid-a", REQUESTER, "Eviction", T0)
    assert [(c.type, c.status, c.reason) for c in r.conditions] == [("Failed", "False", "AwaitingEviction")]
    e = eviction_record(eviction_obj("a", "a", "uid-a"))
    assert (e.namespace, e.name, e.pod, e.pod_uid, e.requesters) == ("ns", "a", "a", "uid-a", ((REQUESTER, "Eviction"),))
    assert [(x.name, x.state, x.priority, x.started, x.heartbeat, x.message) for x in e.responders] == [
        (RESPONDER, "Active", 10000, T0, T0 + 20, "migrating KV cache"), (EVICTOR, "Inactive", 100, None, None, "")]


def test_records_of_objects_missing_their_parts_are_empty_not_errors():
    r = eviction_request_record({"metadata": {"name": "x"}, "spec": {"target": {}}, "status": {"conditions": "no"}})
    assert (r.pod, r.pod_uid, r.created, r.conditions) == ("", "", None, ())
    e = eviction_record({"spec": {"target": {"pod": "x"}}, "status": {"targetResponders": [{"state": "Active"}, 3]}})
    assert (e.pod, e.responders) == ("", ())


@pytest.mark.parametrize(("intent", "conditions", "pending"), [
    ("Eviction", (), True),
    ("Eviction", (("Failed", "False", "AwaitingEviction"),), True),
    ("Eviction", (("TargetEvicted", "True", "Succeeded"),), False),
    ("Eviction", (("Failed", "True", "EvictionFailed"),), False),
    ("Withdrawn", (), False),
])
def test_a_request_is_pending_while_its_intent_is_eviction_and_it_is_not_over(intent, conditions, pending):
    r = eviction_request_record(request_obj("a-1", "a", "uid-a", intent=intent, conditions=conditions))
    assert r.pending is pending


def index(requests=(), evictions=()) -> EvictionIndex:
    return EvictionIndex.of([eviction_request_record(o) for o in requests], [eviction_record(o) for o in evictions])


def test_a_pods_pending_requests_oldest_first_by_name_and_uid_and_namespace():
    ix = index([request_obj("late", "a", "uid-a", created=T0 + 60, requester="example.com/late"),
                request_obj("early", "a", "uid-a"),
                request_obj("other-uid", "a", "uid-old"),  # the pod before it was replaced under its name
                request_obj("other-ns", "a", "uid-a", namespace="ns2"),
                request_obj("done", "a", "uid-a", conditions=(("TargetEvicted", "True", "Succeeded"),))])
    assert [r.name for r in ix.pending("ns", "a", "uid-a")] == ["early", "late"]
    assert ix.requesters("ns", "a", "uid-a") == (REQUESTER, "example.com/late")
    assert ix.pending("ns", "b", "uid-b") == ()


def test_another_active_responder_handles_the_pod_with_its_heartbeat_age():
    ix = index(evictions=[eviction_obj("a", "a", "uid-a")])
    h = ix.handler("ns", "a", "uid-a", T0 + 60)
    assert h == Handler(RESPONDER, "Active", 40.0, "a") and not h.stale
    assert h.words() == (f"its eviction is handled by {RESPONDER} (Active, heartbeat 40 s ago): "
                         "gputui will not evict it")
    assert ix.handler("ns", "a", "uid-other", T0 + 60) is None  # another pod under the name
    assert ix.handler("ns2", "a", "uid-a", T0 + 60) is None


@pytest.mark.parametrize("state", ["Inactive", "Completed", "Canceled", "Interrupted"])
def test_a_responder_not_active_handles_nothing(state):
    assert index(evictions=[eviction_obj("a", "a", "uid-a", state=state)]).handler("ns", "a", "uid-a", T0) is None


def test_gputui_itself_as_the_active_responder_never_blocks_it():
    ix = index(evictions=[eviction_obj("a", "a", "uid-a", responder=GPUTUI_RESPONDER)])
    assert ix.handler("ns", "a", "uid-a", T0) is None


def test_a_stale_heartbeat_still_holds_the_pod_and_says_stale():
    """Past the API's 20 min deadline the responder may be dead, yet no controller has passed it over: fail closed."""
    ix = index(evictions=[eviction_obj("a", "a", "uid-a")])
    h = ix.handler("ns", "a", "uid-a", T0 + 20 + HEARTBEAT_DEADLINE_S + 1)
    assert h is not None and h.stale
    assert "heartbeat 20 min ago, stale: past the API's 20 min deadline, yet still Active" in h.words()
    assert not ix.handler("ns", "a", "uid-a", T0 + 20 + HEARTBEAT_DEADLINE_S).stale  # at the deadline: not yet


def test_no_heartbeat_counts_from_its_start_and_no_time_at_all_is_stale():
    h = index(evictions=[eviction_obj("a", "a", "uid-a", heartbeat=None)]).handler("ns", "a", "uid-a", T0 + 30)
    assert h is not None and h.heartbeat_age_s == 30.0
    h = index(evictions=[eviction_obj("a", "a", "uid-a", heartbeat=None, started=None)]).handler("ns", "a", "uid-a", T0)
    assert h is not None and h.heartbeat_age_s is None and h.stale and "no heartbeat" in h.words()


def test_read_state_is_one_answer_for_the_two_kinds():
    assert read_state(None) == "not installed"
    assert read_state({}) == "not installed"
    assert read_state({"EvictionRequest": "read", "Eviction": "read"}) == "read"
    assert read_state({"EvictionRequest": "read", "Eviction": "unknown: forbidden: evictions is forbidden"}) == \
        "unknown: Evictions forbidden: evictions is forbidden"
    assert read_state({"EvictionRequest": "read"}).startswith("unknown: only one of the two kinds is served")


# -- the drain plan ---------------------------------------------------------------------------------------------

def pod(name: str) -> InferencePod:
    return InferencePod(namespace="ns", name=name, uid=f"uid-{name}", node="n1", owner_kind="ReplicaSet",
                        gpu_request=1)


def snapshot(reads: dict[str, str] | None, requests=(), evictions=(), now: float = T0 + 60) -> ClusterSnapshot:
    actors = None if reads is None else ActorObjects(
        reads=reads, eviction_requests=tuple(eviction_request_record(o) for o in requests),
        evictions=tuple(eviction_record(o) for o in evictions))
    return ClusterSnapshot(now, "t", nodes=(Node("n1", True, False, "H100", 8, 8), Node("n2", True, False, "H100", 8, 8)),
                           pods=(pod("a"), pod("b")), actors=actors)




def test_the_plan_shows_pending_requests_and_names_the_handled_pod_as_a_blocker():
    s = snapshot(READ, [request_obj("a-1", "a", "uid-a"), request_obj("b-1", "b", "uid-b")],
                 [eviction_obj("a", "a", "uid-a")])
    plan = plan_drain(s, "n1", preview=False)
    a, b = plan.pods
    assert a.eviction_api.requests == (f"EvictionRequest by {REQUESTER} pending since 2026-12-04T03:00:00Z (60 s)",)
    assert b.eviction_api.handler is None and a.eviction_api.handler is not None
    assert not plan.blocked and [p.step for p in plan.pods] == [Step.EVICT, Step.EVICT]  # the rest still drains
    assert plan.blockers == [f"ns/a: its eviction is handled by {RESPONDER} (Active, heartbeat 40 s ago): "
                             "gputui will not evict it"]
    data = plan_json(plan)
    assert data["eviction_requests"] == "read" and data["blockers"] == plan.blockers
    assert data["pods"][0]["eviction_requests"] == {
        "pending": [a.eviction_api.requests[0]], "requesters": [REQUESTER],
        "handled_by": {"responder": RESPONDER, "state": "Active", "heartbeat_age_s": 40.0, "stale": False,
                       "eviction": "a"}}
    assert data["pods"][1]["eviction_requests"]["handled_by"] is None


def test_not_served_changes_nothing():
    for reads in (None, {}):
        plan = plan_drain(snapshot(reads), "n1", preview=False)
        assert plan.eviction_state == "not installed" and plan.blockers == [] and plan.warnings == ()
        assert "eviction_requests" not in plan_json(plan) and "blockers" not in plan_json(plan)


def test_unreadable_is_a_warning_naming_it_unknown_and_the_last_seen_responder_still_blocks():
    forbidden = {"EvictionRequest": "unknown: forbidden: evictionrequests.lifecycle.k8s.io is forbidden",
                 "Eviction": "unknown: forbidden: evictions.lifecycle.k8s.io is forbidden"}
    plan = plan_drain(snapshot(forbidden), "n1", preview=False)
    assert not plan.blocked and plan.blockers == []
    assert plan.eviction_state.startswith("unknown: EvictionRequests forbidden")
    (warning,) = [w for w in plan.warnings if w.startswith("EvictionRequests unknown")]
    assert "whether another responder is handling the eviction of the 2 pods to move is not known" in warning
    assert "gputui evicts them as planned" in warning and "docs/rbac.yaml" in warning
    assert plan_json(plan)["eviction_requests"] == plan.eviction_state
    held = plan_drain(snapshot(forbidden, evictions=[eviction_obj("a", "a", "uid-a")]), "n1", preview=False)
    assert len(held.blockers) == 1  # what the cache last held still names a responder: fail closed


def test_pods_not_moved_carry_nothing():
    """A pod the drain skips (a DaemonSet's, ignored) is not evicted by gputui: no blocker, nothing shown."""
    ds = InferencePod(namespace="ns", name="ds", uid="uid-ds", node="n1", owner_kind="DaemonSet")
    s = snapshot(READ, [request_obj("ds-1", "ds", "uid-ds")], [eviction_obj("ds", "ds", "uid-ds")])
    s = ClusterSnapshot(s.taken_at, "t", nodes=s.nodes, pods=(ds,), actors=s.actors)
    plan = plan_drain(s, "n1", DrainOptions(ignore_daemonsets=True), preview=False)
    assert [p.step for p in plan.pods] == [Step.SKIP] and plan.blockers == []
    assert plan.pods[0].eviction_api.requests == () and plan.pods[0].eviction_api.handler is None


# -- the run's check before each eviction (EvictionApiView.hold, on the fresh read) -------------------------------

READ_STATE = "read"  # the state a plan read them in (gputui.vocabulary.disruptions.READ)
FORBIDDEN = {"EvictionRequest": "unknown: forbidden", "Eviction": "unknown: forbidden"}


def view(reads, evictions=(), now: float = T0 + 60) -> EvictionApiView:
    return EvictionApiView.of(snapshot(reads, evictions=evictions, now=now))


def test_the_run_holds_exactly_the_pod_another_responder_handles_with_its_words():
    v = view(READ, [eviction_obj("a", "a", "uid-a")])
    assert v.hold("ns", "a", "uid-a", READ_STATE) == (
        f"{RESPONDER} Active", f"its eviction is handled by {RESPONDER} (Active, heartbeat 40 s ago): gputui will not "
        "evict it")
    for other in (("ns", "b", "uid-b"), ("ns2", "a", "uid-a"), ("ns", "a", "uid-new")):  # pod, namespace, UID
        assert v.hold(*other, READ_STATE) == ("", "")
    stale = view(READ, [eviction_obj("a", "a", "uid-a")], now=T0 + 20 + HEARTBEAT_DEADLINE_S + 1)
    held, words = stale.hold("ns", "a", "uid-a", READ_STATE)
    assert held == f"{RESPONDER} Active stale" and "stale: past the API's" in words


def test_the_run_waits_when_what_its_plan_read_is_unknown_or_gone_now_and_not_otherwise():
    """Planned on a read of them: unknown now (or no longer served) waits, saying why; the last records seen still
    name a responder first (fail closed). Planned without them (not served, or unknown already), nothing changes."""
    why = ("unknown", "EvictionRequests were read for the plan and are unknown: EvictionRequests forbidden "
           "now: whether another responder is handling its eviction is not known; waiting before evicting it")
    assert view(FORBIDDEN).hold("ns", "a", "uid-a", READ_STATE) == why
    gone = view({}).hold("ns", "a", "uid-a", READ_STATE)
    assert gone[0] == "unknown" and "are not installed now" in gone[1]
    assert view(FORBIDDEN, [eviction_obj("a", "a", "uid-a")]).hold("ns", "a", "uid-a", READ_STATE)[0] == \
        f"{RESPONDER} Active"
    for planned in ("not installed", "unknown: forbidden"):
        assert view(FORBIDDEN).hold("ns", "a", "uid-a", planned) == ("", "")
        assert view({}).hold("ns", "a", "uid-a", planned) == ("", "")
    assert view(READ).hold("ns", "a", "uid-a", READ_STATE) == ("", "")


def test_the_unknown_warning_counts_one_pod_in_the_singular():
    assert "the eviction of the 1 pod to move is not known" in view(FORBIDDEN).warning(1)
    assert view(FORBIDDEN).warning(0) == "" and view(READ).warning(3) == ""
