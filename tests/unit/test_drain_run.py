"""Session-aware drains on the demo cluster, with a hand-moved clock."""

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.batch_plan import plan_batch
from gputui.ops.drain.events import DrainControl
from gputui.ops.drain.options import resumable, saved_drain
from gputui.ops.drain.plan import DrainOptions, plan_drain
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.run import run_drain
from gputui.ops.drain.start import BatchStart, DrainStart
from gputui.ops.steps import Ended, run_steps, step
from gputui.vocabulary.model import DRAIN_PHASE_ANNOTATION, NodeState
from tests.demo_clock import ManualClock


def drive(cluster, clock, plan, control=None, on_event=None, max_steps=5000, deadline=None):
    """Run a drain to the end; the fake sleep moves the demo's clock."""
    events = []
    gen = run_drain(plan, OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                                    poll_s=2.0), control, DrainStart(deadline=deadline))
    for _ in range(max_steps):
        event = step(gen)
        if isinstance(event, Ended):
            return event.report, events
        events.append(event)
        if on_event:
            on_event(event, control)
    raise AssertionError("drain did not finish")


def busy_node(snap):
    return max((n for n in snap.nodes if n.ready and not n.unschedulable),
               key=lambda n: sum(snap.sessions(p).live or 0 for p in snap.pods_on(n.name)))


def test_sessions_run_down_then_pods_are_evicted_without_losing_any():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    node = busy_node(snap).name
    plan = plan_drain(snap, node)
    assert plan.live_sessions > 0
    report, events = drive(cluster, clock, plan)
    assert report.evicted == len(plan.to_evict) and not report.failed
    assert report.cut_sessions == 0 and cluster.lost_sessions == 0
    # It really waited on live sessions (a wait at 0 is a quiet count not trusted yet: rotation settling).
    waits = [e.sessions for e in events if e.kind == "waiting" and "settles" not in e.message
             and "kept in rotation" not in e.message]
    assert waits and min(waits) >= 1
    after = cluster.snapshot()
    assert not [p for p in after.pods_on(node) if p.owner_kind != "DaemonSet" and not p.deleting]
    assert after.node(node).state is NodeState.CORDONED
    assert after.node(node).annotations[DRAIN_PHASE_ANNOTATION] == "done"


def test_evict_now_cuts_sessions_and_says_so():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    plan = plan_drain(snap, busy_node(snap).name)
    target = next(p.pod.key for p in plan.to_evict if p.sessions.live)
    control = DrainControl()
    control.evict_now(target)
    report, events = drive(cluster, clock, plan, control)
    cut = [e for e in events if e.kind == "sessions-cut"]
    assert [e.pod for e in cut] == [target] and "evict now" in cut[0].message
    assert cluster.lost_sessions == report.cut_sessions == cut[0].sessions > 0


def test_deadline_expires_then_evicts():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    plan = plan_drain(snap, busy_node(snap).name, DrainOptions(session_deadline_s=4))
    report, events = drive(cluster, clock, plan)
    assert any("deadline expired" in e.message for e in events if e.kind == "sessions-cut")
    assert cluster.lost_sessions == report.cut_sessions > 0


def test_abort_leaves_node_cordoned_or_uncordons():
    for uncordon in (False, True):
        clock = ManualClock()
        cluster = DemoCluster(seed=7, clock=clock)
        snap = cluster.snapshot()
        node = busy_node(snap).name
        control = DrainControl()

        def abort_when_waiting(event, control):
            if event.kind == "waiting":
                control.abort(uncordon=uncordon)  # noqa: B023 - called at once, in this iteration

        report, events = drive(cluster, clock, plan_drain(snap, node), control, abort_when_waiting)
        assert report.outcome is Outcome.ABORTED and events[-1].kind == "aborted"
        state = cluster.snapshot().node(node)
        assert state.unschedulable is (not uncordon)
        assert state.annotations[DRAIN_PHASE_ANNOTATION] == "aborted"
        assert cluster.lost_sessions == 0


def test_pdb_blocks_until_headroom_and_names_the_budget():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    # gpu-h100-01 and -02 hold several llama pods; maxUnavailable 1 means one at a time.
    node = next(n.name for n in snap.nodes if sum(p.service == "llama-3-70b-instruct" for p in snap.pods_on(n.name)) >= 2)
    # No rotation here (selectors unread): every pod is quiet at once and the evictions race for the budget.
    snap = replace(snap, selectors=None)
    report, events = drive(cluster, clock, plan_drain(snap, node, DrainOptions(session_threshold=10**6)))
    blocked = [e for e in events if e.kind == "blocked"]
    assert blocked and "llama-3-70b-instruct-pdb" in blocked[0].message
    assert report.evicted >= 2 and not report.failed


