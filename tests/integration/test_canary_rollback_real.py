"""The guided canary's rollback refused by the apiserver, on the real control plane (issue 34): v2 fails its gate at
the first step, the canary sends traffic back, and the route patch that would do it is answered 403 (forbidden,
e.g. an admission webhook) or 409 (someone else's edit) by a proxy in front of the real apiserver
(tests/support/api_faults.py). The canary says "rollback failed", says what to do (the command that goes back,
which works when typed), and exits 1; the step it took stands.

The gate's figures come from vLLM's own counters in the real Prometheus: the exporter serves each pod's finished
requests (v1 healthy, v2 aborting half of them), as tests/integration/test_canary_real.py does; no session count
is involved."""

from __future__ import annotations

import re

import pytest
from kubernetes import client

from tests.support.api_faults import Answer, FaultProxy, kubeconfig
from tests.support.audit_lines import written
from tests.support.crds import create_custom, get_custom, install_crd
from tests.support.gputui_cli import run
from tests.support.procs import wait_until
from tests.support.workloads import deployment

NS, NODE = "t-canary-rb", "canary-rb"
ROUTE = f"/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes/chat"
REFUSALS = {  # the proxy's answer to the rollback's route patch, and how gputui words it
    403: (Answer(403, 'httproutes "chat" is forbidden: admission webhook "routes.example" denied the request'),
          'forbidden: httproutes "chat" is forbidden: admission webhook "routes.example" denied the request'),
    409: (Answer(409, "Operation cannot be fulfilled on httproutes \"chat\": the object has been modified"),
          f"httproute/{NS}/chat changed since it was read (someone else edited it): nothing was changed"),
}


def weights(api) -> list[int]:
    return [b["weight"] for b in get_custom(api, "httproutes", NS, "chat")["spec"]["rules"][0]["backendRefs"]]


@pytest.fixture(scope="module")
def chat(cluster, fake_kubelet, prometheus, inference_exporter):
    """llm chat: v1 and v2, two pods each, behind an HTTPRoute at 100/0; v1 healthy, v2 aborting half its requests."""
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    install_crd(api, "httproutes")
    fake_kubelet.add_node(NODE, gpus=8, labels={"gputui.test/pool": NODE})
    core.create_namespace({"metadata": {"name": NS}})
    pods: list[str] = []
    try:
        for version in ("v1", "v2"):
            apps.create_namespaced_deployment(NS, deployment(f"chat-{version}", "chat", version, 2, 1, ns=NS, pool=NODE))
            core.create_namespaced_service(NS, {"metadata": {"name": f"chat-{version}"}, "spec": {
                "selector": {"app.kubernetes.io/name": "chat", "app.kubernetes.io/version": version},
                "ports": [{"port": 80}]}})
        create_custom(api, "httproutes", NS, {"metadata": {"name": "chat"}, "spec": {"rules": [{"backendRefs": [
            {"name": "chat-v1", "port": 80, "weight": 100}, {"name": "chat-v2", "port": 80, "weight": 0}]}]}})
        running = wait_until(lambda: (p := [x for x in core.list_namespaced_pod(NS).items if x.status.phase == "Running"
                                            and not x.metadata.deletion_timestamp]) and len(p) == 4 and p,
                             60, what="4 chat pods running")
        wait_until(lambda: all((d.status.ready_replicas or 0) == 2 for d in apps.list_namespaced_deployment(NS).items),
                   30, what="both Deployments ready")  # the shift's capacity rule reads it
        for pod in running:
            name, version = pod.metadata.name, pod.metadata.labels["app.kubernetes.io/version"]
            pods.append(name)
            inference_exporter.add_pod(NS, name)
            inference_exporter.serve(NS, name, 20.0, error_ratio=0.5 if version == "v2" else 0.001, latency_s=0.8)
        prometheus.wait_until(f'sum by (pod) (rate(vllm:request_success_total{{namespace="{NS}"}}[10s])) > 0',
                              lambda v: len(v) == 4, timeout=40)
        yield api
    finally:
        for name in pods:
            inference_exporter.remove_pod(NS, name)
        core.delete_namespace(NS)
        fake_kubelet.remove_node(NODE)


@pytest.mark.parametrize("status", list(REFUSALS))
def test_a_rollback_the_apiserver_refuses_says_rollback_failed_what_to_do_and_exits_1(status, chat, cluster,
                                                                                      prometheus, tmp_path):
    """Failed on the code before: its last line said only "(shift it back by hand)", not to which shares nor how.
    Also fails on this one-line mutation of gputui/ops/canary.py's rollback: `except BackendError as exc:` →
    `except ShiftError as exc:` (the 403 escapes: "gputui: error: forbidden…", no "rollback failed")."""
    answer, words = REFUSALS[status]
    patches: list[str] = []

    def refuse_after_the_first_step(method: str, path: str) -> Answer | None:
        if method == "PATCH" and path == ROUTE:
            patches.append(path)
            return answer if len(patches) > 1 else None  # the step goes through; the rollback does not
        return None

    assert weights(chat) == [100, 0]
    with FaultProxy(cluster.api_url, cluster.ca_file, refuse_after_the_first_step) as proxy:
        proxied = kubeconfig(tmp_path / "proxied.yaml", proxy.url, cluster.token("admin"))
        mark = cluster.audit_mark()
        out = run("rollout", f"{NS}/chat", "v2", "--steps", "5,25", "--hold", "10s", "--poll", "2s", "--window", "10s",
                  "--kubeconfig", str(proxied), "--prometheus", prometheus.url, home=tmp_path)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    said = out.stdout + out.stderr
    assert out.returncode == 1, said
    assert any(line.startswith("step 5%: ") for line in lines), said
    assert any(line.startswith("gate failed at 5%: error ratio beyond the gate") for line in lines), said
    assert not any(line.startswith("rolled back:") for line in lines), said
    last = lines[-1]
    assert last.startswith("rollback failed: error ratio beyond the gate (") and "; the rollback failed: " in last, said
    assert words in last, last
    back = f"gputui shift {NS}/chat --to v1=100 --to v2=0"
    assert f"back to the start: {back} (shift it back by hand)" in last, last
    assert ("PATCH", ROUTE, status) in proxy.answered
    # The step stands: the refused patch never reached the apiserver, which took only the step's.
    assert weights(chat) == [95, 5]
    route_writes = [(e["verb"], e["responseStatus"]["code"]) for e in cluster.write_requests("admin", since=mark)
                    if e["objectRef"].get("namespace") == NS]
    assert route_writes == [("patch", 200)], route_writes
    audit = written(tmp_path / ".state" / "gputui" / "audit.jsonl")
    assert [(e["action"], e["result"].split(":")[0]) for e in audit] == [
        ("canary-start", "ok"), ("shift", "ok"), ("shift", "refused" if status == 409 else "error"),
        ("canary-end", "rollback failed")], audit
    # What it said to do works: typed as shown (with this cluster's kubeconfig), traffic is back where it started.
    typed = run(*re.split(r"\s+", back)[1:], "--kubeconfig", str(cluster.admin_kubeconfig),
                "--prometheus", prometheus.url, home=tmp_path)
    assert typed.returncode == 0, typed.stdout + typed.stderr
    assert weights(chat) == [100, 0]
