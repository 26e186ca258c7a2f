"""A batch's plan and run under the other controllers' budgets (issue 40 item 3), on the demo cluster read as one
where the maintenance-operator's config or a Karpenter NodePool is installed: the plan's nodes at once equal the
tightest budget's room, named; the run holds the next node while there is no room and starts nothing when a budget
allows none or is unknown; a pod annotated karpenter.sh/do-not-disrupt blocks its node, the annotation named."""

from __future__ import annotations

from dataclasses import replace

from gputui.backends.base import BackendError
from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.batch import run_batch
from gputui.ops.drain.batch_plan import batch_json, plan_batch
from gputui.ops.drain.events import DrainEvent, EventKind
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.plan import Step, plan_drain
from gputui.ops.drain.pod_guards import with_guards
from gputui.ops.drain.report import DrainReport, Outcome
from gputui.ops.drain.start import BatchStart
from gputui.ops.steps import run_steps
from gputui.policy.batch_budgets import disrupted
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.batch_budgets import MAINTENANCE_CONFIG, NODEPOOL, BudgetObjects, MaintenanceConfigRecord
from tests.demo_clock import ManualClock

BATCH = ["gpu-h100-01", "gpu-h100-02", "gpu-h100-03"]


class _WithBudgets:
    """The demo read as a cluster with these budget objects (and, when given, pods' do-not-disrupt annotations)."""

    def __init__(self, cluster: DemoCluster, objects: BudgetObjects, guards: dict[str, str] | None = None,
                 failures: int = 0) -> None:
        self.cluster, self.objects = cluster, objects
        if guards is not None:
            self.actors = _Guards(guards, failures)

    def snapshot(self) -> ClusterSnapshot:
        return replace(self.cluster.snapshot(), batch_budgets=self.objects)

    def __getattr__(self, name):
        return getattr(self.cluster, name)


class _Guards:
    """Pods' do-not-disrupt annotations as the live reader's actors read them; `failures`: the first reads that
    fail (an apiserver that refuses, then answers). `asked`: the nodes of each read."""

    def __init__(self, guards: dict[str, str], failures: int = 0) -> None:
        self.guards, self.failures = guards, failures
        self.asked: list[list[str]] = []

    def pod_guards(self, nodes: list[str]) -> dict[str, str]:
        self.asked.append(list(nodes))
        if self.failures:
            self.failures -= 1
            raise BackendError("pods is forbidden: User cannot list resource pods")
        return dict(self.guards)


def _config(max_parallel: str) -> BudgetObjects:
    return BudgetObjects((), (MaintenanceConfigRecord("nvidia-maintenance", "default", max_parallel),),
                         {NODEPOOL: d.NOT_INSTALLED, MAINTENANCE_CONFIG: d.READ})


# The demo's nodes in other actors' hands (gputui/backends/demo/actors.py, scenario.py), counted by hand: NVSentinel's
# quarantine, a person's cordon through gputui, Karpenter's disruption taint, the GPU Operator's failed, mid-way and
# stalled upgrades (the stalled one on the NotReady node: the actor is counted, not the condition), the cluster
# autoscaler's deletion.
OTHERS = {"gpu-a100-03": d.NVSENTINEL, "gpu-a100-06": d.PERSON, "gpu-a100-07": d.KARPENTER,
          "gpu-a100-08": d.GPU_OPERATOR, "gpu-l40s-03": d.GPU_OPERATOR, "gpu-l40s-04": d.CLUSTER_AUTOSCALER,
          "gpu-l40s-06": d.GPU_OPERATOR, "gpu-h100-10": d.MAINTENANCE_OPERATOR}


def _others(cluster: DemoCluster) -> int:
    assert disrupted(cluster.snapshot()) == OTHERS
    return len(OTHERS)


def _run(reader, cluster: DemoCluster, clock: ManualClock, nodes: list[str], parallel: int,
         options: DrainOptions = DrainOptions()):
    ctx = OpContext(reader, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance, poll_s=2.0)
    events: list = []
    reports = run_steps(run_batch(nodes, ctx, options, BatchStart(parallel=parallel)), events.append)
    return events, reports


def test_the_plan_runs_as_many_at_once_as_the_tightest_budget_leaves_and_names_it():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    taken = _others(cluster)
    snap = replace(cluster.snapshot(), batch_budgets=_config(str(taken + 2)))
    batch = plan_batch(snap, BATCH, DrainOptions(), parallel=3)
    assert batch.at_once == 2  # 10 allowed, 8 already disrupted: room for 2
    assert batch.limiting is not None and batch.limiting.name == \
        "MaintenanceOperatorConfig nvidia-maintenance/default maxParallelOperations"
    head = next(line for line in batch.describe() if line.startswith("nodes at once"))
    assert head == ("nodes at once: 2 of 3, limited by MaintenanceOperatorConfig nvidia-maintenance/default "
                    "maxParallelOperations: 10 → 10 nodes; 8 already disrupted (3 by the GPU Operator, 1 by "
                    "the cluster autoscaler, 1 by Karpenter, 1 by a NodeMaintenance, 1 by NVSentinel, 1 by a cordon): "
                    "2 more at once now")
    data = batch_json(batch)
    assert data["nodes_at_once"] == 2 and data["limiting_budget"]["room"] == 2


