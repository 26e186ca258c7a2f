"""Every way a cluster hands out GPUs, on the real control plane: MIG (mixed and single strategy) and
time-sliced nodes from the fake kubelet with the device plugin's resources and GFD's labels, pods placed on
them by the real scheduler in those units; and Dynamic Resource Allocation (resource.k8s.io/v1): a
ResourceSlice published as a DRA driver would, a DeviceClass, and a claim the real scheduler allocates and
reserves for its pod. `gputui nodes -o json` must give what the API holds, counted here independently."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from tests.support.fake_kubelet import GPU_TOLERATION
from tests.support.gputui_cli import run
from tests.support.procs import wait_until
from tests.support.terminal import until

NS = "t-schemes"
POOL = {"gputui.test/pool": "schemes"}
GFD = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
       "nvidia.com/cuda.driver-version.full": "550.54.15", **POOL}
DRIVER = "gpu.nvidia.com"
PODS = [("mig-small", "mig-mixed", {"nvidia.com/mig-1g.10gb": 2}), ("mig-large", "mig-mixed", {"nvidia.com/mig-3g.40gb": 1}),
        ("single", "mig-single", {"nvidia.com/gpu": 3}), ("shared-a", "shared", {"nvidia.com/gpu.shared": 2}),
        ("shared-b", "shared", {"nvidia.com/gpu.shared": 1})]


def _pod(name: str, node: str, resources: dict[str, int], claim: str | None = None) -> dict:
    container: dict = {"name": "server", "image": "vllm/vllm-openai:v0.9.0"}
    if resources:
        container["resources"] = {"limits": {k: str(v) for k, v in resources.items()}}
    spec: dict = {"nodeSelector": {"kubernetes.io/hostname": node}, "tolerations": [GPU_TOLERATION],
                  "terminationGracePeriodSeconds": 1, "containers": [container]}
    if claim:
        container["resources"] = {"claims": [{"name": "gpu"}]}
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return {"metadata": {"name": name, "labels": {"app.kubernetes.io/name": name}}, "spec": spec}


@pytest.fixture(scope="module")
def schemes(cluster, fake_kubelet):
    api = cluster.harness_client()
    core = client.CoreV1Api(api)
    fake_kubelet.add_node("mig-mixed", gpus=0, labels={**GFD, "nvidia.com/gpu.count": "2", "nvidia.com/mig.strategy": "mixed"},
                          extra_resources={"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2"})
    fake_kubelet.add_node("mig-single", gpus=0, labels={
        **GFD, "nvidia.com/gpu.count": "1", "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}, extra_resources={"nvidia.com/gpu": "7"})
    fake_kubelet.add_node("shared", gpus=0, labels={
        **GFD, "nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED"},
        extra_resources={"nvidia.com/gpu.shared": "16"})
    fake_kubelet.add_node("dra", gpus=0, labels=dict(GFD))
    core.create_namespace({"metadata": {"name": NS}})
    _dra_objects(api)
    for name, node, res in PODS:
        core.create_namespaced_pod(NS, _pod(name, node, res))
    core.create_namespaced_pod(NS, _pod("claimant", "dra", {}, claim="two-gpus"))

    def running():
        items = core.list_namespaced_pod(NS).items
        return items if len(items) == 6 and all(p.status.phase == "Running" for p in items) else None

    wait_until(running, 60, what="the pods of every scheme running")
    yield api
    core.delete_namespace(NS)
    custom = client.CustomObjectsApi(api)
    custom.delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", "dra-gpu.nvidia.com")
    custom.delete_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", DRIVER)
    for name in ("mig-mixed", "mig-single", "shared", "dra"):
        fake_kubelet.remove_node(name)


def _dra_objects(api) -> None:
    """As NVIDIA's DRA driver publishes them (a slice per node, its devices with attributes; a tainted one),
    a DeviceClass selecting its devices, and a claim for two of them."""
    custom = client.CustomObjectsApi(api)
    devices = [{"name": f"gpu-{i}", "attributes": {"productName": {"string": "NVIDIA A100-SXM4-80GB"},
                                                  "driverVersion": {"version": "550.54.15"}}}
               for i in range(4)]
    devices[3]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}]
    custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "dra-gpu.nvidia.com"},
        "spec": {"driver": DRIVER, "nodeName": "dra", "pool": {"name": "dra", "generation": 1, "resourceSliceCount": 1},
                 "devices": devices}})
    custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    custom.create_namespaced_custom_object("resource.k8s.io", "v1", NS, "resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "two-gpus"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 2}}]}}})


def test_every_scheme_is_counted_as_the_api_holds_it(cluster, schemes, tmp_path):
    core = client.CoreV1Api(schemes)
    custom = client.CustomObjectsApi(schemes)
    claim = custom.get_namespaced_custom_object("resource.k8s.io", "v1", NS, "resourceclaims", "two-gpus")
    results = claim["status"]["allocation"]["devices"]["results"]  # the real scheduler's allocation
    assert len(results) == 2 and all(r["driver"] == DRIVER and r["pool"] == "dra" for r in results)
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["claimant"]

    # Counted here from the API objects, independently of gputui.
    expected: dict[str, dict[str, tuple[int, int]]] = {}
    for node in ("mig-mixed", "mig-single", "shared"):
        allocatable = core.read_node(node).status.allocatable
        on_node = [p for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items]
        for name, value in allocatable.items():
            if name.startswith("nvidia.com/"):
                used = sum(int((c.resources.limits or {}).get(name, 0)) for p in on_node for c in p.spec.containers)
                expected.setdefault(node, {})[name] = (used, int(value))
    slice_devices = custom.get_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", "dra-gpu.nvidia.com")
    expected["dra"] = {f"dra:{DRIVER}": (len(results), len(slice_devices["spec"]["devices"]))}

    out = run("nodes", "--kubeconfig", str(cluster.admin_kubeconfig), "-o", "json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    nodes = {n["name"]: n for n in json.loads(out.stdout)}
    got = {name: {r["name"]: (r["allocated"], r["allocatable"]) for r in nodes[name]["gpu_resources"]}
           for name in expected}
    assert got == expected
    assert {name: nodes[name]["allocation"] for name in expected} == {
        "mig-mixed": "3/9 MIG of 2 GPUs", "mig-single": "3/7 MIG of 1 GPU", "shared": "3/16 ×4 shared",
        "dra": "2/4 DRA"}
    # GFD's count where GFD labels it; a DRA node's cards are its driver's devices.
    assert {name: nodes[name]["physical_gpus"] for name in expected} == {
        "mig-mixed": 2, "mig-single": 1, "shared": 4, "dra": len(slice_devices["spec"]["devices"])}
    assert any("gpu-3 tainted gpu.nvidia.com/xid=79:NoExecute: its pods are deleted, past PodDisruptionBudgets"
               in a for a in nodes["dra"]["alerts"])


async def test_node_detail_lists_slices_and_devices_with_the_pods_holding_them(cluster, schemes, tmp_path):
    """The detail of a MIG and a DRA node: each resource, its units in use, and which pods hold them."""
    import asyncio

    from gputui.backends.kube_backend import live_backend
    from gputui.ops.audit import AuditLog
    from gputui.settings import Settings
    from gputui.ui.app import GputuiApp
    from gputui.ui.screens.node_detail import NodeDetailScreen

    settings = Settings(kubeconfig=str(cluster.admin_kubeconfig), refresh=1.0)
    backend = live_backend(settings)
    app = GputuiApp(settings, backend, audit=AuditLog(tmp_path / "audit.jsonl", "admin", backend.context))

    async def info(pilot, node: str) -> str:
        app.push_screen(NodeDetailScreen(node))
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            screen = app.screen
            found = screen.query("#node-info") if isinstance(screen, NodeDetailScreen) and screen.node_name == node else []
            if found:
                text = str(found.first().content)
                if "allocated" in text:
                    return text
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"no detail of {node}")
            await pilot.pause(0.1)

    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await until(pilot, lambda: app.snapshot is not None and app.snapshot.node("dra") is not None)
            mig = await info(pilot, "mig-mixed")
            assert "GPUs 3/9 MIG of 2 GPUs allocated" in mig
            assert "nvidia.com/mig-1g.10gb (MIG)  2/7  mig-small ×2" in mig
            assert "nvidia.com/mig-3g.40gb (MIG)  1/2  mig-large ×1" in mig
            app.pop_screen()
            dra = await info(pilot, "dra")
            assert "dra:gpu.nvidia.com (DRA)  2/4  claimant ×2" in dra
            assert "gpu-3 tainted gpu.nvidia.com/xid=79:NoExecute" in dra
    finally:
        app.backend.close()


def test_a_mig_gpus_utilisation_is_its_instances_activity(cluster, schemes, dcgm_exporter, prometheus):
    """dcgm-exporter serves no utilisation gauge for a MIG GPU, only its instances' graphics-engine activity
    (with GPU_I_PROFILE and GPU_I_ID): the real Prometheus answers gputui's queries, and the MIG node's
    utilisation is its instances' mean (30%), and the node's the mean of its two cards (55%), per GPU and per
    node, never unknown, 0, or weighted by how many slices a card was cut into."""
    from gputui.backends.kube_backend import live_backend
    from gputui.settings import Settings

    dcgm_exporter.add_node("mig-mixed", gpus=2, model="NVIDIA A100-SXM4-80GB")
    try:
        dcgm_exporter.set("mig-mixed", util=0)
        dcgm_exporter.set_mig("mig-mixed", 0, [("1g.10gb", 1, 0.5), ("1g.10gb", 2, 0.3), ("3g.40gb", 3, 0.1)])
        dcgm_exporter.set("mig-mixed", 1, util=80)  # the other GPU is not partitioned
        for per_gpu in (True, False):
            backend = live_backend(Settings(kubeconfig=str(cluster.admin_kubeconfig), prometheus=prometheus.url),
                                   per_gpu=per_gpu)
            try:
                def read():
                    snap = backend.reader.snapshot()  # noqa: B023 - called at once, in this iteration
                    node = snap.node("mig-mixed")
                    util = snap.gauges(node).util_pct if node is not None else None
                    return (snap, node) if util is not None and abs(util - 55.0) < 0.01 else None

                snap, node = wait_until(read, 60, what="the MIG node's utilisation from its instances")
                if snap.summary(node) is None:  # per GPU: GPU 0 is the mean of its instances
                    assert {g.index: round(g.util_pct, 2) for g in node.gpus} == {0: 30.0, 1: 80.0}
                else:
                    assert snap.summary(node).count == 2  # two cards, whatever their slicing
            finally:
                backend.close()
    finally:
        dcgm_exporter.remove_node("mig-mixed")


def test_an_identity_refused_dra_still_starts_and_says_what_it_cannot_count(cluster, schemes, tmp_path):
    """A role that may read nodes and pods but not resource.k8s.io: gputui starts (before, the refused
    watch stopped it), and the snapshot says DRA is not readable instead of counting the DRA node as empty."""
    import yaml

    from gputui.backends.kube_backend import live_backend
    from gputui.settings import Settings

    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "no-dra", "namespace": NS}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "t-no-dra"},
         # Every group another test may have installed, read-only; all but resource.k8s.io.
         "rules": [{"apiGroups": ["", "apps", "policy", "gateway.networking.k8s.io", "networking.istio.io",
                                  "split.smi-spec.io", "argoproj.io", "inference.networking.k8s.io", "nvidia.com"],
                    "verbs": ["get", "list", "watch"], "resources": ["*"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "t-no-dra"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "t-no-dra"},
         "subjects": [{"kind": "ServiceAccount", "name": "no-dra", "namespace": NS}]}]).encode())
    token = cluster.kubectl("-n", NS, "create", "token", "no-dra").stdout.decode().strip()
    kubeconfig = tmp_path / "no-dra.yaml"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "c", "cluster": {"server": cluster.api_url, "certificate-authority": str(cluster.ca_file)}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}]}))
    backend = live_backend(Settings(kubeconfig=str(kubeconfig), read_only=True))
    try:
        snap = backend.reader.snapshot()
    finally:
        backend.close()
    dra = snap.source("DRA")
    assert dra is not None and dra.error == "not readable (forbidden): GPUs it allocates are not counted"
    assert snap.node("mig-mixed") is not None  # the rest of the fleet is there
