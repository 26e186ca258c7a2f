"""Smoke tests proving the integration harness is the real thing.

A real kube-apiserver with controllers and scheduler, fake GPU nodes kept by
the fake kubelet, and a real Prometheus scraping exporters the tests serve.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
import requests
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.support.control_plane import K8S_VERSION, ControlPlane
from tests.support.exporters import InferenceExporter
from tests.support.fake_kubelet import GPU_RESOURCE, GPU_TOLERATION, FakeKubelet
from tests.support.procs import wait_for
from tests.support.prom import DCGM_JOB, INFERENCE_JOB, PrometheusServer
from tests.support.topology import DEFAULT_GPU_NODES, HISTORY_STEP, history_util

GPU_NODE_NAMES = {n.name for n in DEFAULT_GPU_NODES}


def _namespace(cluster: ControlPlane, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    k8s.CoreV1Api(cluster.harness_client()).create_namespace({"metadata": {"name": name}})
    return name


def _gone(cluster: ControlPlane, *namespaces: str) -> None:
    """Delete the namespaces a test made, with everything in them, and wait until the API has none of it: the
    session's cluster is shared, and a workload left running would change what later tests count (their GPU
    and pod figures were `>=` for that reason). The pods go at once (grace 0): the test is over, and a
    namespace still terminating holds its pods' GPUs."""
    core = k8s.CoreV1Api(cluster.harness_client())
    for ns in namespaces:
        try:
            core.delete_namespace(ns)  # first: a terminating namespace takes no new pod from a ReplicaSet
            core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def all_gone() -> bool:
        for ns in namespaces:
            try:
                core.read_namespace(ns)
                return False
            except ApiException as exc:
                if exc.status != 404:
                    raise
        return True

    wait_for(all_gone, timeout=90, what=f"namespaces {', '.join(namespaces)} and what they held gone",
             on_timeout=cluster.describe)


def _gpu_deployment(name: str, replicas: int, gpus: int, *, labels: dict[str, str] | None = None) -> dict:
    labels = labels or {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 2,
                    "tolerations": [GPU_TOLERATION],
                    "containers": [{
                        "name": "vllm",
                        "image": "vllm/vllm-openai:v0.11.0",
                        "resources": {"requests": {GPU_RESOURCE: str(gpus), "cpu": "1"},
                                      "limits": {GPU_RESOURCE: str(gpus)}},
                    }],
                },
            },
        },
    }


# --- control plane -------------------------------------------------------------

def test_binaries_and_server_report_the_pinned_version(cluster: ControlPlane):
    out = subprocess.run([cluster.bin_dir / "kube-apiserver", "--version"], capture_output=True, text=True)
    assert out.stdout.strip() == f"Kubernetes {K8S_VERSION}"
    info = k8s.VersionApi(cluster.admin_client()).get_code()
    assert info.git_version == K8S_VERSION
    # kubectl built from the same release talks to it with the readonly kubeconfig
    res = cluster.kubectl("version", "-o", "json", user="readonly")
    assert json.loads(res.stdout)["serverVersion"]["gitVersion"] == K8S_VERSION


def test_kubeconfig_is_a_real_users_kubeconfig(cluster: ControlPlane):
    import yaml

    cfg = yaml.safe_load(cluster.readonly_kubeconfig.read_text())
    ctx = {c["name"]: c["context"] for c in cfg["contexts"]}[cfg["current-context"]]
    clusters = {c["name"]: c["cluster"] for c in cfg["clusters"]}
    assert clusters[ctx["cluster"]]["server"] == cluster.api_url
    # TLS is verified against the apiserver's own serving cert: a wrong CA fails.
    r = requests.get(f"{cluster.api_url}/version", verify=clusters[ctx["cluster"]]["certificate-authority"],
                     timeout=5)
    assert r.status_code == 200
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{cluster.api_url}/version", timeout=5)  # system CAs do not trust it


