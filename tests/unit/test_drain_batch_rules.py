"""A batch's own writes and guards, fast: the cordons it makes before its first eviction (those nodes only, each
audited with why), the uncordons it owes when it stops before a node (each said and audited; one refused is said
and the others still put back), and its capacity and placement guards on the demo cluster's snapshot. The
mutants named in each docstring are one-line bugs of gputui/ops/drain/batch.py these tests kill."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from gputui.backends.base import BackendError
from gputui.backends.demo import DemoCluster
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.batch import _cordon_first, _guard, _placement_guard, _uncordon
from gputui.ops.drain.batch_plan import plan_batch
from gputui.ops.drain.events import EventKind
from gputui.ops.drain.options import DrainOptions
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, Node
from gputui.vocabulary.scheduling import NodeScheduling, PodScheduling
from tests.demo_clock import ManualClock
from tests.support.audit_lines import written


class Hand:
    """A writer that records each cordon and uncordon, and refuses those of the nodes named (a 403)."""

    identity = "t"

    def __init__(self, refuses: tuple[str, ...] = ()) -> None:
        self.refuses = refuses
        self.calls: list[tuple[str, bool]] = []

    def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        if node in self.refuses:
            raise BackendError(f"forbidden: may not patch node {node}")
        self.calls.append((node, unschedulable))


# The placement preview's case (tests/unit/test_drain_placement_plan.py, issue 39): an 8-GPU pod pinned to zone z1,
# whose other node is full; 16 GPUs free in z2.
_ALLOC = NodeScheduling((), (("cpu", 96_000), ("memory", 2**40), ("pods", 110)))


def _issue_cluster() -> ClusterSnapshot:
    def node(name: str, zone: str) -> Node:
        return Node(name, True, False, "NVIDIA-H100", 8, 8, labels={"zone": zone}, scheduling=_ALLOC)

    def pod(name: str, on: str, spec: PodScheduling = PodScheduling()) -> InferencePod:
        return InferencePod("ns", name, name, on, gpu_request=8, gpu_units={"nvidia.com/gpu": 8}, service="chat",
                            labels={"app": "chat"}, scheduling=spec)

    nodes = (node("z1-a", "z1"), node("z1-b", "z1"), node("z2-a", "z2"), node("z2-b", "z2"), node("free", "z2"))
    pods = (pod("pinned", "z1-a", PodScheduling(node_selector=(("zone", "z1"),))), pod("filler", "z1-b"),
            pod("loose", "free"))
    return ClusterSnapshot(0.0, "t", nodes=nodes, pods=pods)


class _Still:
    """A reader of one snapshot (the batch's writes go to the Hand)."""

    def __init__(self, snap: ClusterSnapshot) -> None:
        self.snap = snap

    def snapshot(self) -> ClusterSnapshot:
        return self.snap


def _entries(log: Path) -> list[tuple[str, str, dict, str]]:
    return [(e["action"], e["target"], e["params"], e["result"]) for e in written(log)]


def test_each_node_the_batch_owes_an_uncordon_is_put_back_said_and_audited_with_why(tmp_path):
    """Kills: `writer.set_unschedulable(name, False)` → `(name, True)` or `(name, None)`; the audit's action,
    target or reason changed or dropped; the event's node, kind or message changed (`uncordoned: {why}`)."""
    hand, log = Hand(), tmp_path / "audit.jsonl"
    events = list(_uncordon(["gpu-a", "gpu-b"], hand, AuditLog(log, "t", "demo"), "the batch stopped"))
    assert hand.calls == [("gpu-a", False), ("gpu-b", False)]
    assert [(e.node, e.kind, e.message) for e in events] == [
        ("gpu-a", EventKind.INFO, "uncordoned: the batch stopped"),
        ("gpu-b", EventKind.INFO, "uncordoned: the batch stopped")]
    assert _entries(log) == [("uncordon", "node/gpu-a", {"reason": "the batch stopped"}, "ok"),
                             ("uncordon", "node/gpu-b", {"reason": "the batch stopped"}, "ok")]


def test_a_refused_uncordon_is_said_and_the_next_node_is_still_put_back(tmp_path):
    """Kills: `continue` → `break` after a refused uncordon (the next node left cordoned), the FAILED event's
    node, kind or words changed, and the refused uncordon also said as done."""
    hand, log = Hand(refuses=("gpu-a",)), tmp_path / "audit.jsonl"
    events = list(_uncordon(["gpu-a", "gpu-b"], hand, AuditLog(log, "t", "demo"), "why"))
    assert hand.calls == [("gpu-b", False)]
    assert [(e.node, e.kind, e.message) for e in events] == [
        ("gpu-a", EventKind.FAILED, "left cordoned (why); uncordon failed: forbidden: may not patch node gpu-a"),
        ("gpu-b", EventKind.INFO, "uncordoned: why")]
    assert [(a, t, r) for a, t, _p, r in _entries(log)] == [("uncordon", "node/gpu-a", "error: forbidden: may not patch node gpu-a"),
                                                             ("uncordon", "node/gpu-b", "ok")]


def _demo() -> tuple[DemoCluster, ManualClock]:
    clock = ManualClock()
    return DemoCluster(seed=7, clock=clock), clock


def test_cordon_first_cordons_each_schedulable_node_named_and_no_other(tmp_path):
    """Kills: `continue` → `break` on a node already cordoned or unknown (the rest left schedulable); `or` →
    `and` in its skip; `set_unschedulable(name, True)` → `False`/`None`; the audit's action, target or reason
    changed; `cordoned.append(name)` dropped or wrong (the batch then puts back the wrong nodes)."""
    cluster, clock = _demo()
    cluster.set_unschedulable("gpu-h100-02", True)  # cordoned by someone else: not the batch's to put back
    snap = cluster.snapshot()
    hand, log = Hand(), tmp_path / "audit.jsonl"
    ctx = OpContext(cluster, hand, AuditLog(log, "t", "demo"), clock=clock)
    cordoned: list[str] = []
    events = list(_cordon_first(snap, ["no-such-node", "gpu-h100-02", "gpu-h100-01", "gpu-h100-03"], ctx,
                                cordoned))
    assert hand.calls == [("gpu-h100-01", True), ("gpu-h100-03", True)]
    assert cordoned == ["gpu-h100-01", "gpu-h100-03"]
    assert [(e.node, e.kind, e.message) for e in events] == [
        (n, EventKind.INFO, "cordoned with the batch, before its first eviction") for n in cordoned]
    assert _entries(log) == [("cordon", f"node/{n}", {"reason": "batch: before its first eviction"}, "ok")
                             for n in cordoned]


def test_a_refused_cordon_stops_cordon_first_and_is_not_counted_as_cordoned(tmp_path):
    """Kills: `cordoned.append` moved before the write (a node never cordoned then uncordoned by the batch)."""
    cluster, clock = _demo()
    hand = Hand(refuses=("gpu-h100-02",))
    ctx = OpContext(cluster, hand, AuditLog(tmp_path / "a.jsonl", "t", "demo"), clock=clock)
    cordoned: list[str] = []
    gen = _cordon_first(cluster.snapshot(), ["gpu-h100-01", "gpu-h100-02", "gpu-h100-03"], ctx, cordoned)
    try:
        list(gen)
    except BackendError:
        pass
    else:
        raise AssertionError("a refused cordon must stop the batch's cordons")
    assert cordoned == ["gpu-h100-01"] and hand.calls == [("gpu-h100-01", True)]


def _l40s(cluster: DemoCluster) -> list[str]:
    """The demo's L40S nodes, gpu-l40s-01 last: the plan's capacity guard stops before it (see
    test_batch_cordon_first)."""
    snap = cluster.snapshot()
    return sorted((n.name for n in snap.nodes if n.gpu_product == "NVIDIA-L40S" and n.ready and not n.unschedulable
                   and n.name != "gpu-l40s-07"), key=lambda n: n == "gpu-l40s-01")


def test_the_capacity_guard_passes_while_the_pods_fit_outside_and_names_what_does_not():
    """The guard must agree with the plan (plan_batch's stop): the nodes before the stop pass, the stop's node
    does not, and the refusal is the capacity check's words. Kills: `if not check.fits` → `if check.fits`,
    `return None` → a string, `continue` → `break` for a node the snapshot lacks, `extend` of the units
    dropped, the batch's members left out of what is excluded, `sorted(needed)` mis-keyed."""
    cluster, _ = _demo()
    snap, nodes = cluster.snapshot(), _l40s(cluster)
    opts = {n: DrainOptions() for n in nodes}
    plan = plan_batch(snap, nodes, opts)
    stop = nodes.index(plan.stop_before)
    members = set(nodes)
    before = set(nodes[:stop])
    assert _guard(snap, before | {"a-no-such-node"}, members, opts) is None
    refusal = _guard(snap, before | {nodes[stop], "a-no-such-node"}, members, opts)  # sorted first: skipped, not the end
    assert refusal is not None and refusal.endswith("does NOT fit") and "NVIDIA-L40S GPUs" in refusal, refusal


def test_a_drain_beside_the_batch_is_counted_with_every_pod_that_moves():
    """A node drained beside the batch (another gputui's) has no options in the batch: it is counted as a
    forced drain (BESIDE), every pod of it that moves. Kills: `options.get(name, BESIDE)` → `options[name]`
    (KeyError: the batch crashes) or → `options.get(name)` (None: no plan)."""
    cluster, _ = _demo()
    snap, nodes = cluster.snapshot(), _l40s(cluster)
    stop = nodes.index(plan_batch(snap, nodes, DrainOptions()).stop_before)
    members = set(nodes[:stop])
    opts = {n: DrainOptions() for n in members}
    # The stop's node drained by someone else: its pods count, and they no longer fit.
    assert _guard(snap, members | {nodes[stop]}, members | {nodes[stop]}, opts) is not None


def test_the_placement_guard_names_a_stranded_pod_unless_the_operator_accepted_it():
    """Kills: `strand_words(...) if stranded else None` inverted, the accepted pods ignored, the nodes the
    snapshot lacks not skipped (`is not None` → `is None`)."""
    cluster, _ = _demo()
    snap = cluster.snapshot()
    nodes = [n.name for n in snap.nodes if n.gpu_product == "NVIDIA-L40S" and n.ready and not n.unschedulable]
    opts = {n: DrainOptions() for n in nodes}
    plan = plan_batch(snap, nodes, opts)
    stranded = [p.pod.key for p in plan.stranded]
    assert stranded, "the demo's whole L40S pool drained strands pods"
    words = _placement_guard(snap, [*nodes, "no-such-node"], set(nodes), {**opts, "no-such-node": DrainOptions()}, ())
    assert words is not None and stranded[0].split("/", 1)[1] in words, words
    assert _placement_guard(snap, nodes, set(nodes), opts, stranded) is None
    assert _placement_guard(snap, [], set(nodes), opts, ()) is None


def test_the_placement_guard_places_only_the_pods_each_nodes_own_options_move():
    """Each node's own options decide which of its pods move (a pod selector that selects none moves none).
    Kills: `plan_drain(snap, name, options[name], ...)` → `plan_drain(snap, name, ...)` (the default options:
    every pod counted, a batch stopped that strands nobody)."""
    cluster, _ = _demo()
    snap = cluster.snapshot()
    nodes = [n.name for n in snap.nodes if n.gpu_product == "NVIDIA-L40S" and n.ready and not n.unschedulable]
    assert _placement_guard(snap, nodes, set(nodes), {n: DrainOptions() for n in nodes}, ()) is not None
    none_selected = {n: DrainOptions(pod_selector={"gputui-test": "selects-nothing"}) for n in nodes}
    assert _placement_guard(snap, nodes, set(nodes), none_selected, ()) is None


def _idle_l40s(cluster: DemoCluster) -> list[str]:
    """Schedulable L40S nodes with no pod to move: a drain of one is its cordon, its records and its end."""
    snap = cluster.snapshot()
    return [n for n in _l40s(cluster) if not any(p.owner_kind != "DaemonSet" for p in snap.pods_on(n))]


def _run(gen) -> tuple[list, dict]:
    from gputui.ops.steps import run_steps

    events: list = []
    return events, run_steps(gen, events.append)


def test_a_batch_of_one_node_is_cordoned_by_its_drain_not_first_by_the_batch(tmp_path):
    """One node: nothing to cordon ahead of (kubectl cordons each node as its drain starts), so the one cordon
    is the drain's own. Kills: `None if len(nodes) > 1 and writer is not None else []` → `None`, `... or True`,
    `len(nodes) >= 1`, `len(nodes) > 1 or writer is not None` (a cordon-first said and audited for one node)."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.report import Outcome
    from gputui.ops.drain.start import BatchStart

    cluster, clock = _demo()
    target = _idle_l40s(cluster)[0]
    log = tmp_path / "audit.jsonl"
    ctx = OpContext(cluster, cluster, AuditLog(log, "t", "demo"), clock=clock, sleep=clock.advance, poll_s=2.0)
    events, reports = _run(run_batch([target], ctx, DrainOptions(), BatchStart()))
    assert reports[target].outcome is Outcome.DRAINED
    assert [(a, t, p) for a, t, p, _r in _entries(log) if a == "cordon"] == [("cordon", f"node/{target}",
                                                                              {"reason": "drain"})]
    assert not any("cordoned with the batch" in e.message for e in events)


def test_each_node_drains_with_its_own_options_when_given_per_node(tmp_path):
    """A resumed batch restores each node's options from that node: a mapping node -> options. Kills:
    `options if isinstance(options, Mapping) else {...}` → the mapping taken as one node's options (the batch
    crashes before its first node)."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.options import OPTIONS
    from gputui.ops.drain.report import Outcome
    from gputui.ops.drain.start import BatchStart

    cluster, clock = _demo()
    nodes = _idle_l40s(cluster)[:2]
    chosen = {nodes[0]: DrainOptions(session_deadline_s=111), nodes[1]: DrainOptions(session_deadline_s=222)}
    ctx = OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance, poll_s=2.0)
    _, reports = _run(run_batch(nodes, ctx, chosen, BatchStart(parallel=2)))
    assert all(r.outcome is Outcome.DRAINED for r in reports.values())
    recorded = {n: DrainOptions.from_json(cluster.snapshot().node(n).annotations[OPTIONS]) for n in nodes}
    assert {n: o.session_deadline_s for n, o in recorded.items()} == {nodes[0]: 111, nodes[1]: 222}


