"""A batch cordons its nodes before its first eviction (issue 35, item 1), on the real control plane: the real
scheduler places each evicted pod's replacement, and no pod is evicted twice.

The pods prefer the second node of the batch (a preferred node affinity, as a zone or a newer GPU would make
them). The old batch cordoned each node only when its turn came: the first node's replacement went to the
second node, which had room, and was evicted again minutes later. Counted from the apiserver's own audit
log: one eviction per pod that was on the batch's nodes when it began."""

from __future__ import annotations

from kubernetes import client

from gputui.vocabulary.sessions import SESSION_SIGNAL_LABEL
from tests.support.gputui_cli import run
from tests.support.workloads import ready_pods, served_deployment

NS = "t-batch-cordon"


def test_no_pod_is_evicted_twice_in_a_batch(cluster, fake_kubelet, tmp_path):
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": NS}})
    first, second, spare = "bc-a", "bc-b", "bc-c"
    body = served_deployment("x", NS, "bc", 1, grace_s=1)
    # No session signal: evicted at once (this test is about where replacements go, not sessions).
    body["spec"]["template"]["metadata"]["labels"][SESSION_SIGNAL_LABEL] = "false"
    body["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchExpressions": [{"key": "bc-prefer", "operator": "In",
                                                                 "values": ["yes"]}]}}]}}
    try:
        fake_kubelet.add_node(first, gpus=2, labels={"gputui.test/pool": "bc"})
        apps.create_namespaced_deployment(NS, body)
        ready_pods(core, NS, 1)  # on bc-a, the only node
        fake_kubelet.add_node(second, gpus=2, labels={"gputui.test/pool": "bc", "bc-prefer": "yes"})
        apps.patch_namespaced_deployment_scale("x", NS, {"spec": {"replicas": 2}})
        pods = ready_pods(core, NS, 2)
        assert sorted(p.spec.node_name for p in pods) == [first, second]
        fake_kubelet.add_node(spare, gpus=4, labels={"gputui.test/pool": "bc"})
        mark = cluster.audit_mark()
        out = run("drain", "--kubeconfig", str(cluster.admin_kubeconfig), first, second, "--parallel", "1",
                  home=tmp_path)
        text = out.stdout + out.stderr
        assert out.returncode == 0, text
        assert f"cordons {first}, {second} before the first eviction" in text, text
        evictions = [e for e in cluster.audit_events("admin", since=mark, verbs={"create"}, resource="pods")
                     if e.get("objectRef", {}).get("subresource") == "eviction"]
        evicted = [e["objectRef"]["name"] for e in evictions]
        assert sorted(evicted) == sorted(p.metadata.name for p in pods), evicted  # each once, none of the new
        placed = ready_pods(core, NS, 2)
        assert {p.spec.node_name for p in placed} == {spare}, [(p.metadata.name, p.spec.node_name) for p in placed]
    finally:
        apps.delete_collection_namespaced_deployment(NS)
        core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
        core.delete_namespace(NS)
        for node in (first, second, spare):
            fake_kubelet.remove_node(node)