def test_gpu_nodes_are_ready_with_gpu_labels_and_leases(cluster: ControlPlane, fake_kubelet: FakeKubelet):
    core = k8s.CoreV1Api(cluster.admin_client())
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert set(nodes) >= GPU_NODE_NAMES
    for spec in DEFAULT_GPU_NODES:
        node = nodes[spec.name]
        labels = node.metadata.labels
        assert labels["nvidia.com/gpu.present"] == "true"
        assert labels["nvidia.com/gpu.product"] == spec.product
        assert labels["nvidia.com/gpu.count"] == str(spec.gpus)
        assert labels["nvidia.com/gpu.memory"] == str(spec.memory_mib)
        assert labels["nvidia.com/cuda.driver-version.full"] == spec.driver
        assert node.status.capacity[GPU_RESOURCE] == str(spec.gpus)
        assert node.status.allocatable[GPU_RESOURCE] == str(spec.gpus)
        ready = {c.type: c.status for c in node.status.conditions}
        assert ready["Ready"] == "True"
        assert node.status.node_info.kubelet_version == K8S_VERSION
    assert GPU_RESOURCE not in (nodes["cpu-node-1"].status.allocatable or {})
    leases = k8s.CoordinationV1Api(cluster.admin_client()).list_namespaced_lease("kube-node-lease").items
    renewed = {le.metadata.name: le.spec.renew_time for le in leases}
    assert set(renewed) >= GPU_NODE_NAMES


def test_heartbeats_renew_the_lease_and_status(cluster: ControlPlane):
    # A kubelet of its own with a fast heartbeat, so the loop itself is tested.
    kubelet = FakeKubelet(cluster.kubeconfigs["kubelet"], heartbeat_interval=0.5).start()
    coord = k8s.CoordinationV1Api(cluster.harness_client())
    core = k8s.CoreV1Api(cluster.harness_client())
    try:
        kubelet.add_node("hb-node", gpus=2)
        first = coord.read_namespaced_lease("hb-node", "kube-node-lease").spec.renew_time
        beat = core.read_node("hb-node").status.conditions
        first_beat = {c.type: c.last_heartbeat_time for c in beat}["Ready"]
        wait_for(lambda: coord.read_namespaced_lease("hb-node", "kube-node-lease").spec.renew_time > first,
                 timeout=10, what="lease renewal")
        wait_for(lambda: {c.type: c.last_heartbeat_time for c in core.read_node("hb-node").status.conditions}
                 ["Ready"] > first_beat, timeout=10, what="Ready heartbeat")
        # Not Ready: condition and the not-ready NoSchedule taint, as the node-lifecycle controller would
        kubelet.set_ready("hb-node", False)
        node = core.read_node("hb-node")
        assert {c.type: c.status for c in node.status.conditions}["Ready"] == "False"
        assert any(t.key == "node.kubernetes.io/not-ready" for t in node.spec.taints or [])
        kubelet.set_ready("hb-node", True)
        assert not any(t.key == "node.kubernetes.io/not-ready" for t in core.read_node("hb-node").spec.taints or [])
    finally:
        kubelet.stop()
        core.delete_node("hb-node")
        wait_for(lambda: "hb-node" not in {n.metadata.name for n in core.list_node().items}, timeout=30,
                 what="hb-node gone")


@pytest.fixture
def gpu_workload(cluster: ControlPlane, fake_kubelet: FakeKubelet):
    """A 3-replica Deployment asking 2 GPUs each, Available on the fake GPU nodes; deleted, and gone, after
    the test."""
    ns = _namespace(cluster, "smoke")
    try:
        api = cluster.harness_client()
        apps = k8s.AppsV1Api(api)
        apps.create_namespaced_deployment(ns, _gpu_deployment("llm", 3, 2))

        def available():
            d = apps.read_namespaced_deployment("llm", ns)
            return d.status.available_replicas == 3 and d.status.updated_replicas == 3

        wait_for(available, timeout=60, what="Deployment llm Available 3/3", on_timeout=cluster.describe)
        yield ns
    finally:
        _gone(cluster, ns)


def test_gpu_deployment_is_scheduled_and_available(cluster: ControlPlane, gpu_workload: str):
    core = k8s.CoreV1Api(cluster.admin_client())
    pods = core.list_namespaced_pod(gpu_workload, label_selector="app=llm").items
    assert len(pods) == 3
    for p in pods:
        assert p.spec.node_name in GPU_NODE_NAMES, p.spec.node_name
        assert p.status.phase == "Running"
        assert p.status.pod_ip and p.status.pod_ip.startswith("10.244.")
        conds = {c.type: c.status for c in p.status.conditions}
        assert conds["Ready"] == conds["ContainersReady"] == conds["PodScheduled"] == "True"
        assert p.status.container_statuses[0].ready is True
        assert p.status.container_statuses[0].state.running is not None