def test_inside_a_batch_only_the_batch_sleeps_between_looks_and_one_at_a_time_means_one(tmp_path):
    """Runs interleave in one thread: a node's run yields a tick and never sleeps itself (its sleep would
    stall every other drain of the batch). `--parallel 1`: the second node starts once the first is done.
    Kills: `each = replace(ctx, sleep=lambda _s: None)` → `replace(ctx, )` (each run sleeping its poll inside
    the batch's loop); `len(active) < max(1, parallel)` → `<=` or `max(2, parallel)` (two drains at once)."""
    import sys

    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.start import BatchStart

    cluster, clock = _demo()
    sleepers: list[str] = []

    def sleep(s: float) -> None:
        sleepers.append(Path(sys._getframe(1).f_code.co_filename).name)  # who called it
        clock.advance(s)

    nodes = ["gpu-h100-01", "gpu-h100-02"]  # pods with live sessions: the runs poll many times
    ctx = OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=sleep, poll_s=2.0)
    events, _ = _run(run_batch(nodes, ctx, DrainOptions(), BatchStart(parallel=1)))
    assert sleepers and set(sleepers) == {"batch.py"}, set(sleepers)
    order = [(e.kind, e.node) for e in events if e.kind in (EventKind.STARTED, EventKind.DONE)]
    assert order == [(EventKind.STARTED, nodes[0]), (EventKind.DONE, nodes[0]),
                     (EventKind.STARTED, nodes[1]), (EventKind.DONE, nodes[1])], order


