"""The batch plan's budgets where the plan builds them (issue 40 item 3, pinned for issue 34): each budget's exact
record (who sets it, its figures in words, how many nodes, over which nodes, whom it counts as taken, whether it holds
the batch's first node), the head line that says how many nodes start at once and why in each of its cases, the
parallelism asked for carried into the plan, and the plan's JSON of one GPU's drain. The policy side (each budget's
arithmetic) is pinned in test_batch_budgets.py; these kill the mutants of gputui.ops.drain.batch_plan._budgets,
BatchPlan.budget_lines and plan_json that only the real-apiserver tests reached."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputui.backends.demo import DemoCluster
from gputui.backends.demo.actors import DEMO_BUDGETS
from gputui.ops.drain.batch_plan import BatchPlan, batch_json, plan_batch
from gputui.ops.drain.gpu_target import fence_words, gpu_options
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.plan import Step, plan_drain, plan_json
from gputui.policy.batch_budgets import CAPACITY, GPU_OPERATOR, KARPENTER, PDB, UNREAD, BatchBudget
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.gpu_bindings import BoundGpu, GpuBindings
from gputui.vocabulary.model import InferencePod, Node, UpgradePolicy
from tests.demo_clock import ManualClock

A100 = "NVIDIA-A100-SXM4-80GB"
# The demo's NodePool gpu-a100 (gputui/backends/demo/actors.py): the A100 nodes labelled with it (gpu-a100-09 is not).
POOL = frozenset(f"gpu-a100-0{i}" for i in range(1, 9))


def _demo(policy: UpgradePolicy | None = None) -> ClusterSnapshot:
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    return replace(snap, batch_budgets=DEMO_BUDGETS, upgrade_policy=policy)


def test_every_budget_over_the_batch_is_built_exactly_and_its_json_carries_each():
    """gpu-a100-03 (NVSentinel's) is in the batch and counts as taken; gpu-a100-07 (Karpenter's taint, schedulable)
    is disrupted for the NodePool but not unavailable for the GPU Operator, which counts only cordoned or NotReady
    nodes (gpu-l40s-06 is both). The unlabelled model is named "GPU"; its node's pods fit nowhere: 0 nodes."""
    snap = _demo(UpgradePolicy(max_unavailable="10%"))
    snap = replace(snap, nodes=tuple(replace(n, gpu_product="") if n.name == "gpu-l40s-01" else n for n in snap.nodes))
    batch = plan_batch(snap, ["gpu-a100-01", "gpu-a100-03", "gpu-l40s-01"], DrainOptions(), parallel=3,
                       guards_error="403: forbidden")
    assert list(batch.budgets) == [
        BatchBudget("pods' karpenter.sh/do-not-disrupt", "not readable (403: forbidden)", None, kind=UNREAD),
        BatchBudget("Karpenter NodePool gpu-a100", "75% of 8 nodes → 6 nodes", 6, POOL,
                    {"gpu-a100-03": d.NVSENTINEL, "gpu-a100-06": d.PERSON, "gpu-a100-07": d.KARPENTER,
                     "gpu-a100-08": d.GPU_OPERATOR}, kind=KARPENTER),
        BatchBudget("the GPU Operator's maxUnavailable", "10% of 27 GPU nodes → 3 nodes", 3, None,
                    {"gpu-h100-10": d.MAINTENANCE_OPERATOR, "gpu-a100-03": d.NVSENTINEL, "gpu-a100-06": d.PERSON,
                     "gpu-a100-08": d.GPU_OPERATOR, "gpu-l40s-03": d.GPU_OPERATOR,
                     "gpu-l40s-04": d.CLUSTER_AUTOSCALER, "gpu-l40s-06": d.GPU_OPERATOR},
                    holds_first=False, kind=GPU_OPERATOR),
        BatchBudget("free GPU GPUs", "the pods of 0 of the batch's 1 GPU nodes fit outside it → 0 nodes", 0,
                    frozenset({"gpu-l40s-01"}), kind=CAPACITY),
        BatchBudget(f"free {A100} GPUs", f"the pods of 2 of the batch's 2 {A100} nodes fit outside it → 2 nodes", 2,
                    frozenset({"gpu-a100-01", "gpu-a100-03"}), kind=CAPACITY),
    ]
    assert batch_json(batch)["budgets"] == [b.to_dict() for b in batch.budgets]


@pytest.mark.parametrize(("limit", "words"), [("1", "1 of 27 GPU nodes → 1 node"),
                                              ("25%", "25% of 27 GPU nodes → 7 nodes")])
def test_the_gpu_operators_limit_is_said_in_nodes_singular_or_plural(limit, words):
    batch = plan_batch(_demo(UpgradePolicy(max_unavailable=limit)), ["gpu-h100-01"], DrainOptions())
    operator = next(b for b in batch.budgets if b.kind == GPU_OPERATOR)
    assert operator.figures == words


def test_one_node_per_free_gpu_budget_is_said_in_the_singular():
    batch = plan_batch(_demo(), ["gpu-l40s-01"], DrainOptions())
    assert [b.figures for b in batch.budgets if b.kind == CAPACITY] == [
        "the pods of 1 of the batch's 1 NVIDIA-L40S nodes fit outside it → 1 node"]


def test_the_parallelism_asked_for_caps_the_plan_and_is_said():
    """Free H100s allow 2 of these 3 at once (test_batch_budget_runs); asking for 1 starts 1, said as asked."""
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    nodes = ["gpu-h100-01", "gpu-h100-02", "gpu-h100-03"]
    one = plan_batch(snap, nodes, DrainOptions(), parallel=1)
    assert (one.at_once, one.limiting, one.parallel) == (1, None, 1)
    assert one.budget_lines()[0] == "nodes at once: 1 of 3 (--parallel 1; every budget allows it)"
    assert plan_batch(snap, nodes, DrainOptions()).at_once == 2


