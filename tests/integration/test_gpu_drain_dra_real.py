"""One DRA GPU's drain (issue 37 item 3) on the real control plane: a ResourceSlice of two GPUs as a DRA driver
publishes it, two Deployments whose pods each get one through a ResourceClaimTemplate (claims made by the real
resourceclaim controller, allocated by the real scheduler). `gputui drain NODE --gpu INDEX` finds the pod from
the claims, fences the device with a DeviceTaintRule (resource.k8s.io/v1, its gates GA in v1.37: the shared
control plane serves it without flags), effect None first then NoSchedule, and evicts only that pod: its
replacement's new claim is not given the fenced device (it stays Pending) until the rule is gone."""

from __future__ import annotations

import subprocess
import sys

import pytest
from kubernetes import client

from tests.support.fake_kubelet import GPU_TOLERATION
from tests.support.gputui_cli import environment
from tests.support.procs import wait_until

NS = "t-gpu-drain-dra"
NODE = "gd-dra"
SPARE = "gd-dra-spare"
DRIVER = "gpu.gd.example.com"
CLASS = "gd-gpu"
GROUP, V = "resource.k8s.io", "v1"


def _deployment(name: str) -> dict:
    return {"metadata": {"name": name}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE}, "tolerations": [GPU_TOLERATION],
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "server", "image": "vllm/vllm-openai:v0.9.0",
                            "resources": {"claims": [{"name": "gpu"}]}}]}}}}


@pytest.fixture(scope="module")
def dra_node(cluster, fake_kubelet):
    api = cluster.harness_client()
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    # A second node of the same model with one free device: the drain's capacity guard (a coarse count of free
    # units outside the node) lets the drain start; the Deployments are pinned to NODE, so the replacement
    # stays there, and what is tested is that its new claim is not given the fenced device.
    for name, count in ((NODE, 2), (SPARE, 1)):
        fake_kubelet.add_node(name, gpus=0, labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
        devices = [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}, "uuid": {"string": f"GPU-{name}-{i}"}}}
                   for i in range(count)]
        custom.create_cluster_custom_object(GROUP, V, "resourceslices", {
            "apiVersion": f"{GROUP}/{V}", "kind": "ResourceSlice", "metadata": {"name": f"{name}-slice"},
            "spec": {"driver": DRIVER, "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}})
    core.create_namespace({"metadata": {"name": NS}})
    custom.create_cluster_custom_object(GROUP, V, "deviceclasses", {
        "apiVersion": f"{GROUP}/{V}", "kind": "DeviceClass", "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    custom.create_namespaced_custom_object(GROUP, V, NS, "resourceclaimtemplates", {
        "apiVersion": f"{GROUP}/{V}", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}}})
    for name in ("dra-a", "dra-b"):
        apps.create_namespaced_deployment(NS, _deployment(name))
    wait_until(lambda: len(_running(core)) == 2, 60, what="both DRA pods running")
    yield api
    apps.delete_collection_namespaced_deployment(NS)
    core.delete_namespace(NS)
    for plural, name in (("devicetaintrules", f"gputui-fence-{NODE}-gpu-1"), ("devicetaintrules", f"gputui-fence-{NODE}-gpu-0"),
                         ("resourceslices", f"{NODE}-slice"), ("resourceslices", f"{SPARE}-slice"),
                         ("deviceclasses", CLASS)):
        try:
            custom.delete_cluster_custom_object(GROUP, V, plural, name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    fake_kubelet.remove_node(NODE)
    fake_kubelet.remove_node(SPARE)


def _running(core) -> list:
    return [p for p in core.list_namespaced_pod(NS).items
            if p.status.phase == "Running" and not p.metadata.deletion_timestamp]


def _device_of(custom, pod) -> str | None:
    """The device the pod's generated claim was allocated, None while it has none."""
    statuses = pod.status.resource_claim_statuses or []
    if not statuses or not statuses[0].resource_claim_name:
        return None
    claim = custom.get_namespaced_custom_object(GROUP, V, NS, "resourceclaims", statuses[0].resource_claim_name)
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return results[0]["device"] if results else None


def test_a_dra_gpu_is_fenced_and_only_its_pod_moves(dra_node, cluster, tmp_path):
    core, custom = client.CoreV1Api(dra_node), client.CustomObjectsApi(dra_node)
    pods = {p.metadata.labels["app"]: p for p in _running(core)}
    device_b = _device_of(custom, pods["dra-b"])
    assert device_b in ("gpu-0", "gpu-1")
    index = device_b.split("-")[1]
    out = subprocess.run([sys.executable, "-m", "gputui", "drain", "--kubeconfig", str(cluster.admin_kubeconfig),
                          NODE, "--gpu", index, "--accept-stranded", "--session-deadline", "60s"],
                         capture_output=True, text=True, env=environment(tmp_path), timeout=120)
    text = out.stdout + out.stderr
    print(text)
    assert out.returncode == 0, text
    assert "dry run (effect None) of DeviceTaintRule" in text and "fenced: DeviceTaintRule" in text, text
    rule = custom.get_cluster_custom_object(GROUP, V, "devicetaintrules", f"gputui-fence-{NODE}-{device_b}")
    assert rule["spec"]["taint"]["effect"] == "NoSchedule"
    assert rule["spec"]["deviceSelector"] == {"driver": DRIVER, "pool": NODE, "device": device_b}
    print("rule status:", rule.get("status"))
    left = {p.metadata.labels["app"]: p for p in _running(core)}
    assert left["dra-a"].metadata.uid == pods["dra-a"].metadata.uid, "the pod on the other GPU was touched"
    assert not core.read_node(NODE).spec.unschedulable, "the node was cordoned"

    def replacement():
        return next((p for p in core.list_namespaced_pod(NS, label_selector="app=dra-b").items
                     if p.metadata.uid != pods["dra-b"].metadata.uid and not p.metadata.deletion_timestamp), None)

    new = wait_until(replacement, 30, what="dra-b's replacement")

    def refused():
        events = core.list_namespaced_event(NS, field_selector=f"involvedObject.name={new.metadata.name}").items
        return [e.message for e in events if e.reason == "FailedScheduling"]

    said = wait_until(refused, 60, what="the scheduler's refusal of the replacement")
    print("scheduler:", said)
    now = core.read_namespaced_pod(new.metadata.name, NS)
    assert now.spec.node_name is None and _device_of(custom, now) is None, "the fenced device was given"
    # The control: without the rule the very same claim gets the device.
    custom.delete_cluster_custom_object(GROUP, V, "devicetaintrules", f"gputui-fence-{NODE}-{device_b}")
    wait_until(lambda: _device_of(custom, core.read_namespaced_pod(new.metadata.name, NS)) == device_b, 60,
               what="the replacement given the device once the fence is gone")
