"""The version matrix on the real control plane: node software from the kubelets' status, the GPU Operator's
components from the pods its DaemonSets run on each node (made by the real DaemonSet controller), the
engines from the inference pods' images; drift flagged against the node's pool, counted here from the API."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from kubernetes import client

from tests.support.fake_kubelet import GPU_TOLERATION
from tests.support.gputui_cli import run
from tests.support.procs import wait_until
from tests.support.workloads import deployment, running

OPERATOR = "gpu-operator"
NS = "t-versions"
NODES = ("ver-1", "ver-2", "ver-3")
POOL = {"gpu.pool": "versions"}


def _daemonset(name: str, image: str, nodes: dict[str, str]) -> dict:
    labels = {"app": name}
    return {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": labels}, "template": {
        "metadata": {"labels": labels}, "spec": {"nodeSelector": nodes, "tolerations": [GPU_TOLERATION],
                                                 "terminationGracePeriodSeconds": 1,
                                                 "containers": [{"name": "c", "image": image}]}}}}


@pytest.fixture(scope="module")
def fleet(cluster, fake_kubelet):
    api = cluster.harness_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    for i, name in enumerate(NODES):
        fake_kubelet.add_node(name, gpus=8, labels={**POOL, "gputui.test/node": name},
                              node_info={"kernelVersion": "6.8.0-fake" if i < 2 else "6.5.0-old"})
    for ns in (OPERATOR, NS):
        core.create_namespace({"metadata": {"name": ns}})
    # The plugin everywhere; the exporter at one tag on two nodes and another on the third.
    apps.create_namespaced_daemon_set(OPERATOR, _daemonset(
        "nvidia-device-plugin-daemonset", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1", POOL))
    apps.create_namespaced_daemon_set(OPERATOR, _daemonset(
        "nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.1-ubuntu22.04",
        {**POOL, "gputui.test/exporter": "new"}))
    apps.create_namespaced_daemon_set(OPERATOR, _daemonset(
        "nvidia-dcgm-exporter-old", "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04",
        {**POOL, "gputui.test/exporter": "old"}))
    for i, name in enumerate(NODES):
        core.patch_node(name, {"metadata": {"labels": {"gputui.test/exporter": "old" if i == 2 else "new"}}})
    body = deployment("ver-chat", "ver-chat", "v1", 3, 1, ns=NS)
    body["spec"]["template"]["spec"]["nodeSelector"] = POOL
    apps.create_namespaced_deployment(NS, body)

    def placed():
        pods = core.list_namespaced_pod(OPERATOR).items + core.list_namespaced_pod(NS).items
        mine = [p for p in pods if p.spec.node_name in NODES and p.status.phase == "Running"]
        return mine if len(mine) == 3 + 3 + 3 else None

    wait_until(placed, 90, what="the operator's DaemonSet pods and the engines running on the pool")
    yield api
    for ns in (OPERATOR, NS):
        core.delete_namespace(ns)
    for name in NODES:
        fake_kubelet.remove_node(name)


def test_versions_are_what_the_api_holds_with_drift_within_the_pool(cluster, fleet, tmp_path):
    core = client.CoreV1Api(fleet)
    out = run("versions", "--kubeconfig", str(cluster.admin_kubeconfig), "-o", "json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {r["node"]: r for r in json.loads(out.stdout) if r["node"] in NODES}
    assert set(rows) == set(NODES) and {r["pool"] for r in rows.values()} == {"versions"}
    # Counted from the API: each node's nodeInfo, and the tags of the pods on it.
    for name in NODES:
        info = core.read_node(name).status.node_info
        pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
        tags = {p.metadata.name.rsplit("-", 1)[0]: p.spec.containers[0].image.rsplit(":", 1)[1] for p in pods}
        got = rows[name]["versions"]
        assert (got["kubelet"], got["runtime"], got["kernel"], got["os"]) == (
            info.kubelet_version, info.container_runtime_version, info.kernel_version, info.os_image)
        assert got["device-plugin"] == tags["nvidia-device-plugin-daemonset"]
        exporter = tags.get("nvidia-dcgm-exporter") or tags.get("nvidia-dcgm-exporter-old")
        assert got["dcgm-exporter"] == exporter
        assert got["engines"] == "v0.9.0" and got["toolkit"] is None  # no toolkit DaemonSet: unknown, not drift
    kernels = Counter(core.read_node(n).status.node_info.kernel_version for n in NODES)
    odd = next(n for n in NODES if kernels[core.read_node(n).status.node_info.kernel_version] == 1)
    assert rows[odd]["drift"] == ["dcgm-exporter", "kernel"]
    assert all(rows[n]["drift"] == [] for n in NODES if n != odd)


def test_the_upgrade_cockpit_says_why_a_node_does_not_move_and_drains_warn(cluster, fleet, tmp_path):
    """The GPU Operator's own ClusterPolicy CRD, a policy allowing one upgrade at a time, and three nodes in
    three states of its state machine, labelled as the operator labels them."""
    from tests.support.crds import install_crd

    install_crd(fleet, "clusterpolicies")
    client.CustomObjectsApi(fleet).create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
        # What the real schema requires of a policy, each section as its chart leaves it by default.
        "spec": {**{k: {} for k in ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "gfd",
                                     "nodeStatusExporter", "operator", "toolkit")},
                 "driver": {"upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1}}}})
    core = client.CoreV1Api(fleet)
    states = {"ver-1": "drain-required", "ver-2": "upgrade-required", "ver-3": "upgrade-failed"}
    for node, state in states.items():
        core.patch_node(node, {"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade-state": state}}})
    policy = client.CustomObjectsApi(fleet).get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies",
                                                                      "cluster-policy")
    assert policy["spec"]["driver"]["upgradePolicy"]["maxUnavailable"] == "25%"  # the CRD's default, applied
    out = run("versions", "--kubeconfig", str(cluster.admin_kubeconfig), "-o", "json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    upgrade = {r["node"]: r["upgrade"] for r in json.loads(out.stdout) if r["node"] in NODES}
    on_ver_1 = [p for p in core.list_pod_for_all_namespaces(field_selector="spec.nodeName=ver-1").items
                if p.metadata.namespace == NS]  # the engines' pods there (the operator's own are DaemonSet pods)
    assert upgrade["ver-1"]["state"] == "drain-required"
    assert upgrade["ver-1"]["stuck"] == (f"{len(on_ver_1)} GPU pods still on the node; the operator waits for them "
                                         "or evicts them" if on_ver_1 else None)
    assert upgrade["ver-2"]["stuck"] == "waiting its turn: 1 node upgrading, maxParallelUpgrades 1"
    assert upgrade["ver-3"]["stuck"].startswith("upgrade failed: the operator leaves the node for manual recovery")
    plan = run("drain", "ver-1", "--dry-run", "-o", "json", "--kubeconfig", str(cluster.admin_kubeconfig), home=tmp_path)
    assert "mid driver upgrade under the GPU Operator (state drain-required)" in plan.stdout, plan.stderr
    # A monitoring agent that sees the GPUs by environment and requests none: the operator never evicts it, so
    # it is why ver-1's driver cannot be swapped, and said so (the real fake-kubelet runs it there).
    core.create_namespaced_pod(NS, {"metadata": {"name": "gpu-agent"}, "spec": {
        "nodeName": "ver-1", "tolerations": [GPU_TOLERATION], "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "image": "example.com/gpu-agent:1",
                        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}})
    try:
        wait_until(lambda: core.read_namespaced_pod("gpu-agent", NS).status.phase == "Running", 60,
                   what="the agent running on ver-1")
        out = run("versions", "--kubeconfig", str(cluster.admin_kubeconfig), "-o", "json", home=tmp_path)
        upgrade = {r["node"]: r["upgrade"] for r in json.loads(out.stdout) if r["node"] in NODES}
        assert upgrade["ver-1"]["stuck"] == ("1 pod uses GPUs without requesting any (NVIDIA_VISIBLE_DEVICES): the "
                                             f"operator never evicts it and the driver stays in use: {NS}/gpu-agent")
        # The operator's own DaemonSet pods on the node see GPUs too: they are not named.
        assert "nvidia-" not in upgrade["ver-1"]["stuck"]
    finally:
        core.delete_namespaced_pod("gpu-agent", NS, grace_period_seconds=0)


def test_pools_count_allocated_idle_and_unallocated_gpus_from_the_real_prometheus(cluster, fake_kubelet,
                                                                                   dcgm_exporter, prometheus, tmp_path):
    """A pool of one node with four whole cards and a MIG card in two 3g.40gb instances (GFD's mixed strategy).
    The real scheduler places four pods there: two holding an idle card each, one a busy card, one both MIG
    instances (one idle); one card stays free. The exporter maps each held card and instance to the pod the
    scheduler placed, so every GPU the metrics attribute is one the API says a pod holds. A second pool whose
    node has a GPU allocated by the real scheduler that no series maps to a pod: its idle figure is unknown,
    never 0. The idle figures are range queries over the window on the real Prometheus. The expected rows are
    worked out by hand from these numbers, not by gputui's pools."""
    core = client.CoreV1Api(cluster.harness_client())
    fake_kubelet.add_node("idle-a", gpus=4, labels={"gpu.pool": "idle-test", "gputui.test/pool": "idle-a",
                                                    "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.count": "5"},
                          extra_resources={"nvidia.com/mig-3g.40gb": "2"})
    fake_kubelet.add_node("idle-b", gpus=2, labels={"gpu.pool": "idle-unattributed", "gputui.test/pool": "idle-b"})
    dcgm_exporter.add_node("idle-a", gpus=5)  # cards 0-3 whole, card 4 in MIG instances
    dcgm_exporter.add_node("idle-b", gpus=2)
    core.create_namespace({"metadata": {"name": "t-idle"}})
    try:
        # pod -> (what it asks for, the card it holds, that card's utilisation %)
        held = {"held-idle-1": ({"nvidia.com/gpu": 1}, 0, 1), "held-idle-2": ({"nvidia.com/gpu": 1}, 1, 2),
                "held-busy": ({"nvidia.com/gpu": 1}, 2, 60), "held-mig": ({"nvidia.com/mig-3g.40gb": 2}, 4, None)}
        for name, (asks, _card, _util) in held.items():
            core.create_namespaced_pod("t-idle", {"metadata": {"name": name}, "spec": {
                "nodeSelector": {"gputui.test/pool": "idle-a"}, "tolerations": [GPU_TOLERATION],
                "terminationGracePeriodSeconds": 1, "containers": [{
                    "name": "server", "image": "vllm/vllm-openai:v0.9.0",
                    "resources": {"limits": {k: str(v) for k, v in asks.items()}}}]}})
        client.AppsV1Api(cluster.harness_client()).create_namespaced_deployment(
            "t-idle", deployment("held", "held", "v1", 1, 1, ns="t-idle", pool="idle-b"))
        placed = {p.metadata.name for p in running(core, "t-idle", len(held), "idle-a")}
        assert placed == set(held)  # the scheduler put every one on idle-a: their requests fit
        running(core, "t-idle", 1, "idle-b")
        # Only now does the exporter name them, as dcgm-exporter's pod mapping would for the devices the kubelet
        # gave them; card 3 is held by nobody and stays unattributed.
        for name, (_asks, card, util) in held.items():
            if util is not None:
                dcgm_exporter.set("idle-a", card, util=util)
            dcgm_exporter.assign("idle-a", card, "t-idle", name)
        dcgm_exporter.set("idle-a", 3, util=0)
        dcgm_exporter.set_mig("idle-a", 4, [("3g.40gb", 1, 0.01), ("3g.40gb", 2, 0.6)])
        # By hand: units are 4 cards + 2 instances = 6; allocated 3 cards + 2 instances = 5, one card free; idle
        # below 5 %: held-idle-1's and held-idle-2's cards and held-mig's first instance = 3.
        want = {"nodes": 1, "gpus": 6, "allocated": 5, "unallocated": 1, "allocated_idle": 3,
                "idle_unattributed_nodes": 0}

        def pool():
            out = run("pools", "-o", "json", "--idle-window", "15s", "--kubeconfig", str(cluster.admin_kubeconfig),
                      "--prometheus", prometheus.url, home=tmp_path)
            assert out.returncode == 0, out.stderr
            data = json.loads(out.stdout)
            rows = {r["pool"]: r for r in data["pools"]}
            row = rows.get("idle-test")
            return (row, rows, data) if row and row["allocated_idle"] == want["allocated_idle"] else None

        row, rows, data = wait_until(pool, 60, what="three idle GPUs (two cards, one MIG instance) over the window")
        assert {k: row[k] for k in want} == want
        assert (row["by_scheme"]["whole"], row["by_scheme"]["mig"]) == (
            {"allocated": 3, "offered": 4}, {"allocated": 2, "offered": 2})
        unattributed = rows["idle-unattributed"]
        assert (unattributed["allocated"], unattributed["allocated_idle"], unattributed["idle_unattributed_nodes"]) \
            == (1, None, 1)
        assert rows["(fleet)"]["allocated_idle"] is None  # a part unknown leaves the whole unknown
        assert data["idle_unknown_because"].startswith("no pod attribution on ")
    finally:
        core.delete_namespace("t-idle")
        # Its pods end on their nodes (the fake kubelet finalises them) before the nodes go: nothing is left behind.
        wait_until(lambda: not [ns for ns in core.list_namespace().items if ns.metadata.name == "t-idle"], 60,
                   what="namespace t-idle gone")
        for node in ("idle-a", "idle-b"):
            dcgm_exporter.remove_node(node)
            fake_kubelet.remove_node(node)
