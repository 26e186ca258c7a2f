"""One GPU's drain (issue 37 item 3) on the real control plane and Prometheus: a node with four GPUs, one pod on
GPU 0 and one on GPU 1 (dcgm-exporter's pod labels on their series, scraped by the real Prometheus), sessions
routed by the real EndpointSlices (tests.support.traffic). `gputui drain NODE --gpu 1` moves exactly the pod on
GPU 1, after its sessions end, and leaves the other serving and the node schedulable. No count is set by hand."""

from __future__ import annotations

import subprocess
import sys

import pytest
from kubernetes import client

from tests.support.gputui_cli import environment
from tests.support.procs import wait_until
from tests.support.traffic import Durations, TrafficGenerator
from tests.support.workloads import ready_pods, served_deployment

NS = "t-gpu-drain"
NODE = "gd-node"
MAX_SESSION_S = 10.0


@pytest.fixture(scope="module")
def two_gpus(cluster, fake_kubelet, dcgm_exporter, prometheus):
    """Two Deployments pinned to the node, one GPU each, behind one Service selecting on a serving label; each pod's
    GPU labelled with it in the DCGM series as dcgm-exporter's pod mapping does (pod a on GPU 0, pod b on GPU 1)."""
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": NS}})
    fake_kubelet.add_node(NODE, gpus=4, labels={"gputui.test/pool": NODE})
    dcgm_exporter.add_node(NODE, gpus=4)
    for shard in ("a", "b"):
        body = served_deployment(f"svc-{shard}", NS, NODE, 1, labels={"shard": shard}, grace_s=3)
        body["spec"]["template"]["metadata"]["labels"]["app"] = "svc"
        body["spec"]["selector"]["matchLabels"]["app"] = "svc"
        apps.create_namespaced_deployment(NS, body)
    core.create_namespaced_service(NS, {"metadata": {"name": "svc"}, "spec": {
        "selector": {"app": "svc", "serving": "true"}, "ports": [{"port": 8000}]}})
    pods = ready_pods(core, NS, 2, label_selector="app=svc")
    by_shard = {p.metadata.labels["shard"]: p.metadata.name for p in pods}
    dcgm_exporter.assign(NODE, 0, NS, by_shard["a"])
    dcgm_exporter.assign(NODE, 1, NS, by_shard["b"])
    prometheus.wait_until('count by (pod) (DCGM_FI_DEV_GPU_UTIL{Hostname="%s",pod!=""})' % NODE,
                          lambda v: len(v) == 2, by="pod", timeout=30)
    yield {shard: f"{NS}/{name}" for shard, name in by_shard.items()}
    apps.delete_collection_namespaced_deployment(NS)
    core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
    core.delete_namespace(NS)
    dcgm_exporter.remove_node(NODE)
    fake_kubelet.remove_node(NODE)


def _drain(cluster, prometheus, home, *args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputui", "drain", "--kubeconfig", str(cluster.admin_kubeconfig),
                           "--prometheus", prometheus.url, "--rotation-settle", "3s", "--accept-stranded", *args],
                          capture_output=True, text=True, env=environment(home), timeout=timeout)


def _live(core) -> dict[str, str]:
    return {f"{NS}/{p.metadata.name}": p.metadata.uid for p in core.list_namespaced_pod(NS).items
            if not p.metadata.deletion_timestamp}


def test_draining_gpu_1_moves_only_its_pod_after_its_sessions_end_and_leaves_the_node_serving(
        two_gpus, cluster, prometheus, inference_exporter, tmp_path):
    core = client.CoreV1Api(cluster.harness_client())
    on_0, on_1 = two_gpus["a"], two_gpus["b"]
    before = _live(core)
    plan = _drain(cluster, prometheus, tmp_path, NODE, "--gpu", "1", "--dry-run", timeout=60)
    said = plan.stdout + plan.stderr
    assert plan.returncode == 0, said
    assert f"node/{NODE} GPU 1:" in said and on_1 in said and on_0 not in said, said
    # The fake kubelet's device plugin offers every GPU: the plan says a new pod could land on it.
    assert "a new pod could land on GPU 1" in said, said
    gen = TrafficGenerator(cluster.kubeconfigs["harness"], inference_exporter, seed=37,
                           durations=Durations(mean_s=4, max_s=MAX_SESSION_S))
    gen.add_route("Service", NS, "svc", rate_per_s=3.0)
    with gen.start(run_for_s=120):
        wait_until(lambda: gen.live(on_1) >= 1 and gen.live(on_0) >= 1, 30, what="sessions on both pods")
        prometheus.wait_until('vllm:num_requests_running{namespace="%s"}' % NS,
                              lambda v: v.get(on_1.split("/")[1], 0) > 0, by="pod", timeout=20)
        out = _drain(cluster, prometheus, tmp_path, NODE, "--gpu", "1", "--session-deadline", "90s", timeout=150)
        report = gen.stop()
    text = out.stdout + out.stderr
    print(text)
    assert out.returncode == 0, text
    assert "deadline expired" not in text and "sessions cut" not in text, text
    assert report.cut == 0 and report.cut_by_pod.get(on_1, 0) == 0, report.cut_by_pod
    after = _live(core)
    assert after.get(on_0) == before[on_0], "the pod on GPU 0 was touched"
    assert on_1 not in after or after[on_1] != before[on_1], "the pod on GPU 1 is still there"
    assert not core.read_node(NODE).spec.unschedulable, "the node was cordoned"
    assert report.pods[on_0].started > 0


def test_a_gpu_pod_nobody_can_place_on_a_gpu_refuses_the_drain_unless_chosen(
        two_gpus, cluster, prometheus, dcgm_exporter, tmp_path):
    core = client.CoreV1Api(cluster.harness_client())
    pods = {p.metadata.labels["shard"]: p.metadata.name for p in core.list_namespaced_pod(NS).items
            if not p.metadata.deletion_timestamp and p.status.phase == "Running"}
    # The pod on GPU 0 loses its DCGM label (attribution off for it): its GPU is unknown.
    dcgm_exporter.assign(NODE, 0, None)
    try:
        prometheus.wait_until('count by (pod) (DCGM_FI_DEV_GPU_UTIL{Hostname="%s",pod!=""})' % NODE,
                              lambda v: pods["a"] not in v, by="pod", timeout=30)
        out = _drain(cluster, prometheus, tmp_path, NODE, "--gpu", "1", timeout=60)
        text = out.stdout + out.stderr
        assert out.returncode == 1, text
        assert "refused" in text and "unknown GPU" in text and f"{NS}/{pods['a']}" in text, text
        assert "--include-unattributed" in text, text
        plan = _drain(cluster, prometheus, tmp_path, NODE, "--gpu", "1", "--include-unattributed", "--dry-run",
                      timeout=60)
        assert f"{NS}/{pods['a']}" in plan.stdout and "unknown GPU: moved too (chosen)" in plan.stdout, plan.stdout
    finally:
        dcgm_exporter.assign(NODE, 0, NS, pods["a"])
