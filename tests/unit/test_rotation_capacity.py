"""Capacity stays in rotation while a drain runs, judged on fresh views: a pod kept in rotation because its
version had too few pods serving goes out once a replacement serves (not at its deadline), and the drains
of a batch, interleaved, never take out between them more than a path or a budget can spare. The demo cluster
is the cluster; the Services' and Deployments' selectors are given (tests.support.demo_selectors.served)."""

from __future__ import annotations

from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.batch import run_batch
from gputui.ops.drain.events import DrainControl, EventKind
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.out_of_rotation import KEPT_IN
from gputui.ops.drain.plan import plan_drain
from gputui.ops.drain.rotation_run import TAKEN_OUT
from gputui.ops.drain.run import run_drain
from gputui.ops.drain.start import BatchStart
from gputui.ops.steps import run_steps
from gputui.policy.rotation import PATH_KINDS
from tests.demo_clock import ManualClock
from tests.support.demo_selectors import busy_node, served


class Served:
    """The demo cluster read with the given selectors (what a batch plans from)."""

    def __init__(self, cluster: DemoCluster) -> None:
        self.cluster = cluster

    def snapshot(self):
        return served(self.cluster.snapshot())


def shortfalls(cluster: DemoCluster) -> list[str]:
    """Each path left with no pod serving, and each budget with fewer pods in rotation than it needs, now."""
    snap = served(cluster.snapshot())
    paths = [s for s in snap.selectors if s.kind in PATH_KINDS]
    serving = [p for p in snap.pods if p.ready and not p.deleting and not p.terminated]
    out = [f"{path.key}: none serving" for path in paths
           if any(path.selects(p.labels) for p in snap.pods) and not any(path.selects(p.labels) for p in serving)]
    for b in snap.budgets:
        routed = [p for p in serving if b.matches(p) and any(path.selects(p.labels) for path in paths)]
        if len(routed) < b.desired_healthy:
            out.append(f"{b.name}: {len(routed)} in rotation, {b.desired_healthy} needed")
    return out


def test_a_pod_kept_in_for_capacity_goes_out_once_a_replacement_serves_and_before_its_eviction():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = served(cluster.snapshot())
    node = busy_node(snap).name
    plan = plan_drain(snap, node)
    kept = {p.pod.key for p in plan.to_evict if p.rotation is None and p.rotation_note.startswith(KEPT_IN)}
    assert kept, [p.rotation_note for p in plan.to_evict]
    run = run_drain(plan,
                    OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=2.0),
                    DrainControl())
    events: list = []
    report = run_steps(run, events.append)
    assert report.outcome.value == "drained" and report.cut_sessions == 0, report.describe()
    went_out = [e.pod for e in events if e.kind is EventKind.OUT_OF_ROTATION]
    # The old run took out only what the plan chose: a pod kept in stayed in until its eviction.
    later = kept & set(went_out)
    assert later, [(e.kind.value, e.pod, e.message) for e in events]
    for key in later:
        order = [e.kind for e in events if e.pod == key and e.kind in (EventKind.OUT_OF_ROTATION, EventKind.EVICTED)]
        assert order == [EventKind.OUT_OF_ROTATION, EventKind.EVICTED], (key, order)
    assert not TAKEN_OUT.keys(cluster)  # every pod it took out is gone: nothing left in the process's registry