def test_the_run_holds_the_next_node_while_the_budget_has_no_room():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    reader = _WithBudgets(cluster, _config(str(_others(cluster) + 1)))  # room for one
    events, reports = _run(reader, cluster, clock, BATCH[:2], parallel=2)
    seen = [(e.kind, e.node) for e in events if e.kind in (EventKind.STARTED, EventKind.DONE)
            or "waits for the drains running: MaintenanceOperatorConfig" in e.message]
    assert seen.index((EventKind.INFO, "gpu-h100-02")) < seen.index((EventKind.DONE, "gpu-h100-01")) < \
        seen.index((EventKind.STARTED, "gpu-h100-02")), seen
    assert all(r.outcome is Outcome.DRAINED for r in reports.values())
    # Said once, for the node that waits, however many looks it waits (the batch looks every 2 s).
    assert [e for e in events if "waits for the drains running" in e.message] == [DrainEvent(
        "gpu-h100-02", EventKind.INFO, message="gpu-h100-02 waits for the drains running: MaintenanceOperatorConfig "
        "nvidia-maintenance/default maxParallelOperations: 9 → 9 nodes; 8 already disrupted (3 by the GPU Operator, "
        "1 by the cluster autoscaler, 1 by Karpenter, 1 by a NodeMaintenance, 1 by NVSentinel, 1 by a cordon): "
        "1 more at once now")]


def test_a_budget_with_no_room_starts_nothing_and_puts_the_cordons_back():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    reader = _WithBudgets(cluster, _config(str(_others(cluster))))  # every slot taken by other actors
    events, reports = _run(reader, cluster, clock, BATCH[:2], parallel=2)
    words = ("MaintenanceOperatorConfig nvidia-maintenance/default maxParallelOperations: 8 → 8 nodes; 8 already "
             "disrupted (3 by the GPU Operator, 1 by the cluster autoscaler, 1 by Karpenter, 1 by a NodeMaintenance, "
             "1 by NVSentinel, 1 by a cordon): 0 more at once now")
    assert reports == {n: DrainReport(n, Outcome.NOT_STARTED, reason=f"budget: {words}") for n in BATCH[:2]}
    assert [e for e in events if e.kind is EventKind.FAILED] == [DrainEvent(
        "gpu-h100-01", EventKind.FAILED, message=f"no room in a budget before gpu-h100-01: {words}; not started: "
                                                 "gpu-h100-01, gpu-h100-02")]
    after = cluster.snapshot()
    assert not any(after.node(n).unschedulable for n in BATCH[:2])  # cordoned first, put back


def test_an_unknown_budget_stops_the_plan_and_the_run():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    unknown = BudgetObjects((), (), {NODEPOOL: "unknown: forbidden: nodepools.karpenter.sh is forbidden",
                                     MAINTENANCE_CONFIG: d.NOT_INSTALLED})
    batch = plan_batch(replace(cluster.snapshot(), batch_budgets=unknown), BATCH, DrainOptions(), parallel=3)
    assert batch.budget_stops and batch.at_once == 0 and batch.limiting is not None
    assert batch.limiting.name == NODEPOOL
    assert any(line.startswith("nodes at once: NONE may start now: NodePool: not readable (forbidden") for line in
               batch.describe())
    _events, reports = _run(_WithBudgets(cluster, unknown), cluster, clock, BATCH[:2], parallel=2)
    assert all(r.outcome is Outcome.NOT_STARTED and "batch size unknown" in r.reason for r in reports.values())


def test_unread_pod_guards_make_the_batch_size_unknown():
    cluster = DemoCluster(seed=7, clock=ManualClock())
    batch = plan_batch(cluster.snapshot(), BATCH, DrainOptions(), guards_error="403: forbidden")
    assert batch.budget_stops and batch.limiting is not None and "karpenter.sh/do-not-disrupt" in batch.limiting.name


def test_a_pod_annotated_do_not_disrupt_blocks_its_node_in_the_plan_and_the_run():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    pod = next(p for p in plan_drain(snap, "gpu-h100-01").pods if p.step is not Step.SKIP).pod
    plan = with_guards(plan_drain(snap, "gpu-h100-01"), {pod.key: "true"})
    assert plan.blocked and plan.errors == [f"{pod.key}: annotated karpenter.sh/do-not-disrupt=true: Karpenter's "
                                            "guard against voluntary disruption (remove the annotation to drain "
                                            "this node)"]
    assert not with_guards(plan_drain(snap, "gpu-h100-01"), {pod.key: "maybe"}).blocked  # Karpenter ignores it
    batch = plan_batch(snap, ["gpu-h100-01"], DrainOptions(), guards={pod.key: "true"})
    assert batch.plans[0].blocked
    reader = _WithBudgets(cluster, _config("100"), guards={pod.key: "true"})
    _events, reports = _run(reader, cluster, clock, ["gpu-h100-01"], parallel=1)
    assert reports["gpu-h100-01"].reason == "plan blocked"
    assert any("karpenter.sh/do-not-disrupt=true" in f for f in reports["gpu-h100-01"].failed)


