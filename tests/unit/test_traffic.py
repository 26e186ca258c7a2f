"""Traffic shifts: percentages to weights, each router's exact patch and rules, apply, the demo's API, headless."""

import argparse
import copy
import json

import pytest

from gputui.backends.base import Backend, ConflictError
from gputui.backends.demo import DemoApiError, DemoCluster, demo_backend, json_patch, merge_patch
from gputui.cli import shift as headless_shift
from gputui.cli.arguments import add_shift_parser
from gputui.ops.audit import AuditLog
from gputui.ops.errors import ReadOnlyError
from gputui.ops.traffic import (
    ADAPTERS,
    RolloutRead,
    ShiftError,
    Step,
    apply_shift,
    apportion,
    find_service,
    needs_route,
    plan_rollout,
    plan_shift,
    read_route,
    resolve_targets,
    route_scale,
)
from gputui.settings import Settings
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, InferenceService, Rollout, ServiceVersion
from tests.demo_clock import ManualClock
from tests.support.audit_lines import written
from tests.support.op_context import write_context

# ----- synthetic services ----------------------------------------------------------------


def service(kind, versions, name="m", ns="llm", router_name=None):
    """versions: (name, weight, backend, ready replicas, desired replicas)."""
    return InferenceService(ns, name, tuple(
        ServiceVersion(v, w, Rollout(replicas_desired=d, replicas=d, updated=d, ready=r, available=r), backend=b,
                       workload=f"{name}-rollout" if kind == "Rollout" else f"{b}-deploy")
        for v, w, b, r, d in versions
    ), kind, router_name if router_name is not None else (name if kind else ""))


def snapshot(svc, sessions=None):
    pods = tuple(
        InferencePod(svc.namespace, f"{svc.name}-{v}-pod", f"uid-{v}", "node-1", service=svc.name, version=v)
        for v in (sessions or {})
    )
    counts = {(svc.namespace, f"{svc.name}-{v}-pod"): n for v, n in (sessions or {}).items()}
    return ClusterSnapshot(taken_at=0.0, context="test", pods=pods, services=(svc,), session_counts=counts)


def two(kind, w1=90, w2=10, ready2=3, b1="m-v1", b2="m-v2", n1="v1", n2="v2", desired2=3, ready1=3):
    """v1 with ready1 of 3 ready; v2 with ready2 of desired2 (by default as big as v1: no shift below 50% is an
    overload)."""
    return service(kind, [(n1, w1, b1, ready1, 3), (n2, w2, b2, ready2, desired2)])


def httproute(rules, name="m", ns="llm", **meta):
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "7", **meta}, "spec": {"rules": rules}}


