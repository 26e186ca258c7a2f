"""A drain as the maintenance-operator's requestor (issue 40 item 4) on the real control plane, with the
NodeMaintenance CRD generated from the operator's API module (scripts/fetch-crds.py) and the operator's reconcile
played step for step as its v0.3.0 controller does it (tests.support.maintenance_operator: its main module is
refused by the proxy, so it cannot be built here). Sessions are routed by the real EndpointSlices
(tests.support.traffic) and counted by the real Prometheus; none is set by hand.

`gputui drain NODE --via nodemaintenance` creates a NodeMaintenance (requestorID gputui.io) and cordons nothing
itself. While another requestor's maintenance holds the operator's one slot, its request stays Pending and nothing
on the node moves. Given the slot, the operator cordons, and gputui's session-aware wait runs inside the operator's
WaitForPodCompletion: the pod leaves rotation, its sessions end, then it is evicted; the operator moves on to Ready
and gputui calls the drain done. No session is cut. `gputui uncordon NODE` then deletes the request, and the
operator gives the node back."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from tests.support.crds import create_custom, install_crd, uninstall_crd
from tests.support.gputui_cli import read_until, run, start_drain
from tests.support.maintenance_operator import GROUP, PLURAL, VERSION, MaintenanceOperator, phase_of
from tests.support.procs import wait_until
from tests.support.traffic import Durations, TrafficGenerator
from tests.support.workloads import ready_pods, served_deployment, service_for

NS = "t-nm-drain"
MAINT_NS = "t-nm-requests"
NODE, OTHER = "nmd-node", "nmd-other"
REQUEST = f"gputui-{NODE}"


@pytest.fixture(scope="module")
def served(cluster, fake_kubelet, prometheus):
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    install_crd(api, "nodemaintenances")
    for ns in (NS, MAINT_NS):
        core.create_namespace({"metadata": {"name": ns}})
    fake_kubelet.add_node(NODE, gpus=8, labels={"gputui.test/pool": NODE})
    fake_kubelet.add_node(OTHER, gpus=8, labels={"gputui.test/pool": OTHER})
    # One pod on the node drained and one elsewhere behind one Service, so the first can leave rotation.
    for shard, pool in (("a", NODE), ("b", OTHER)):
        apps.create_namespaced_deployment(NS, served_deployment(f"chat-{shard}", NS, pool, 1, grace_s=3,
                                                                labels={"app": "chat", "shard": shard}))
    core.create_namespaced_service(NS, service_for("chat", NS, {"app": "chat"}))
    pods = ready_pods(core, NS, 2, label_selector="app=chat")
    yield f"{NS}/{next(p.metadata.name for p in pods if p.metadata.labels['shard'] == 'a')}"
    apps.delete_collection_namespaced_deployment(NS)
    core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
    custom = client.CustomObjectsApi(api)
    for obj in custom.list_namespaced_custom_object(GROUP, VERSION, MAINT_NS, PLURAL)["items"]:  # none left, normally
        custom.patch_namespaced_custom_object(GROUP, VERSION, MAINT_NS, PLURAL, obj["metadata"]["name"],
                                              {"metadata": {"finalizers": None}})
    for ns in (NS, MAINT_NS):
        core.delete_namespace(ns)
    fake_kubelet.remove_node(NODE)
    fake_kubelet.remove_node(OTHER)
    uninstall_crd(api, "nodemaintenances")


def _audit(home) -> list[tuple[str, str]]:
    path = home / ".state" / "gputui" / "audit.jsonl"
    return [(e["action"], e["result"]) for e in map(json.loads, path.read_text().splitlines()) if e["phase"] == "result"]


def test_the_operator_takes_the_node_in_turn_and_gputui_waits_out_the_sessions_in_its_wait_step(
        served, cluster, prometheus, inference_exporter, tmp_path):
    api = cluster.harness_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    chat = served
    config = tmp_path / ".config" / "gputui"
    config.mkdir(parents=True)
    (config / "config.yaml").write_text(f"maintenance_namespace: {MAINT_NS}\n")
    admin = ("--kubeconfig", str(cluster.admin_kubeconfig), "--prometheus", prometheus.url)

    # The pod's replacement is pinned to the node's pool: it stays Pending by choice (--accept-stranded).
    plan = run("drain", *admin, NODE, "--via", "nodemaintenance", "--accept-stranded", "--dry-run", "-o", "json",
               home=tmp_path)
    via = json.loads(plan.stdout)["nodes"][0]["via"]
    assert via == {"via": "nodemaintenance", "namespace": MAINT_NS, "name": REQUEST, "requestor": "gputui.io",
                   "wait_selector": "app in (chat)", "error": None}, via

    gen = TrafficGenerator(cluster.kubeconfigs["harness"], inference_exporter, seed=40,
                           durations=Durations(mean_s=4, max_s=10))
    gen.add_route("Service", NS, "chat", rate_per_s=3.0)
    with MaintenanceOperator(api, MAINT_NS, max_parallel=1) as operator, gen.start(run_for_s=150):
        # The Network Operator's maintenance of another node holds the operator's one slot.
        create_custom(api, "nodemaintenances", MAINT_NS, {"metadata": {"name": "network-op"}, "spec": {
            "requestorID": "network.nvidia.com", "nodeName": OTHER}})
        wait_until(lambda: operator.history.get("network-op", [])[-1:] == ["Draining"], 30, what="the other's turn")
        wait_until(lambda: gen.live(chat) >= 1, 30, what="sessions on the pod")
        prometheus.wait_until('vllm:num_requests_running{namespace="%s"}' % NS,
                              lambda v: v.get(chat.split("/")[1], 0) > 0, by="pod", timeout=20)
        drain = start_drain(cluster, prometheus, NODE, "--via", "nodemaintenance", "--session-deadline", "100s",
                            "--accept-stranded", home=tmp_path)
        try:
            read_until(drain, lambda line: "maintenance-operator: Pending" in line, timeout=30)
            # Its turn has not come: the node is neither cordoned nor drained, whatever the wait.
            wait_until(lambda: len(operator.history.get(REQUEST, [])) == 1, 10, what="its request seen")
            assert not core.read_node(NODE).spec.unschedulable
            assert chat.split("/")[1] in {p.metadata.name for p in core.list_namespaced_pod(NS).items}
            custom.delete_namespaced_custom_object(GROUP, VERSION, MAINT_NS, PLURAL, "network-op")
            out, _ = drain.communicate(timeout=150)
        finally:
            drain.kill()
        report = gen.stop()
    print(out)
    assert drain.returncode == 0, out
    assert "sessions cut" not in out and report.cut == 0, (report.cut_by_pod, out)
    assert operator.history[REQUEST] == ["Pending", "Scheduled", "Cordon", "WaitForPodCompletion", "Draining",
                                         "Ready"]
    assert out.index("maintenance-operator: WaitForPodCompletion") < out.index("live sessions") < out.index("evicted")
    assert out.index("evicted") < out.index("maintenance-operator: Ready")
    request = custom.get_namespaced_custom_object(GROUP, VERSION, MAINT_NS, PLURAL, REQUEST)
    assert phase_of(request) == "Ready" and request["spec"]["requestorID"] == "gputui.io"
    assert "drainSpec" not in request["spec"]  # every eviction was gputui's
    assert core.read_node(NODE).spec.unschedulable  # the operator's cordon, held while the request stands
    actions = [a for a, _ in _audit(tmp_path)]
    assert actions.count("nodemaintenance-create") == 1 and "cordon" not in actions and "evict" in actions

    # The uncordon withdraws the request; the operator uncordons the node it cordoned.
    back = run("uncordon", *admin, NODE, home=tmp_path)
    assert back.returncode == 0, back.stdout + back.stderr
    assert f"node/{NODE} uncordoned" in back.stdout, back.stdout + back.stderr
    with MaintenanceOperator(api, MAINT_NS):
        wait_until(lambda: REQUEST not in {o["metadata"]["name"] for o in custom.list_namespaced_custom_object(
            GROUP, VERSION, MAINT_NS, PLURAL)["items"]}, 30, what="the request gone")
    assert not core.read_node(NODE).spec.unschedulable
    assert [a for a, _ in _audit(tmp_path)][-2:] == ["nodemaintenance-delete", "uncordon"]