def test_the_batch_cordons_first_the_nodes_its_accepted_stranded_pods_let_it_drain():
    """The operator accepted that ns/pinned is left Pending: the batch's plan, and so its cordon-first, reach
    both nodes. Kills: `plan_batch(snap, nodes, per_node, accept_stranded)` → without `accept_stranded` (the
    placement stop at z1-a: nothing cordoned first, the pods of z1-a may land on z2-a and move twice)."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.start import BatchStart
    snap = _issue_cluster()
    hand = Hand(refuses=("z2-a",))  # the second cordon refused: the batch stops, puts the first back, writes nothing else
    ctx = OpContext(_Still(snap), hand, AuditLog(None, "t", "test"), clock=ManualClock(), sleep=lambda _s: None)
    events, _reports = _run(run_batch(["z1-a", "z2-a"], ctx, DrainOptions(),
                                      BatchStart(parallel=1, accept_stranded=["ns/pinned"])))
    # z1-a cordoned first, then put back once (it was put back twice: where the cordon was refused, and again at
    # the batch's end as a node that never started: two audit entries for one state change)
    assert hand.calls == [("z1-a", True), ("z1-a", False)], hand.calls  # z2-a refused: no call made
    assert any("could not cordon the batch's nodes: forbidden" in e.message for e in events)


class _Flaky:
    """The demo as a reader whose snapshot fails on the calls numbered (1 = the first)."""

    def __init__(self, cluster: DemoCluster, failing: set[int]) -> None:
        self.cluster, self.failing, self.calls = cluster, failing, 0

    def snapshot(self):
        self.calls += 1
        if self.calls in self.failing:
            raise BackendError("apiserver unreachable")
        return self.cluster.snapshot()

    def __getattr__(self, name):
        return getattr(self.cluster, name)


@pytest.mark.parametrize("failing", [{1}, {2}, {1, 2, 3}])
def test_a_failed_read_before_a_node_starts_pauses_and_tries_again_never_reads_as_a_refused_cordon(failing):
    """A read that fails before the first cordon ({1}), or right after the batch cordoned every node ({2}),
    pauses the batch (said, one poll slept) and it goes on: nothing uncordoned, nothing left not started.
    Kills: `cordoned is not None and len(cordoned) < len(nodes) and not active and not reports` with any `and`
    → `or` (a read failure taken for a refused cordon: the batch abandoned, or a crash on `len(None)`), and
    `<` → `<=` (every node cordoned, then a failed read abandons the batch)."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.report import Outcome
    from gputui.ops.drain.start import BatchStart

    cluster, clock = _demo()
    nodes = _idle_l40s(cluster)[:2]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        clock.advance(s)

    ctx = OpContext(_Flaky(cluster, failing), cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=sleep,
                    poll_s=3.0)
    events, reports = _run(run_batch(nodes, ctx, DrainOptions(), BatchStart(parallel=2)))
    assert {n: r.outcome for n, r in reports.items()} == {n: Outcome.DRAINED for n in nodes}
    paused = [e for e in events if e.kind is EventKind.PAUSED]
    assert [(e.node, e.message) for e in paused] == \
        [(nodes[0], f"cannot read the cluster to start {nodes[0]}: apiserver unreachable")] * len(failing)
    assert slept[:len(failing)] == [3.0] * len(failing)
    assert not any(e.message.startswith("uncordoned") for e in events)