def virtualservice(http, name="m", ns="llm"):
    return {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": name, "namespace": ns}, "spec": {"hosts": ["m"], "http": http}}


def trafficsplit(backends, name="m", ns="llm"):
    return {"apiVersion": "split.smi-spec.io/v1alpha2", "kind": "TrafficSplit",
            "metadata": {"name": name, "namespace": ns}, "spec": {"service": "m", "backends": backends}}


def ref(name, weight=None, **extra):
    out = {"name": name, "port": 8000, **extra}
    if weight is not None:
        out["weight"] = weight
    return out


def dest(host, subset=None, weight=None):
    out = {"destination": {"host": host, **({"subset": subset} if subset else {})}}
    if weight is not None:
        out["weight"] = weight
    return out


# ----- percentages -> weights ----------------------------------------------------------------


@pytest.mark.parametrize("pcts, scale, expected", [
    ({"a": 80, "b": 20}, 100, {"a": 80, "b": 20}),
    ({"a": 80, "b": 20}, 1000, {"a": 800, "b": 200}),
    ({"a": 100 / 3, "b": 100 / 3, "c": 100 / 3}, 100, {"a": 34, "b": 33, "c": 33}),
    ({"a": 12.5, "b": 87.5}, 100, {"a": 13, "b": 87}),  # ties go to the first
    ({"a": 43.75, "b": 26.25, "c": 30}, 100, {"a": 44, "b": 26, "c": 30}),
    ({"a": 0.4, "b": 0.4, "c": 99.2}, 100, {"a": 1, "b": 0, "c": 99}),  # largest remainders, ties to the first
    ({"a": 0, "b": 100}, 1_000_000, {"a": 0, "b": 1_000_000}),
])
def test_apportion_sums_exactly_to_the_scale(pcts, scale, expected):
    weights = apportion(pcts, scale)
    assert weights == expected
    assert sum(weights.values()) == scale


@pytest.mark.parametrize("total, scale", [(100, 100), (1000, 1000), (4, 100), (150, 100), (1_000_000, 1_000_000), (0, 100)])
def test_scale_is_the_routes_own_when_a_multiple_of_100(total, scale):
    assert route_scale(total) == scale


@pytest.mark.parametrize("current, targets, expected, error", [
    ({"v1": 90, "v2": 10}, Step("v2", 10), {"v1": 80, "v2": 20}, None),
    ({"v1": 90, "v2": 10}, Step("v2", -10), {"v1": 100, "v2": 0}, None),
    ({"v1": 95, "v2": 5}, Step("v2", 100), {"v1": 0, "v2": 100}, None),  # clamped
    ({"a": 50, "b": 30, "c": 20}, Step("c", 10), {"a": 43.75, "b": 26.25, "c": 30}, None),
    ({"a": 0, "b": 0, "c": 100}, Step("c", -10), {"a": 5, "b": 5, "c": 90}, None),  # the rest evenly
    ({"v1": 90, "v2": 10}, {"v2": 20}, {"v1": 80, "v2": 20}, None),
    ({"v1": 90, "v2": 10}, {"v2": "25%"}, {"v1": 75, "v2": 25}, None),
    ({"v1": 90, "v2": 10}, {"v1": 30, "v2": 70}, {"v1": 30, "v2": 70}, None),
    ({"v1": 90, "v2": 10}, {"v1": 30, "v2": 60}, None, "add up to 90%, not 100%"),
    ({"v1": 90, "v2": 10}, {"v3": 20}, None, 'no version "v3"'),
    ({"v1": 90, "v2": 10}, {"v2": 120}, None, "outside 0..100%"),
    ({"v1": 90, "v2": 10}, {"v2": -5}, None, "outside 0..100%"),
    ({"v1": 90, "v2": 10}, {"v2": "lots"}, None, "not a percentage"),
    ({"a": 50, "b": 30, "c": 20}, {"a": 60, "b": 50}, None, "more than 100%"),
    ({"v1": 90, "v2": 10}, Step("v9", 10), None, 'no version "v9"'),
])
def test_resolve_targets(current, targets, expected, error):
    pcts, errors = resolve_targets({k: float(v) for k, v in current.items()}, targets)
    if error:
        assert errors and error in errors[0]
    else:
        assert errors == []
        assert pcts == pytest.approx(expected)
        assert sum(pcts.values()) == pytest.approx(100)


# ----- each adapter's exact patch ----------------------------------------------------------

HEADER_RULE = {"matches": [{"headers": [{"name": "x-version", "value": "v2"}]}], "backendRefs": [ref("m-v2")]}

PATCH_CASES = [
    pytest.param(
        two("HTTPRoute"), httproute([HEADER_RULE, {"backendRefs": [ref("m-v1", 90), ref("m-v2", 10)]}]),
        {"v2": 20},
        ("gateway.networking.k8s.io", "v1", "httproutes"),
        [
            {"op": "test", "path": "/spec/rules/1/backendRefs/0/name", "value": "m-v1"},
            {"op": "test", "path": "/spec/rules/1/backendRefs/0/weight", "value": 90},
            {"op": "replace", "path": "/spec/rules/1/backendRefs/0/weight", "value": 80},
            {"op": "test", "path": "/spec/rules/1/backendRefs/1/name", "value": "m-v2"},
            {"op": "test", "path": "/spec/rules/1/backendRefs/1/weight", "value": 10},
            {"op": "replace", "path": "/spec/rules/1/backendRefs/1/weight", "value": 20},
        ],
        id="httproute: the splitting rule only, tests on names and old weights",
    ),
    pytest.param(
        two("HTTPRoute", 900, 100), httproute([{"backendRefs": [ref("m-v1", 900), ref("m-v2", 100)]}]),
        {"v2": 25},
        ("gateway.networking.k8s.io", "v1", "httproutes"),
        [
            {"op": "test", "path": "/spec/rules/0/backendRefs/0/name", "value": "m-v1"},
            {"op": "test", "path": "/spec/rules/0/backendRefs/0/weight", "value": 900},
            {"op": "replace", "path": "/spec/rules/0/backendRefs/0/weight", "value": 750},
            {"op": "test", "path": "/spec/rules/0/backendRefs/1/name", "value": "m-v2"},
            {"op": "test", "path": "/spec/rules/0/backendRefs/1/weight", "value": 100},
            {"op": "replace", "path": "/spec/rules/0/backendRefs/1/weight", "value": 250},
        ],
        id="httproute: keeps the route's own scale (1000)",
    ),
    pytest.param(
        two("HTTPRoute", 1, 1, ready1=0), httproute([{"backendRefs": [ref("m-v1"), ref("m-v2")]}]),
        {"v2": 100},
        ("gateway.networking.k8s.io", "v1", "httproutes"),
        [
            {"op": "test", "path": "/spec/rules/0/backendRefs/0/name", "value": "m-v1"},
            {"op": "add", "path": "/spec/rules/0/backendRefs/0/weight", "value": 0},
            {"op": "test", "path": "/spec/rules/0/backendRefs/1/name", "value": "m-v2"},
            {"op": "add", "path": "/spec/rules/0/backendRefs/1/weight", "value": 100},
        ],
        id="httproute: absent weights (1 each) are added",
    ),
    pytest.param(
        two("HTTPRoute"),
        httproute([{"backendRefs": [ref("m-v1", 90), ref("m-v2", 10)]},
                   {"matches": [{"path": {"value": "/v1/chat"}}], "backendRefs": [ref("m-v2", 10), ref("m-v1", 90)]}]),
        {"v1": 50, "v2": 50},
        ("gateway.networking.k8s.io", "v1", "httproutes"),
        [
            {"op": "test", "path": "/spec/rules/0/backendRefs/0/name", "value": "m-v1"},
            {"op": "test", "path": "/spec/rules/0/backendRefs/0/weight", "value": 90},
            {"op": "replace", "path": "/spec/rules/0/backendRefs/0/weight", "value": 50},
            {"op": "test", "path": "/spec/rules/0/backendRefs/1/name", "value": "m-v2"},
            {"op": "test", "path": "/spec/rules/0/backendRefs/1/weight", "value": 10},
            {"op": "replace", "path": "/spec/rules/0/backendRefs/1/weight", "value": 50},
            {"op": "test", "path": "/spec/rules/1/backendRefs/0/name", "value": "m-v2"},
            {"op": "test", "path": "/spec/rules/1/backendRefs/0/weight", "value": 10},
            {"op": "replace", "path": "/spec/rules/1/backendRefs/0/weight", "value": 50},
            {"op": "test", "path": "/spec/rules/1/backendRefs/1/name", "value": "m-v1"},
            {"op": "test", "path": "/spec/rules/1/backendRefs/1/weight", "value": 90},
            {"op": "replace", "path": "/spec/rules/1/backendRefs/1/weight", "value": 50},
        ],
        id="httproute: every rule that splits between the versions",
    ),
    pytest.param(
        two("VirtualService", 80, 20, b1="m", b2="m", n1="stable", n2="canary"),
        virtualservice([{"route": [dest("m.llm.svc.cluster.local", "stable", 80),
                                   dest("m.llm.svc.cluster.local", "canary", 20)]}]),
        {"canary": 50},
        ("networking.istio.io", "v1", "virtualservices"),
        [
            {"op": "test", "path": "/spec/http/0/route/0/destination",
             "value": {"host": "m.llm.svc.cluster.local", "subset": "stable"}},
            {"op": "test", "path": "/spec/http/0/route/0/weight", "value": 80},
            {"op": "replace", "path": "/spec/http/0/route/0/weight", "value": 50},
            {"op": "test", "path": "/spec/http/0/route/1/destination",
             "value": {"host": "m.llm.svc.cluster.local", "subset": "canary"}},
            {"op": "test", "path": "/spec/http/0/route/1/weight", "value": 20},
            {"op": "replace", "path": "/spec/http/0/route/1/weight", "value": 50},
        ],
        id="virtualservice: by subset",
    ),
    pytest.param(
        two("VirtualService", 100, 0, b1="m-v1", b2="m-v2"),
        virtualservice([{"route": [dest("m-v1", weight=100), dest("m-v2.llm.svc.cluster.local", weight=0)]}]),
        {"v2": 10},
        ("networking.istio.io", "v1", "virtualservices"),
        [
            {"op": "test", "path": "/spec/http/0/route/0/destination", "value": {"host": "m-v1"}},
            {"op": "test", "path": "/spec/http/0/route/0/weight", "value": 100},
            {"op": "replace", "path": "/spec/http/0/route/0/weight", "value": 90},
            {"op": "test", "path": "/spec/http/0/route/1/destination", "value": {"host": "m-v2.llm.svc.cluster.local"}},
            {"op": "test", "path": "/spec/http/0/route/1/weight", "value": 0},
            {"op": "replace", "path": "/spec/http/0/route/1/weight", "value": 10},
        ],
        id="virtualservice: by host",
    ),
    pytest.param(
        two("TrafficSplit", 900, 100, ready1=0),
        trafficsplit([{"service": "m-v1", "weight": 900}, {"service": "m-v2", "weight": 100}]),
        {"v2": 100},
        ("split.smi-spec.io", "v1alpha2", "trafficsplits"),
        [
            {"op": "test", "path": "/spec/backends/0/service", "value": "m-v1"},
            {"op": "test", "path": "/spec/backends/0/weight", "value": 900},
            {"op": "replace", "path": "/spec/backends/0/weight", "value": 0},
            {"op": "test", "path": "/spec/backends/1/service", "value": "m-v2"},
            {"op": "test", "path": "/spec/backends/1/weight", "value": 100},
            {"op": "replace", "path": "/spec/backends/1/weight", "value": 1000},
        ],
        id="trafficsplit",
    ),
]


@pytest.mark.parametrize("svc, route, targets, api, body", PATCH_CASES)
def test_each_router_gets_its_exact_patch(svc, route, targets, api, body):
    plan = plan_shift(snapshot(svc), svc.key, targets, route=route)
    assert plan.errors == () and plan.blockers == ()
    p = plan.patch
    assert (p.group, p.version, p.plural, p.namespace, p.name) == (*api, "llm", "m")
    assert p.patch_type == "json" and p.subresource == ""
    assert p.body == body
    # Applied to the route it was read from, the patch sets the targets and nothing else.
    patched = json_patch(copy.deepcopy(route), p.body)
    assert _strip_weights(patched) == _strip_weights(route)
    reread = plan_shift(snapshot(svc), svc.key, targets, route=patched)
    assert not reread.changes and reread.patch is None


def _strip_weights(obj):
    if isinstance(obj, dict):
        return {k: _strip_weights(v) for k, v in obj.items()
                if k != "weight"}
    if isinstance(obj, list):
        return [_strip_weights(v) for v in obj]
    return obj


def test_the_patch_refuses_a_route_changed_after_it_was_read():
    svc = two("HTTPRoute")
    route = httproute([{"backendRefs": [ref("m-v1", 90), ref("m-v2", 10)]}])
    plan = plan_shift(snapshot(svc), svc.key, {"v2": 20}, route=route)
    edited = copy.deepcopy(route)
    edited["spec"]["rules"][0]["backendRefs"][1]["weight"] = 50  # someone else's shift
    with pytest.raises(DemoApiError) as err:
        json_patch(edited, plan.patch.body)
    assert err.value.status == 422 and "rejected our request" in str(err.value)  # kube-apiserver's words
    reordered = copy.deepcopy(route)
    reordered["spec"]["rules"][0]["backendRefs"].reverse()
    with pytest.raises(DemoApiError):
        json_patch(reordered, plan.patch.body)


# ----- Argo Rollouts: promote and abort, never set-weight ---------------------------------------


def rollout_service():
    return service("Rollout", [("stable", 80, "", 4, 4), ("canary", 20, "", 4, 4)], name="m")


def rollout_obj(paused: bool = False, steps: int = 3, **status) -> dict:
    """The Rollout as the apiserver holds it (its controller writes the status)."""
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": {"name": "m-rollout", "namespace": "llm"},
            "spec": {"paused": paused, "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}},
                                                                          {"setWeight": 50}][:steps]}}},
            "status": {"currentPodHash": "new", "stableRS": "old", **status}}


