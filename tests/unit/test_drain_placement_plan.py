"""The placement preview in every drain plan (issue 39): the issue's own case, which the capacity check by GPU
model called a fit; a plan that strands a pod is blocked unless the operator accepts it; the batch's guard
stops where the preview says a node's drain would strand one; the preview in the plan's JSON and text."""

from __future__ import annotations

from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.batch import _placement_guard, run_batch
from gputui.ops.drain.batch_plan import batch_json, plan_batch
from gputui.ops.drain.events import EventKind
from gputui.ops.drain.placement import CAVEAT, Verdict
from gputui.ops.drain.plan import DrainOptions, plan_drain
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.start import BatchStart
from gputui.ops.steps import run_steps
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, Node
from gputui.vocabulary.scheduling import NodeScheduling, PodScheduling
from tests.demo_clock import ManualClock

ALLOC = NodeScheduling((), (("cpu", 96_000), ("memory", 2**40), ("pods", 110)))
Z1 = PodScheduling(node_selector=(("zone", "z1"),))


def node(name: str, zone: str) -> Node:
    return Node(name, True, False, "NVIDIA-H100", 8, 8, labels={"zone": zone}, scheduling=ALLOC)


def pod(name: str, on: str, gpus: int, spec: PodScheduling = PodScheduling()) -> InferencePod:
    return InferencePod("ns", name, name, on, gpu_request=gpus, gpu_units={"nvidia.com/gpu": gpus}, service="chat",
                        labels={"app": "chat"}, scheduling=spec)


def issue_cluster() -> ClusterSnapshot:
    """The issue's measurement: an 8-GPU pod with nodeSelector zone=z1, the zone's other node full, 16 GPUs
    free in z2; plus a pod without a selector on a node of its own."""
    nodes = (node("z1-a", "z1"), node("z1-b", "z1"), node("z2-a", "z2"), node("z2-b", "z2"), node("free", "z2"))
    pods = (pod("pinned", "z1-a", 8, Z1), pod("filler", "z1-b", 8), pod("loose", "free", 8))
    return ClusterSnapshot(0.0, "t", nodes=nodes, pods=pods)


def test_the_issue_case_is_stranded_where_the_capacity_check_says_it_fits():
    snap = issue_cluster()
    plan = plan_drain(snap, "z1-a")
    assert plan.capacity.fits  # the check by GPU model alone: 16 free in z2
    (p,) = plan.stranded
    assert p.placement is not None and p.placement.verdict is Verdict.NOWHERE
    assert p.placement.why == "no node with zone=z1 outside the batch has 8 free NVIDIA-H100 GPUs"
    batch = plan_batch(snap, ["z1-a"], DrainOptions())
    assert batch.blocked_by_placement and batch.placement_stop == "z1-a" and batch.cordon_first == []
    lines = batch.describe()
    assert any(CAVEAT in line for line in lines)
    assert "1 would be stranded (Pending): ns/chat loses 1 of 3 replicas" in lines
    assert "BLOCKED: 1 pod would have nowhere to go; accept it to drain anyway (left Pending)" in lines
    data = batch_json(batch)
    assert data["placement"]["blocked"] and data["placement"]["stranded"] == ["ns/pinned"]
    assert data["nodes"][0]["pods"][0]["placement"]["verdict"] == "nowhere"
    assert data["guard_stops_before"] == "z1-a"


def test_accepting_the_stranded_pod_unblocks_the_plan_and_the_guard():
    snap = issue_cluster()
    batch = plan_batch(snap, ["z1-a"], DrainOptions(), accept_stranded=["ns/pinned"])
    assert not batch.blocked_by_placement and batch.placement_stop is None and batch.cordon_first == ["z1-a"]
    options = {"z1-a": DrainOptions()}
    assert _placement_guard(snap, ["z1-a"], {"z1-a"}, options, ["ns/pinned"]) is None
    assert _placement_guard(snap, ["z1-a"], {"z1-a"}, options, ()) == (
        "ns/pinned would have nowhere to go: no node with zone=z1 outside the batch has 8 free NVIDIA-H100 GPUs")