def test_a_batch_of_interleaved_drains_never_takes_out_more_than_paths_and_budgets_spare():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = served(cluster.snapshot())
    # Two nodes holding pods of one service whose budget spares one pod (7 of 8): both drains take from it.
    by_node: dict[str, int] = {}
    for p in snap.pods:
        if p.service == "llama-3-70b-instruct" and p.node:
            by_node[p.node] = by_node.get(p.node, 0) + 1
    nodes = sorted(by_node, key=lambda n: -by_node[n])[:2]
    assert len(nodes) == 2 and not shortfalls(cluster), shortfalls(cluster)
    batch = run_batch(nodes,
                      OpContext(Served(cluster), cluster, AuditLog(None, "t", "demo"), clock=clock,
                                sleep=clock.advance, poll_s=2.0),
                      DrainOptions(), BatchStart(parallel=2))
    took_out, seen = 0, []

    def look(event) -> None:
        nonlocal took_out
        if event.kind is EventKind.OUT_OF_ROTATION:
            took_out += 1
            seen.extend(f"after {event.pod}: {s}" for s in shortfalls(cluster))
    reports = run_steps(batch, look)
    assert took_out >= 2 and not seen, (took_out, seen)
    assert all(r.outcome.value == "drained" for r in reports.values()), [r.describe() for r in reports.values()]


def test_the_plan_says_when_the_drained_nodes_hold_every_pod_of_a_version_and_proposes_the_shift():
    from dataclasses import replace

    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    # mistral-7b: 6 stable and 2 canary pods, all on gpu-a100-01 (the demo's layout).
    whole = plan_drain(snap, "gpu-a100-01").warnings
    assert "every pod of llm/mistral-7b (8) is on the nodes drained and no version serves elsewhere to shift " \
           "its traffic to: its last pods keep taking new sessions until replacements serve" in whole, whole
    # Its stable pods elsewhere: only the canary is emptied, and the shift away from it is the command.
    moved = tuple(replace(p, node="gpu-a100-05") if p.service == "mistral-7b" and p.version == "stable" else p
                  for p in snap.pods)
    canary = plan_drain(replace(snap, pods=moved), "gpu-a100-01").warnings
    assert [w for w in canary if "every pod" in w] == [
        "every pod of llm/mistral-7b version canary (2) is on the nodes drained: its 20% of new sessions keep "
        "coming until its last pod goes; shift its weight away first: gputui shift llm/mistral-7b --to canary=0 "
        "--to stable=100"], canary
    # A batch counts every node in it: two of llama-3-70b's four nodes empty nothing; all four empty it.
    nodes = sorted({p.node for p in snap.pods if p.service == "llama-3-70b-instruct"})
    assert not [w for w in plan_drain(snap, nodes[0], batch=set(nodes[:2])).warnings if "every pod" in w]
    assert [w for w in plan_drain(snap, nodes[0], batch=set(nodes)).warnings if "every pod" in w]


def _timed_run(options):
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = served(cluster.snapshot())
    plan = plan_drain(snap, busy_node(snap).name, options)
    run = run_drain(plan,
                    OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=1.0),
                    DrainControl())
    events: list = []
    return plan, run_steps(run, lambda event: events.append((clock(), event))), events


def test_a_pod_is_not_evicted_on_a_count_read_before_its_rotation_settled_nor_while_kept_in():
    """Found by the fault campaign under live traffic: a pod went out of rotation and was evicted in the same
    second on a count read before, cutting the sessions routed to it just before its endpoints changed; and a
    pod kept in rotation for capacity was evicted the moment its count read 0, while new sessions still came."""
    from gputui.ops.drain.plan import DrainOptions

    _plan, report, events = _timed_run(DrainOptions(rotation_settle_s=30))
    assert report.outcome.value == "drained", report.describe()
    out_at = {e.pod: t for t, e in events if e.kind is EventKind.OUT_OF_ROTATION}
    evicted_at = {e.pod: t for t, e in events if e.kind is EventKind.EVICTED}
    kept = {e.pod for _, e in events if e.kind is EventKind.INFO and e.message.startswith("kept in rotation")}
    assert out_at and kept, events
    for pod, t in evicted_at.items():
        if pod in out_at:
            assert t >= out_at[pod] + 30, (pod, out_at[pod], t)  # a quiet count trusted only once settled
        if pod in kept:
            assert pod in out_at and out_at[pod] < t, pod  # never evicted while kept in rotation