@pytest.mark.parametrize("targets, action, body, sub", [
    ({"canary": 100}, "promote-full", {"status": {"promoteFull": True}}, "status"),
    ({"stable": 100}, "abort", {"status": {"abort": True}}, "status"),
    ({"canary": 0}, "abort", {"status": {"abort": True}}, "status"),
])
def test_rollout_targets_map_to_promote_full_and_abort(targets, action, body, sub):
    svc = rollout_service()
    first = plan_shift(snapshot(svc), svc.key, targets)
    assert first.action == action and first.patch is None and needs_route(first)  # built on the Rollout as read
    plan = plan_shift(snapshot(svc), svc.key, targets, route=rollout_obj())
    assert plan.errors == ()
    assert (plan.patch.group, plan.patch.version, plan.patch.plural, plan.patch.name) == \
        ("argoproj.io", "v1alpha1", "rollouts", "m-rollout")
    assert (plan.patch.patch_type, plan.patch.body, plan.patch.subresource) == ("merge", body, sub)
    assert any("never" in w or "owns the routes" in w for w in plan.warnings)


def test_rollout_has_no_set_weight():
    svc = rollout_service()
    plan = plan_shift(snapshot(svc), svc.key, {"canary": 50})
    assert plan.patch is None
    assert "no set-weight" in plan.errors[0]