KARPENTER_POOL = BatchBudget("Karpenter NodePool p", "2 nodes", 2, kind=KARPENTER)
FREE = BatchBudget("free X GPUs", "the pods of 3 of 3 fit", 3, kind=CAPACITY)
PDB_BUDGET = BatchBudget("PodDisruptionBudget ns/b", "1 allowed", 1, kind=PDB, binds=False)


def _batch(nodes: int, budgets: tuple[BatchBudget, ...], at_once: int, limiting: BatchBudget | None = None,
           parallel: int | None = None) -> BatchPlan:
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    plans = tuple(plan_drain(snap, n, preview=False) for n in ["gpu-h100-01", "gpu-h100-02", "gpu-h100-03"][:nodes])
    return BatchPlan(plans, (), None, budgets=budgets, at_once=at_once, limiting=limiting, parallel=parallel)


@pytest.mark.parametrize(("batch", "lines"), [
    (_batch(3, (KARPENTER_POOL, FREE), 3), ["nodes at once: 3 of 3: every budget allows it",
                                            f"  budget {KARPENTER_POOL.words()}", f"  budget {FREE.words()}"]),
    (_batch(3, (FREE,), 2, parallel=2), ["nodes at once: 2 of 3 (--parallel 2; every budget allows it)",
                                         f"  budget {FREE.words()}"]),
    (_batch(3, (FREE,), 3, parallel=3), ["nodes at once: 3 of 3: every budget allows it", f"  budget {FREE.words()}"]),
    (_batch(3, (KARPENTER_POOL, FREE), 2, KARPENTER_POOL),
     [f"nodes at once: 2 of 3, limited by {KARPENTER_POOL.words()}", f"  budget {FREE.words()}"]),
    (_batch(2, (FREE, KARPENTER_POOL), 0, KARPENTER_POOL),
     [f"nodes at once: NONE may start now: {KARPENTER_POOL.words()}", f"  budget {FREE.words()}"]),
    # One node: its own free GPUs and PDBs need no word on parallelism (a plain drain's plan) ...
    (_batch(1, (FREE, PDB_BUDGET), 1), []),
    (_batch(1, (), 1), []),
    # ... but another controller's budget over it, or a budget that stops it, is said.
    (_batch(1, (KARPENTER_POOL,), 1), ["nodes at once: 1 of 1: every budget allows it",
                                       f"  budget {KARPENTER_POOL.words()}"]),
    (_batch(1, (FREE,), 0, FREE), [f"nodes at once: NONE may start now: {FREE.words()}"]),
    (_batch(2, (FREE,), 2), ["nodes at once: 2 of 2: every budget allows it", f"  budget {FREE.words()}"]),
], ids=["every-budget-allows", "parallel-asked", "parallel-all", "limited", "none-may-start", "one-node-own-budgets",
        "no-budget", "one-node-controller", "one-node-stopped", "two-nodes-own-budgets"])
def test_the_head_line_says_how_many_nodes_start_at_once_and_why(batch, lines):
    assert batch.budget_lines() == lines


BINDINGS = GpuBindings((BoundGpu(0, "GPU-aaa", pods=frozenset({"ns/a"})), BoundGpu(1, "GPU-bbb", pods=frozenset({"ns/b"}))))


def _gpu_snapshot() -> ClusterSnapshot:
    pods = [InferencePod(namespace="ns", name=name, uid=f"uid-{name}", node="n1", gpu_request=1, has_emptydir=scratch)
            for name, scratch in (("a", False), ("b", False), ("stray", True))]
    node = Node("n1", True, False, "H100", 4, 4)
    return ClusterSnapshot(0.0, "t", nodes=(node, Node("n2", True, False, "H100", 8, 8)), pods=tuple(pods))


def test_one_gpus_plan_json_names_the_gpu_its_pods_and_fence_and_does_not_take_the_node():
    snap = _gpu_snapshot()
    options = gpu_options(DrainOptions(delete_emptydir_data=True), snap, "n1", "1", BINDINGS, include_unattributed=True)
    plan = plan_drain(snap, "n1", options)
    data = plan_json(plan)
    assert data["gpu"] == {"gpu": "1", "device": None, "fence": fence_words(options, snap.node("n1")),
                           "pods": ["ns/b"], "unattributed": ["ns/stray"], "include_unattributed": True}
    assert data["gpu"]["fence"]  # the fence is said, never left empty
    assert "via" not in data  # one GPU's drain leaves the node schedulable: no cordon, no NodeMaintenance
    stray = next(p for p in plan.pods if p.pod.key == "ns/stray")
    assert (stray.step, stray.note) == (Step.EVICT, "unknown GPU: moved too (chosen); deleting emptyDir data")


def test_a_whole_nodes_plan_has_no_fence_and_is_taken_by_a_cordon():
    plan = plan_drain(_gpu_snapshot(), "n1", DrainOptions(delete_emptydir_data=True))
    assert plan.fence == ""
    assert plan_json(plan)["via"] == {"via": "cordon"} and "gpu" not in plan_json(plan)


def test_a_requestor_drain_where_no_actor_was_read_says_the_nodemaintenance_is_not_installed():
    plan = plan_drain(_gpu_snapshot(), "n1", DrainOptions(delete_emptydir_data=True,
                                                          maintenance_namespace="nvidia-maintenance"))
    assert plan.request is not None and plan.request.error == ("--via nodemaintenance: the maintenance-operator's "
                                                               "NodeMaintenance is not installed here")