def test_a_refused_cordon_says_why_on_each_node_and_in_each_report():
    """Kills: the uncordon's why dropped (`_uncordon(..., None)`), a report's node or reason dropped
    (`DrainReport(None, ...)`, `reason=None`), the FAILED event's node dropped."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.report import Outcome
    from gputui.ops.drain.start import BatchStart

    hand = Hand(refuses=("z2-a",))
    ctx = OpContext(_Still(_issue_cluster()), hand, AuditLog(None, "t", "test"), clock=ManualClock(),
                    sleep=lambda _s: None)
    events, reports = _run(run_batch(["z1-a", "z2-a"], ctx, DrainOptions(),
                                     BatchStart(parallel=1, accept_stranded=["ns/pinned"])))
    why = "forbidden: may not patch node z2-a"
    assert {n: (r.node, r.outcome, r.reason) for n, r in reports.items()} == {
        n: (n, Outcome.NOT_STARTED, f"could not cordon: {why}") for n in ("z1-a", "z2-a")}
    said = [(e.node, e.kind, e.message) for e in events]
    assert ("z1-a", EventKind.INFO, f"uncordoned: the batch could not cordon its nodes: {why}") in said
    assert ("z1-a", EventKind.FAILED, f"could not cordon the batch's nodes: {why}") in said


class _WithPolicy:
    """The demo read as a cluster whose GPU Operator ClusterPolicy allows `limit` unavailable nodes (the demo has
    3 unavailable GPU nodes of its own: two cordoned, one NotReady)."""

    def __init__(self, cluster: DemoCluster, limit: str) -> None:
        from gputui.vocabulary.model import UpgradePolicy

        self.cluster, self.policy = cluster, UpgradePolicy(True, 1, limit)

    def snapshot(self) -> ClusterSnapshot:
        from dataclasses import replace

        return replace(self.cluster.snapshot(), upgrade_policy=self.policy)

    def __getattr__(self, name):
        return getattr(self.cluster, name)


def _with_limit(limit: str, nodes: list[str], cordoned_before: str) -> list[tuple[str, str]]:
    """A parallel batch under a maxUnavailable: its starts, ends and holds, in order."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.start import BatchStart

    cluster, clock = _demo()
    cluster.set_unschedulable(cordoned_before, True)  # by someone else, before the batch
    ctx = OpContext(_WithPolicy(cluster, limit), cluster, AuditLog(None, "t", "demo"), clock=clock,
                    sleep=clock.advance, poll_s=2.0)
    events, _ = _run(run_batch(nodes, ctx, DrainOptions(), BatchStart(parallel=len(nodes))))
    return [(e.kind.value if "waits" not in e.message else "held", e.node) for e in events
            if e.kind in (EventKind.STARTED, EventKind.DONE) or "waits for the drains running" in e.message]