# As kubectl argo rollouts v1.8.3 sends them (pkg/kubectl-argo-rollouts/cmd/promote, abort, retry).
@pytest.mark.parametrize("action, rollout, status_body, spec_body", [
    ("promote", rollout_obj(pauseConditions=[{"reason": "CanaryPauseStep"}], currentStepIndex=1),
     {"status": {"pauseConditions": None}}, None),
    ("promote", rollout_obj(paused=True, pauseConditions=[{"reason": "PausedByUser"}]),
     {"status": {"pauseConditions": None}}, {"spec": {"paused": False}}),
    ("promote", rollout_obj(currentStepIndex=1), {"status": {"pauseConditions": None, "currentStepIndex": 2}}, None),
    ("promote", rollout_obj(paused=True, steps=0), None, {"spec": {"paused": False}}),
    ("promote", rollout_obj(pauseConditions=[{"reason": "InconclusiveAnalysisRun"}], controllerPause=True,
                            currentStepIndex=1, canary={"currentStepAnalysisRunStatus": {"status": "Inconclusive"}}),
     {"status": {"pauseConditions": None, "controllerPause": False, "currentStepIndex": 2}}, None),
    ("promote-full", rollout_obj(), {"status": {"promoteFull": True}}, None),
    ("abort", rollout_obj(), {"status": {"abort": True}}, None),
    ("retry", rollout_obj(abort=True), {"status": {"abort": False}}, None),
], ids=["paused-step", "paused-by-user", "between-steps", "spec-paused-no-steps", "inconclusive", "promote-full",
        "abort", "retry"])
def test_rollout_actions_follow_argos_own_patches(action, rollout, status_body, spec_body):
    svc = rollout_service()
    plan = plan_rollout(snapshot(svc), svc.key, action, rollout=RolloutRead(rollout))
    assert plan.errors == ()
    sent = [(p.body, p.subresource) for p in (plan.patch, plan.then) if p is not None]
    assert sent == [(b, sub) for b, sub in ((status_body, "status"), (spec_body, "")) if b is not None]


def test_a_rollout_with_nothing_to_do_sends_nothing_and_says_why():
    svc = rollout_service()
    done = plan_rollout(snapshot(svc), svc.key, "promote-full", rollout=RolloutRead(rollout_obj(currentPodHash="old")))
    assert done.patch is None and "fully promoted already" in done.errors[0]
    idle = plan_rollout(snapshot(svc), svc.key, "promote", rollout=RolloutRead(rollout_obj(steps=0)))
    assert idle.patch is None and "neither paused nor on a canary step" in idle.errors[0]


def test_a_route_managed_by_argo_rollouts_is_refused():
    svc = two("HTTPRoute")
    route = httproute([{"backendRefs": [ref("m-v1", 90), ref("m-v2", 10)]}],
                      managedFields=[{"manager": "rollouts-controller", "operation": "Update"}])
    plan = plan_shift(snapshot(svc), svc.key, {"v2": 20}, route=route)
    assert plan.patch is None
    assert "Argo Rollouts" in plan.errors[0]


# ----- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind, weights, fragment", [
    ("HTTPRoute", {"a": 1_000_001, "b": 0}, "maximum 1,000,000"),
    ("HTTPRoute", {"a": -1, "b": 1}, "negative"),
    ("HTTPRoute", {"a": 0, "b": 0}, "500"),
    ("VirtualService", {"a": -1, "b": 2}, "negative"),
    ("VirtualService", {"a": 0, "b": 0}, "Istio rejects"),
    ("TrafficSplit", {"a": 0, "b": 0}, "no backend"),
])
def test_router_weight_rules(kind, weights, fragment):
    errors = ADAPTERS[kind].validate(weights)
    assert errors and fragment in " ".join(errors)


@pytest.mark.parametrize("kind, weights", [
    ("HTTPRoute", {"a": 1_000_000, "b": 0}),
    ("VirtualService", {"a": 0, "b": 100}),
    ("TrafficSplit", {"a": 1, "b": 3}),
])
def test_router_weight_rules_accept(kind, weights):
    assert ADAPTERS[kind].validate(weights) == []


def test_a_version_with_no_ready_replicas_blocks_unless_lowered():
    svc = two("HTTPRoute", ready2=0)
    route = httproute([{"backendRefs": [ref("m-v1", 90), ref("m-v2", 10)]}])
    up = plan_shift(snapshot(svc), svc.key, {"v2": 20}, route=route)
    assert up.ok and up.patch is not None
    assert up.blockers and "v2 has no ready replicas (0/3)" in up.blockers[0]
    down = plan_shift(snapshot(svc), svc.key, {"v2": 5}, route=route)
    assert down.blockers == ()
    assert any("no ready replicas" in w for w in down.warnings)
    off = plan_shift(snapshot(svc), svc.key, {"v2": 0}, route=route)
    assert off.blockers == () and not any("ready" in w for w in off.warnings)


def test_more_traffic_than_a_version_has_ready_pods_for_blocks_unless_forced():
    """50% of new sessions to a version with 1 of its 2 pods ready, beside 3 of the old: refused, said why."""
    svc = two("HTTPRoute", ready2=1, desired2=2)
    route = httproute([{"backendRefs": [ref("m-v1", 90), ref("m-v2", 10)]}])
    half = plan_shift(snapshot(svc), svc.key, {"v2": 50}, route=route)
    assert half.ok and half.patch is not None  # forced, it would go
    (blocked,) = half.blockers
    assert blocked.startswith("v2 would get 50% of new sessions on 25% of the ready pods (1 of 4)") \
        and "2.0× an even share" in blocked
    assert plan_shift(snapshot(svc), svc.key, {"v2": 25}, route=route).blockers == ()  # its ready share
    back = plan_shift(snapshot(svc), svc.key, {"v2": 5}, route=route)  # back to the version carrying the most:
    assert back.blockers == () and any("v1 would get 95%" in w for w in back.warnings)  # the rollback path
    with pytest.raises(ShiftError, match="25% of the ready pods"):
        apply_shift(half, write_context(RecordingWriter(), AuditLog(None, "t", "c")))


def test_the_demo_refuses_a_canary_beyond_its_ready_pods_from_the_command_line(tmp_path, capsys):
    code, backend = run(tmp_path, "llm/mistral-7b", "--to", "canary=50")
    assert code == 1 and demo_weights(backend, MISTRAL) == {"stable": 80, "canary": 20}
    assert "canary would get 50% of new sessions" in capsys.readouterr().err and audit_lines(tmp_path) == []


def test_sessions_continue_when_a_version_goes_to_zero():
    svc = two("HTTPRoute")
    plan = plan_shift(snapshot(svc, {"v1": 12, "v2": 3}), svc.key, {"v1": 0, "v2": 100})
    (warning,) = plan.warnings
    assert warning.startswith("v1 goes to 0%: its 12 live sessions continue")
    assert "only new sessions move" in warning
    quiet = plan_shift(snapshot(svc, {"v1": 0, "v2": 3}), svc.key, {"v1": 0})
    assert quiet.warnings == ()


