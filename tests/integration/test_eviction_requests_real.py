"""The alpha EvictionRequest API (KEP-4563) on a real kube-apiserver of its own, started with
`--feature-gates=EvictionRequestAPI=true` and `--runtime-config=lifecycle.k8s.io/v1alpha1=true` (the shared
`cluster` does not serve it). No evictionrequest-controller ships in 1.37.2 (docs/disruption-actors.md §5), so the
test writes what one would: an EvictionRequest for one of a node's two pods (as a requester creates it), and the
Eviction of that pod with a foreign responder Active and the default evictor Inactive behind it, its status through
the status subresource (the apiserver validates the responders' states and times: startTime and heartbeatTime must be
the present time).

Checked: `gputui drain NODE --dry-run -o json` and the text plan name the pending EvictionRequest and its requester,
and the handled pod as a blocker naming the responder, its state and heartbeat age; `gputui disruptions -o json`
names both kinds read; `gputui drain NODE` evicts the other pod and never the handled one (no eviction of it reaches
the apiserver: its audit log says so), says why once, and at its deadline leaves it in place, the drain unfinished
(exit 1). docs/rbac.yaml's role less its lifecycle.k8s.io rule: the plan says the EvictionRequests are unknown (a
warning, not a blocker) and the sources say unknown: forbidden. Fails on the code before them: the plan has no
blockers and the drain evicts both pods."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.support.control_plane import ControlPlane
from tests.support.drain_safety import POOL_LABEL, batch_pods, brief, place
from tests.support.fake_kubelet import FakeKubelet
from tests.support.gputui_cli import run
from tests.support.procs import HarnessError
from tests.support.rbac import bound_role, kubeconfig_for, role_rules, wait_rbac

GROUP, VERSION = "lifecycle.k8s.io", "v1alpha1"
NS, NODE, SPARE = "t-evr", "evr-node", "evr-spare"
REQUESTER = "example.com/upgrader"
RESPONDER = "inference.example.com/kv-migrator"
EVICTOR = "imperative-eviction.k8s.io/evictor"


@pytest.fixture(scope="module")
def gated(alpha_cluster: ControlPlane) -> ControlPlane:
    """The session's control plane with the alpha lifecycle gates on (tests/integration/conftest.py: ALPHA_APISERVER)."""
    return alpha_cluster


@pytest.fixture(scope="module")
def gated_kubelet(alpha_kubelet: FakeKubelet) -> Iterator[FakeKubelet]:
    for name in (NODE, SPARE):
        alpha_kubelet.add_node(name, gpus=4, labels={POOL_LABEL: NODE})
    if not alpha_kubelet.synced.wait(30):
        raise HarnessError(f"fake kubelet never listed pods; errors: {alpha_kubelet.errors}")
    try:
        yield alpha_kubelet
    finally:
        for name in (NODE, SPARE):
            alpha_kubelet.remove_node(name)


def now_time() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_handled(custom: Any, pod: Any) -> None:
    """The EvictionRequest (spec only: a requester writes no status), then the Eviction its controller would make,
    its status put through the subresource as the controller and the Active responder would leave it."""
    target = {"pod": {"name": pod.metadata.name, "uid": pod.metadata.uid}}
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, "evictionrequests", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "EvictionRequest", "metadata": {"name": f"{pod.metadata.name}-upgrade"},
        "spec": {"target": target, "requester": REQUESTER, "intent": "Eviction"}})
    name = pod.metadata.uid  # informative only (the API says so): the controller's choice, not read by gputui
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, "evictions", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Eviction",
        "metadata": {"name": name, "labels": {REQUESTER: "requester", RESPONDER: "responder", EVICTOR: "responder"}},
        "spec": {"target": target}})
    obj = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "evictions", name)
    at = now_time()
    obj["status"] = {
        "requesters": [{"name": REQUESTER, "intent": "Eviction"}],
        "targetResponders": [{"name": RESPONDER, "priority": 10000, "state": "Active"},
                             {"name": EVICTOR, "priority": 100, "state": "Inactive"}],
        "responders": [{"name": RESPONDER, "startTime": at, "heartbeatTime": at, "message": "moving its KV cache"},
                       {"name": EVICTOR}]}
    written = custom.replace_namespaced_custom_object_status(GROUP, VERSION, NS, "evictions", name, obj)
    assert written["status"]["targetResponders"][0]["state"] == "Active", written


def role_without_lifecycle(name: str) -> list[dict]:
    """docs/rbac.yaml's ClusterRole less its lifecycle.k8s.io rule, bound to a ServiceAccount of NS."""
    _, rules = role_rules()
    kept = [r for r in rules if GROUP not in r.get("apiGroups", [])]
    assert len(kept) == len(rules) - 1, "docs/rbac.yaml has no lifecycle.k8s.io rule"
    return bound_role(name, NS, kept)