def test_interrupted_drain_is_visible_and_resumes_to_the_same_end():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    node = busy_node(snap).name
    started = clock.now
    gen = run_drain(plan_drain(snap, node, DrainOptions(session_deadline_s=1234)),
                    OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance,
                              poll_s=2.0))
    for event in gen:
        if event.kind == "waiting":
            break  # the process dies here: the generator is simply dropped
    del gen
    snap = cluster.snapshot()
    assert resumable(snap) == [node]
    assert snap.node(node).state is NodeState.DRAINING
    options, deadline = saved_drain(snap.node(node))
    assert options.session_deadline_s == 1234
    assert abs(deadline - (started + 1234)) <= 1  # the original deadline, not a fresh one
    report, _ = drive(cluster, clock, plan_drain(snap, node, options), deadline=deadline)
    assert not report.failed and resumable(cluster.snapshot()) == []
    assert cluster.lost_sessions == 0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), node_index=st.integers(0, 23), threshold=st.sampled_from([0, 0, 3]),
       evict_now_at=st.one_of(st.none(), st.integers(1, 20)), deadline_s=st.sampled_from([5, 60, 900]))
def test_no_session_is_lost_unless_chosen_and_no_budget_is_violated(seed, node_index, threshold, evict_now_at, deadline_s):
    clock = ManualClock()
    cluster = DemoCluster(seed=seed, clock=clock)
    snap = cluster.snapshot()
    node = snap.nodes[node_index]
    plan = plan_drain(snap, node.name, DrainOptions(session_threshold=threshold, session_deadline_s=deadline_s))
    if plan.blocked or not node.ready:
        return
    control = DrainControl()
    steps = {"n": 0}
    budgets_seen = []

    def watch(event, control):
        steps["n"] += 1
        if evict_now_at is not None and steps["n"] == evict_now_at and plan.to_evict:
            control.evict_now(plan.to_evict[0].pod.key)
        budgets_seen.append(cluster.snapshot().budgets)

    _report, events = drive(cluster, clock, plan, control, watch)
    cut_shown = sum(e.sessions or 0 for e in events if e.kind == "sessions-cut")
    assert cluster.lost_sessions <= cut_shown + threshold * len(plan.to_evict)
    if evict_now_at is None and deadline_s >= 900 and threshold == 0:
        assert cluster.lost_sessions == 0
    held = {b.name for b in snap.budgets if b.current_healthy >= b.desired_healthy}
    for budgets in budgets_seen:  # an eviction never takes a service below what its PDB keeps
        for b in budgets:
            if b.name in held:
                assert b.current_healthy >= b.desired_healthy, b


def test_batch_parallelism_and_capacity_guard():
    from gputui.ops.drain.batch import run_batch

    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    l40s = [n.name for n in snap.nodes if n.gpu_product == "NVIDIA-L40S" and n.ready and not n.unschedulable
            and n.name != "gpu-l40s-07"]  # the time-sliced one: its pods need shared units, not whole cards
    # bge-large's 4 pods (1 GPU each) live on gpu-l40s-01; the other schedulable L40S nodes are idle. Drained
    # last, 01's pods need room outside the batch, and there is none (03 is cordoned, 06 NotReady).
    order = sorted(l40s, key=lambda n: n == "gpu-l40s-01")
    batch = plan_batch(snap, order, DrainOptions())
    assert batch.stop_before == "gpu-l40s-01"
    assert "this batch needs 4 NVIDIA-L40S GPUs (4 pods); 0 are free outside it: does NOT fit" in batch.describe()[0]
    events, reports = _drained(run_batch(order,
                                         OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock,
                                                   sleep=clock.advance, poll_s=2.0),
                                         DrainOptions(), BatchStart(parallel=2)))
    guard = [e for e in events if "capacity guard" in e.message]
    assert guard and "before gpu-l40s-01" in guard[0].message
    # The run stops where the plan said, and every node named has a truthful report.
    assert [n for n in order if reports[n].outcome is Outcome.DRAINED] == order[:-1]
    assert reports["gpu-l40s-01"].outcome is Outcome.NOT_STARTED
    assert "not started" in reports["gpu-l40s-01"].describe() and "drained" not in reports["gpu-l40s-01"].describe()
    # Parallelism 2: the first two nodes started before either finished.
    starts = [e.node for e in events if e.kind == "started"]
    assert starts[:2] == order[:2]
    assert cluster.lost_sessions == 0