@pytest.mark.parametrize("svc, route, fragment", [
    (service("", [("v1", None, "m", 3, 3)]), None, "no traffic router"),
    (service("HTTPRoute", [("v1", 100, "m-v1", 3, 3)]), None, "one version"),
    (two("HTTPRoute"), httproute([{"backendRefs": [ref("other", 1)]}]), "no rule that splits"),
    (two("VirtualService"), virtualservice([{"route": [dest("m-v1", weight=100), dest("x", weight=0)]}]), "no rule that splits"),
])
def test_what_cannot_be_shifted(svc, route, fragment):
    plan = plan_shift(snapshot(svc), svc.key, {"v1": 50}, route=route)
    assert plan.patch is None
    assert fragment in plan.errors[0]


def test_find_service_by_name_when_unique():
    a, b = two("HTTPRoute"), service("HTTPRoute", [("v1", 1, "x", 1, 1), ("v2", 1, "y", 1, 1)], ns="other")
    snap = ClusterSnapshot(taken_at=0, context="t", services=(a, b, service("", [("v", None, "z", 1, 1)], name="solo")))
    assert find_service(snap, "solo").key == "llm/solo"
    assert find_service(snap, "other/m") is b
    with pytest.raises(ShiftError, match="several namespaces"):
        find_service(snap, "m")
    with pytest.raises(ShiftError, match="not found"):
        find_service(snap, "nope")


def test_discovered_api_versions_are_used():
    svc = two("VirtualService", 80, 20, b1="m", b2="m", n1="stable", n2="canary")
    route = virtualservice([{"route": [dest("m", "stable", 80), dest("m", "canary", 20)]}])
    plan = plan_shift(snapshot(svc), svc.key, {"canary": 30}, route=route, api_versions={"VirtualService": "v1beta1"})
    assert plan.patch.version == "v1beta1"
    assert plan.patch.path == "/apis/networking.istio.io/v1beta1/namespaces/llm/virtualservices/m"


# ----- apply, through the demo cluster's API ---------------------------------------------------

LLAMA = "llm/llama-3-70b-instruct"
MISTRAL = "llm/mistral-7b"


@pytest.fixture
def demo():
    clock = ManualClock()
    backend = demo_backend(clock=clock)
    return backend, clock


def audit_of(tmp_path):
    return AuditLog(tmp_path / "audit.jsonl", "tester", "demo")


def audit_lines(tmp_path):
    """The log's entries; the CLI on the demo writes beside the configured file, in audit-demo.jsonl."""
    out = []
    for name in ("audit.jsonl", "audit-demo.jsonl"):
        path = tmp_path / name
        out += written(path)
    return out


def demo_weights(backend, key):
    return {v.name: v.weight for v in backend.reader.snapshot().service(key).versions}


def test_apply_patches_the_demo_route_and_audits(demo, tmp_path):
    backend, _ = demo
    snap = backend.reader.snapshot()
    plan = plan_shift(snap, LLAMA, Step("v2", 10))
    plan = plan_shift(snap, LLAMA, Step("v2", 10), route=read_route(plan, backend.writer))
    line = apply_shift(plan, write_context(backend.writer, audit_of(tmp_path)), force=True)  # past the capacity rule
    assert line == "httproute/llm/llama-3-70b-instruct: v1 90% → 80%, v2 10% → 20%"
    assert demo_weights(backend, LLAMA) == {"v1": 80, "v2": 20}
    (entry,) = audit_lines(tmp_path)
    assert entry["action"] == "shift" and entry["result"] == "ok"
    assert entry["target"] == "httproute/llm/llama-3-70b-instruct"
    assert entry["params"]["from"] == {"v1": 90, "v2": 10} and entry["params"]["to"] == {"v1": 80, "v2": 20}
    assert entry["params"]["patch"] == plan.patch.body


def test_apply_reads_the_route_when_planned_from_the_snapshot(demo, tmp_path):
    backend, _ = demo
    plan = plan_shift(backend.reader.snapshot(), MISTRAL, {"canary": 35})
    assert plan.patch is None
    apply_shift(plan, write_context(backend.writer, audit_of(tmp_path)), force=True)
    assert demo_weights(backend, MISTRAL) == {"stable": 65, "canary": 35}


def test_apply_refuses_when_the_route_moved_since_the_plan(demo, tmp_path):
    backend, _ = demo
    plan = plan_shift(backend.reader.snapshot(), MISTRAL, {"canary": 35})
    backend.writer.set_weights("llm", "mistral-7b", {"stable": 50, "canary": 50})
    with pytest.raises(ShiftError, match="changed since the plan"):
        apply_shift(plan, write_context(backend.writer, audit_of(tmp_path)), force=True)
    assert demo_weights(backend, MISTRAL) == {"stable": 50, "canary": 50}


def test_a_concurrent_edit_makes_the_patch_fail_whole_and_is_audited(demo, tmp_path):
    backend, _ = demo
    snap = backend.reader.snapshot()
    plan = plan_shift(snap, LLAMA, {"v2": 20}, route=backend.writer.get_object(
        "gateway.networking.k8s.io", "v1", "httproutes", "llm", "llama-3-70b-instruct"))
    backend.writer.set_weights("llm", "llama-3-70b-instruct", {"v1": 70, "v2": 30})  # someone else
    with pytest.raises(ShiftError, match="changed since it was read"):
        apply_shift(plan, write_context(backend.writer, audit_of(tmp_path)), force=True)
    assert demo_weights(backend, LLAMA) == {"v1": 70, "v2": 30}
    (entry,) = audit_lines(tmp_path)
    assert "changed since it was read (422: the server rejected our request" in entry["result"]