def test_a_node_already_unavailable_starts_beside_the_running_drains_whatever_the_limit():
    """Draining a node cordoned already costs the GPU Operator nothing more: it starts at once. Kills:
    `parallel_hold(snap, node, ...)` → `parallel_hold(snap, None, ...)` (held as if it were one more)."""
    seen = _with_limit("4", ["gpu-h100-01", "gpu-h100-02"], cordoned_before="gpu-h100-02")
    assert seen[:2] == [("started", "gpu-h100-01"), ("started", "gpu-h100-02")], seen
    assert ("held", "gpu-h100-02") not in seen


def test_a_later_node_someone_else_cordoned_counts_as_unavailable_while_the_batch_waits():
    """Only the nodes the batch itself cordoned ahead (and has not started) are left out of the count: one in
    the batch's queue that someone else cordoned is unavailable, and holds the parallel drain back. Kills:
    `set(cordoned or ()) & set(pending)` → `|` (every pending node left out: a drain started beyond the limit)."""
    idle = "gpu-l40s-02"  # no pod to move
    seen = _with_limit("5", ["gpu-h100-01", "gpu-h100-02", idle], cordoned_before=idle)
    assert seen.index(("held", "gpu-h100-02")) < seen.index(("done", "gpu-h100-01")) < \
        seen.index(("started", "gpu-h100-02")), seen


