"""The guided canary end to end on the real control plane: v2 raised from 0% along its steps on a real
HTTPRoute (its real CRD), its gates read from vLLM's own counters and latency histogram in the real Prometheus,
then in VictoriaMetrics; when v2 starts failing requests at the second step, traffic goes back to v1 at once,
and v1's pods are the same pods throughout (nothing deleted, nothing scaled)."""

from __future__ import annotations

import subprocess
import sys

from kubernetes import client

from tests.support.audit_lines import written
from tests.support.crds import create_custom, get_custom, install_crd
from tests.support.gputui_cli import environment, read_until
from tests.support.procs import wait_until
from tests.support.workloads import deployment

NS = "t-canary"


def test_a_failing_gate_rolls_the_canary_back_to_v1_at_once(cluster, fake_kubelet, metrics_store, inference_exporter,
                                                             tmp_path):
    ns, node = f"{NS}-{metrics_store.tag}", f"canary-{metrics_store.tag}"  # once per store
    api = cluster.admin_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    install_crd(api, "httproutes")
    fake_kubelet.add_node(node, gpus=8, labels={"gputui.test/pool": "canary"})
    core.create_namespace({"metadata": {"name": ns}})
    for version in ("v1", "v2"):
        apps.create_namespaced_deployment(ns, deployment(f"chat-{version}", "chat", version, 2, 1, ns=ns, pool="canary"))
        core.create_namespaced_service(ns, {"metadata": {"name": f"chat-{version}"}, "spec": {
            "selector": {"app.kubernetes.io/name": "chat", "app.kubernetes.io/version": version},
            "ports": [{"port": 80}]}})
    create_custom(api, "httproutes", ns, {"metadata": {"name": "chat"}, "spec": {"rules": [{"backendRefs": [
        {"name": "chat-v1", "port": 80, "weight": 100}, {"name": "chat-v2", "port": 80, "weight": 0}]}]}})

    def running():
        pods = [p for p in core.list_namespaced_pod(ns).items
                if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
        return pods if len(pods) == 4 else None

    try:
        pods = wait_until(running, 60, what="4 chat pods running")
        wait_until(lambda: all((d.status.ready_replicas or 0) == 2 for d in apps.list_namespaced_deployment(ns).items),
                   30, what="both Deployments' status ready")  # the capacity rule reads it
        by_version = {v: [p.metadata.name for p in pods if p.metadata.labels["app.kubernetes.io/version"] == v]
                      for v in ("v1", "v2")}
        v1_uids = {p.metadata.uid for p in pods if p.metadata.name in by_version["v1"]}
        for name in by_version["v1"] + by_version["v2"]:  # both healthy: 0.1% aborted, 0.8 s
            inference_exporter.add_pod(ns, name, running=1)
            inference_exporter.serve(ns, name, 20.0, error_ratio=0.001, latency_s=0.8)
        metrics_store.wait_until(f'sum by (pod) (rate(vllm:request_success_total{{namespace="{ns}"}}[10s])) > 0',
                                 lambda v: len(v) == 4, timeout=40)
        mark = cluster.audit_mark()
        proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "gputui", "rollout", f"{ns}/chat", "v2", "--steps", "5,25,50",
             "--hold", "10s", "--poll", "2s", "--window", "10s", "--kubeconfig", str(cluster.admin_kubeconfig),
             "--prometheus", metrics_store.url],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment(tmp_path))
        try:
            seen = read_until(proc, lambda line: line.startswith("step 25%"), timeout=90)
            assert any(line.startswith("  holding at 5%: v2: errors 0.10%") for line in seen), seen
            route = get_custom(api, "httproutes", ns, "chat")
            assert [b["weight"] for b in route["spec"]["rules"][0]["backendRefs"]] == [75, 25]
            for name in by_version["v2"]:  # v2 starts failing half its requests
                inference_exporter.serve(ns, name, 20.0, error_ratio=0.5, latency_s=0.8)
            rest = read_until(proc, lambda line: line.startswith("rolled back:"), timeout=60)
            assert any(line.startswith("gate failed at 25%: error ratio beyond the gate") for line in rest), rest
            out, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        # The last line it printed says so (read_until may already have taken it: then nothing follows).
        printed = [line.strip() for line in rest + out.splitlines() if line.strip()]
        assert proc.returncode == 1 and printed[-1].startswith("rolled back: ")
        route = get_custom(api, "httproutes", ns, "chat")
        assert [b["weight"] for b in route["spec"]["rules"][0]["backendRefs"]] == [100, 0]  # v1 has it all again
        assert {p.metadata.uid for p in running() if p.metadata.name in by_version["v1"]} == v1_uids
        writes = [(e["verb"], e["objectRef"].get("resource")) for e in cluster.write_requests("admin", since=mark)
                  if e["objectRef"].get("namespace") == ns]
        assert writes == [("patch", "httproutes")] * 3, writes  # 5%, 25%, back: only the route, never a pod
        audit = written(tmp_path / ".state/gputui/audit.jsonl")
        assert [e["action"] for e in audit] == ["canary-start", "shift", "shift", "shift", "canary-end"]
        assert audit[-1]["result"] == "rolled back" and audit[-2]["params"]["force"] is True
    finally:
        for name in [n for pod_ns, n in inference_exporter.pods() if pod_ns == ns]:
            inference_exporter.remove_pod(ns, name)
        core.delete_namespace(ns)
        fake_kubelet.remove_node(node)
