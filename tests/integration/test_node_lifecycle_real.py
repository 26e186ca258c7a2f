"""Node lifecycle conditions (KEP-5683; issue 40 items 1 and 4) on the real kube-apiserver: where its
NodeLifecycleConditions gate is on, a gputui drain sets DrainInProgress while it runs, then DrainInProgress False
and Drained True, through nodes/status beside the kubelet's own conditions (a heartbeat keeps them); an uncordon
clears Drained. Where the gate is off (the shared control plane, as every cluster by default), nothing is set.
Another writer's DrainInProgress (as `kubectl drain --report-node-conditions` would write it) is a hold gputui
shows, and an uncordon over it is refused headless, naming it."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client

from tests.support.gputui_cli import run
from tests.support.procs import wait_until


def conditions(core: client.CoreV1Api, node: str) -> dict[str, dict]:
    raw = json.loads(core.read_node_status(node, _preload_content=False).data)
    return {c["type"]: c for c in raw["status"].get("conditions") or []}


def audited(home) -> list[tuple[str, dict, str]]:
    lines = (home / ".state" / "gputui" / "audit.jsonl").read_text().splitlines()
    return [(e["action"], e["params"], e.get("result", "")) for e in map(json.loads, lines)
            if e["action"] == "node-condition" and e["phase"] == "result"]


@pytest.fixture
def node(alpha_kubelet):
    """A node of the alpha plane for one test, gone after it (the other tests there see their own nodes only)."""
    made = []

    def add(name: str) -> str:
        alpha_kubelet.add_node(name, gpus=2)
        made.append(name)
        return name
    yield add
    for name in made:
        alpha_kubelet.remove_node(name)


def test_a_drain_marks_the_node_draining_then_drained_and_an_uncordon_clears_it(alpha_cluster, node, tmp_path):
    core = client.CoreV1Api(alpha_cluster.harness_client())
    kc = ("--kubeconfig", str(alpha_cluster.admin_kubeconfig))
    node("lc-1")
    out = run("drain", "lc-1", *kc, home=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "node lifecycle condition DrainInProgress set" in out.stdout
    marks = conditions(core, "lc-1")
    assert (marks["DrainInProgress"]["status"], marks["DrainInProgress"]["reason"]) == ("False", "GputuiDrainCompleted")
    assert (marks["Drained"]["status"], marks["Drained"]["reason"]) == ("True", "GputuiDrainCompleted")
    assert marks["Ready"]["status"] == "True"  # the kubelet's own stay beside them
    # Once per state change, in order: in progress, no longer, drained.
    assert [(p["type"], p["status"]) for _a, p, _r in audited(tmp_path)] == [
        ("DrainInProgress", "True"), ("DrainInProgress", "False"), ("Drained", "True")]
    beat = marks["Ready"]["lastHeartbeatTime"]
    wait_until(lambda: conditions(core, "lc-1")["Ready"]["lastHeartbeatTime"] != beat, 15, what="a kubelet heartbeat")
    assert conditions(core, "lc-1")["Drained"]["status"] == "True"  # the kubelet's status patch merges by type
    out = run("uncordon", "lc-1", *kc, home=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    marks = conditions(core, "lc-1")
    assert (marks["Drained"]["status"], marks["Drained"]["reason"]) == ("False", "GputuiUncordoned")
    assert not core.read_node("lc-1").spec.unschedulable


def test_another_writers_drain_in_progress_is_shown_and_an_uncordon_over_it_is_refused(alpha_cluster, node, tmp_path):
    core = client.CoreV1Api(alpha_cluster.harness_client())
    kc = ("--kubeconfig", str(alpha_cluster.admin_kubeconfig))
    node("lc-2")
    began = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 600))
    core.patch_node("lc-2", {"spec": {"unschedulable": True}})
    core.patch_node_status("lc-2", {"status": {"conditions": [{
        "type": "DrainInProgress", "status": "True", "reason": "AdminRequested", "message": "kernel upgrade",
        "lastTransitionTime": began, "lastHeartbeatTime": began}]}})
    out = run("disruptions", "-o", "json", *kc, home=tmp_path)
    rows = [r for r in json.loads(out.stdout)["disruptions"] if r["node"] == "lc-2"]
    lifecycle = [r for r in rows if r["actor"] == "node-lifecycle"]
    assert len(lifecycle) == 1, rows
    assert lifecycle[0]["phase"] == "DrainInProgress" and "AdminRequested: kernel upgrade" in lifecycle[0]["why"]
    assert abs(lifecycle[0]["since"] - (time.time() - 600)) < 5
    out = run("uncordon", "lc-2", *kc, home=tmp_path)
    assert out.returncode != 0 and "another writer marks it: DrainInProgress (AdminRequested: kernel upgrade)" in out.stderr, out.stderr
    assert core.read_node("lc-2").spec.unschedulable


def test_where_the_gate_is_off_a_drain_sets_no_condition(cluster, fake_kubelet, tmp_path):
    core = client.CoreV1Api(cluster.harness_client())
    fake_kubelet.add_node("lc-off", gpus=2)
    try:
        out = run("drain", "lc-off", "--kubeconfig", str(cluster.admin_kubeconfig), home=tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "lifecycle" not in out.stdout  # off is the default of every cluster: nothing to say
        assert not {"DrainInProgress", "Drained"} & set(conditions(core, "lc-off"))
        out = run("drain", "lc-off", "--kubeconfig", str(cluster.admin_kubeconfig), home=tmp_path,
                  env={"GPUTUI_LIFECYCLE_CONDITIONS": "on"})  # the setting sets them anyway (1.37 accepts them)
        assert conditions(core, "lc-off")["Drained"]["status"] == "True", out.stdout + out.stderr
    finally:
        fake_kubelet.remove_node("lc-off")