def test_the_guard_never_counts_the_batchs_own_free_gpus_as_room():
    """A node half full, nothing free elsewhere: its pods have nowhere to go, however many GPUs it has free
    itself. One node, so the batch cordons nothing first (its own cordon would hide its room). Kills:
    `_guard(..., members | set(beside), ...)` → `members & set(beside)` (nothing left out: the node's own free
    GPUs counted as room, the drain started); the refusal's report node or reason, or its event's node,
    dropped."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.report import Outcome
    from gputui.ops.drain.start import BatchStart

    nodes = (Node("half", True, False, "H100", 8, 8), Node("full", True, False, "H100", 8, 8))
    pods = (InferencePod("ns", "a", "uid-a", "half", gpu_request=4), InferencePod("ns", "b", "uid-b", "full", gpu_request=8))
    snap = ClusterSnapshot(0.0, "t", nodes=nodes, pods=pods)
    ctx = OpContext(_Still(snap), Hand(), AuditLog(None, "t", "test"), clock=ManualClock(), sleep=lambda _s: None)
    events, reports = _run(run_batch(["half"], ctx, DrainOptions(), BatchStart()))
    why = "4 H100 GPUs in 1 pod need a new home; 0 free on other schedulable nodes: does NOT fit"
    assert (reports["half"].node, reports["half"].outcome, reports["half"].reason) == \
        ("half", Outcome.NOT_STARTED, f"capacity guard: {why}")
    assert [(e.node, e.kind, e.message) for e in events] == [
        ("half", EventKind.FAILED, f"capacity guard stopped the batch before half: {why}; not started: half")]


class _NoLease(Hand):
    """A writer whose lease read fails (a BackendError): each drain the batch starts ends at once, FAILED."""

    def node_annotations(self, node: str) -> tuple[dict[str, str], str]:
        raise BackendError(f"no lease on {node} in this test")


def test_the_placement_guard_places_the_pods_of_the_running_drains_and_the_next_node_only():
    """z2-a (no pod to move) starts; z1-a, next, would strand ns/pinned: the guard stops there, not before
    z2-a. Kills: `[n for n in nodes if n in active or n == node]` → `n not in active` (the pods of nodes not
    started yet placed too: the batch stopped before a node that strands nobody)."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.report import Outcome
    from gputui.ops.drain.start import BatchStart

    ctx = OpContext(_Still(_issue_cluster()), _NoLease(), AuditLog(None, "t", "test"), clock=ManualClock(),
                    sleep=lambda _s: None)
    events, reports = _run(run_batch(["z2-a", "z1-a"], ctx, DrainOptions(), BatchStart(parallel=2)))
    stops = [e.message for e in events if "guard stopped" in e.message]
    assert stops == ["placement guard stopped the batch before z1-a: ns/pinned would have nowhere to go: no node "
                     "with zone=z1 outside the batch has 8 free NVIDIA-H100 GPUs; not started: z1-a"], stops
    assert reports["z2-a"].outcome is not Outcome.NOT_STARTED and reports["z1-a"].outcome is Outcome.NOT_STARTED


def test_each_node_runs_with_the_operators_hand_and_its_resumed_deadline():
    """The batch hands each node's drain what the operator chose for it: its control (here: aborted before it
    starts) and, for a resumed node, the deadline it keeps. Kills: `controls.get(node)` → `None` (an abort
    ignored: the node drained), `DrainStart(start.deadlines.get(node), start.take_over)` dropped (a resumed
    node given a fresh deadline)."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.events import DrainControl
    from gputui.ops.drain.options import DEADLINE
    from gputui.ops.drain.report import Outcome
    from gputui.ops.drain.start import BatchStart

    cluster, clock = _demo()
    stopped, resumed = _idle_l40s(cluster)[:2]
    control = DrainControl()
    control.abort()
    ctx = OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance, poll_s=2.0)
    _, reports = _run(run_batch([stopped, resumed], ctx, DrainOptions(),
                                BatchStart(parallel=2, controls={stopped: control}, deadlines={resumed: 4242.0})))
    assert reports[stopped].outcome is Outcome.ABORTED and reports[resumed].outcome is Outcome.DRAINED
    assert cluster.snapshot().node(resumed).annotations[DEADLINE] == "4242"



@pytest.mark.parametrize("take_over", [False, True])
def test_the_batch_takes_over_another_gputuis_lease_only_when_the_operator_chose_to(take_over):
    """A drain another gputui started (on another host) and left holds the node's lease, no longer renewed; the batch's
    run of that node takes it over only when the operator chose `take_over` (BatchStart, handed to each node's DrainStart). Kills:
    `DrainStart(start.deadlines.get(node), start.take_over)` → `..., None)` or the argument dropped."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.lease import LEASE_S, Holder
    from gputui.ops.drain.plan import plan_drain
    from gputui.ops.drain.report import Outcome
    from gputui.ops.drain.run import run_drain
    from gputui.ops.drain.start import BatchStart, DrainStart

    cluster, clock = _demo()
    held, free = _idle_l40s(cluster)[:2]
    ctx = OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance, poll_s=2.0)
    other = Holder("someone@example", "another-host", 1, "their-token", renewed=clock())
    theirs = run_drain(plan_drain(cluster.snapshot(), held), ctx, None, DrainStart(holder=other))
    next(theirs)  # it took the lease and started ...
    theirs.close()  # ... and its process went away (another host's: not known dead here): its lease stays ...
    clock.advance(LEASE_S + 1)  # ... and stops being renewed: only the operator's choice takes it over
    _, reports = _run(run_batch([held, free], ctx, DrainOptions(), BatchStart(parallel=2, take_over=take_over)))
    assert reports[free].outcome is Outcome.DRAINED
    assert (reports[held].outcome is Outcome.DRAINED) is take_over, reports[held]
    if not take_over:
        assert "stopped renewing its lease; take it over explicitly" in reports[held].reason


