"""Objects the integration tests put on the real control plane: GPU node pools on the fake kubelet,
inference Deployments and StatefulSets, and waiting for their pods; a backend on the test cluster."""

from __future__ import annotations

from gputui.backends.kube_backend import live_backend
from gputui.settings import Settings
from tests.support.procs import wait_until


def pool(fake_kubelet, core, name: str) -> tuple[str, str]:
    """Two fresh GPU nodes labelled for this test; pods land on the first (the second is cordoned)."""
    a, b = f"{name}-a", f"{name}-b"
    for node in (a, b):
        fake_kubelet.add_node(node, gpus=4, labels={"gputui.test/pool": name})
    core.patch_node(b, {"spec": {"unschedulable": True}})
    return a, b


def workload(kind: str, name: str, ns: str, pool_name: str, replicas: int) -> dict:
    """A one-GPU vLLM Deployment or StatefulSet pinned to a pool, labelled app=NAME."""
    labels = {"app": name}
    template = {"metadata": {"labels": labels}, "spec": {
        "nodeSelector": {"gputui.test/pool": pool_name}, "terminationGracePeriodSeconds": 2,
        "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.9.0",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    spec = {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec}


def deployment(name: str, service: str, version: str, replicas: int, gpus: int, ns: str = "t-backend",
               pool: str | None = None) -> dict:
    """A version of an inference service, labelled the Kubernetes way (app.kubernetes.io/name, /version);
    with `pool`, pinned to the nodes labelled gputui.test/pool=POOL."""
    labels = {"app.kubernetes.io/name": service, "app.kubernetes.io/version": version}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "terminationGracePeriodSeconds": 1,
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "server", "image": "vllm/vllm-openai:v0.9.0",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
                     **({"nodeSelector": {"gputui.test/pool": pool}} if pool else {})}}},
    }


def running(core, ns: str, n: int, node: str):
    """Wait for exactly N live pods of the namespace Running on the node; they are returned."""
    def check():
        pods = [p for p in core.list_namespaced_pod(ns).items if not p.metadata.deletion_timestamp]
        ok = [p for p in pods if p.status.phase == "Running" and p.spec.node_name == node]
        return ok if len(ok) == n else None
    return wait_until(check, 60, what=f"{n} pods running on {node}")


def backend_for(cluster, prometheus):
    return live_backend(Settings(kubeconfig=str(cluster.admin_kubeconfig), prometheus=prometheus.url))


#: The label a Service (or InferencePool) selects on and the owner's selector does not: removing it from one
#: pod takes that pod out of rotation while it keeps running (issue 33).
SERVING_LABEL = ("serving", "true")


def served_deployment(name: str, ns: str, pool_name: str, replicas: int, *, labels: dict[str, str] | None = None,
                      grace_s: int = 30, prestop_sleep_s: int | None = None,
                      annotations: dict[str, str] | None = None) -> dict:
    """A one-GPU vLLM Deployment pinned to a pool. Its ReplicaSet selects app=NAME (plus `labels`); its pods
    also carry serving=true, which only the Service (service_for) or InferencePool selects. A preStop sleep
    and pod annotations (the fake kubelet's gputui.test/... knobs) are optional."""
    selector = {"app": name, **(labels or {})}
    container: dict = {"name": "vllm", "image": "vllm/vllm-openai:v0.9.0",
                       "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    if prestop_sleep_s is not None:
        container["lifecycle"] = {"preStop": {"sleep": {"seconds": prestop_sleep_s}}}
    meta: dict = {"labels": {**selector, SERVING_LABEL[0]: SERVING_LABEL[1]}}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": selector}, "template": {
                "metadata": meta, "spec": {
                    "nodeSelector": {"gputui.test/pool": pool_name}, "terminationGracePeriodSeconds": grace_s,
                    "containers": [container]}}}}


def service_for(name: str, ns: str, selector: dict[str, str]) -> dict:
    """A Service selecting `selector` plus the serving label."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {**selector, SERVING_LABEL[0]: SERVING_LABEL[1]}, "ports": [{"port": 8000}]}}


def ready_pods(core, ns: str, n: int, label_selector: str = "", timeout: float = 60):
    """Wait for exactly N live pods (no deletionTimestamp) of the namespace Running and Ready; returned."""
    def check():
        pods = [p for p in core.list_namespaced_pod(ns, label_selector=label_selector).items
                if not p.metadata.deletion_timestamp]
        ok = [p for p in pods if p.status.phase == "Running"
              and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
        return sorted(ok, key=lambda p: p.metadata.name) if len(ok) == n == len(pods) else None
    return wait_until(check, timeout, what=f"{n} pods Running and Ready in {ns}")