def test_apply_refuses_read_only_errors_and_unforced_blockers(demo, tmp_path):
    backend, _ = demo
    snap = backend.reader.snapshot()
    plan = plan_shift(snap, LLAMA, {"v2": 20})
    with pytest.raises(ReadOnlyError):
        apply_shift(plan, write_context(None, audit_of(tmp_path)))
    bad = plan_shift(snap, LLAMA, {"v2": 150})
    with pytest.raises(ShiftError, match="outside"):
        apply_shift(bad, write_context(backend.writer, audit_of(tmp_path)))
    svc = snap.service(LLAMA)
    blocked = plan_shift(snapshot(InferenceService(svc.namespace, svc.name, tuple(
        ServiceVersion(v.name, v.weight, Rollout(1, 1, 1, 1, 1, 0, 0), v.backend, v.workload) for v in svc.versions
    ), svc.router_kind, svc.router_name)), LLAMA, {"v2": 20})
    with pytest.raises(ShiftError, match="no ready replicas"):
        apply_shift(blocked, write_context(backend.writer, audit_of(tmp_path)))
    assert audit_lines(tmp_path) == []
    assert demo_weights(backend, LLAMA) == {"v1": 90, "v2": 10}
    apply_shift(blocked, write_context(backend.writer, audit_of(tmp_path)), force=True)
    assert demo_weights(backend, LLAMA) == {"v1": 80, "v2": 20}
    assert audit_lines(tmp_path)[0]["params"]["force"] is True


def test_no_change_sends_nothing(demo, tmp_path):
    backend, _ = demo
    plan = plan_shift(backend.reader.snapshot(), LLAMA, {"v1": 90, "v2": 10})
    assert not plan.changes
    assert "already at" in apply_shift(plan, write_context(backend.writer, audit_of(tmp_path)))
    assert audit_lines(tmp_path) == []


class RecordingWriter:
    identity = "rec"

    def __init__(self, obj=None):
        self.calls = []
        self.obj = obj

    def get_object(self, *args):
        return self.obj

    def patch_object(self, *args, **kw):
        self.calls.append((args, kw))
        return {}


def test_rollout_apply_reads_the_rollout_then_sends_status_and_spec_in_argos_order(tmp_path):
    svc = rollout_service()
    writer = RecordingWriter(rollout_obj(paused=True, pauseConditions=[{"reason": "PausedByUser"}]))
    line = apply_shift(plan_rollout(snapshot(svc), svc.key, "promote"), write_context(writer, audit_of(tmp_path)))
    rollout = ("argoproj.io", "v1alpha1", "rollouts", "llm", "m-rollout")
    assert writer.calls == [((*rollout, {"status": {"pauseConditions": None}}), {"patch_type": "merge", "subresource": "status"}),
                            ((*rollout, {"spec": {"paused": False}}), {"patch_type": "merge", "subresource": ""})]
    assert line == "rollout/llm/m-rollout: promote sent"
    (entry,) = audit_lines(tmp_path)  # one write, audited once, both patches in its parameters
    assert entry["action"] == "rollout-promote" and entry["params"]["then"]["patch"] == {"spec": {"paused": False}}


def test_weights_from_the_route_steer_the_demos_sessions(demo, tmp_path):
    backend, clock = demo
    snap = backend.reader.snapshot()
    apply_shift(plan_shift(snap, LLAMA, {"v1": 0}), write_context(backend.writer, audit_of(tmp_path)), force=True)
    for _ in range(3):  # far longer than sessions last (mean 70 s)
        clock.advance(600)
        backend.reader.snapshot()
    snap = backend.reader.snapshot()
    svc = snap.service(LLAMA)
    assert snap.sessions_of(svc, "v1") == 0 and snap.sessions_of(svc, "v2") > 0


# ----- the demo's API answers as the apiserver would ---------------------------------------------

HR = ("gateway.networking.k8s.io", "v1", "httproutes", "llm", "llama-3-70b-instruct")


def test_demo_merge_patch_replaces_whole_lists():
    cluster = DemoCluster(clock=ManualClock())
    route = cluster.get_object(*HR)
    rules = copy.deepcopy(route["spec"]["rules"])
    rules[1]["backendRefs"][0]["weight"] = 60
    rules[1]["backendRefs"][1]["weight"] = 40
    out = cluster.patch_object(*HR, {"spec": {"rules": [rules[1]]}}, patch_type="merge")
    assert len(out["spec"]["rules"]) == 1  # RFC 7386: the list was replaced, not merged
    assert int(out["metadata"]["resourceVersion"]) > int(route["metadata"]["resourceVersion"])
    assert out["metadata"]["generation"] == route["metadata"]["generation"] + 1
    assert {v.name: v.weight for v in cluster.snapshot().service(LLAMA).versions} == {"v1": 60, "v2": 40}


@pytest.mark.parametrize("patch, patch_type, status, fragment", [
    ([{"op": "replace", "path": "/spec/rules/1/backendRefs/0/weight", "value": -5}], "json", 422,
     "should be greater than or equal to 0"),
    ([{"op": "replace", "path": "/spec/rules/1/backendRefs/0/weight", "value": 2_000_000}], "json", 422,
     "less than or equal to 1000000"),
    ([{"op": "replace", "path": "/spec/rules/9/backendRefs/0/weight", "value": 1}], "json", 422, "does not apply"),
    ({"metadata": {"resourceVersion": "1"}, "spec": {"rules": []}}, "merge", 409, "has been modified"),
    ({"spec": {"rules": []}}, "strategic", 415, "unknown format"),
    ({"spec": {}}, "json", 400, "cannot unmarshal"),
])
def test_demo_rejects_what_the_apiserver_rejects_and_changes_nothing(patch, patch_type, status, fragment):
    cluster = DemoCluster(clock=ManualClock())
    before = cluster.get_object(*HR)
    with pytest.raises(DemoApiError) as err:
        cluster.patch_object(*HR, patch, patch_type=patch_type)
    assert err.value.status == status and fragment in str(err.value)
    assert cluster.get_object(*HR) == before


def test_demo_reads_a_failed_test_op_as_the_live_writer_reads_the_apiserver():
    cluster = DemoCluster(clock=ManualClock())
    before = cluster.get_object(*HR)
    with pytest.raises(ConflictError, match="changed since it was read"):
        cluster.patch_object(*HR, [{"op": "test", "path": "/spec/rules/1/backendRefs/0/weight", "value": 91},
                                   {"op": "replace", "path": "/spec/rules/1/backendRefs/0/weight", "value": 0}],
                             patch_type="json")
    assert cluster.get_object(*HR) == before


