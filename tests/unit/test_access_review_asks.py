"""What the access reviews ask of the router kinds served (gputui.backends.kube_access): one review per kind of
the table, not per API group, and a kind whose controller owns the weights asked through its status too."""

from __future__ import annotations

import pytest

from gputui.backends import kube_access
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
