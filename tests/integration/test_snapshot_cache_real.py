"""The cached first frame's file (gputui.backends.snapshot_cache), written from a real cluster's snapshot: it
holds what the screens draw and nothing of a secret planted where a cluster keeps them (issue 38)."""

from __future__ import annotations

import copy

from kubernetes import client

from gputui.backends import snapshot_cache
from tests.support.procs import wait_until
from tests.support.workloads import backend_for, deployment

NS = "t-cache"
PLANTED = "gpt-sk-PLANTED-0123456789abcdef"  # looks like a token: it must reach no cache file


def test_the_cache_of_a_real_snapshot_holds_no_secret_planted_in_the_cluster(cluster, fake_kubelet, prometheus,
                                                                              tmp_path):
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": NS}})
    node = next(n.metadata.name for n in core.list_node().items
                if (n.metadata.labels or {}).get("nvidia.com/gpu.present") == "true")
    try:
        core.create_namespaced_secret(NS, {"metadata": {"name": "hf-token"}, "stringData": {"token": PLANTED}})
        spec = copy.deepcopy(deployment("cache-llm", "cache-llm", "v1", 1, 1, ns=NS))
        template = spec["spec"]["template"]
        template["metadata"]["annotations"] = {"example.com/note": PLANTED}  # a pod annotation gputui drops
        template["spec"]["containers"][0]["env"] = [
            {"name": "HF_TOKEN", "value": PLANTED},  # a literal environment value
            {"name": "HF_TOKEN_REF", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]
        template["spec"]["containers"][0]["args"] = ["--api-key", PLANTED]  # and on the command line
        apps.create_namespaced_deployment(NS, spec)
        core.patch_node(node, {"metadata": {"annotations": {"example.com/secret": PLANTED}}})
        backend = backend_for(cluster, prometheus)
        try:
            def with_pod():
                snap = backend.reader.snapshot()
                return snap if any(p.namespace == NS and p.node for p in snap.pods) else None

            snap = wait_until(with_pod, 60, what="the planted pod in gputui's snapshot")
            path = snapshot_cache.save(snap, tmp_path / "cache.json")
        finally:
            backend.close()
        data = path.read_bytes()
        assert PLANTED.encode() not in data
        # Not vacuous: the file holds the pod, its node and its image, as the screens draw them.
        assert b"cache-llm" in data and node.encode() in data and b"vllm/vllm-openai:v0.9.0" in data
        back, _ = snapshot_cache.load(path)
        assert any(p.namespace == NS for p in back.pods) and back.node(node) is not None
    finally:
        core.patch_node(node, {"metadata": {"annotations": {"example.com/secret": None}}})
        core.delete_namespace(NS)
