"""Whether a pod can be taken out of rotation, worked out from the real objects: a Service that selects on a
label its Deployment does not (a per-pod switch) and one that selects only on the Deployment's own labels (no
switch: new sessions keep reaching the pod while a drain waits on it). `gputui check` names the second with
the commands that fix it; a drain's plan says so before anything is written."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from gputui.policy.rotation import RotationState, rotation_of
from tests.support.gputui_cli import run
from tests.support.workloads import backend_for, deployment, pool, running

NS = "t-rotation"


@pytest.fixture(scope="module")
def served(cluster, fake_kubelet):
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    node, _spare = pool(fake_kubelet, core, "rot")
    core.create_namespace({"metadata": {"name": NS}})
    for service, serving in (("switch", True), ("stuck", False)):
        body = deployment(f"{service}-llm", service, "v1", 1, 1, ns=NS, pool="rot")
        selector = {"app.kubernetes.io/name": service}
        if serving:  # in the template and the Service's selector, not in the Deployment's
            template = body["spec"]["template"]["metadata"]
            template["labels"] = {**template["labels"], "serving": "true"}  # a copy: the selector shares the dict
            selector["serving"] = "true"
        apps.create_namespaced_deployment(NS, body)
        core.create_namespaced_service(NS, {"metadata": {"name": service}, "spec": {
            "selector": selector, "ports": [{"port": 8000}]}})
    running(core, NS, 2, node)
    yield node
    core.delete_namespace(NS)


def test_the_switch_label_is_found_where_one_exists_and_its_absence_named_where_not(served, cluster, prometheus):
    backend = backend_for(cluster, prometheus)
    try:
        snap = backend.reader.snapshot()
    finally:
        backend.close()
    by_service = {p.service: p for p in snap.pods if p.namespace == NS}
    switch = rotation_of(by_service["switch"], snap)
    assert switch.state is RotationState.SWITCH and switch.labels == ("serving",), switch.describe()
    stuck = rotation_of(by_service["stuck"], snap)
    assert stuck.state is RotationState.NO_SWITCH, stuck.describe()
    assert stuck.why == (f"Service {NS}/stuck selects it only on app.kubernetes.io/name, "
                         f"which Deployment {NS}/stuck-llm selects on too")


def test_check_and_the_drain_plan_say_where_new_sessions_keep_arriving(served, cluster, prometheus, tmp_path):
    common = ("--kubeconfig", str(cluster.admin_kubeconfig), "--prometheus", prometheus.url)
    out = run("check", "--only", "services", "-o", "json", *common, home=tmp_path)
    found = {c["id"]: c for c in json.loads(out.stdout)["checks"]}["services.rotation"]
    assert found["status"] == "warn" and f"{NS}/stuck" in found["summary"] and f"{NS}/switch" not in found["summary"]
    assert "patch deployment/stuck-llm" in found["fix"]
    plan = run("drain", served, "--dry-run", *common, home=tmp_path)
    text = plan.stdout + plan.stderr
    assert f"new sessions keep arriving: no label can take it out of rotation: Service {NS}/stuck" in text, text
    assert f"no label can take it out of rotation: Service {NS}/switch" not in text
    # The switch exists, but the Service's only pod stays in: taken out, nothing would serve it.
    assert f"kept in rotation for capacity, as Service {NS}/switch would have no pod serving" in text, text