def test_a_pod_another_responder_handles_is_planned_as_a_blocker_and_never_evicted(gated, gated_kubelet, tmp_path):
    api = gated.harness_client()
    core: Any = client.CoreV1Api(api)
    apps, custom = client.AppsV1Api(api), client.CustomObjectsApi(api)
    admin = ("--kubeconfig", str(gated.admin_kubeconfig))
    limited = "t-evr-no-lifecycle"
    core.create_namespace({"metadata": {"name": NS}})
    try:
        handled, other = place(core, apps, NS, batch_pods("llm", NS, NODE, 2), NODE, 2, spare=SPARE)
        write_handled(custom, handled)
        key = f"{NS}/{handled.metadata.name}"

        # The plan, as scripts read it: the pending request and the blocker, per pod and for the node.
        out = run("drain", NODE, "--dry-run", "-o", "json", *admin, home=tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr  # a blocker stops no drain: the rest of the node goes
        (plan,) = json.loads(out.stdout)["nodes"]
        pods = {p["name"]: p for p in plan["pods"]}
        mine = pods[handled.metadata.name]["eviction_requests"]
        assert plan["eviction_requests"] == "read" and not plan["blocked"]
        assert mine["requesters"] == [REQUESTER] and len(mine["pending"]) == 1
        assert mine["pending"][0].startswith(f"EvictionRequest by {REQUESTER} pending since "), mine
        h = mine["handled_by"]
        assert (h["responder"], h["state"], h["stale"], h["eviction"]) == \
            (RESPONDER, "Active", False, handled.metadata.uid)
        assert 0 <= h["heartbeat_age_s"] < 20 * 60
        (blocker,) = plan["blockers"]
        assert blocker.startswith(f"{key}: its eviction is handled by {RESPONDER} (Active, heartbeat ")
        assert blocker.endswith(" ago): gputui will not evict it")
        assert pods[other.metadata.name]["eviction_requests"] == {"pending": [], "requesters": [], "handled_by": None}
        text = run("drain", NODE, "--dry-run", *admin, home=tmp_path).stdout
        assert text.startswith(f"node/{NODE}: ready to drain; 1 pod left to another responder\n"), text
        assert f"  blocker: {key}: its eviction is handled by {RESPONDER} (Active" in text, text
        assert f"EvictionRequest by {REQUESTER} pending since" in text, text
        listed = json.loads(run("disruptions", "-o", "json", "--read-only", *admin, home=tmp_path).stdout)
        assert listed["sources"]["EvictionRequest"] == listed["sources"]["Eviction"] == "read", listed["sources"]

        # The drain: the other pod evicted, the handled one never; left in place at the deadline, unfinished.
        mark = gated.audit_mark()
        drained = run("drain", NODE, "--session-deadline", "8s", *admin, home=tmp_path)
        said = drained.stdout + drained.stderr
        assert drained.returncode == 1, said
        waits = [line for line in said.splitlines() if " waiting " in line and key in line]
        assert len(waits) == 1 and f"its eviction is handled by {RESPONDER} (Active" in waits[0], said
        assert "left in place at its deadline: its eviction is handled by" in said, said
        evictions = sorted(brief(e) for e in gated.audit_events("admin", since=mark, verbs={"create"}, resource="pods")
                           if (e.get("objectRef") or {}).get("subresource") == "eviction")
        assert evictions == [("create", "pods/eviction", NS, other.metadata.name, 201)], evictions
        live = core.read_namespaced_pod(handled.metadata.name, NS)
        assert live.metadata.uid == handled.metadata.uid and live.metadata.deletion_timestamp is None
        assert other.metadata.uid not in {p.metadata.uid for p in core.list_namespaced_pod(NS).items
                                          if not p.metadata.deletion_timestamp}

        # docs/rbac.yaml's role without its lifecycle.k8s.io rule: unknown, said, and the plan still not blocked.
        gated.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(role_without_lifecycle(limited)).encode())
        token = gated.kubectl("-n", NS, "create", "token", limited, "--duration", "1h").stdout.decode().strip()
        kubeconfig = kubeconfig_for(gated, tmp_path / "limited.yaml", token)
        wait_rbac(gated, kubeconfig)
        blind = ("--kubeconfig", str(kubeconfig), "--read-only")
        out = run("drain", NODE, "--dry-run", "-o", "json", *blind, home=tmp_path)
        (plan,) = json.loads(out.stdout)["nodes"]
        assert plan["eviction_requests"].startswith("unknown: EvictionRequests forbidden"), plan
        assert plan["blockers"] == [] and not plan["blocked"]
        assert any(w.startswith("EvictionRequests unknown: ") and "is not known" in w for w in plan["warnings"]), plan
        listed = json.loads(run("disruptions", "-o", "json", *blind, home=tmp_path).stdout)
        assert listed["sources"]["EvictionRequest"].startswith("unknown: forbidden"), listed["sources"]
        assert listed["sources"]["Eviction"].startswith("unknown: forbidden"), listed["sources"]
    finally:
        gated.kubectl("delete", "clusterrole,clusterrolebinding", limited, "--ignore-not-found", check=False)
        apps.delete_collection_namespaced_deployment(NS)
        core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
        core.delete_namespace(NS)