def test_scheduler_respects_gpu_capacity(cluster: ControlPlane, fake_kubelet: FakeKubelet):
    ns = _namespace(cluster, "toobig")
    try:
        apps = k8s.AppsV1Api(cluster.harness_client())
        apps.create_namespaced_deployment(ns, _gpu_deployment("huge", 1, 9))  # no node has 9 GPUs
        core = k8s.CoreV1Api(cluster.harness_client())

        def unschedulable():
            for p in core.list_namespaced_pod(ns).items:
                for c in p.status.conditions or []:
                    if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                        return p
            return None

        pod = wait_for(unschedulable, timeout=30, what="pod asking 9 GPUs to be Unschedulable")
        assert pod.spec.node_name is None
        assert pod.status.phase == "Pending"
    finally:
        _gone(cluster, ns)


def test_pdb_status_and_eviction(cluster: ControlPlane, gpu_workload: str):
    ns = gpu_workload
    api = cluster.harness_client()
    policy, core = k8s.PolicyV1Api(api), k8s.CoreV1Api(api)
    policy.create_namespaced_pod_disruption_budget(ns, {
        "metadata": {"name": "llm"},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "llm"}}},
    })

    def observed(allowed: int):
        def check():
            pdb = policy.read_namespaced_pod_disruption_budget("llm", ns)
            st = pdb.status
            ok = (st is not None and st.observed_generation == pdb.metadata.generation
                  and st.current_healthy == 3 and st.disruptions_allowed == allowed)
            return pdb if ok else None
        return check

    pdb = wait_for(observed(0), timeout=30, what="PDB status from the disruption controller")
    assert pdb.status.expected_pods == 3 and pdb.status.desired_healthy == 3

    victim = core.list_namespaced_pod(ns, label_selector="app=llm").items[0]
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": victim.metadata.name, "namespace": ns}}
    with pytest.raises(ApiException) as blocked:
        core.create_namespaced_pod_eviction(victim.metadata.name, ns, eviction)
    assert blocked.value.status == 429
    assert "disruption budget" in blocked.value.body.lower()

    policy.patch_namespaced_pod_disruption_budget("llm", ns, {"spec": {"minAvailable": 2}})
    wait_for(observed(1), timeout=30, what="PDB to allow one disruption")
    _, status, _ = core.create_namespaced_pod_eviction_with_http_info(victim.metadata.name, ns, eviction)
    assert status == 201

    # The fake kubelet completes the graceful deletion after the grace period
    # (2 s) and the ReplicaSet replaces the pod.
    def victim_gone():
        try:
            p = core.read_namespaced_pod(victim.metadata.name, ns)
        except ApiException as exc:
            return exc.status == 404
        return p.metadata.uid != victim.metadata.uid

    wait_for(victim_gone, timeout=30, what="evicted pod to be deleted")
    wait_for(lambda: k8s.AppsV1Api(api).read_namespaced_deployment("llm", ns).status.available_replicas == 3,
             timeout=30, what="Deployment back to 3 available")


