"""The router table: a kind added to it, and nowhere else, is the demo's too (its route object, the snapshot's
weights, the shift's patch, the apiserver's answers) and the adapters' (the canary's and the TUI's lookups).
Its discovery, reader and patch on the real apiserver: tests/integration/test_router_kinds_real.py."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest

from gputui.backends.demo import demo_backend
from gputui.backends.demo import simulation as demo_simulation
from gputui.ops.audit import AuditLog
from gputui.ops.traffic import ADAPTERS, apply_shift, on_route_now, plan_shift
from gputui.vocabulary.router_demo_forms import DemoForm, DemoRoute
from gputui.vocabulary.router_kinds import (
    HTTPROUTE_MAX_WEIGHT,
    ROUTER_KINDS,
    RouterKind,
    WeightedBackends,
    backend_ref,
    route_kinds,
)
from tests.demo_clock import ManualClock
from tests.support.op_context import write_context

LLAMA = "llm/llama-3-70b-instruct"


def _grpc_spec(route: DemoRoute) -> dict[str, Any]:
    return {"rules": [{"backendRefs": [{"name": b.service, "port": route.port, "weight": b.weight}
                                       for b in route.backends]}]}


def _grpc_validate(obj: Any) -> list[str]:
    refs = [r for rule in obj["spec"]["rules"] for r in rule["backendRefs"]]
    return [f"weight {r['weight']!r} is not an integer" for r in refs if type(r.get("weight", 1)) is not int]


# What a new router kind needs: its row (here added by the test alone), with its demo form.
GRPC_ROUTE = RouterKind(
    "GRPCRoute", "gateway.networking.k8s.io", ("v1",), "grpcroutes",
    WeightedBackends("rules", "backendRefs", "name", backend_ref, absent=1),
    max_weight=HTTPROUTE_MAX_WEIGHT,
    demo=DemoForm(subsets=False, spec=_grpc_spec, status=lambda route: {}, validate=_grpc_validate),
)


@pytest.fixture
def grpc_llama(monkeypatch):
    """The table with GRPCRoute in it, and the demo's llama behind a GRPCRoute."""
    monkeypatch.setitem(ROUTER_KINDS, "GRPCRoute", GRPC_ROUTE)
    shipped = demo_simulation.demo_services

    def services():
        out = shipped()
        for s in out:
            if f"{s.namespace}/{s.name}" == LLAMA:
                s.router_kind = "GRPCRoute"
        return out

    monkeypatch.setattr(demo_simulation, "demo_services", services)
    return demo_backend(clock=ManualClock())


def test_a_kind_added_only_to_the_table_is_read_shifted_and_served_by_the_demo(grpc_llama, tmp_path):
    backend = grpc_llama
    assert "GRPCRoute" in ADAPTERS and ADAPTERS["GRPCRoute"].max_weight == HTTPROUTE_MAX_WEIGHT
    snap = backend.reader.snapshot()
    svc = snap.service(LLAMA)
    assert svc.router_kind == "GRPCRoute" and [(v.name, v.weight) for v in svc.versions] == [("v1", 90), ("v2", 10)]
    plan = on_route_now(partial(plan_shift, snap, LLAMA, {"v2": 30}), backend.writer)
    assert plan.errors == () and plan.patch is not None
    assert plan.patch.path == "/apis/gateway.networking.k8s.io/v1/namespaces/llm/grpcroutes/llama-3-70b-instruct"
    line = apply_shift(plan, write_context(backend.writer, AuditLog(tmp_path / "audit.jsonl", "t", "demo")), force=True)
    assert line == "grpcroute/llm/llama-3-70b-instruct: v1 90% → 70%, v2 10% → 30%"
    route = backend.writer.get_object("gateway.networking.k8s.io", "v1", "grpcroutes", "llm", "llama-3-70b-instruct")
    assert route["kind"] == "GRPCRoute"
    assert [(r["name"], r["weight"]) for r in route["spec"]["rules"][0]["backendRefs"]] == \
        [("llama-3-70b-instruct-v1", 70), ("llama-3-70b-instruct-v2", 30)]
    assert [(v.name, v.weight) for v in backend.reader.snapshot().service(LLAMA).versions] == [("v1", 70), ("v2", 30)]
    entry = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])
    assert entry["target"] == "grpcroute/llm/llama-3-70b-instruct" and entry["result"] == "ok"


def test_the_demo_answers_a_write_to_the_new_kind_with_its_forms_checks(grpc_llama):
    from gputui.backends.demo import DemoApiError

    backend = grpc_llama
    with pytest.raises(DemoApiError, match="weight '9' is not an integer"):
        backend.writer.patch_object("gateway.networking.k8s.io", "v1", "grpcroutes", "llm", "llama-3-70b-instruct",
                                    [{"op": "replace", "path": "/spec/rules/0/backendRefs/0/weight", "value": "9"}],
                                    patch_type="json")
    with pytest.raises(DemoApiError, match="could not find the requested resource"):  # a version it does not speak
        backend.writer.get_object("gateway.networking.k8s.io", "v1beta1", "grpcroutes", "llm", "llama-3-70b-instruct")


def test_without_its_row_the_kind_is_nobodys():
    assert "GRPCRoute" not in ADAPTERS and all(k.kind != "GRPCRoute" for k in route_kinds())
    with pytest.raises(KeyError):
        ADAPTERS["GRPCRoute"]
    with pytest.raises(KeyError):  # a Rollout's weights are its controller's: no route adapter
        ADAPTERS["Rollout"]


def test_every_route_kind_has_its_own_plural():
    """The live reader keeps one watch cache per plural: two kinds under one plural would share it."""
    plurals = [k.plural for k in ROUTER_KINDS.values()]
    assert len(set(plurals)) == len(plurals)