def test_demo_istio_validation_and_served_versions():
    cluster = DemoCluster(clock=ManualClock())
    vs = ("networking.istio.io", "v1beta1", "virtualservices", "llm", "mistral-7b")
    assert cluster.get_object(*vs)["apiVersion"] == "networking.istio.io/v1beta1"
    with pytest.raises(DemoApiError, match="total destination weight = 0"):
        cluster.patch_object(*vs, [{"op": "replace", "path": "/spec/http/0/route/0/weight", "value": 0},
                                   {"op": "replace", "path": "/spec/http/0/route/1/weight", "value": 0}], patch_type="json")
    with pytest.raises(DemoApiError) as err:
        cluster.get_object("networking.istio.io", "v2", "virtualservices", "llm", "mistral-7b")
    assert err.value.status == 404
    with pytest.raises(DemoApiError, match="not found"):
        cluster.get_object(*HR[:4], "nope")


def test_demo_status_subresource_changes_status_only():
    cluster = DemoCluster(clock=ManualClock())
    before = cluster.get_object(*HR)
    out = cluster.patch_object(*HR, {"spec": {"rules": []}, "status": {"parents": []}}, subresource="status")
    assert out["spec"] == before["spec"] and out["status"] == {"parents": []}
    assert out["metadata"]["generation"] == before["metadata"]["generation"]
    out = cluster.patch_object(*HR, {"status": {"parents": ["x"]}})  # the main resource ignores status
    assert out["status"] == {"parents": []}


@pytest.mark.parametrize("doc, patch, expected", [
    ({"a": {"b": 1, "c": [1, 2]}}, {"a": {"b": None, "c": [3]}}, {"a": {"c": [3]}}),
    ({"a": 1}, {"b": {"c": 2}}, {"a": 1, "b": {"c": 2}}),
    ({"a": [1]}, {"a": {"x": 1}}, {"a": {"x": 1}}),
])
def test_merge_patch_rfc7386(doc, patch, expected):
    assert merge_patch(doc, patch) == expected


@pytest.mark.parametrize("doc, ops, expected", [
    ({"a": [1, 2]}, [{"op": "add", "path": "/a/1", "value": 9}], {"a": [1, 9, 2]}),
    ({"a": [1, 2]}, [{"op": "add", "path": "/a/-", "value": 9}], {"a": [1, 2, 9]}),
    ({"a/b": {"~": 1}}, [{"op": "replace", "path": "/a~1b/~0", "value": 2}], {"a/b": {"~": 2}}),
    ({"a": 1}, [{"op": "test", "path": "/a", "value": 1.0}, {"op": "remove", "path": "/a"}], {}),
])
def test_json_patch_rfc6902(doc, ops, expected):
    assert json_patch(doc, ops) == expected


@pytest.mark.parametrize("doc, ops", [
    ({"a": True}, [{"op": "test", "path": "/a", "value": 1}]),  # true is not 1
    ({"a": [1]}, [{"op": "replace", "path": "/a/01", "value": 1}]),
    ({"a": {}}, [{"op": "replace", "path": "/a/b", "value": 1}]),
])
def test_json_patch_rfc6902_failures(doc, ops):
    with pytest.raises(DemoApiError):
        json_patch(doc, ops)


# ----- headless: run() with a demo backend -----------------------------------------------------


def parse(*argv):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    add_shift_parser(sub, lambda p: None)
    return parser.parse_args(["shift", *argv])


def run(tmp_path, *argv, read_only=False, backend=None):
    backend = backend or demo_backend(clock=ManualClock(), read_only=read_only)
    settings = Settings(demo=True, read_only=read_only, audit_log=str(tmp_path / "audit.jsonl"))
    return headless_shift.run(settings, parse(*argv), lambda s: backend), backend


def test_headless_dry_run_prints_the_plan_and_exact_patch(tmp_path, capsys):
    code, backend = run(tmp_path, "llama-3-70b-instruct", "--to", "v2=25", "--dry-run", "--force")
    out = capsys.readouterr().out
    assert code == 0
    assert "PATCH /apis/gateway.networking.k8s.io/v1/namespaces/llm/httproutes/llama-3-70b-instruct" in out
    assert "Content-Type: application/json-patch+json" in out
    assert '{"op": "replace", "path": "/spec/rules/1/backendRefs/1/weight", "value": 25}' in out
    assert demo_weights(backend, LLAMA) == {"v1": 90, "v2": 10}
    assert audit_lines(tmp_path) == []


def test_headless_dry_run_json(tmp_path, capsys):
    code, _ = run(tmp_path, "llm/mistral-7b", "--to", "canary=40", "--dry-run", "-o", "json", "--force")
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["dry_run"] is True and doc["simulated"] is True
    assert {v["name"]: v["target_weight"] for v in doc["versions"]} == {"stable": 60, "canary": 40}
    assert doc["patch"]["patch_type"] == "json" and doc["patch"]["plural"] == "virtualservices"


def test_headless_apply_prints_one_line(tmp_path, capsys):
    code, backend = run(tmp_path, "llm/llama-3-70b-instruct", "--to", "v1=70", "--to", "v2=30", "--force")
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines() == ["httproute/llm/llama-3-70b-instruct: v1 90% → 70%, v2 10% → 30% [SIMULATED: demo cluster]"]
    assert demo_weights(backend, LLAMA) == {"v1": 70, "v2": 30}
    assert audit_lines(tmp_path)[0]["result"] == "ok"


@pytest.mark.parametrize("argv, code, fragment", [
    # Bad input (README: exit 2): targets that cannot add up, a version the service lacks, one named twice.
    (["llama-3-70b-instruct", "--to", "v1=50", "--to", "v2=20"], 2, "not 100%"),
    (["llama-3-70b-instruct", "--to", "v9=20"], 2, 'no version "v9"'),
    (["llama-3-70b-instruct", "--to", "v2=20", "--to", "v2=30"], 2, "--to names v2 more than once"),
    (["no-such-model", "--to", "v1=50"], 2, 'service "no-such-model" not found'),
    # Refused (exit 1): what the cluster holds cannot take it.
    (["qwen2-72b", "--to", "v3=50"], 1, "no traffic router"),
])
def test_headless_refusals_are_one_line(tmp_path, capsys, argv, code, fragment):
    got, backend = run(tmp_path, *argv)
    err = capsys.readouterr().err
    assert got == code
    assert len(err.strip().splitlines()) == 1 and fragment in err
    assert demo_weights(backend, LLAMA) == {"v1": 90, "v2": 10}
    assert audit_lines(tmp_path) == []


