"""One count of what needs attention, the same everywhere (issue 35): nodes, not alerts; per-GPU alerts grouped
per node; a problem that comes and goes within a minute is flapping, not counted in and out."""

from __future__ import annotations

from gputui.backends.demo import DemoCluster
from gputui.checks.context import CheckContext
from gputui.checks.rules import gpu_health
from gputui.policy.figures import figures
from gputui.policy.fleet import cluster_row
from gputui.policy.health import fleet_alerts, fleet_driver
from gputui.policy.problems import FLAP_WINDOW_S, ProblemMemory, findings, problems_of, summary, with_flaps
from gputui.present.node_filter import matching
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import Gpu, Node
from tests.demo_clock import ManualClock

# The demo's planted problems, one per node: NotReady, a GPU fallen off the bus, a failed driver upgrade, heat, and a
# person's gputui cordon past its expiry (backends/demo/actors.py, issue 40).
DEMO_PROBLEMS = {"gpu-l40s-06": "NotReady", "gpu-h100-07": "XID 79", "gpu-a100-08": "upgrade ✗", "gpu-h100-04": "°C",
                 "gpu-a100-06": "expired",
                 # the demo's GPU faults (issue 37 item 6)
                 "gpu-h100-05": "XID 79", "gpu-a100-04": "XID 13", "gpu-h100-03": "GPU fault", "gpu-h100-06": "GPU fault"}


def demo_snapshots(count: int, step_s: float = 1.0) -> list[ClusterSnapshot]:
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snaps = []
    for _ in range(count):
        snaps.append(cluster.snapshot())
        clock.advance(step_s)
    return snaps


def test_the_header_count_is_nodes_and_stays_put_while_gpus_cross_the_threshold():
    """The hot node's GPUs go over and under 85°C from one refresh to the next: it counted 10 to 14 alerts."""
    snaps = demo_snapshots(12)
    per_gpu = {len(fleet_alerts(s, 85.0)) for s in snaps}
    assert len(per_gpu) > 1  # the alerts do move (what made the header flicker)
    said = {summary(list(figures(s, 85.0).problems)) for s in snaps}
    assert said == {"9 nodes need attention: 1 NotReady, 3 XID, 2 health, 1 upgrade failed, 1 hot, 1 cordon expired"}
    assert {figures(s, 85.0).alerts for s in snaps} == {9}


def test_every_view_counts_the_same_nodes():
    snap = demo_snapshots(1)[0]
    problems = list(figures(snap, 85.0).problems)
    nodes = {p.node for p in problems}
    assert {p.node: p.word for p in problems if not p.word.endswith("°C")} == {
        k: v for k, v in DEMO_PROBLEMS.items() if v != "°C"}
    assert next(p.word for p in problems if p.node == "gpu-h100-04").endswith("°C")
    # /alert
    _snap, _words, found = matching(snap, ["alert"], 85.0, fleet_driver(snap), None)
    assert set(found) == nodes
    # d: one finding per node that needs attention, first; the lost GPU is the XID node's own, not a second line
    listed = findings(problems, snap)
    assert [f.subject for f in listed[:len(problems)]] == [p.node for p in problems]
    assert not any(f.kind == "GpuLost" for f in listed)
    assert {"Pending", "Drift"} <= {f.kind for f in listed}
    # gputui check: the hot node too (it counted 3 nodes: heat was left out while a worse node failed)
    result = gpu_health(CheckContext(snap, 85.0))
    assert set(o.split(" (")[0] for o in result.objects) == nodes
    assert result.summary.startswith(
        "9 nodes needing attention (1 NotReady, 3 XID, 2 health, 1 upgrade failed, 1 hot, 1 cordon expired)")
    # the fleet of clusters' row
    assert sum(cluster_row("demo", snap, "", 85.0).alerts.values()) == len(nodes)


def test_per_gpu_alerts_are_one_problem_per_node():
    hot = Node(name="hot", ready=True, unschedulable=False, gpu_product="NVIDIA-H100", gpu_capacity=8, gpu_allocatable=8,
               gpus=tuple(Gpu(i, f"u{i}", temp_c=90.0 + i) for i in range(8)))
    snap = ClusterSnapshot(taken_at=0.0, context="t", nodes=(hot,))
    (problem,) = problems_of(fleet_alerts(snap, 85.0))
    assert (problem.kind, problem.word) == ("hot", "97°C")  # the hottest GPU stands for the node
    assert problem.details() == "8 GPUs hot, the hottest 97°C"
    assert problem.cell(9) == "97°C"


def _hot(temp: float) -> list:
    node = Node(name="n1", ready=True, unschedulable=False, gpu_product="NVIDIA-H100", gpu_capacity=1, gpu_allocatable=1,
                gpus=(Gpu(0, "u0", temp_c=temp),))
    return problems_of(fleet_alerts(ClusterSnapshot(taken_at=0.0, context="t", nodes=(node,)), 85.0))


def test_a_problem_that_comes_and_goes_within_a_minute_is_flapping_not_counted_in_and_out():
    memory = ProblemMemory()
    now = 0.0
    counted = []
    for temp in (86, 84, 86, 84, 86):
        seen = with_flaps(_hot(temp), memory.observe(_hot(temp), now))
        counted.append((len(seen), [p.flapping for p in seen]))
        now += 5
    # First seen: not flapping; gone 5 s later: still counted, flapping; back: flapping; and so on.
    assert counted == [(1, [False]), (1, [True]), (1, [True]), (1, [True]), (1, [True])]
    assert summary(with_flaps(_hot(84), memory.observe(_hot(84), now))) == \
        "1 node needs attention: 1 hot (flapping)"
    # Gone for a whole minute: gone.
    assert with_flaps([], memory.observe([], now + FLAP_WINDOW_S + 1)) == []


def test_a_steady_problem_is_not_flapping_and_one_that_clears_for_good_leaves_after_a_minute():
    memory = ProblemMemory()
    for t in range(0, 300, 5):
        flaps = memory.observe(_hot(90), float(t))
        assert not flaps
    # It clears: kept, flapping, for the window, then gone; the flaps object is kept while nothing changes.
    first = memory.observe([], 300.0)
    assert list(first) == ["n1"] and not first["n1"].present
    assert first["n1"].cell(9) == "flapping"
    assert memory.observe([], 310.0) is first
    assert memory.observe([], 300.0 + FLAP_WINDOW_S + 1) == {}


def test_a_snapshots_problems_are_worked_out_once_and_every_view_gets_that_list():
    """The header asks for them at every tick of the age (each second): at 100,000 nodes with 30,000 problems,
    merging the flaps and counting again was 50 ms of the UI thread a tick. Once per snapshot and threshold."""
    from gputui.policy.figures import problems as figures_problems
    from gputui.ui.runs.problem_watch import ProblemWatch

    clock = ManualClock()
    snap = DemoCluster(seed=7, clock=clock).snapshot()
    watch = ProblemWatch(clock)
    first = watch.problems(snap, 85.0)
    assert first and watch.problems(snap, 85.0) is first
    assert first == with_flaps(figures_problems(snap, 85.0), watch.flaps(snap, 85.0))  # what it was before
    other = watch.problems(snap, 60.0)  # another threshold: worked out again, and more is hot
    assert other is not first and len(other) >= len(first)
