"""Two drains at once on the real cluster (issue 35 item 2): a plan made while another gputui drains a node
counts what that drain's pods still move before its own, so the two never count the same free GPU."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.drain_safety import POOL_LABEL, batch_pods, budget, place, scene
from tests.support.gputui_cli import environment, read_until, run

PRODUCT = "NVIDIA-L4-CONCURRENT-TEST"  # a GPU model of its own: only these nodes count for capacity
POOL = "concurrent"
FIRST, SECOND, SPARE = "conc-1", "conc-2", "conc-spare"  # two one-GPU pods each; the spare has room for two


def test_a_plan_made_while_another_gputui_drains_counts_that_drains_pods_first(cluster, fake_kubelet, tmp_path):
    """conc-1's drain runs, held by a PodDisruptionBudget that allows no eviction: its two pods stay, its lease
    lives. Alone, conc-2's plan fits (2 pods, 2 free on the spare); with conc-1's drain running it does not (4
    pods, 2 free), and the plan says why.

    Fails on this one-line mutation of gputui/cli/drain.py: `running = draining(snap, time.time())` →
    `running = []` (the plan counts the spare's GPUs for conc-2's pods as if conc-1's drain were not there)."""
    ns = "t-concurrent-drains"
    spec = {"gpus": 2, "product": PRODUCT, "labels": {POOL_LABEL: POOL}}
    nodes = {FIRST: spec, SECOND: spec, SPARE: spec}
    with scene(cluster, fake_kubelet, ns, nodes) as (core, apps, policy):
        core.patch_node(SECOND, {"spec": {"unschedulable": True}})
        place(core, apps, ns, batch_pods("first", ns, POOL, 2), FIRST, 2, spare=SPARE)
        core.patch_node(SECOND, {"spec": {"unschedulable": None}})
        core.patch_node(FIRST, {"spec": {"unschedulable": True}})
        place(core, apps, ns, batch_pods("second", ns, POOL, 2), SECOND, 2, spare=SPARE)
        core.patch_node(FIRST, {"spec": {"unschedulable": None}})
        policy.create_namespaced_pod_disruption_budget(ns, budget("first-pdb", "first", 2))
        kc = ("--kubeconfig", str(cluster.admin_kubeconfig))

        alone = run("drain", SECOND, "--dry-run", "-o", "json", *kc, home=tmp_path)
        assert alone.returncode == 0, alone.stdout + alone.stderr
        assert json.loads(alone.stdout)["guard_stops_before"] is None

        other = subprocess.Popen([sys.executable, "-u", "-m", "gputui", "drain", FIRST, *kc],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 env=environment(tmp_path / "other"))
        try:
            # Its eviction refused by the budget: the drain is running, holding its lease, the pods in place.
            read_until(other, lambda line: "disruption budget" in line.lower() or "pdb" in line.lower())
            plan = run("drain", SECOND, "--dry-run", "-o", "json", *kc, home=tmp_path)
            assert plan.returncode == 1, plan.stdout + plan.stderr
            assert json.loads(plan.stdout)["guard_stops_before"] == SECOND, plan.stdout
            words = run("drain", SECOND, "--dry-run", *kc, home=tmp_path).stdout
            assert f"the drains running on {FIRST} still move 2 {PRODUCT} GPUs (2 pods)" in words, words
            assert f"this batch needs 4 {PRODUCT} GPUs (4 pods); 2 are free outside it: does NOT fit" in words, words
        finally:
            other.kill()
            other.wait(30)