def test_the_fake_kubelet_starts_slowly_or_never_and_terminates_pods_as_the_kubelet_does(
        cluster: ControlPlane, fake_kubelet: FakeKubelet):
    """Readiness and termination, the parts of the kubelet gputui's claims depend on: a slow start (per pod
    and per namespace), a pod never Ready, a terminating pod not Ready at once, a preStop sleep (exec form)
    before the engine exits, a hook longer than the grace period (killed 2 s after it, the kubelet's
    minimum), and without either the grace period as before. All pods at once, timed from their deletion."""
    from tests.support.fake_kubelet import NEVER_READY_ANNOTATION, SHUTDOWN_ANNOTATION, START_DELAY_ANNOTATION

    core = k8s.CoreV1Api(cluster.harness_client())
    ns, slow_ns = _namespace(cluster, "lifecycle"), _namespace(cluster, "slowstart")
    fake_kubelet.set_start_delay(slow_ns, 3)

    def pod(name: str, *, namespace: str = ns, annotations: dict[str, str] | None = None, grace: int = 30,
            prestop: list[str] | None = None) -> None:
        container: dict = {"name": "c", "image": "vllm/vllm-openai:v0.11.0"}
        if prestop:
            container["lifecycle"] = {"preStop": {"exec": {"command": prestop}}}
        core.create_namespaced_pod(namespace, {
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"nodeName": "gpu-node-3", "terminationGracePeriodSeconds": grace, "containers": [container]}})

    def ready(name: str, namespace: str = ns) -> str | None:
        p = core.read_namespaced_pod(name, namespace)
        if p.status.phase != "Running":
            return None
        return {c.type: c.status for c in p.status.conditions or []}.get("Ready")

    t0 = time.time()
    try:
        pod("slow", annotations={START_DELAY_ANNOTATION: "3"})
        pod("never", annotations={NEVER_READY_ANNOTATION: "true"})
        pod("hook", annotations={SHUTDOWN_ANNOTATION: "0"}, prestop=["/bin/sh", "-c", "sleep 3"])
        pod("long-hook", grace=1, prestop=["sleep", "10"])
        pod("plain", grace=2)
        pod("ns-slow", namespace=slow_ns)
        wait_for(lambda: ready("slow") == "False" and ready("ns-slow", slow_ns) == "False", timeout=15,
                 what="slow pods Running, not Ready yet")
        for name in ("hook", "long-hook", "plain"):
            wait_for(lambda: ready(name) == "True", timeout=15, what=f"{name} Ready")  # noqa: B023 - called at once, in this iteration
        wait_for(lambda: ready("slow") == "True" and ready("ns-slow", slow_ns) == "True", timeout=15,
                 what="slow pods Ready after their delay")
        assert time.time() - t0 >= 2.5  # their 3 s delay: a lower bound no busy machine can break
        assert ready("never") == "False"
        deleted = time.time()
        for name in ("hook", "long-hook", "plain"):
            core.delete_namespaced_pod(name, ns)
        for name in ("hook", "long-hook", "plain"):  # not Ready at once, as a terminating pod's kubelet says
            wait_for(lambda: ready(name) == "False", timeout=3, interval=0.1, what=f"{name} not Ready")  # noqa: B023 - called at once, in this iteration
        gone: dict[str, float] = {}

        def all_gone() -> bool:
            for name in {"hook", "long-hook", "plain"} - set(gone):
                try:
                    core.read_namespaced_pod(name, ns)
                except ApiException as exc:
                    if exc.status == 404:
                        gone[name] = time.time() - deleted
            return len(gone) == 3

        # Bounds that tell the kubelet's rules from their plausible bugs, never how busy the machine is: the lower
        # ones hold however late the fake kubelet's timers fire, and each upper one is the time the wrong rule
        # would take (a busy machine delays by tenths of a second, not by seconds).
        wait_for(all_gone, timeout=20, interval=0.1, what="the terminating pods finalised")
        # The preStop sleep (3 s), then SIGTERM: the engine exits. Killed at its grace period (30 s) instead, it
        # would outlast the 20 s wait above.
        assert gone["hook"] >= 2.5, gone
        assert 2.5 <= gone["long-hook"] < 10, gone  # grace 1 s spent in the hook, then the 2 s minimum: not 10 s
        assert gone["plain"] >= 1.5, gone  # ignores SIGTERM: killed at its grace period (2 s), not at once
        assert ready("never") == "False"
        assert not [e for e in fake_kubelet.errors if ns in e or slow_ns in e]
    finally:
        fake_kubelet.set_start_delay(slow_ns, 0)
        _gone(cluster, ns, slow_ns)


def test_readonly_user_is_forbidden_to_write(cluster: ControlPlane, fake_kubelet: FakeKubelet):
    mark = cluster.audit_mark()
    core = k8s.CoreV1Api(cluster.readonly_client())
    assert {n.metadata.name for n in core.list_node().items} >= GPU_NODE_NAMES  # reading works
    with pytest.raises(ApiException) as denied:
        core.patch_node("gpu-node-1", {"spec": {"unschedulable": True}})
    assert denied.value.status == 403
    assert k8s.CoreV1Api(cluster.admin_client()).read_node("gpu-node-1").spec.unschedulable in (None, False)
    writes = cluster.wait_for_audit("readonly", since=mark, verb="patch", resource="nodes", code=403)
    assert writes[0]["objectRef"]["name"] == "gpu-node-1"
    assert [w["verb"] for w in cluster.write_requests("readonly", since=mark)] == ["patch"]


