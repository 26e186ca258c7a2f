"""Each router adapter, at its edges: which rule splits traffic, what a missing weight means, the exact JSON patch
(`test` on every backend's name and old weight, `add` where none was written, `replace` only where it moves), the
weight limits, and the reading of weights no number can hold."""

from __future__ import annotations

import pytest

from gputui.ops.traffic.adapters import ADAPTERS, _ptr, managed_by_argo, route_name
from gputui.vocabulary.model import InferenceService, ServiceVersion
from gputui.vocabulary.router_kinds import route_weight

HR, VS, TS = ADAPTERS["HTTPRoute"], ADAPTERS["VirtualService"], ADAPTERS["TrafficSplit"]
SVC = InferenceService("llm", "chat", (ServiceVersion("v1", backend="chat-v1"), ServiceVersion("v2", backend="chat-v2")),
                       router_kind="HTTPRoute", router_name="chat")


def httproute(*rules) -> dict:
    return {"metadata": {"namespace": "llm", "name": "chat"}, "spec": {"rules": [{"backendRefs": r} for r in rules]}}


def ref(name, weight=None) -> dict:
    return {"name": name} if weight is None else {"name": name, "weight": weight}


def test_the_first_widest_splitting_rule_is_read_and_other_rules_noted():
    route = httproute([ref("chat-v1", 80), ref("chat-v2", 20)], [ref("chat-v2", 1)], [ref("other", 1), ref("x", 1)])
    read = HR.read(route, SVC)
    assert read.errors == [] and read.weights == {"v1": 80, "v2": 20} and read.scale == 100
    assert read.notes == ["rule 1 sends its matches to v2; left as is"]
    assert [s.path for s in read.slots] == [("spec", "rules", 0, "backendRefs", 0), ("spec", "rules", 0, "backendRefs", 1)]


def test_several_splitting_rules_all_get_the_target_and_differing_weights_are_warned():
    same = HR.read(httproute([ref("chat-v1", 80), ref("chat-v2", 20)], [ref("chat-v1", 80), ref("chat-v2", 20)]), SVC)
    assert same.warnings == [] and len(same.slots) == 4
    differ = HR.read(httproute([ref("chat-v1", 80), ref("chat-v2", 20)], [ref("chat-v1", 50), ref("chat-v2", 50)]), SVC)
    assert differ.warnings == ["2 rules split between these versions with different weights; all get the target"]
    assert differ.weights == {"v1": 80, "v2": 20}  # the first splitting rule's


def test_a_route_with_no_splitting_rule_says_so():
    read = HR.read(httproute([ref("chat-v1", 1)], [ref("chat-v1", 1), ref("elsewhere", 1)]), SVC)
    assert read.errors == ["HTTPRoute llm/chat has no rule that splits traffic between v1, v2"]
    assert read.slots == []


def test_a_route_that_misses_a_version_names_it():
    three = InferenceService("llm", "chat", (*SVC.versions, ServiceVersion("v3", backend="chat-v3")),
                             router_kind="HTTPRoute")
    read = HR.read(httproute([ref("chat-v1", 1), ref("chat-v2", 1)]), three)
    assert read.errors == ["HTTPRoute llm/chat routes to no backend of v3"]


def test_an_absent_httproute_weight_is_1_and_the_route_scale_follows_the_total():
    read = HR.read(httproute([ref("chat-v1"), ref("chat-v2")]), SVC)
    assert read.weights == {"v1": 1, "v2": 1} and read.scale == 100
    big = HR.read(httproute([ref("chat-v1", 600), ref("chat-v2", 400)]), SVC)
    assert big.scale == 1000


