"""A router kind added to gputui's table, and nowhere else, is joined: discovered, read into the snapshot and
shifted on the real apiserver. The kind is Gateway API's GRPCRoute, from its real CRD (the pinned module that
publishes HTTPRoute's), whose row only this test adds: it shares its API group with HTTPRoute, so discovery, the
caches and the patch must tell kinds apart, not groups."""

from __future__ import annotations

import pytest
from kubernetes import client

from gputui.backends.kube_backend import live_backend
from gputui.ops.audit import AuditLog
from gputui.ops.traffic import apply_shift, plan_shift, read_route, served_api_versions
from gputui.settings import Settings
from gputui.vocabulary.router_kinds import HTTPROUTE_MAX_WEIGHT, ROUTER_KINDS, RouterKind, WeightedBackends, backend_ref
from tests.support.crds import create_custom, get_custom, install_crd
from tests.support.op_context import write_context
from tests.support.procs import wait_until
from tests.support.workloads import deployment

NS = "t-router-kinds"

# The whole of what a new router kind needs in gputui: its row (here added by the test alone).
GRPC_ROUTE = RouterKind(
    "GRPCRoute", "gateway.networking.k8s.io", ("v1",), "grpcroutes",
    WeightedBackends("rules", "backendRefs", "name", backend_ref, absent=1),  # Gateway API: absent is 1
    max_weight=HTTPROUTE_MAX_WEIGHT,
)


@pytest.fixture(scope="module")
def routes(cluster, fake_kubelet):
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    install_crd(api, "httproutes")
    install_crd(api, "grpcroutes")
    core.create_namespace({"metadata": {"name": NS}})
    for service in ("rpc", "chat"):
        for version in ("v1", "v2"):
            apps.create_namespaced_deployment(NS, deployment(f"{service}-{version}", service, version, 1, 1, ns=NS))
            core.create_namespaced_service(NS, {"metadata": {"name": f"{service}-{version}"}, "spec": {
                "selector": {"app.kubernetes.io/name": service, "app.kubernetes.io/version": version},
                "ports": [{"port": 80}]}})
    create_custom(api, "grpcroutes", NS, {"metadata": {"name": "rpc"}, "spec": {"rules": [
        {"backendRefs": [{"name": "rpc-v1", "port": 80, "weight": 70}, {"name": "rpc-v2", "port": 80, "weight": 30}]}]}})
    create_custom(api, "httproutes", NS, {"metadata": {"name": "chat"}, "spec": {"rules": [
        {"backendRefs": [{"name": "chat-v1", "port": 80, "weight": 90}, {"name": "chat-v2", "port": 80, "weight": 10}]}]}})

    def ready():
        deps = apps.list_namespaced_deployment(NS).items
        return len(deps) == 4 and all((d.status.ready_replicas or 0) == 1 for d in deps)

    wait_until(ready, 60, what="route backends ready")
    yield api
    core.delete_namespace(NS)


def _backend(cluster):
    return live_backend(Settings(kubeconfig=str(cluster.admin_kubeconfig)))


def _weights(backend, key):
    svc = backend.reader.snapshot().service(key)
    return None if svc is None else (svc.router_kind, [(v.name, v.weight) for v in svc.versions])


def test_a_kind_added_only_to_the_table_is_discovered_read_and_shifted(cluster, routes, monkeypatch, tmp_path):
    monkeypatch.setitem(ROUTER_KINDS, "GRPCRoute", GRPC_ROUTE)
    backend = _backend(cluster)
    try:
        api = served_api_versions(backend)
        assert api["GRPCRoute"] == "v1" and api["HTTPRoute"] == "v1"  # two kinds of one group, both found
        assert wait_until(lambda: _weights(backend, f"{NS}/rpc"), 15, what="the GRPCRoute's service") == \
            ("GRPCRoute", [("v1", 70), ("v2", 30)])
        assert _weights(backend, f"{NS}/chat") == ("HTTPRoute", [("v1", 90), ("v2", 10)])  # its group-mate too

        snap = backend.reader.snapshot()
        plan = plan_shift(snap, f"{NS}/rpc", {"v2": 60}, api_versions=api)
        plan = plan_shift(snap, f"{NS}/rpc", {"v2": 60}, route=read_route(plan, backend.writer), api_versions=api)
        assert plan.patch is not None and plan.patch.path == f"/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/grpcroutes/rpc"
        mark = cluster.audit_mark()
        # One pod per version: past the capacity rule (its own tests are in tests/unit/test_traffic.py).
        audit = AuditLog(tmp_path / "audit.jsonl", backend.writer.identity, backend.context)
        apply_shift(plan, write_context(backend.writer, audit), force=True)
        route = get_custom(routes, "grpcroutes", NS, "rpc")
        assert [(b["name"], b["weight"]) for b in route["spec"]["rules"][0]["backendRefs"]] == [("rpc-v1", 40), ("rpc-v2", 60)]
        (patch,) = cluster.wait_for_audit("admin", since=mark, verb="patch", resource="grpcroutes", code=200)
        assert patch["objectRef"]["name"] == "rpc"
        wait_until(lambda: _weights(backend, f"{NS}/rpc") == ("GRPCRoute", [("v1", 40), ("v2", 60)]), 5,
                   what="the new weights in the snapshot")
        assert '"action": "shift"' in (tmp_path / "audit.jsonl").read_text()
    finally:
        backend.close()


def test_without_its_row_the_kind_is_not_watched_and_its_service_has_no_router(cluster, routes):
    """The control: the same cluster, the table as shipped. The service is only its GPU workloads, no weights."""
    assert "GRPCRoute" not in ROUTER_KINDS
    backend = _backend(cluster)
    try:
        assert "GRPCRoute" not in served_api_versions(backend)
        wait_until(lambda: _weights(backend, f"{NS}/chat"), 15, what="the HTTPRoute's service")
        assert _weights(backend, f"{NS}/rpc") == ("", [("v1", None), ("v2", None)])
    finally:
        backend.close()
