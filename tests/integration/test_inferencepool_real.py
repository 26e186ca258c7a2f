"""InferencePools as a router's backends (Gateway API Inference Extension): an HTTPRoute whose backendRefs are
InferencePools splits traffic between versions like any other route; each pool's selector finds its pods;
a shift patches the pools' weights. The InferencePool CRD here is transcribed from the published API
reference (tests/support/crds/), because its module is not served by this machine's proxy: the HTTPRoute
is the real, fetched CRD."""

from __future__ import annotations

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from gputui.backends.kube_backend import live_backend
from gputui.ops.audit import AuditLog
from gputui.ops.traffic import apply_shift, needs_route, plan_shift, read_route, served_api_versions
from gputui.settings import Settings
from tests.support.crds import create_custom, get_custom, install_crd
from tests.support.op_context import write_context
from tests.support.procs import wait_until
from tests.support.workloads import deployment

NS = "t-pools"
POOL_GROUP = "inference.networking.k8s.io"
TRANSCRIBED = __import__("pathlib").Path(__file__).resolve().parents[1] / "support/crds" / \
    "inferencepools.inference.networking.k8s.io.yaml"


def _install_pool_crd(api) -> None:
    try:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(yaml.safe_load(TRANSCRIBED.read_text()))
    except ApiException as exc:
        if exc.status != 409:
            raise
    custom = client.CustomObjectsApi(api)
    wait_until(lambda: custom.list_cluster_custom_object(POOL_GROUP, "v1", "inferencepools") is not None, 30,
               what="InferencePool served")


@pytest.fixture(scope="module")
def pools(cluster, fake_kubelet):
    api = cluster.harness_client()
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    install_crd(api, "httproutes")
    _install_pool_crd(api)
    fake_kubelet.add_node("pools-a", gpus=8, labels={"gputui.test/pool": "pools"})
    core.create_namespace({"metadata": {"name": NS}})
    for version in ("v1", "v2"):
        apps.create_namespaced_deployment(NS, deployment(f"summ-{version}", "summ", version, 2, 1, ns=NS, pool="pools"))
        custom.create_namespaced_custom_object(POOL_GROUP, "v1", NS, "inferencepools", {
            "apiVersion": f"{POOL_GROUP}/v1", "kind": "InferencePool", "metadata": {"name": f"summ-{version}"},
            "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "summ", "app.kubernetes.io/version": version}},
                     "targetPorts": [{"number": 8000}], "endpointPickerRef": {"name": f"summ-{version}-epp",
                                                                              "port": {"number": 9002}}}})
    create_custom(api, "httproutes", NS, {"metadata": {"name": "summ"}, "spec": {"rules": [{"backendRefs": [
        {"group": POOL_GROUP, "kind": "InferencePool", "name": "summ-v1", "weight": 90},
        {"group": POOL_GROUP, "kind": "InferencePool", "name": "summ-v2", "weight": 10}]}]}})
    yield api
    core.delete_namespace(NS)
    fake_kubelet.remove_node("pools-a")


def test_inferencepool_backends_are_versions_and_their_weights_shift(cluster, pools, tmp_path):
    backend = live_backend(Settings(kubeconfig=str(cluster.admin_kubeconfig)))
    try:
        def joined():
            snap = backend.reader.snapshot()
            svc = snap.service(f"{NS}/summ")
            pods = [p for p in snap.pods if p.namespace == NS and p.phase == "Running"]
            ready = svc is not None and all(v.rollout.ready == 2 for v in svc.versions)  # the Deployments' status too
            return (snap, svc) if ready and len(pods) == 4 and all(p.service == "summ" for p in pods) else None

        snap, svc = wait_until(joined, 60, what="the pools' pods joined to their versions, all ready")
        assert svc.router_kind == "HTTPRoute"
        assert [(v.name, v.weight, v.backend, v.workload) for v in svc.versions] == [
            ("v1", 90, "summ-v1", "summ-v1"), ("v2", 10, "summ-v2", "summ-v2")]
        assert sorted(p.version for p in snap.pods if p.namespace == NS) == ["v1", "v1", "v2", "v2"]
        plan = plan_shift(snap, f"{NS}/summ", {"v2": 40}, api_versions=served_api_versions(backend))
        assert needs_route(plan)
        plan = plan_shift(snap, f"{NS}/summ", {"v2": 40}, route=read_route(plan, backend.writer),
                          api_versions=served_api_versions(backend))
        assert plan.ok and plan.blockers == ()  # 2 of 4 ready pods: 40% is within its share
        apply_shift(plan, write_context(backend.writer, AuditLog(tmp_path / "audit.jsonl", "t", "c")))
        refs = get_custom(pools, "httproutes", NS, "summ")["spec"]["rules"][0]["backendRefs"]
        assert [(r["kind"], r["name"], r["weight"]) for r in refs] == [
            ("InferencePool", "summ-v1", 60), ("InferencePool", "summ-v2", 40)]
    finally:
        backend.close()


def test_the_endpoint_pickers_figures_reach_the_service_screen(cluster, pools, prometheus, inference_exporter):
    """An EPP's pool gauges scraped by the real Prometheus: a version behind a reported pool gets its
    figures, the other one is unknown (never zero), and the service screen says both."""
    from rich.console import Console

    from gputui.present.cells import Palette
    from gputui.present.service_view import service_view
    from tests.support.workloads import backend_for

    inference_exporter.add_picker(NS, "summ-v1-epp-0", {"summ-v1": (0.42, 1.5, 2)})
    backend = backend_for(cluster, prometheus)
    try:
        def read():
            snap = backend.reader.snapshot()
            svc = snap.service(f"{NS}/summ")
            signals = backend.version_signals(snap, svc, 300) if svc else {}
            return (snap, svc, signals) if signals and signals["v1"].picker is not None else None

        snap, svc, signals = wait_until(read, 60, what="the picker's gauges scraped")
        assert [v.pool for v in svc.versions] == [True, True]
        picker = signals["v1"].picker
        assert (picker.kv_cache, picker.queue, picker.ready_pods) == (0.42, 1.5, 2)
        assert signals["v2"].picker is None
        console = Console(width=200, record=True)
        console.print(service_view(snap, svc, signals, "", [], Palette()))
        text = console.export_text()
        assert "v1 (summ-v1): KV cache 42%, queue 1.5, ready pods 2" in text
        assert "v2 (summ-v2): no metrics read" in text
    finally:
        backend.close()