def test_audit_log_records_requests_per_user(cluster: ControlPlane):
    mark = cluster.audit_mark()
    k8s.CoreV1Api(cluster.admin_client()).list_namespace()
    k8s.CoreV1Api(cluster.readonly_client()).list_namespaced_pod("default")
    admin = cluster.wait_for_audit("admin", since=mark, verb="list", resource="namespaces")
    ro = cluster.wait_for_audit("readonly", since=mark, verb="list", resource="pods", namespace="default")
    assert admin[0]["user"]["username"] == "gputui-admin"
    assert "system:masters" in admin[0]["user"]["groups"]
    assert ro[0]["user"]["username"] == "gputui-readonly"
    assert ro[0]["responseStatus"]["code"] == 200
    assert cluster.write_requests("readonly", since=mark) == []
    assert cluster.write_requests("admin", since=mark) == []
    # Harness traffic is under its own users, not the app's.
    assert cluster.audit_events("kubelet")  # the fake kubelet's heartbeats, pod status...
    # (gputui's own Argo verbs patch a Rollout's status as admin, as kubectl argo rollouts does: not these.)
    assert not [e for e in cluster.audit_events("admin") if e["verb"] == "patch"
                and (e.get("objectRef") or {}).get("subresource") == "status"
                and (e.get("objectRef") or {}).get("resource") in ("pods", "nodes")]


def test_the_published_inferencepool_crd_is_served_with_its_own_validation(cluster: ControlPlane):
    """The Gateway API Inference Extension's GA InferencePool, as its module publishes it (scripts/fetch-crds.py),
    not a transcription: its CEL rule refuses an endpoint picker Service without a port, and a pool without one
    (optional in the published schema; the transcription required it) is taken."""
    from tests.support.crds import install_crd

    api = cluster.harness_client()
    install_crd(api, "inferencepools")
    crd = k8s.ApiextensionsV1Api(api).read_custom_resource_definition("inferencepools.inference.networking.k8s.io")
    assert crd.metadata.annotations["inference.networking.k8s.io/bundle-version"] == "v1.6.0"
    ns = _namespace(cluster, "pool-crd")
    custom = k8s.CustomObjectsApi(api)

    def pool(name: str, **spec: object) -> dict:
        return {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool", "metadata": {"name": name},
                "spec": {"selector": {"matchLabels": {"app": "summ"}}, "targetPorts": [{"number": 8000}], **spec}}

    try:
        custom.create_namespaced_custom_object("inference.networking.k8s.io", "v1", ns, "inferencepools",
                                               pool("no-picker"))
        with pytest.raises(ApiException) as refused:
            custom.create_namespaced_custom_object("inference.networking.k8s.io", "v1", ns, "inferencepools",
                                                   pool("portless-picker", endpointPickerRef={"name": "epp"}))
        assert refused.value.status == 422 and "port is required when kind is 'Service'" in refused.value.body
    finally:
        _gone(cluster, ns)