def test_the_demos_nodepool_limits_an_a100_batch_to_two_and_is_named():
    """The demo's NodePool gpu-a100 (gputui/backends/demo/actors.py): 75% of its 8 nodes → 6; 4 in other hands (by
    hand: NVSentinel gpu-a100-03, a person gpu-a100-06, Karpenter gpu-a100-07, the GPU Operator gpu-a100-08): 2."""
    from gputui.backends.demo.actors import DEMO_BUDGETS

    cluster = DemoCluster(seed=7, clock=ManualClock())
    snap = replace(cluster.snapshot(), batch_budgets=DEMO_BUDGETS)
    batch = plan_batch(snap, ["gpu-a100-01", "gpu-a100-02", "gpu-a100-04"], DrainOptions(), parallel=3)
    assert batch.at_once == 2 and batch.limiting is not None
    assert batch.limiting.words() == ("Karpenter NodePool gpu-a100: 75% of 8 nodes → 6 nodes; 4 already disrupted (1 "
                                      "by the GPU Operator, 1 by Karpenter, 1 by NVSentinel, 1 by a cordon): 2 more "
                                      "at once now")


def test_a_nodepool_over_none_of_the_batchs_nodes_is_not_its_budget():
    from gputui.backends.demo.actors import DEMO_BUDGETS

    snap = replace(DemoCluster(seed=7, clock=ManualClock()).snapshot(), batch_budgets=DEMO_BUDGETS)
    batch = plan_batch(snap, BATCH, DrainOptions(), parallel=3)  # H100 nodes: not Karpenter's gpu-a100
    assert not [b for b in batch.budgets if b.kind == "karpenter"]
    # The H100s' own limit is their free GPUs (gpu-h100-10, in maintenance, offers none), never gpu-a100's NodePool.
    assert batch.limiting is not None and batch.limiting.kind == "free-gpus" and batch.at_once == 2


def test_pod_guards_that_cannot_be_read_pause_the_node_until_they_can():
    """Unknown is not "none": the node waits, said, and starts once its pods' annotations are read (each read asks
    for that node's pods only)."""
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    reader = _WithBudgets(cluster, _config("100"), guards={}, failures=2)
    started = clock()
    events, reports = _run(reader, cluster, clock, ["gpu-h100-01"], parallel=1)
    paused = [e for e in events if e.kind is EventKind.PAUSED]
    assert paused == 2 * [DrainEvent("gpu-h100-01", EventKind.PAUSED, message="cannot read gpu-h100-01's pods' "
                                     "do-not-disrupt: pods is forbidden: User cannot list resource pods")]
    assert reports["gpu-h100-01"].outcome is Outcome.DRAINED
    assert reader.actors.asked[:3] == 3 * [["gpu-h100-01"]]
    assert clock() - started >= 2 * 2.0  # a poll's sleep after each failed read, not a busy loop


def test_the_run_holds_a_node_its_nodepools_budget_governs_and_names_it():
    """The demo's NodePool gpu-a100 leaves room for 2 (test_the_demos_nodepool_limits_an_a100_batch_to_two_and_is_named):
    asked for 3 at once, the third waits while the two run, the NodePool named. Kills: the budget asked
    about another node than the one that would start (`refusing(…, None, …)`: a scoped budget then governs none)."""
    from gputui.backends.demo.actors import DEMO_BUDGETS

    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    nodes = ["gpu-a100-01", "gpu-a100-02", "gpu-a100-04"]  # gpu-a100-04 holds a pod with emptyDir scratch
    events, reports = _run(_WithBudgets(cluster, DEMO_BUDGETS), cluster, clock, nodes, parallel=3,
                           options=DrainOptions(delete_emptydir_data=True))
    seen = [(e.kind, e.node) for e in events if e.kind in (EventKind.STARTED, EventKind.DONE)
            or "waits for the drains running: Karpenter NodePool gpu-a100" in e.message]
    first_done = min(seen.index((EventKind.DONE, n)) for n in nodes[:2])
    assert seen.index((EventKind.INFO, "gpu-a100-04")) < first_done, seen
    assert (EventKind.STARTED, "gpu-a100-04") not in seen[:first_done], seen  # not beside the two running
    assert reports["gpu-a100-01"].outcome is reports["gpu-a100-02"].outcome is Outcome.DRAINED
    # (Once room came, the capacity guard stopped gpu-a100-04: the two drained pools' pods took the free A100s.)
    assert reports["gpu-a100-04"].reason.startswith("capacity guard:")