class _Script:
    """A reader whose snapshots follow a script (the last one repeats): the cluster changing under the batch."""

    def __init__(self, *snaps: ClusterSnapshot) -> None:
        self.snaps = list(snaps)

    def snapshot(self) -> ClusterSnapshot:
        return self.snaps.pop(0) if len(self.snaps) > 1 else self.snaps[0]


def test_nodes_cordoned_for_drains_that_never_start_are_put_back_when_the_batch_stops():
    """The plan fitted (C free); by the time the first drain starts, C has filled up: the guard stops before
    A, and A and B, cordoned first by the batch, are put back with why. Kills: the end's `never` list
    (`reports.get(n) is None or ... is NOT_STARTED` → `and` / `is not`), `if never and writer is not None` →
    `if never and writer is None`, the uncordon's why."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.report import Outcome
    from gputui.ops.drain.start import BatchStart

    nodes = (Node("A", True, False, "H100", 8, 8), Node("B", True, False, "H100", 8, 8),
             Node("C", True, False, "H100", 8, 8))
    moving = (InferencePod("ns", "a", "uid-a", "A", gpu_request=4), InferencePod("ns", "b", "uid-b", "B", gpu_request=4))
    fits = ClusterSnapshot(0.0, "t", nodes=nodes, pods=moving)
    full = ClusterSnapshot(1.0, "t", nodes=nodes, pods=(*moving, InferencePod("ns", "c", "uid-c", "C", gpu_request=8)))
    hand = Hand()
    ctx = OpContext(_Script(fits, full), hand, AuditLog(None, "t", "test"), clock=ManualClock(), sleep=lambda _s: None)
    events, reports = _run(run_batch(["A", "B"], ctx, DrainOptions(), BatchStart(parallel=1)))
    assert {n: r.outcome for n, r in reports.items()} == {"A": Outcome.NOT_STARTED, "B": Outcome.NOT_STARTED}
    assert hand.calls == [("A", True), ("B", True), ("A", False), ("B", False)]
    assert [(e.node, e.message) for e in events if e.message.startswith("uncordoned")] == [
        ("A", "uncordoned: the batch stopped before draining it"), ("B", "uncordoned: the batch stopped before draining it")]


class _Slow:
    """The demo read over a network: every read takes `cost` seconds of the clock."""

    def __init__(self, cluster: DemoCluster, clock: ManualClock, cost: float) -> None:
        self.cluster, self.clock, self.cost = cluster, clock, cost

    def snapshot(self) -> ClusterSnapshot:
        self.clock.advance(self.cost)
        return self.cluster.snapshot()

    def __getattr__(self, name):
        return getattr(self.cluster, name)


def test_the_batch_sleeps_until_its_earliest_drain_wants_to_look_again_never_longer_than_a_poll():
    """Two drains at once on a cluster whose reads take time: the second's look ends later than the first's,
    so the first is due again before a whole poll has passed; the batch sleeps just until then. Kills, in
    `sleep(max(0.0, min(poll_s, min(wake...) - clock())) or poll_s)`: `min(poll_s` → `max(poll_s`, `- clock()`
    → `+ clock()`, the inner `min(wake...)` → `max`, `or poll_s` → `and poll_s` (a fixed poll: the first drain
    looked at late); and `if clock() < wake.get(node, 0.0)` → `>` (a drain looked at before it asked)."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.report import Outcome
    from gputui.ops.drain.start import BatchStart

    cluster, clock = _demo()
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        clock.advance(s)

    ctx = OpContext(_Slow(cluster, clock, 0.5), cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=sleep,
                    poll_s=2.0)
    _, reports = _run(run_batch(["gpu-h100-01", "gpu-h100-02"], ctx, DrainOptions(), BatchStart(parallel=2)))
    assert all(r.outcome is Outcome.DRAINED for r in reports.values())
    assert slept and all(0.0 < s <= 2.0 for s in slept), sorted(set(slept))
    assert any(s < 2.0 for s in slept), sorted(set(slept))


def test_the_capacity_guard_counts_only_the_pods_each_nodes_own_options_move():
    """A pod selector that selects none moves none: nothing to place, the guard passes where the default
    options would stop. Kills: `options.get(name, BESIDE)` → `options.get(None, BESIDE)` (every node counted
    as a drain beside the batch) or dropped (the default options)."""
    cluster, _ = _demo()
    snap, nodes = cluster.snapshot(), _l40s(cluster)
    members = set(nodes)
    assert _guard(snap, members, members, {n: DrainOptions() for n in nodes}) is not None
    none_selected = {n: DrainOptions(pod_selector={"gputui-test": "selects-nothing"}) for n in nodes}
    assert _guard(snap, members, members, none_selected) is None