class _Still:
    """A reader of one snapshot and a writer that must not be called: the guard stops before any write."""

    def __init__(self, snap: ClusterSnapshot) -> None:
        self.snap = snap

    def snapshot(self) -> ClusterSnapshot:
        return self.snap

    def __getattr__(self, name):
        raise AssertionError(f"nothing may be written: {name}")


def test_the_guard_stops_where_the_preview_says_a_node_would_strand_a_pod():
    snap = issue_cluster()
    # "free" first: its pod goes to z2; then z1-a, whose pod has nowhere to go once the batch holds "free".
    batch = plan_batch(snap, ["z1-a", "free"], DrainOptions())
    assert batch.placement_stop == "z1-a" and batch.fits
    still = _Still(snap)
    gen = run_batch(["z1-a", "free"],
                    OpContext(still, still, AuditLog(None, "t", "test"), clock=ManualClock(), sleep=lambda _s: None),
                    DrainOptions(), BatchStart(parallel=1))
    events: list = []
    reports = run_steps(gen, events.append)
    failed = [e.message for e in events if e.kind is EventKind.FAILED]
    assert failed == ["placement guard stopped the batch before z1-a: ns/pinned would have nowhere to go: no node "
                      "with zone=z1 outside the batch has 8 free NVIDIA-H100 GPUs; not started: z1-a, free"]
    assert {n: r.outcome for n, r in reports.items()} == {"z1-a": Outcome.NOT_STARTED, "free": Outcome.NOT_STARTED}


def test_every_demo_plan_previews_each_recreated_pod():
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    plan = plan_drain(snap, "gpu-h100-01")
    recreated = [p for p in plan.pods if p.recreated]
    assert recreated and all(p.placement is not None and p.placement.verdict is Verdict.CAN_GO for p in recreated)
    assert all(p.placement is None for p in plan.pods if not p.recreated)  # DaemonSet pods stay


def test_the_dry_run_text_says_where_each_pod_can_go_and_why_not(capsys):
    from gputui.cli.drain import _print_plan

    snap = issue_cluster()
    batch = plan_batch(snap, ["z1-a", "free"], DrainOptions())
    for plan in batch.plans:
        _print_plan(plan)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "node/z1-a: 1 pods with nowhere to go"
    assert out[2] == "         NOWHERE: no node with zone=z1 outside the batch has 8 free NVIDIA-H100 GPUs"
    assert "           1 node without 8 free NVIDIA-H100 GPUs (the most free: 0)" in out
    assert "         can go: 2 nodes (z2-a, z2-b)" in out


def test_pods_past_the_capacity_guards_stop_block_nothing():
    """The capacity guard stops before c (6 GPUs needed, 4 free): the run never moves c's pod, so that it would
    have nowhere to go blocks nothing and stops nothing; the plan says so."""
    nodes = (node("a", "z1"), node("b", "z1"), node("c", "z1"), node("spare", "z1"))
    pods = (pod("pa", "a", 2), pod("pb", "b", 2), pod("pc", "c", 2), pod("held", "spare", 4))
    snap = ClusterSnapshot(0.0, "t", nodes=nodes, pods=pods)
    batch = plan_batch(snap, ["a", "b", "c"], DrainOptions())
    assert batch.stop_before == "c" and [p.pod.name for p in batch.stranded] == ["pc"]
    assert not batch.blocked_by_placement and batch.placement_stop is None and batch.first_stop == "c"
    assert batch.cordon_first == ["a", "b"]
    lines = batch.describe()
    assert "1 pod past the capacity guard's stop (1 with nowhere to go): not moved, the run stops before them" in lines
    assert not any(line.startswith("BLOCKED") for line in lines)
