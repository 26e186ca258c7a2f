"""Session-aware scale-down on the real control plane: gputui annotates each pod's pod-deletion-cost from
its live sessions (read from the real Prometheus) and scales the Deployment; kube-controller-manager's own
ReplicaSet controller then removes exactly the idlest pods. gputui itself deletes no pod."""

from __future__ import annotations

from kubernetes import client

from tests.support.gputui_cli import run
from tests.support.procs import wait_until
from tests.support.workloads import deployment

NS = "t-scale"


def test_the_replicaset_controller_removes_the_pods_gputui_ranked_idlest(cluster, fake_kubelet, prometheus,
                                                                        inference_exporter, tmp_path):
    api = cluster.admin_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    fake_kubelet.add_node("scale-a", gpus=8, labels={"gputui.test/pool": "scale"})
    core.create_namespace({"metadata": {"name": NS}})
    apps.create_namespaced_deployment(NS, deployment("old-v1", "old", "v1", 3, 1, ns=NS, pool="scale"))

    def running():
        pods = [p for p in core.list_namespaced_pod(NS).items
                if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
        return pods if len(pods) == 3 else None

    try:
        pods = sorted(p.metadata.name for p in wait_until(running, 60, what="3 pods running"))
        sessions = dict(zip(pods, (2, 9, 0), strict=True))  # the busiest stays
        for name, n in sessions.items():
            inference_exporter.add_pod(NS, name, running=n)
        for name in pods:
            prometheus.wait_until(f'vllm:num_requests_running{{pod="{name}"}}', timeout=30)
        argv = ("scale-down", f"{NS}/old", "v1", "1", "--kubeconfig", str(cluster.admin_kubeconfig),
                "--prometheus", prometheus.url)

        mark = cluster.audit_mark()
        refused = run(*argv, home=tmp_path)  # threshold 0: the pod with 2 sessions blocks
        assert refused.returncode == 1 and "holds 2 live sessions (threshold 0)" in refused.stdout + refused.stderr
        asked = run(*argv, "--threshold", "2", home=tmp_path)  # below the threshold, the cut is still asked
        assert asked.returncode == 1 and "it cuts 2 live sessions: confirm" in asked.stderr, asked.stderr
        assert not [e for e in cluster.write_requests("admin", since=mark) if e["objectRef"].get("namespace") == NS]

        done = run(*argv, "--threshold", "2", "--confirm-sessions", "2", home=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        busiest = max(sessions, key=sessions.get)

        def only_the_busiest():
            left = [p.metadata.name for p in core.list_namespaced_pod(NS).items if not p.metadata.deletion_timestamp]
            return left if left == [busiest] else None

        wait_until(only_the_busiest, 60, what=f"only {busiest} left")
        writes = [(e["verb"], e["objectRef"].get("resource"), e["objectRef"].get("subresource"))
                  for e in cluster.write_requests("admin", since=mark) if e["objectRef"].get("namespace") == NS]
        assert writes == [("patch", "pods", None)] * 3 + [("patch", "deployments", "scale")], writes
        deletes = cluster.audit_events("system:kube-controller-manager", since=mark, verbs={"delete"}, resource="pods")
        assert sorted(e["objectRef"]["name"] for e in deletes if e["objectRef"].get("namespace") == NS) == \
            sorted(n for n in pods if n != busiest)
    finally:
        for name in list(sessions) if "sessions" in locals() else []:
            inference_exporter.remove_pod(NS, name)
        core.delete_namespace(NS)
        fake_kubelet.remove_node("scale-a")
