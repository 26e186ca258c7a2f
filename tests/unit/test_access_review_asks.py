"""What the access reviews ask of the router kinds served (gputui.backends.kube_access): one review per kind of
the table, not per API group, and a kind whose controller owns the weights asked through its status too."""

from __future__ import annotations

import pytest

from gputui.backends import kube_access
from gputui.backends.base import BackendError
from gputui.vocabulary.router_kinds import ROUTER_KINDS, RouterKind, WeightedBackends, backend_ref


@pytest.fixture
def asked(monkeypatch):
    seen: list[dict] = []

    def allowed(conn, **attrs):
        seen.append(attrs)
        return attrs.get("resource") != "grpcroutes"  # the identity may patch every route kind but this one

    monkeypatch.setattr(kube_access, "allowed", allowed)
    return seen


def test_two_kinds_of_one_group_are_two_reviews_and_a_denied_one_is_named(asked, monkeypatch):
    """Before, the reviews were keyed by API group: GRPCRoute, of HTTPRoute's group, was never asked, so a shift
    the identity may not make on it was offered as allowed."""
    monkeypatch.setitem(ROUTER_KINDS, "GRPCRoute", RouterKind(
        "GRPCRoute", "gateway.networking.k8s.io", ("v1",), "grpcroutes",
        WeightedBackends("rules", "backendRefs", "name", backend_ref, absent=1)))
    permissions, unknown, words = kube_access.access_reviews(
        object(), {"HTTPRoute": "v1", "GRPCRoute": "v1", "Rollout": "v1alpha1"}, None)
    routes = [(a["resource"], a.get("subresource", "")) for a in asked if a["verb"] == "patch"
              and a.get("group") in ("gateway.networking.k8s.io", "argoproj.io")]
    assert sorted(routes) == [("grpcroutes", ""), ("httproutes", ""), ("rollouts", ""), ("rollouts", "status")]
    assert permissions["shift"] is False and "shift" not in unknown
    assert "grpcroutes" in words["shift"] and "httproutes" not in words["shift"]


def test_a_requestor_drains_writes_are_reviewed_in_its_namespace_and_a_denied_one_named(monkeypatch):
    """Before, nothing reviewed NodeMaintenance: a role without `delete nodemaintenances` let `drain --via
    nodemaintenance` and the uncordon that withdraws it reach the apiserver's forbidden answer (exit 1), where
    every other verb the role lacks is named before any write (exit 2)."""
    seen: list[dict] = []

    def allowed(conn, **attrs):
        seen.append(attrs)
        return not (attrs["resource"] == "nodemaintenances" and attrs["verb"] == "delete")

    monkeypatch.setattr(kube_access, "allowed", allowed)
    permissions, unknown, words = kube_access.access_reviews(object(), {}, None, "maint")
    asked = [a for a in seen if a["resource"] == "nodemaintenances"]
    assert asked == [{"verb": v, "resource": "nodemaintenances", "group": "maintenance.nvidia.com",
                      "namespace": "maint"} for v in ("create", "delete")]
    assert permissions["nodemaintenance_create"] is True and permissions["nodemaintenance_delete"] is False
    assert words["nodemaintenance_delete"] == "delete nodemaintenances (maintenance.nvidia.com) in namespace maint"
    assert unknown == {}


def test_no_requestor_namespace_no_nodemaintenance_review_and_failed_discovery_leaves_them_unknown(asked):
    kube_access.access_reviews(object(), {}, None, "")
    assert not [a for a in asked if a["resource"] == "nodemaintenances"]
    permissions, unknown, _ = kube_access.access_reviews(object(), {}, BackendError("503"), "maint")
    assert "nodemaintenance_create" not in permissions and "503" in unknown["nodemaintenance_create"]
    assert not [a for a in asked if a["resource"] == "nodemaintenances"]
