"""A batch drain with --parallel 2 and its capacity guard on the real cluster (issue 34): the plan (--dry-run)
says where the guard will stop, and the run, two nodes at a time, stops there. The pods it evicts are placed
again by the real scheduler on the one spare node, which the guard counts."""

from __future__ import annotations

import json

from tests.support.drain_safety import POOL_LABEL, app_writes, batch_pods, pods_on, scene
from tests.support.gputui_cli import run

PRODUCT = "NVIDIA-L4-GUARD-TEST"  # a GPU model of its own: only these nodes count for the batch's capacity
POOL = "batch-guard"
BATCH = ["guard-1", "guard-2", "guard-3"]  # two one-GPU pods each, on 2 GPUs
SPARE = "guard-spare"  # 4 free GPUs: room for two of the batch's nodes, not three


def test_a_parallel_batch_stops_where_its_plan_said_the_capacity_guard_would(cluster, fake_kubelet, tmp_path):
    """The plan: guard-1 and guard-2 fit on the spare node (4 GPUs), guard-3 does not. The run drains guard-1 and
    guard-2 at once and does not start guard-3: not cordoned, not written to, its pods in place; exit 1.

    Fails on this one-line mutation of gputui/ops/drain/batch.py's run_batch: `guard = _guard(snap, set(active) |
    {node}, members, per_node)` → `guard = None` (guard-3 drained, its pods left with nowhere to run); and on this
    one: `while pending and len(active) < max(1, parallel):` → `while pending and len(active) < 1:` (one node at a
    time: guard-2 starts only after guard-1 is done)."""
    ns = "t-batch-guard"
    spec = {"gpus": 2, "product": PRODUCT, "labels": {POOL_LABEL: POOL}}
    with scene(cluster, fake_kubelet, ns, {**{n: spec for n in BATCH}, SPARE: {**spec, "gpus": 4}}) as (core, apps, _):
        # Each node's pods placed there: only that node has room when its Deployment is made.
        for node in [*BATCH[1:], SPARE]:
            core.patch_node(node, {"spec": {"unschedulable": True}})
        pods = {}
        for node in BATCH:
            core.patch_node(node, {"spec": {"unschedulable": None}})
            apps.create_namespaced_deployment(ns, batch_pods(f"{node}-job", ns, POOL, 2))
            pods[node] = pods_on(core, ns, node, 2)
        core.patch_node(SPARE, {"spec": {"unschedulable": None}})
        kc = ("--kubeconfig", str(cluster.admin_kubeconfig))

        plan = run("drain", *BATCH, "--parallel", "2", "--dry-run", "-o", "json", *kc, home=tmp_path)
        assert plan.returncode == 1, plan.stdout + plan.stderr  # a clean plan that will not finish: 1
        predicted = json.loads(plan.stdout)
        assert predicted["guard_stops_before"] == "guard-3", predicted
        words = run("drain", *BATCH, "--parallel", "2", "--dry-run", *kc, home=tmp_path).stdout
        assert "the capacity guard would stop before guard-3: 2 of 3 nodes drained (guard-1, guard-2)" in words, words

        mark = cluster.audit_mark()
        out = run("drain", *BATCH, "--parallel", "2", *kc, home=tmp_path)
        said = out.stdout + out.stderr
        assert out.returncode == 1, said
        lines = out.stdout.splitlines()
        assert "guard-1: drained, 2 pods evicted" in lines and "guard-2: drained, 2 pods evicted" in lines, said
        assert any(line.startswith("guard-3: not started (capacity guard: ") for line in lines), said
        assert "capacity guard stopped the batch before guard-3" in said, said
        # Two at a time: guard-2 started before guard-1 was done.
        started = next(i for i, line in enumerate(lines) if " guard-2 started " in line)
        done = next(i for i, line in enumerate(lines) if " guard-1 done " in line)
        assert started < done, said

        evicted = sorted(e["objectRef"]["name"] for e in app_writes(cluster, mark)
                         if e["objectRef"].get("subresource") == "eviction" and e["responseStatus"]["code"] == 201)
        assert evicted == sorted(p.metadata.name for n in ("guard-1", "guard-2") for p in pods[n]), evicted
        assert not [e for e in app_writes(cluster, mark) if e["objectRef"].get("name") == "guard-3"]
        assert not core.read_node("guard-3").spec.unschedulable
        assert [p.metadata.uid for p in pods_on(core, ns, "guard-3", 2)] == [p.metadata.uid for p in pods["guard-3"]]
        assert len(pods_on(core, ns, SPARE, 4)) == 4  # the evicted pods run again where the guard counted room