def test_the_patch_tests_every_name_and_weight_and_replaces_only_what_moves():
    read = HR.read(httproute([ref("chat-v1", 80), ref("chat-v2", 20)]), SVC)
    assert HR.patch_body(read, {"v1": 80, "v2": 20}) == [
        {"op": "test", "path": "/spec/rules/0/backendRefs/0/name", "value": "chat-v1"},
        {"op": "test", "path": "/spec/rules/0/backendRefs/0/weight", "value": 80},
        {"op": "test", "path": "/spec/rules/0/backendRefs/1/name", "value": "chat-v2"},
        {"op": "test", "path": "/spec/rules/0/backendRefs/1/weight", "value": 20}]
    ops = HR.patch_body(read, {"v1": 50, "v2": 50})
    assert {"op": "replace", "path": "/spec/rules/0/backendRefs/0/weight", "value": 50} in ops
    assert {"op": "replace", "path": "/spec/rules/0/backendRefs/1/weight", "value": 50} in ops


def test_an_absent_weight_is_added_with_no_test_of_its_value():
    read = HR.read(httproute([ref("chat-v1"), ref("chat-v2", None)]), SVC)
    assert HR.patch_body(read, {"v1": 70, "v2": 30}) == [
        {"op": "test", "path": "/spec/rules/0/backendRefs/0/name", "value": "chat-v1"},
        {"op": "add", "path": "/spec/rules/0/backendRefs/0/weight", "value": 70},
        {"op": "test", "path": "/spec/rules/0/backendRefs/1/name", "value": "chat-v2"},
        {"op": "add", "path": "/spec/rules/0/backendRefs/1/weight", "value": 30}]


def test_a_weight_written_as_a_quantity_is_rewritten_as_an_integer_even_when_equal():
    split = {"metadata": {"namespace": "llm", "name": "chat"},
             "spec": {"backends": [{"service": "chat-v1", "weight": "500m"}, {"service": "chat-v2", "weight": 0}]}}
    ts = InferenceService("llm", "chat", SVC.versions, router_kind="TrafficSplit")
    read = TS.read(split, ts)
    assert read.weights == {"v1": 1, "v2": 0}  # rounded up, as Kubernetes reads a quantity as an integer
    assert read.warnings == ["weights not written as whole numbers (v1 '500m') are read rounded up, as Kubernetes "
                             "reads a quantity as an integer; the shift writes whole numbers"]
    ops = TS.patch_body(read, {"v1": 1, "v2": 100})
    assert {"op": "test", "path": "/spec/backends/0/weight", "value": "500m"} in ops
    assert {"op": "replace", "path": "/spec/backends/0/weight", "value": 1} in ops  # "500m" becomes 1, an int
    assert {"op": "test", "path": "/spec/backends/0/service", "value": "chat-v1"} in ops


def test_a_virtualservice_destination_is_tested_whole_and_matched_by_host_or_subset():
    vs = {"metadata": {"namespace": "llm", "name": "chat"}, "spec": {"http": [{"route": [
        {"destination": {"host": "chat.llm.svc.cluster.local", "subset": "v1"}, "weight": 90},
        {"destination": {"host": "chat", "subset": "v2"}, "weight": 10}]}]}}
    svc = InferenceService("llm", "chat", (ServiceVersion("v1", backend="chat"), ServiceVersion("v2")),
                           router_kind="VirtualService")
    read = VS.read(vs, svc)
    assert read.errors == [] and read.weights == {"v1": 90, "v2": 10}
    ops = VS.patch_body(read, {"v1": 50, "v2": 50})
    assert ops[0] == {"op": "test", "path": "/spec/http/0/route/0/destination",
                      "value": {"host": "chat.llm.svc.cluster.local", "subset": "v1"}}
    wrong_host = {"metadata": {}, "spec": {"http": [{"route": [
        {"destination": {"host": "other", "subset": "v1"}}, {"destination": {"host": "chat", "subset": "v2"}}]}]}}
    assert VS.read(wrong_host, svc).errors  # v1's subset on another host is not v1
    by_host = {"metadata": {}, "spec": {"http": [{"route": [
        {"destination": {"host": "chat-v1.llm"}}, {"destination": {"host": "chat-v2"}}]}]}}
    read = VS.read(by_host, SVC)
    assert read.weights == {"v1": None, "v2": None} and read.scale == 100  # Istio's even split: unknown weights


