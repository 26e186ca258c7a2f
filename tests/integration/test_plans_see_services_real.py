"""Plans see services, on the real cluster (issue 35 item 6): a drain plan names the service it would empty and
its pods no PodDisruptionBudget covers; a canary does not raise traffic towards pods a running drain is about to
evict."""

from __future__ import annotations

import subprocess
import sys

from kubernetes import client

from tests.support.crds import create_custom, install_crd
from tests.support.gputui_cli import environment, read_until, run
from tests.support.workloads import deployment, running

NS = "t-plans-see-services"
POOL = "plans-see"
EMPTIED, OTHER = "see-1", "see-2"  # the drain test's nodes; the canary's have names of their own (a deleted
# namespace's pods linger a while, bound to their node's name)


def test_a_drain_plan_names_the_service_it_empties_and_its_pods_without_a_budget(cluster, fake_kubelet, tmp_path):
    """Both of solo's pods are on see-1 and no PodDisruptionBudget covers them: the plan says both, before
    anything is written. Fails on plan.py without `_unguarded_warnings` (the plan said nothing of the budget)."""
    ns = f"{NS}-drain"
    api = cluster.admin_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    for node in (EMPTIED, OTHER):
        fake_kubelet.add_node(node, gpus=4, labels={"gputui.test/pool": POOL})
    core.create_namespace({"metadata": {"name": ns}})
    try:
        core.patch_node(OTHER, {"spec": {"unschedulable": True}})
        apps.create_namespaced_deployment(ns, deployment("solo-v1", "solo", "v1", 2, 1, ns=ns, pool=POOL))
        running(core, ns, 2, EMPTIED)
        core.patch_node(OTHER, {"spec": {"unschedulable": None}})
        plan = run("drain", EMPTIED, "--dry-run", "--kubeconfig", str(cluster.admin_kubeconfig), home=tmp_path)
        said = plan.stdout + plan.stderr
        assert f"every pod of {ns}/solo" in said, said
        assert (f"{ns}/solo: no PodDisruptionBudget covers its 2 pods here: nothing but this drain limits how many "
                "of its pods go at once") in said, said
        assert said.count("[no PodDisruptionBudget]") == 2, said  # each pod's line
    finally:
        core.delete_namespace(ns)
        for node in (EMPTIED, OTHER):
            fake_kubelet.remove_node(node)


def test_a_canary_holds_before_raising_traffic_to_pods_a_drain_is_evicting(cluster, fake_kubelet, tmp_path):
    """v2's pods are all on one node, whose drain runs (waiting for their sessions, unknown without metrics,
    and held by v2's PodDisruptionBudget besides): the canary's plan holds its first step, says why, and exits 1 (a plan that will not finish).
    Fails on canary_steps.step_blocker without its `going` check (the steps were offered as 'will be taken')."""
    ns, emptied, other = f"{NS}-canary", "see-canary-1", "see-canary-2"
    api = cluster.admin_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    policy = client.PolicyV1Api(api)
    install_crd(api, "httproutes")
    for node in (emptied, other):
        fake_kubelet.add_node(node, gpus=4, labels={"gputui.test/pool": POOL})
    core.create_namespace({"metadata": {"name": ns}})
    drain = None
    try:
        for version, here, away in (("v2", emptied, other), ("v1", other, emptied)):
            core.patch_node(away, {"spec": {"unschedulable": True}})
            apps.create_namespaced_deployment(ns, deployment(f"chat-{version}", "chat", version, 2, 1, ns=ns, pool=POOL))
            running(core, ns, 2, here)
            core.patch_node(away, {"spec": {"unschedulable": None}})
            core.create_namespaced_service(ns, {"metadata": {"name": f"chat-{version}"}, "spec": {
                "selector": {"app.kubernetes.io/name": "chat", "app.kubernetes.io/version": version},
                "ports": [{"port": 80}]}})
        create_custom(api, "httproutes", ns, {"metadata": {"name": "chat"}, "spec": {"rules": [{"backendRefs": [
            {"name": "chat-v1", "port": 80, "weight": 100}, {"name": "chat-v2", "port": 80, "weight": 0}]}]}})
        policy.create_namespaced_pod_disruption_budget(ns, {"metadata": {"name": "v2-pdb"}, "spec": {
            "minAvailable": 2, "selector": {"matchLabels": {"app.kubernetes.io/version": "v2"}}}})
        kc = ("--kubeconfig", str(cluster.admin_kubeconfig))
        before = run("rollout", f"{ns}/chat", "v2", "--steps", "25,50", "--dry-run", *kc, home=tmp_path)
        assert "25%: will be taken" in before.stdout, before.stdout + before.stderr

        drain = subprocess.Popen([sys.executable, "-u", "-m", "gputui", "drain", emptied, *kc],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 env=environment(tmp_path / "drainer"))
        read_until(drain, lambda line: f"{emptied} started" in line)  # cordoned, its drain marked on the node
        held = run("rollout", f"{ns}/chat", "v2", "--steps", "25,50", "--dry-run", *kc, home=tmp_path)
        said = held.stdout + held.stderr
        assert held.returncode == 1, said
        assert f"every ready pod of v2 is waiting to be evicted (2 on {emptied})" in said, said
        assert "25%: will be taken" not in said, said
    finally:
        if drain is not None:
            drain.kill()
            drain.wait(30)
        core.delete_namespace(ns)
        for node in (emptied, other):
            fake_kubelet.remove_node(node)
