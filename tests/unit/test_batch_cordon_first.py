"""A batch cordons every node it will drain before its first eviction, as kubectl drain does (issue 35, item 1):
a pod evicted from the first node never lands on a node the batch drains later, to be evicted again. A node
the capacity guard will not start is not cordoned; a cordon refused stops the batch before any eviction and
puts back what it cordoned. The demo cluster is the cluster."""

from __future__ import annotations

from gputui.backends.base import BackendError
from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.batch import run_batch
from gputui.ops.drain.batch_plan import plan_batch
from gputui.ops.drain.plan import DrainOptions
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.start import BatchStart
from gputui.ops.steps import run_steps
from tests.demo_clock import ManualClock
from tests.support.audit_lines import written


def _drained(gen):
    events: list = []
    return events, run_steps(gen, events.append)


def test_every_node_is_cordoned_before_the_first_eviction_and_no_pod_is_evicted_twice(tmp_path):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    # llama-3-70b's pods, 2 each (two nodes: with gpu-h100-10 in maintenance a third would not fit the H100s free)
    nodes = ["gpu-h100-01", "gpu-h100-02"]
    before = {p.key for n in nodes for p in snap.pods_on(n) if p.owner_kind != "DaemonSet"}
    assert "cordons gpu-h100-01, gpu-h100-02 before the first eviction: no pod moves onto a node " \
           "this batch drains" in plan_batch(snap, nodes, DrainOptions()).describe()
    log = tmp_path / "audit.jsonl"
    _, reports = _drained(run_batch(nodes,
                                    OpContext(cluster, cluster, AuditLog(log, "t", "demo"), clock=clock,
                                              sleep=clock.advance, poll_s=2.0),
                                    DrainOptions(), BatchStart(parallel=1)))
    assert all(r.outcome is Outcome.DRAINED for r in reports.values()), [r.describe() for r in reports.values()]
    entries = [(e["action"], e["target"]) for e in written(log) if e.get("result", "ok") != "intent"]
    first_evict = next(i for i, (action, _) in enumerate(entries) if action == "evict")
    cordons = [target for action, target in entries[:first_evict] if action == "cordon"]
    assert cordons == [f"node/{n}" for n in nodes], entries[:first_evict]
    evicted = [target.split("/", 1)[1] for action, target in entries if action == "evict"]
    # Each pod evicted once, and only pods that were on the batch's nodes at its start: none came back.
    assert len(evicted) == len(set(evicted)) and set(evicted) == before, (evicted, before)


def test_a_node_the_guard_will_not_start_is_not_cordoned():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    l40s = sorted((n.name for n in snap.nodes if n.gpu_product == "NVIDIA-L40S" and n.ready and not n.unschedulable
                   and n.name != "gpu-l40s-07"), key=lambda n: n == "gpu-l40s-01")
    assert plan_batch(snap, l40s, DrainOptions()).stop_before == "gpu-l40s-01"
    _, reports = _drained(run_batch(l40s,
                                    OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock,
                                              sleep=clock.advance, poll_s=2.0),
                                    DrainOptions(), BatchStart(parallel=2)))
    assert reports["gpu-l40s-01"].outcome is Outcome.NOT_STARTED
    assert not cluster.snapshot().node("gpu-l40s-01").unschedulable


class _RefusesCordon:
    """The demo as a writer that may not cordon one node (403)."""

    def __init__(self, cluster: DemoCluster, refused: str) -> None:
        self.cluster, self.refused = cluster, refused

    def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        if node == self.refused and unschedulable:
            raise BackendError(f"forbidden: may not patch node {node}")
        self.cluster.set_unschedulable(node, unschedulable)

    def __getattr__(self, name):
        return getattr(self.cluster, name)


def test_a_refused_cordon_stops_the_batch_before_any_eviction_and_puts_back_its_cordons(tmp_path):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    nodes = ["gpu-h100-01", "gpu-h100-02"]
    log = tmp_path / "audit.jsonl"
    events, reports = _drained(run_batch(nodes,
                                         OpContext(cluster, _RefusesCordon(cluster, "gpu-h100-02"),
                                                   AuditLog(log, "t", "demo"), clock=clock, sleep=clock.advance,
                                                   poll_s=2.0),
                                         DrainOptions(), BatchStart(parallel=1)))
    assert all(r.outcome is Outcome.NOT_STARTED for r in reports.values())
    assert not any(e["action"] == "evict" for e in written(log))
    assert not any(cluster.snapshot().node(n).unschedulable for n in nodes)  # h100-01 put back
    assert any("could not cordon the batch's nodes: forbidden" in e.message for e in events)