def test_weight_limits_per_router():
    assert HR.validate({"a": 1_000_000, "b": 0}) == []
    assert HR.validate({"a": 1_000_001, "b": 0}) == ["a: weight 1000001 is above HTTPRoute's maximum 1,000,000"]
    assert HR.validate({"a": -1, "b": 5}) == ["a: weight -1 is negative"]
    assert HR.validate({"a": 0, "b": 0}) == ["every weight would be 0: Gateway API answers 500 to every request of the rule"]
    assert VS.validate({"a": 0, "b": 0}) == [
        "every weight would be 0: Istio rejects a route whose destinations' weights add up to 0"]
    assert TS.validate({"a": 0, "b": 0}) == ["every weight would be 0: no backend would get traffic"]
    assert TS.validate({"a": 5_000_000, "b": 0}) == []  # no maximum
    assert HR.validate({}) == []


def test_session_persistence_is_warned_about():
    route = httproute([ref("chat-v1", 1), ref("chat-v2", 1)])
    assert HR.warnings(route) == []
    route["spec"]["rules"][0]["sessionPersistence"] = {"type": "Cookie"}
    assert HR.warnings(route) == ["sessionPersistence is set: clients with a session cookie or header keep their "
                                  "backend, even at weight 0"]
    assert VS.warnings(route) == [] and TS.warnings(route) == []


@pytest.mark.parametrize("raw, value", [(5, 5), (0, 0), (2.0, 2), (7.9, 8), ("42", 42), (" 9 ", 9), ("2.5", 3),
                                        ("1500m", 2), ("999m", 1), ("1", 1), ("1k", 1000), ("-1500m", -2),
                                        (True, None), (False, None), (None, None), ("x", None), (float("nan"), None),
                                        ("1e999", None), (float("inf"), None), ("m", None), ({"a": 1}, None)])
def test_a_weight_as_an_integer_is_a_quantity_rounded_up_or_unknown(raw, value):
    """Quantity.Value()'s rule: rounded up, away from zero (a backend given any weight never reads as 0);
    what is no quantity is unknown, never 0."""
    assert route_weight(raw) == value


def test_json_pointers_escape_tilde_and_slash():
    assert _ptr("spec", "rules", 0, "a/b~c") == "/spec/rules/0/a~1b~0c"
    assert _ptr() == ""


def test_a_route_is_named_by_namespace_and_name():
    assert route_name({"metadata": {"namespace": "llm", "name": "chat"}}) == "llm/chat"
    assert route_name({}) == "/"


def test_a_route_written_by_the_rollouts_controller_is_argos():
    assert managed_by_argo({"metadata": {"managedFields": [{"manager": "kubectl"}, {"manager": "rollouts-controller"}]}})
    assert not managed_by_argo({"metadata": {"managedFields": [{"manager": "kubectl"}]}})
    assert not managed_by_argo({"metadata": {}}) and not managed_by_argo({})


def test_a_route_missing_two_versions_names_both():
    three = InferenceService("llm", "chat", (*SVC.versions, ServiceVersion("v3", backend="chat-v3"),
                                             ServiceVersion("v4", backend="chat-v4")), router_kind="HTTPRoute")
    read = HR.read(httproute([ref("chat-v1", 1), ref("chat-v2", 1)]), three)
    assert read.errors == ["HTTPRoute llm/chat routes to no backend of v3, v4"]


def test_a_rule_that_also_sends_elsewhere_is_noted_with_every_version_it_reaches():
    route = httproute([ref("chat-v1", 80), ref("chat-v2", 20)], [ref("chat-v1", 1), ref("chat-v2", 1), ref("other", 1)])
    assert HR.read(route, SVC).notes == ["rule 1 sends its matches to v1, v2; left as is"]


def test_a_virtualservice_names_its_other_http_routes():
    vs = {"metadata": {"namespace": "llm", "name": "chat"}, "spec": {"http": [
        {"route": [{"destination": {"host": "chat-v1"}, "weight": 50}, {"destination": {"host": "chat-v2"}, "weight": 50}]},
        {"route": [{"destination": {"host": "chat-v2"}, "weight": 100}]}]}}
    assert VS.read(vs, SVC).notes == ["http route 1 sends its matches to v2; left as is"]


def test_a_milli_quantity_is_thousandths():
    assert route_weight("2000m") == 2 and route_weight("999999m") == 1000 and route_weight("1m") == 1