def test_the_capacity_guard_counts_in_the_units_the_pods_ask_for():
    """Pods asking for MIG slices fit where slices are free, whatever the whole cards. Kills:
    `capacity_after(snap, members, product, gpus, resource)` → without `resource` (slices counted as whole
    GPUs: a batch stopped that fits)."""
    from gputui.vocabulary.gpu_resources import GpuResource, Scheme

    mig = "nvidia.com/mig-1g.10gb"

    def node(name: str) -> Node:
        return Node(name, True, False, "A100", 1, 1, gpu_resources=(GpuResource(mig, Scheme.MIG, 7, 7),))

    pods = (InferencePod("ns", "a", "uid-a", "m1", gpu_request=1, gpu_units={mig: 2}),)
    snap = ClusterSnapshot(0.0, "t", nodes=(node("m1"), node("m2")), pods=pods)
    assert _guard(snap, {"m1"}, {"m1"}, {"m1": DrainOptions()}) is None
    crowded = ClusterSnapshot(0.0, "t", nodes=(node("m1"), node("m2")),
                              pods=(*pods, InferencePod("ns", "b", "uid-b", "m2", gpu_request=1, gpu_units={mig: 6})))
    assert _guard(crowded, {"m1"}, {"m1"}, {"m1": DrainOptions()}) == \
        f"2 {mig} on A100 in 1 pod need a new home; 1 free on other schedulable nodes: does NOT fit"


class _PerDrainReader:
    """The demo read as the live backend reads it: each drain re-reads its own pods (pods_snapshot). The looks of
    `failing`'s drain fail the first `times` times (the API down for that drain's reads only); each drain's looks
    are noted with the clock's time."""

    def __init__(self, cluster: DemoCluster, clock: ManualClock, failing: str, times: int) -> None:
        self.cluster, self.clock, self.failing, self.times = cluster, clock, failing, times
        self.node_of = {p.key: p.node for p in cluster.snapshot().pods}
        self.looks: dict[str, list[float]] = {}

    def snapshot(self) -> ClusterSnapshot:
        return self.cluster.snapshot()

    def pods_snapshot(self, keys, namespaces=None) -> ClusterSnapshot:
        if namespaces is None:  # a drain's look (not its count of the pods serving around one it takes out)
            node = {self.node_of[k] for k in keys}.pop()
            self.looks.setdefault(node, []).append(self.clock())
            if node == self.failing and self.times > 0:
                self.times -= 1
                raise BackendError("the API is down")
        return self.cluster.snapshot()

    def __getattr__(self, name):
        return getattr(self.cluster, name)


def test_a_paused_drain_backs_off_while_the_drain_beside_it_is_still_looked_at_each_poll():
    """Two drains at once; the first's reads fail three times: it waits 2, 4, then 8 s between its looks (its
    backoff) while the second is looked at every 2 s, on time. Kills: `if clock() < wake.get(node, 0.0)` →
    `wake.get(None, 0.0)` (a paused drain looked at every poll: its backoff ignored), `<=` (a drain looked at a
    poll after it asked), and the `continue` past a drain not yet due → `break` (the drains after it not looked
    at: late)."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.report import Outcome
    from gputui.ops.drain.start import BatchStart

    cluster, clock = _demo()
    first, second = "gpu-h100-01", "gpu-h100-02"  # pods with live sessions: each drain looks many times
    reader = _PerDrainReader(cluster, clock, first, 3)
    ctx = OpContext(reader, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=clock.advance, poll_s=2.0)
    events, reports = _run(run_batch([first, second], ctx, DrainOptions(session_deadline_s=30), BatchStart(parallel=2)))
    assert all(r.outcome is Outcome.DRAINED for r in reports.values())
    assert reports[first].pauses == 1 and sum(e.kind is EventKind.PAUSED for e in events) == 3

    def gaps(node: str) -> list[float]:
        at = reader.looks[node]
        return [b - a for a, b in pairwise(at)]

    assert len(reader.looks[second]) > 5 and set(gaps(second)) == {2.0}, gaps(second)
    assert gaps(first)[:4] == [2.0, 4.0, 8.0, 2.0], gaps(first)


def test_a_batch_polling_faster_than_a_second_sleeps_its_poll_not_a_second():
    """Kills: `sleep(max(0.0, ...) or poll_s)` → `max(1.0, ...)` (every wait at least a second: a drain that
    asked to be looked at in half a second looked at late)."""
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.report import Outcome
    from gputui.ops.drain.start import BatchStart

    cluster, clock = _demo()
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        clock.advance(s)

    ctx = OpContext(cluster, cluster, AuditLog(None, "t", "demo"), clock=clock, sleep=sleep, poll_s=0.5)
    _, reports = _run(run_batch(["gpu-h100-01"], ctx, DrainOptions(session_deadline_s=5), BatchStart()))
    assert reports["gpu-h100-01"].outcome is Outcome.DRAINED
    assert slept and set(slept) == {0.5}, sorted(set(slept))
