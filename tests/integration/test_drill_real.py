"""The drill on the real control plane: kube-controller-manager replaces the evicted pod, kube-scheduler
places it on the other node, the fake kubelet runs it, and this test plays the router (it gives the new
pod live sessions once it runs). gputui must time both, undo its cordon, write only through the Eviction
API, and write nothing at all without --yes-i-mean-it."""

from __future__ import annotations

import subprocess
import sys
import threading

from kubernetes import client

from tests.support.gputui_cli import environment
from tests.support.procs import wait_until

NS = "t-drill"


def test_a_drill_on_the_real_cluster_times_recovery_and_undoes_its_cordon(cluster, fake_kubelet, prometheus,
                                                                         inference_exporter, tmp_path):
    api = cluster.admin_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    for node in ("drill-a", "drill-b"):
        fake_kubelet.add_node(node, gpus=4, labels={"gputui.test/pool": "drill"})
    core.create_namespace({"metadata": {"name": NS}})
    labels = {"app.kubernetes.io/name": "chat", "app.kubernetes.io/version": "v1"}
    apps.create_namespaced_deployment(NS, {"metadata": {"name": "chat"}, "spec": {
        "replicas": 2, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "nodeSelector": {"gputui.test/pool": "drill"}, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.9.0",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
    stop = threading.Event()

    def running() -> list:
        return [p for p in core.list_namespaced_pod(NS).items
                if p.status.phase == "Running" and not p.metadata.deletion_timestamp]

    def router() -> None:  # a new pod gets traffic once it runs, as a load balancer would send it
        while not stop.wait(0.3):
            for p in running():
                if (NS, p.metadata.name) not in inference_exporter.pods():
                    inference_exporter.add_pod(NS, p.metadata.name, running=2)

    first = wait_until(lambda: (lambda up: up if len(up) == 2 else None)(running()), 60, what="2 chat pods running")
    thread = threading.Thread(target=router, daemon=True)
    thread.start()
    try:
        for p in first:
            prometheus.wait_until(f'vllm:num_requests_running{{pod="{p.metadata.name}"}}', timeout=30)
        node = first[0].spec.node_name
        argv = [sys.executable, "-m", "gputui", "check", "--kubeconfig", str(cluster.admin_kubeconfig),
                "--prometheus", prometheus.url, "--drill", node, "--drill-timeout", "90s"]

        mark = cluster.audit_mark()
        unconfirmed = subprocess.run(argv, capture_output=True, text=True, env=environment(tmp_path), timeout=60)
        assert unconfirmed.returncode == 2 and "--yes-i-mean-it" in unconfirmed.stderr, unconfirmed.stderr
        assert "live sessions" in unconfirmed.stdout  # the plan, with what it would cut, said first
        assert not [e for e in cluster.write_requests("admin", since=mark)
                    if (e.get("objectRef") or {}).get("resource") in ("nodes", "pods")]

        done = subprocess.run([*argv, "--yes-i-mean-it"], capture_output=True, text=True, env=environment(tmp_path),
                              timeout=150)
        assert done.returncode == 0, done.stdout + done.stderr
        last = done.stdout.strip().splitlines()[-1]
        assert last.startswith("recovered: ") and "serving traffic after" in last and last.endswith("cordon undone")
        assert not core.read_node(node).spec.unschedulable
        replaced = [p for p in running() if p.metadata.name not in {q.metadata.name for q in first}]
        assert len(replaced) == 1 and replaced[0].spec.node_name != node  # the scheduler kept off the cordoned node

        writes = [(e["verb"], e["objectRef"].get("resource"), e["objectRef"].get("subresource"))
                  for e in cluster.write_requests("admin", since=mark)
                  if (e.get("objectRef") or {}).get("resource") in ("nodes", "pods")]
        assert writes == [("patch", "nodes", None), ("create", "pods", "eviction"), ("patch", "nodes", None)], writes
    finally:
        stop.set()
        thread.join(5)
        for ns, name in inference_exporter.pods():  # the evicted pod's too: later tests count every series
            if ns == NS:
                inference_exporter.remove_pod(ns, name)
        core.delete_namespace(NS)
        for node in ("drill-a", "drill-b"):
            fake_kubelet.remove_node(node)