class _WithPolicy:
    """The demo read as a cluster whose GPU Operator ClusterPolicy allows `limit` unavailable nodes."""

    def __init__(self, cluster, limit: str) -> None:
        from gputui.vocabulary.model import UpgradePolicy

        self.cluster, self.policy = cluster, UpgradePolicy(True, 1, limit)

    def snapshot(self):
        from dataclasses import replace

        return replace(self.cluster.snapshot(), upgrade_policy=self.policy)

    def __getattr__(self, name):
        return getattr(self.cluster, name)


def _run(limit: str):
    from gputui.ops.drain.batch import run_batch

    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    busy = ["gpu-h100-01", "gpu-h100-02"]  # llama pods with live sessions: each drain takes a while
    return _drained(run_batch(busy,
                              OpContext(_WithPolicy(cluster, limit), cluster, AuditLog(None, "t", "demo"),
                                        clock=clock, sleep=clock.advance, poll_s=2.0),
                              DrainOptions(), BatchStart(parallel=2)))


def _drained(gen):
    """A batch run to its end: every event it yielded, and the reports it returned."""
    events: list = []
    return events, run_steps(gen, events.append)


def test_a_parallel_batch_waits_its_turn_when_the_gpu_operators_max_unavailable_has_no_room():
    # The demo has 7 unavailable GPU nodes (six cordoned, one NotReady): maxUnavailable 7 leaves no room beside a
    # running drain, so the second node waits for the first.
    events, reports = _run("7")
    kinds = [(e.kind.value, e.node) for e in events if e.kind.value in ("started", "done", "info")]
    assert kinds.index(("started", "gpu-h100-02")) > kinds.index(("done", "gpu-h100-01"))
    held = [e.message for e in events if e.kind.value == "info" and e.node == "gpu-h100-02" and "waits" in e.message]
    assert len(held) == 1 and "8 of 27 GPU nodes are unavailable, the GPU Operator's maxUnavailable 7 (7)" in held[0]
    assert all(r.outcome is Outcome.DRAINED for r in reports.values())  # held back, never refused
    # With room for both, both start before either is done.
    events, _ = _run("50%")
    kinds = [(e.kind.value, e.node) for e in events if e.kind.value in ("started", "done")]
    assert kinds[:2] == [("started", "gpu-h100-01"), ("started", "gpu-h100-02")]
    assert not [e for e in events if e.kind.value == "info" and "maxUnavailable" in e.message]


def test_the_batch_guard_counts_the_pods_of_drains_running_beside_it():
    """Issue 35 item 2: another gputui drains the other busy H100 nodes (their leases live, renewed now by a
    process on another host): their pods take the free H100s first, so this batch's guard stops before a node
    whose pods would then have nowhere to go. Without those leases the same node drains."""
    import json
    from dataclasses import asdict

    from gputui.ops.drain import lease
    from gputui.ops.drain.batch import run_batch

    def run(beside: bool):
        clock = ManualClock()
        cluster = DemoCluster(seed=7, clock=clock)
        snap = cluster.snapshot()
        busy = [n.name for n in snap.nodes if n.gpu_product.startswith("NVIDIA-H100") and n.ready
                and not n.unschedulable and snap.gpus_allocated(n.name) >= 8]
        target, others = busy[0], busy[1:]
        if beside:
            holder = lease.Holder("someone", "another-host", 1, "t", clock())
            for n in others:
                cluster.annotate_node(n, {lease.LEASE: json.dumps(asdict(holder))})
        ctx = OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance, poll_s=2.0)
        events, reports = _drained(run_batch([target], ctx, DrainOptions(), BatchStart()))
        return target, others, events, reports

    target, others, events, reports = run(beside=True)
    assert len(others) >= 3, others  # enough of them that their pods fill the free H100s
    assert reports[target].outcome is Outcome.NOT_STARTED
    assert any(f"capacity guard stopped the batch before {target}" in e.message for e in events)
    target, _, _, reports = run(beside=False)
    assert reports[target].outcome is Outcome.DRAINED
