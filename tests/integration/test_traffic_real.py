"""Traffic shifts patch real HTTPRoute and VirtualService objects on the real apiserver."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from gputui.backends.kube_backend import live_backend
from gputui.ops.audit import AuditLog
from gputui.ops.traffic import apply_shift, plan_shift, read_route, served_api_versions
from gputui.ops.traffic.vocabulary import ShiftError
from gputui.settings import Settings
from tests.support.audit_lines import written
from tests.support.crds import create_custom, get_custom, install_crd
from tests.support.op_context import write_context
from tests.support.procs import wait_until
from tests.support.workloads import deployment

TNS = "t-traffic"


def _deployment(name, service, version, label_key="app.kubernetes.io/version"):
    body = deployment(name, service, version, 1, 1, ns=TNS)
    if label_key != "app.kubernetes.io/version":
        for labels in (body["spec"]["selector"]["matchLabels"], body["spec"]["template"]["metadata"]["labels"]):
            labels[label_key] = version
    return body


@pytest.fixture(scope="module")
def routes(cluster, fake_kubelet):
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    install_crd(api, "httproutes")
    install_crd(api, "virtualservices")
    core.create_namespace({"metadata": {"name": TNS}})
    for version in ("v1", "v2"):
        apps.create_namespaced_deployment(TNS, _deployment(f"chat-{version}", "chat", version))
        core.create_namespaced_service(TNS, {"metadata": {"name": f"chat-{version}"}, "spec": {
            "selector": {"app.kubernetes.io/name": "chat", "app.kubernetes.io/version": version}, "ports": [{"port": 80}]}})
    create_custom(api, "httproutes", TNS, {"metadata": {"name": "chat"}, "spec": {"rules": [
        {"matches": [{"headers": [{"name": "x-canary", "value": "1"}]}], "backendRefs": [{"name": "chat-v2", "port": 80}]},
        {"backendRefs": [{"name": "chat-v1", "port": 80, "weight": 90}, {"name": "chat-v2", "port": 80, "weight": 10}]}]}})
    for subset in ("stable", "canary"):
        apps.create_namespaced_deployment(TNS, _deployment(f"embed-{subset}", "embed", subset, label_key="version"))
    core.create_namespaced_service(TNS, {"metadata": {"name": "embed"}, "spec": {
        "selector": {"app.kubernetes.io/name": "embed"}, "ports": [{"port": 80}]}})
    create_custom(api, "virtualservices", TNS, {"metadata": {"name": "embed"}, "spec": {"hosts": ["embed"], "http": [{"route": [
        {"destination": {"host": "embed", "subset": "stable"}, "weight": 80},
        {"destination": {"host": "embed", "subset": "canary"}, "weight": 20}]}]}})

    def ready():
        deps = apps.list_namespaced_deployment(TNS).items
        return len(deps) == 4 and all((d.status.ready_replicas or 0) == 1 for d in deps)

    wait_until(ready, 60, what="route backends ready")
    yield api
    core.delete_namespace(TNS)


def _backend(cluster):
    return live_backend(Settings(kubeconfig=str(cluster.admin_kubeconfig)))


def _shift(backend, key, targets, tmp_path):
    snap = backend.reader.snapshot()
    plan = plan_shift(snap, key, targets, api_versions=served_api_versions(backend))
    route = read_route(plan, backend.writer)
    plan = plan_shift(snap, key, targets, route=route, api_versions=served_api_versions(backend))
    # One pod per version here: past the capacity rule (its own tests are in tests/unit/test_traffic.py).
    audit = AuditLog(tmp_path / "audit.jsonl", backend.writer.identity, backend.context)
    return apply_shift(plan, write_context(backend.writer, audit), force=True)


def test_httproute_weights_patched_and_only_the_split_rule(cluster, routes, tmp_path):
    backend = _backend(cluster)
    try:
        assert backend.may("shift")
        svc = wait_until(lambda: backend.reader.snapshot().service(f"{TNS}/chat"), 10, what="service")
        assert [(v.name, v.weight) for v in svc.versions] == [("v1", 90), ("v2", 10)]
        header_rule = get_custom(routes, "httproutes", TNS, "chat")["spec"]["rules"][0]
        # The real CRD's defaults, written by the apiserver: weight 1, the core group, kind Service.
        assert {k: header_rule["backendRefs"][0][k] for k in ("weight", "group", "kind")} == \
            {"weight": 1, "group": "", "kind": "Service"}
        mark = cluster.audit_mark()
        _shift(backend, f"{TNS}/chat", {"v1": 30, "v2": 70}, tmp_path)
        route = get_custom(routes, "httproutes", TNS, "chat")
        assert [b.get("weight") for b in route["spec"]["rules"][1]["backendRefs"]] == [30, 70]
        assert route["spec"]["rules"][0] == header_rule  # the header rule is untouched
        patches = cluster.wait_for_audit("admin", since=mark, verb="patch", resource="httproutes", code=200)
        assert len(patches) == 1
        wait_until(lambda: [v.weight for v in backend.reader.snapshot().service(f"{TNS}/chat").versions] == [30, 70],
                   5, what="new weights in the snapshot")
        assert '"action": "shift"' in (tmp_path / "audit.jsonl").read_text()
    finally:
        backend.close()


def test_virtualservice_weights_patched(cluster, routes, tmp_path):
    backend = _backend(cluster)
    try:
        svc = wait_until(lambda: backend.reader.snapshot().service(f"{TNS}/embed"), 10, what="service")
        assert [(v.name, v.weight) for v in svc.versions] == [("stable", 80), ("canary", 20)]
        _shift(backend, f"{TNS}/embed", {"canary": 50}, tmp_path)
        vs = get_custom(routes, "virtualservices", TNS, "embed")
        assert [r["weight"] for r in vs["spec"]["http"][0]["route"]] == [50, 50]
    finally:
        backend.close()


def test_concurrent_edit_makes_the_patch_fail_whole_and_says_so(cluster, routes, tmp_path):
    backend = _backend(cluster)
    try:
        wait_until(lambda: backend.reader.snapshot().service(f"{TNS}/chat"), 10, what="service")
        snap = backend.reader.snapshot()
        plan = plan_shift(snap, f"{TNS}/chat", {"v2": 100}, api_versions=served_api_versions(backend))
        route = read_route(plan, backend.writer)
        plan = plan_shift(snap, f"{TNS}/chat", {"v2": 100}, route=route, api_versions=served_api_versions(backend))
        # Someone else moves the weights after we read them.
        other = _backend(cluster)
        other.writer.patch_object("gateway.networking.k8s.io", "v1", "httproutes", TNS, "chat",
                                  [{"op": "replace", "path": "/spec/rules/1/backendRefs/0/weight", "value": 55}], "json")
        other.close()
        mark = cluster.audit_mark()
        audit = AuditLog(tmp_path / "audit.jsonl", backend.writer.identity, backend.context)
        with pytest.raises(ShiftError, match="changed since it was read") as err:
            apply_shift(plan, write_context(backend.writer, audit), force=True)
        assert "look again and retry" in str(err.value)
        # The apiserver's own answer, as its audit log has it: our patch refused whole (422).
        cluster.wait_for_audit("admin", since=mark, verb="patch", resource="httproutes", code=422)
        (entry,) = written(tmp_path / "audit.jsonl")
        assert entry["action"] == "shift" and "changed since it was read" in entry["result"]
        route = get_custom(routes, "httproutes", TNS, "chat")
        assert route["spec"]["rules"][1]["backendRefs"][0]["weight"] == 55  # nothing of ours was applied
    finally:
        backend.close()


def test_istio_subsets_find_their_pods_through_the_destinationrule(cluster, routes):
    """Subsets named blue and green select pods by a `track` label, as their DestinationRule says: the
    versions find their Deployments and the pods their service and version."""
    core, apps = client.CoreV1Api(routes), client.AppsV1Api(routes)
    install_crd(routes, "destinationrules")
    for track in ("blue", "green"):
        body = _deployment(f"rerank-{track}", "rerank", track, label_key="track")
        apps.create_namespaced_deployment(TNS, body)
    core.create_namespaced_service(TNS, {"metadata": {"name": "rerank"}, "spec": {
        "selector": {"app.kubernetes.io/name": "rerank"}, "ports": [{"port": 80}]}})
    create_custom(routes, "destinationrules", TNS, {"metadata": {"name": "rerank"}, "spec": {
        "host": f"rerank.{TNS}.svc.cluster.local",
        "subsets": [{"name": "blue", "labels": {"track": "blue"}}, {"name": "green", "labels": {"track": "green"}}]}})
    create_custom(routes, "virtualservices", TNS, {"metadata": {"name": "rerank"}, "spec": {"hosts": ["rerank"], "http": [
        {"route": [{"destination": {"host": "rerank", "subset": "blue"}, "weight": 70},
                   {"destination": {"host": "rerank", "subset": "green"}, "weight": 30}]}]}})
    backend = _backend(cluster)
    try:
        def joined():
            snap = backend.reader.snapshot()
            svc = snap.service(f"{TNS}/rerank")
            pods = [p for p in snap.pods if p.namespace == TNS and p.name.startswith("rerank-")]
            return (snap, svc) if svc and len(pods) == 2 and all(p.service for p in pods) else None

        snap, svc = wait_until(joined, 60, what="rerank's pods joined to their subsets")
        assert [(v.name, v.weight, v.workload) for v in svc.versions] == [
            ("blue", 70, "rerank-blue"), ("green", 30, "rerank-green")]
        assert sorted((p.name.rsplit("-", 2)[0], p.service, p.version) for p in snap.pods
                      if p.namespace == TNS and p.name.startswith("rerank-")) == [
            ("rerank-blue", "rerank", "blue"), ("rerank-green", "rerank", "green")]
    finally:
        backend.close()


def test_the_real_crd_defaults_and_validation_reach_the_operator(cluster, routes, tmp_path):
    """Backends without a weight get the CRD's default (1): gputui reads an even split, not unknown or 0. A
    weight beyond the CRD's maximum is refused by the apiserver's schema, in its words, on one line."""
    from gputui.backends.base import BackendError

    for version in ("v1", "v2"):
        client.CoreV1Api(routes).create_namespaced_service(TNS, {"metadata": {"name": f"even-{version}"}, "spec": {
            "selector": {"app.kubernetes.io/name": "chat", "app.kubernetes.io/version": version},
            "ports": [{"port": 80}]}})
    create_custom(routes, "httproutes", TNS, {"metadata": {"name": "even"}, "spec": {"rules": [
        {"backendRefs": [{"name": "even-v1", "port": 80}, {"name": "even-v2", "port": 80}]}]}})
    assert [b["weight"] for b in get_custom(routes, "httproutes", TNS, "even")["spec"]["rules"][0]["backendRefs"]] \
        == [1, 1]
    backend = _backend(cluster)
    try:
        with pytest.raises(BackendError) as err:
            backend.writer.patch_object("gateway.networking.k8s.io", "v1", "httproutes", TNS, "even",
                                        [{"op": "replace", "path": "/spec/rules/0/backendRefs/0/weight",
                                          "value": 2_000_000}], "json")
        line = str(err.value)
        assert "\n" not in line and "weight" in line and "1000000" in line, line
        assert "changed since it was read" not in line  # a schema violation names its field: not a conflict
    finally:
        backend.close()


def test_trafficsplit_weights_patched_on_its_real_crd(cluster, routes, tmp_path):
    """SMI's TrafficSplit (legacy, v1alpha4: the only version its CRD serves): read, shifted, audited."""
    core, apps = client.CoreV1Api(routes), client.AppsV1Api(routes)
    install_crd(routes, "trafficsplits")
    for version in ("v1", "v2"):
        apps.create_namespaced_deployment(TNS, _deployment(f"split-{version}", "split", version))
        core.create_namespaced_service(TNS, {"metadata": {"name": f"split-{version}"}, "spec": {
            "selector": {"app.kubernetes.io/name": "split", "app.kubernetes.io/version": version},
            "ports": [{"port": 80}]}})
    create_custom(routes, "trafficsplits", TNS, {"metadata": {"name": "split"}, "spec": {"service": "split", "backends": [
        {"service": "split-v1", "weight": 90}, {"service": "split-v2", "weight": 10}]}})
    backend = _backend(cluster)
    try:
        svc = wait_until(lambda: backend.reader.snapshot().service(f"{TNS}/split"), 15, what="the split service")
        assert svc.router_kind == "TrafficSplit" and [(v.name, v.weight) for v in svc.versions] == [("v1", 90), ("v2", 10)]
        mark = cluster.audit_mark()
        _shift(backend, f"{TNS}/split", {"v2": 40}, tmp_path)
        split = get_custom(routes, "trafficsplits", TNS, "split")
        assert [(b["service"], b["weight"]) for b in split["spec"]["backends"]] == [("split-v1", 60), ("split-v2", 40)]
        (patch,) = cluster.wait_for_audit("admin", since=mark, verb="patch", resource="trafficsplits", code=200)
        assert patch["objectRef"]["apiVersion"] == "v1alpha4"  # the version discovery found served
    finally:
        backend.close()


def test_services_lists_each_routed_service_as_shift_names_it(cluster, routes, tmp_path):
    from tests.support.gputui_cli import run

    done = run("services", "--kubeconfig", str(cluster.admin_kubeconfig), "-o", "json", home=tmp_path)
    assert done.returncode == 0, done.stderr
    found = {s["service"]: s for s in json.loads(done.stdout)}
    chat, embed = found[f"{TNS}/chat"], found[f"{TNS}/embed"]
    assert chat["simulated"] is False and chat["router"] == {"kind": "HTTPRoute", "name": "chat"}
    assert [v["name"] for v in chat["versions"]] == ["v1", "v2"] and sum(v["share_pct"] for v in chat["versions"]) == 100
    assert embed["router"]["kind"] == "VirtualService" and [v["name"] for v in embed["versions"]] == ["stable", "canary"]
    assert all(len(v["pods"]) == 1 and v["pods"][0]["node"] for v in chat["versions"])  # one replica each, placed