def test_a_crd_still_terminating_from_an_earlier_module_is_waited_out_before_it_is_installed_again(
        cluster: ControlPlane):
    """Seen in CI under xdist: a module's teardown deleted the NodeMaintenance CRD, the next module's install got a
    409 from the CRD still terminating and went on, and the CRD vanished under its test ("not installed here")."""
    import threading

    from tests.support.crds import create_custom, install_crd, uninstall_crd

    api = cluster.harness_client()
    ext, custom = k8s.ApiextensionsV1Api(api), k8s.CustomObjectsApi(api)
    name, group = "nodemaintenances.maintenance.nvidia.com", "maintenance.nvidia.com"
    install_crd(api, "nodemaintenances")
    ns = _namespace(cluster, "crd-again")
    try:
        # An object a finalizer holds keeps its CRD terminating until the finalizer goes, as a controller's would.
        create_custom(api, "nodemaintenances", ns, {
            "metadata": {"name": "held", "finalizers": ["gputui.test/hold"]},
            "spec": {"requestorID": "gputui.test", "nodeName": "nowhere"}})
        ext.delete_custom_resource_definition(name)
        release = threading.Timer(2.0, lambda: custom.patch_namespaced_custom_object(
            group, "v1alpha1", ns, "nodemaintenances", "held", {"metadata": {"finalizers": None}}))
        release.start()
        install_crd(api, "nodemaintenances")
        release.join()
        crd = ext.read_custom_resource_definition(name)
        assert crd.metadata.deletion_timestamp is None
        time.sleep(1)  # the old CRD's deletion had it finished under us would show now
        assert ext.read_custom_resource_definition(name).metadata.uid == crd.metadata.uid
    finally:
        uninstall_crd(api, "nodemaintenances")
        _gone(cluster, ns)
    with pytest.raises(ApiException) as gone:
        ext.read_custom_resource_definition(name)
    assert gone.value.status == 404


# --- Prometheus ---------------------------------------------------------------------

def test_dcgm_values_are_what_the_exporter_serves(prometheus: PrometheusServer, dcgm_exporter):
    expected = {}
    for i, (node, gpu) in enumerate(dcgm_exporter.gpus()):
        util = (i * 7 + 3) % 100
        dcgm_exporter.set(node, gpu, util=util, fb_used=1000 + i)
        expected[(node, str(gpu))] = float(util)
    got = prometheus.wait_until("DCGM_FI_DEV_GPU_UTIL", lambda v: v == expected, by=("Hostname", "gpu"))
    assert got == expected
    series = prometheus.query('DCGM_FI_DEV_FB_USED{Hostname="gpu-node-3",gpu="2"}')
    labels = series[0]["metric"]
    assert labels["modelName"] == "NVIDIA A100 SXM4 80GB"
    assert labels["DCGM_FI_DRIVER_VERSION"] == "535.161.08"
    assert labels["device"] == "nvidia2" and labels["UUID"].startswith("GPU-") and labels["pci_bus_id"]
    assert labels["job"] == DCGM_JOB
    # memory %: FB_USED / (FB_USED + FB_FREE) joins on identical label sets
    pct = prometheus.query_values("DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)",
                                  by=("Hostname", "gpu"))
    assert len(pct) == len(expected)


def test_backfilled_history_is_queryable(prometheus: PrometheusServer, dcgm_exporter):
    assert prometheus.history_window is not None
    start, end = prometheus.history_window
    assert end - start >= 300
    res = prometheus.query_range('DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-node-2",gpu="5"}', start, end, HISTORY_STEP)
    assert len(res) == 1
    values = [(float(t), float(v)) for t, v in res[0]["values"]]
    assert len(values) == int((end - start) // HISTORY_STEP) + 1
    assert values == [(t, history_util("gpu-node-2", 5, t)) for t, _ in values]
    assert len({v for _, v in values}) > 5  # it varies over time: not one repeated value


def test_inference_pods_get_pod_and_namespace_from_the_scrape_target(
        prometheus: PrometheusServer, inference_exporter: InferenceExporter):
    inference_exporter.add_pod("llm", "vllm-a", running=4, waiting=1)
    inference_exporter.add_pod("llm", "vllm-b", running=0, waiting=0)
    try:
        got = prometheus.wait_until('vllm:num_requests_running{job="%s"}' % INFERENCE_JOB,
                                    lambda v: v == {("llm", "vllm-a"): 4.0, ("llm", "vllm-b"): 0.0},
                                    by=("namespace", "pod"), timeout=20)
        assert got[("llm", "vllm-a")] == 4.0
        # the exporter itself does not label its series with the pod
        body = requests.get(f"http://{inference_exporter.address}/pods/llm/vllm-a/metrics", timeout=5).text
        assert "vllm:num_requests_waiting" in body and "pod=" not in body
        inference_exporter.set("llm", "vllm-a", running=9)
        prometheus.wait_until('vllm:num_requests_running{pod="vllm-a"}', lambda v: list(v.values()) == [9.0])
    finally:
        inference_exporter.remove_pod("llm", "vllm-a")
        inference_exporter.remove_pod("llm", "vllm-b")


def test_prometheus_stop_and_start_on_the_same_port(prometheus: PrometheusServer):
    url = prometheus.url
    prometheus.stop()
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"{url}/-/ready", timeout=2)
    prometheus.start(ready="DCGM_FI_DEV_GPU_UTIL")
    assert prometheus.url == url
    start, end = prometheus.history_window
    assert prometheus.query_range("DCGM_FI_DEV_GPU_UTIL", start, end, 60)  # data survived