def test_headless_read_only_refuses_with_exit_2(tmp_path, capsys):
    code, _ = run(tmp_path, "llama-3-70b-instruct", "--to", "v2=20", read_only=True)
    assert code == 2
    assert capsys.readouterr().err.strip() == "gputui: error: read-only: shift is unavailable"
    code, _ = run(tmp_path, "llama-3-70b-instruct", "--to", "v2=20", "--dry-run", read_only=True)
    assert code == 2


def test_headless_blocker_needs_force(tmp_path, capsys):
    backend = demo_backend(clock=ManualClock())
    cluster = backend.writer
    snap = backend.reader.snapshot()
    for pod in snap.pods_of(snap.service(LLAMA), "v2"):
        cluster.delete_pod(pod.namespace, pod.name)
    code, _ = run(tmp_path, "llama-3-70b-instruct", "--to", "v2=20", backend=backend)
    assert code == 1 and "--force" in capsys.readouterr().err
    code, _ = run(tmp_path, "llama-3-70b-instruct", "--to", "v2=20", "--force", backend=backend)
    assert code == 0
    assert demo_weights(backend, LLAMA) == {"v1": 80, "v2": 20}


@pytest.mark.parametrize("target", ["20", "v2=120", "v2=-1", "v2=nan", "v2=inf", "=20", "v2="])
def test_headless_bad_target_syntax_is_a_usage_error(target):
    with pytest.raises(SystemExit):
        parse("m", "--to", target)


def test_headless_rbac_refusal(tmp_path, capsys):
    backend = demo_backend(clock=ManualClock())
    refused = Backend(backend.reader, backend.writer, "demo", True, permissions={"shift": False})
    code, _ = run(tmp_path, "llama-3-70b-instruct", "--to", "v2=20", backend=refused)
    assert code == 2 and "may not patch" in capsys.readouterr().err  # read-only for this identity, as drain says


def test_undo_goes_back_to_the_weights_before_the_last_shift(tmp_path, capsys):
    backend = demo_backend(clock=ManualClock())
    code, _ = run(tmp_path, "llm/llama-3-70b-instruct", "--undo", backend=backend)
    assert code == 1 and "no shift of llm/llama-3-70b-instruct" in capsys.readouterr().err  # nothing to undo yet
    assert run(tmp_path, "llm/llama-3-70b-instruct", "--to", "v2=5", backend=backend)[0] == 0
    assert demo_weights(backend, LLAMA) == {"v1": 95, "v2": 5}
    code, _ = run(tmp_path, "llm/llama-3-70b-instruct", "--undo", backend=backend)
    assert code == 0, capsys.readouterr().err
    assert demo_weights(backend, LLAMA) == {"v1": 90, "v2": 10}
    undo = audit_lines(tmp_path)[-1]
    assert undo["action"] == "shift" and undo["params"]["to"] == {"v1": 90, "v2": 10}


def test_undo_refuses_when_the_route_moved_since_that_shift_unless_forced(tmp_path, capsys):
    backend = demo_backend(clock=ManualClock())
    assert run(tmp_path, "llm/llama-3-70b-instruct", "--to", "v2=5", backend=backend)[0] == 0
    backend.writer.set_weights("llm", "llama-3-70b-instruct", {"v1": 97, "v2": 3})  # someone else, since
    code, _ = run(tmp_path, "llm/llama-3-70b-instruct", "--undo", backend=backend)
    assert code == 1 and "moved since that shift" in capsys.readouterr().err
    assert demo_weights(backend, LLAMA) == {"v1": 97, "v2": 3}
    assert run(tmp_path, "llm/llama-3-70b-instruct", "--undo", "--force", backend=backend)[0] == 0
    assert demo_weights(backend, LLAMA) == {"v1": 90, "v2": 10}


def test_every_shift_plan_says_where_live_sessions_keep_flowing():
    svc = two("HTTPRoute")
    route = httproute([{"backendRefs": [ref("m-v1", 90), ref("m-v2", 10)]}])
    plan = plan_shift(snapshot(svc, sessions={"v1": 40, "v2": 3}), svc.key, {"v2": 30}, route=route)
    assert "live sessions stay on their pods (v1 40, v2 3); new sessions follow the new weights" in plan.notes


def test_argo_undo_puts_back_the_previous_revisions_template_as_the_plugin_does():
    """Objects shaped as the Argo controller writes them (its ReplicaSets carry the revision annotation and
    the pod-template-hash label; only those it controls count)."""
    from gputui.ops.traffic.argo import HASH_LABEL, REVISION, undo_body

    def template(image: str, hash_: str) -> dict:
        return {"metadata": {"labels": {"app": "chat", HASH_LABEL: hash_}},
                "spec": {"containers": [{"name": "vllm", "image": image}]}}

    def rs(rev, image, hash_, owner="uid-1") -> dict:
        return {"metadata": {"name": f"chat-{hash_}", "annotations": {REVISION: str(rev)},
                             "ownerReferences": [{"uid": owner, "controller": True}]},
                "spec": {"template": template(image, hash_)}}

    rollout = {"metadata": {"uid": "uid-1"}, "spec": {"template": template("vllm:0.9", "")}}
    sets = [rs(1, "vllm:0.8", "a"), rs(2, "vllm:0.9", "b"), rs(7, "vllm:0.1", "z", owner="someone-else")]
    body, why, revision = undo_body(rollout, sets)
    assert why == "" and revision == 1
    assert body == [{"op": "replace", "path": "/spec/template",
                     "value": {"metadata": {"labels": {"app": "chat"}}, "spec": {"containers": [{"name": "vllm", "image": "vllm:0.8"}]}}}]
    assert undo_body(rollout, sets, to_revision=2)[1] == "its template already matches revision 2"
    assert "revision 5 is not in its history (1, 2)" in undo_body(rollout, sets, to_revision=5)[1]
    assert undo_body(rollout, sets[:1])[1] == "no earlier revision in its history to go back to"


def test_a_route_weight_no_number_can_hold_is_read_as_no_weight_not_a_crash():
    """A weight of 1e999 (infinite once decoded) or NaN in a route from the cluster raised OverflowError."""
    from gputui.vocabulary.router_kinds import route_weight

    assert [route_weight(v) for v in (float("inf"), float("nan"), "1e999", "nan", 7, "500m")] == \
        [None, None, None, None, 7, 1]