def test_the_reader_and_the_shift_read_a_weight_alike():
    """One parser: the snapshot's weights (the reader's record) are the shift's current weights."""
    from gputui.vocabulary.router_kinds import ROUTER_KINDS

    split = {"metadata": {"namespace": "llm", "name": "chat"},
             "spec": {"backends": [{"service": "chat-v1", "weight": "1500m"}, {"service": "chat-v2", "weight": "x"}]}}
    ts = InferenceService("llm", "chat", SVC.versions, router_kind="TrafficSplit")
    record = ROUTER_KINDS["TrafficSplit"].record(split)
    assert [b.weight for b in record.backends] == [2, None]
    assert TS.read(split, ts).weights == {"v1": 2, "v2": None}


def test_a_shift_is_not_planned_from_a_weight_that_is_no_number():
    """Fail closed: a version whose weight is unknown was planned as getting 0% (shares() counted it so)."""
    from gputui.ops.traffic.plans import plan_shift
    from gputui.snapshot import ClusterSnapshot

    split = {"metadata": {"namespace": "llm", "name": "chat"},
             "spec": {"backends": [{"service": "chat-v1", "weight": "90"}, {"service": "chat-v2", "weight": "x"}]}}
    ts = InferenceService("llm", "chat", SVC.versions, router_kind="TrafficSplit")
    plan = plan_shift(ClusterSnapshot(0.0, "t", services=(ts,)), "llm/chat", {"v1": 50}, route=split)
    assert plan.errors and "the weight of v2 on the TrafficSplit is no number" in plan.errors[0]
    ok = {**split, "spec": {"backends": [{"service": "chat-v1", "weight": "90"}, {"service": "chat-v2", "weight": "10"}]}}
    assert not plan_shift(ClusterSnapshot(0.0, "t", services=(ts,)), "llm/chat", {"v1": 50}, route=ok).errors


THREE = InferenceService("llm", "chat", (*SVC.versions, ServiceVersion("v3", backend="chat-v3")), router_kind="TrafficSplit")


def split_of(*weights) -> dict:
    return {"metadata": {"namespace": "llm", "name": "chat"},
            "spec": {"backends": [{"service": f"chat-v{i}", "weight": w} for i, w in enumerate(weights, 1)]}}


def test_weights_no_whole_number_and_no_number_at_all_are_each_warned_about_naming_every_one():
    both = TS.read(split_of("500m", 10, "x"), THREE)
    assert both.weights == {"v1": 1, "v2": 10, "v3": None}
    assert both.warnings == [
        "weights not written as whole numbers (v1 '500m') are read rounded up, as Kubernetes reads a quantity as an "
        "integer; the shift writes whole numbers",
        "weights that are no number (v3 'x') are unknown; the shift writes whole numbers"]
    rounded = TS.read(split_of("500m", "1500m", 10), THREE)
    assert rounded.warnings == ["weights not written as whole numbers (v1 '500m', v2 '1500m') are read rounded up, as "
                                "Kubernetes reads a quantity as an integer; the shift writes whole numbers"]
    unknown = TS.read(split_of(10, "x", "y"), THREE)
    assert unknown.warnings == ["weights that are no number (v2 'x', v3 'y') are unknown; the shift writes whole numbers"]
    assert unknown.weights == {"v1": 10, "v2": None, "v3": None}


def test_an_entry_that_is_no_object_is_no_backend_of_any_version():
    read = HR.read(httproute([ref("chat-v1", 50), "chat-v2"]), SVC)
    assert read.errors == ["HTTPRoute llm/chat has no rule that splits traffic between v1, v2"]


def test_a_kind_without_weights_has_no_adapter_and_is_named_in_the_error():
    with pytest.raises(KeyError) as missing:
        ADAPTERS["Rollout"]
    assert missing.value.args == ("Rollout",)


def test_the_adapters_are_every_router_kind_that_holds_weights():
    assert sorted(ADAPTERS) == ["HTTPRoute", "TrafficSplit", "VirtualService"]  # Argo's Rollout holds none