# --- apiserver restart (last: it disturbs everyone for a few seconds) ----------

def test_apiserver_restart_keeps_state_and_kubelet_recovers(cluster: ControlPlane, fake_kubelet: FakeKubelet):
    core = k8s.CoreV1Api(cluster.harness_client())
    ns = _namespace(cluster, "restart")
    try:
        cluster.stop_apiserver()
        assert not cluster.apiserver_running()
        with pytest.raises(Exception):  # noqa: B017 - any failure to connect: the client raises several types
            k8s.CoreV1Api(cluster.harness_client()).list_node(_request_timeout=2)
        cluster.start_apiserver()  # waits for /readyz itself (and fails loudly past its timeout)
        assert core.read_namespace(ns).metadata.name == ns  # etcd kept the data
        core.create_namespaced_pod(ns, {
            "metadata": {"name": "after-restart"},
            "spec": {"nodeName": "gpu-node-3", "containers": [{"name": "c", "image": "busybox"}]},
        })
        wait_for(lambda: core.read_namespaced_pod("after-restart", ns).status.phase == "Running", timeout=30,
                 what="fake kubelet to run a pod after the apiserver restart")
    finally:
        if not cluster.apiserver_running():
            cluster.start_apiserver()
        _gone(cluster, ns)


def test_a_pod_event_seen_twice_starts_the_pod_once_with_one_ip(cluster: ControlPlane, fake_kubelet: FakeKubelet):
    """The watch can hand the fake kubelet a pod twice before its first status patch shows (a re-list, a
    MODIFIED event in between): the second patch chose another pod IP, which the apiserver refuses (422:
    pod IPs may not change once set), and the harness logged it as an error."""
    core = k8s.CoreV1Api(cluster.harness_client())
    ns = _namespace(cluster, "twice")
    try:
        created = json.loads(core.create_namespaced_pod(ns, {
            "metadata": {"name": "twice"},
            "spec": {"nodeName": "gpu-node-3", "containers": [{"name": "c", "image": "busybox"}]},
        }, _preload_content=False).data)
        wait_for(lambda: core.read_namespaced_pod("twice", ns).status.pod_ip, timeout=30, what="the pod started")
        ip = core.read_namespaced_pod("twice", ns).status.pod_ip
        errors = len(fake_kubelet.errors)
        fake_kubelet._start_pod(created, force=True)  # the same event again, from before the first patch
        assert fake_kubelet.errors[errors:] == []
        assert core.read_namespaced_pod("twice", ns).status.pod_ip == ip
    finally:
        _gone(cluster, ns)


def test_an_audit_mark_inside_a_line_being_written_skips_that_line(tmp_path):
    """The apiserver writes events as it goes: a mark taken mid-line once made every later read fail on the
    line's tail (seen in the Argo test). The partial event is older than the mark: skipped, not parsed."""
    import json as json_

    from tests.support.control_plane import AuditMark

    first = json_.dumps({"stage": "ResponseComplete", "user": {"username": "u"}, "verb": "get"}).encode() + b"\n"
    second = json_.dumps({"stage": "ResponseComplete", "user": {"username": "u"}, "verb": "patch"}).encode() + b"\n"
    (tmp_path / "audit.log").write_bytes(first + second)
    cp = ControlPlane.__new__(ControlPlane)  # the reader only: no servers
    cp.audit_log_path, cp.users = tmp_path / "audit.log", {}
    assert [e["verb"] for e in cp.audit_events("u", since=AuditMark(10))] == ["patch"]
    assert [e["verb"] for e in cp.audit_events("u", since=AuditMark(len(first)))] == ["patch"]
    assert [e["verb"] for e in cp.audit_events("u", since=AuditMark(0))] == ["get", "patch"]
