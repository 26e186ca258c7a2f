from gputui.policy.health import has_driver_drift, majority_driver, node_alerts
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_resources import GpuUse
from gputui.vocabulary.model import (
    Budget,
    Condition,
    Gpu,
    Health,
    InferencePod,
    InferenceService,
    Node,
    NodeState,
    Rollout,
    ServiceVersion,
)


def node(name="n1", **kw) -> Node:
    base = dict(name=name, ready=True, unschedulable=False, gpu_product="NVIDIA-H100-80GB-HBM3",
                gpu_capacity=8, gpu_allocatable=8, driver_version="550.127.05")
    base.update(kw)
    return Node(**base)


def pod(name, node_name, gpus, phase="Running", **kw) -> InferencePod:
    return InferencePod(namespace="llm", name=name, uid=name + "-uid", node=node_name,
                        phase=phase, gpu_request=gpus, **kw)


def test_allocation_counts_only_non_terminated_pods_bound_to_the_node():
    snap = ClusterSnapshot(
        taken_at=0, context="t", nodes=(node("a"), node("b")),
        pods=(pod("p1", "a", 4), pod("p2", "a", 2), pod("done", "a", 8, phase="Succeeded"),
              pod("failed", "a", 1, phase="Failed"), pod("pending", "", 8, phase="Pending"),
              pod("p3", "b", 1)),
    )
    assert snap.gpus_allocated("a") == 6
    assert snap.gpus_allocated("b") == 1
    assert snap.gpus_allocated("nowhere") == 0
    assert snap.gpu_use() == GpuUse((7, 0, 0, 0), (16, 0, 0, 0))


def test_majority_driver_and_drift():
    nodes = [node("a"), node("b"), node("c", driver_version="535.183.01"), node("d", driver_version="")]
    majority = majority_driver(nodes)
    assert majority == "550.127.05"
    assert has_driver_drift(nodes[2], majority)
    assert not has_driver_drift(nodes[0], majority)
    assert not has_driver_drift(nodes[3], majority)  # unknown is not drift


def test_majority_driver_tie_goes_to_the_newest_version():
    assert majority_driver([node("a", driver_version="550.9.1"), node("b", driver_version="550.10.1")]) == "550.10.1"


def test_alerts_cover_every_signal():
    hot = node(
        "hot",
        ready=False,
        gpus=(
            Gpu(0, "u0", temp_c=85.0),
            Gpu(1, "u1", temp_c=84.9),
            Gpu(2, "u2", xid=79),
            Gpu(3, "u3", health=Health.WARN),
            Gpu(4, "u4", health=Health.PASS),
        ),
        conditions=(
            Condition("Ready", "False"),
            Condition("GpuThermalWatch", "True", "Hot"),
            Condition("GpuMemWatch", "False"),
            Condition("MemoryPressure", "True"),  # standard: the kubelet's, not a GPU problem
        ),
        upgrade_state="upgrade-failed",
    )
    kinds = [a.kind for a in node_alerts(hot, 85.0)]
    assert kinds == ["NotReady", "XID", "Health", "Condition", "Upgrade", "Temp"]  # worst first
    assert [a.kind for a in node_alerts(hot, 90.0)].count("Temp") == 0
    assert node_alerts(node("fine", gpus=(Gpu(0, "u", temp_c=40.0, health=Health.PASS),)), 85.0) == []


def test_node_state_precedence():
    assert node().state is NodeState.READY
    assert node(unschedulable=True).state is NodeState.CORDONED
    assert node(unschedulable=True, upgrade_state="drain-required").state is NodeState.UPGRADING
    assert node(upgrade_state="upgrade-done").state is NodeState.READY
    assert node(unschedulable=True, annotations={"gputui.io/drain-phase": "waiting"}).state is NodeState.DRAINING
    assert node(unschedulable=True, annotations={"gputui.io/drain-phase": "done"}).state is NodeState.CORDONED
    assert node(ready=False, unschedulable=True).state is NodeState.NOT_READY


def test_node_aggregates_ignore_missing_metrics():
    n = node(gpus=(Gpu(0, "a", util_pct=50, mem_used_mib=10, mem_total_mib=100, power_w=100, temp_c=60),
                   Gpu(1, "b", util_pct=None), Gpu(2, "c", util_pct=100, temp_c=70, power_w=50)))
    from gputui.vocabulary.gauges import gauges, util_sum
    g = gauges(n, None)
    assert (g.util_pct, g.temp_c, g.power_w, *util_sum(n, None), g.reporting) == (75, 70, 150, 150, 2, True)
    assert gauges(node(gpus=()), None).util_pct is None and not gauges(node(gpus=()), None).reporting
    assert gauges(node(gpus=(), gpu_memory_mib=1000), None).mem_total_mib == 8000
    # A fleet read's summary: the card size from the node label times the cards reporting, not the allocatable
    # units (MIG slices would count a card seven times); a total the store gave stands.
    from gputui.vocabulary.model import GpuSummary
    assert gauges(node(gpu_memory_mib=1000), GpuSummary(count=6, mem_used_mib=10.0)).mem_total_mib == 6000
    assert gauges(node(gpu_memory_mib=1000), GpuSummary(count=6, mem_total_mib=5.0)).mem_total_mib == 5
    summarised = gauges(node(), GpuSummary(count=6))
    assert summarised.mem_total_mib is None and summarised.util_pct is None and summarised.reporting
    assert util_sum(node(), GpuSummary(count=6)) == (0.0, 0)  # no utilisation: it weighs nothing in a mean
    assert util_sum(node(), GpuSummary(count=4, util_pct=50.0))[0] == 200.0


def test_rollout_status_follows_kubectl_order():
    assert Rollout(generation=2, observed_generation=1).status == "waiting for spec update"
    assert Rollout(progress_deadline_exceeded=True, replicas_desired=3).status == "progress deadline exceeded"
    assert Rollout(replicas_desired=3, updated=1, replicas=3).status == "1 of 3 updated"
    assert Rollout(replicas_desired=3, updated=3, replicas=4).status == "1 old pending termination"
    assert Rollout(replicas_desired=3, updated=3, replicas=3, available=2).status == "2 of 3 available"
    done = Rollout(replicas_desired=3, updated=3, replicas=3, available=3)
    assert done.status == "rolled out" and done.complete


def test_traffic_share_is_relative_to_the_weights():
    svc = InferenceService("llm", "m", (ServiceVersion("v1", 3), ServiceVersion("v2", 1)), "HTTPRoute", "m")
    assert svc.share_pct("v1") == 75
    assert svc.share_pct("v2") == 25
    assert svc.share_pct("v9") is None
    zero = InferenceService("llm", "z", (ServiceVersion("v1", 0),), "HTTPRoute", "z")
    assert zero.share_pct("v1") == 0
    unrouted = InferenceService("llm", "u", (ServiceVersion("v1"),))
    assert unrouted.share_pct("v1") == 100


def test_budget_matches_by_namespace_and_labels():
    b = Budget("llm", "pdb", {"app": "x"}, disruptions_allowed=0)
    assert b.matches(pod("p", "n", 1, labels={"app": "x", "other": "y"}))
    assert not b.matches(pod("p", "n", 1, labels={"app": "y"}))
    assert not Budget("other", "pdb", {"app": "x"}).matches(pod("p", "n", 1, labels={"app": "x"}))
    # policy/v1: an empty selector ({}) selects every pod of its namespace, a null one none (this test said the
    # opposite of the first until a PDB written `selector: {}` was found covering nothing in gputui's plans).
    assert Budget("llm", "empty", {}).matches(pod("p", "n", 1))
    assert not Budget("other", "empty", {}).matches(pod("p", "n", 1))
    assert not Budget("llm", "null", {}, selects_none=True).matches(pod("p", "n", 1))


def test_budget_selects_by_match_expressions_as_the_api_does():
    from gputui.vocabulary.label_selectors import Requirement

    def selects(*reqs: Requirement, labels: dict, match: dict | None = None) -> bool:
        return Budget("llm", "b", match or {}, expressions=reqs).matches(pod("p", "n", 1, labels=labels))

    tier = {"tier": "gpu", "app": "x"}
    assert selects(Requirement("tier", "In", ("gpu", "cpu")), labels=tier)
    assert not selects(Requirement("tier", "In", ("cpu",)), labels=tier)
    assert not selects(Requirement("zone", "In", ("a",)), labels=tier)  # In needs the label
    assert selects(Requirement("tier", "NotIn", ("cpu",)), labels=tier)
    assert selects(Requirement("zone", "NotIn", ("a",)), labels=tier)  # NotIn holds without the label
    assert not selects(Requirement("tier", "NotIn", ("gpu",)), labels=tier)
    assert selects(Requirement("tier", "Exists"), labels=tier) and not selects(Requirement("zone", "Exists"), labels=tier)
    assert selects(Requirement("zone", "DoesNotExist"), labels=tier)
    assert not selects(Requirement("tier", "DoesNotExist"), labels=tier)
    # matchLabels and matchExpressions must all hold
    assert not selects(Requirement("tier", "Exists"), labels=tier, match={"app": "y"})
    assert selects(Requirement("tier", "Exists"), Requirement("app", "In", ("x",)), labels=tier, match={"app": "x"})


def test_live_sessions_none_without_a_signal():
    snap = ClusterSnapshot(0.0, "t", session_counts={("llm", "q"): 5})
    assert snap.sessions(pod("p", "n", 1)).live is None
    assert snap.sessions(pod("q", "n", 1)).live == 5


def test_a_source_read_on_its_own_interval_is_stale_only_after_three_of_them():
    from gputui.snapshot import SourceStatus

    every_refresh = SourceStatus("API", fetched_at=100.0)
    assert not every_refresh.stale(106.0, refresh=2.0) and every_refresh.stale(106.5, refresh=2.0)
    dcgm = SourceStatus("metrics", fetched_at=100.0, every=15.0)
    assert not dcgm.stale(144.0, refresh=2.0) and dcgm.stale(146.0, refresh=2.0)
    assert not SourceStatus("metrics").stale(1e9, refresh=2.0)  # never read: an error says so, not an age


def test_a_nodes_alerts_are_remembered_per_threshold_and_not_carried_into_a_changed_copy():
    from dataclasses import replace

    warm = node("warm", gpus=(Gpu(0, "u0", temp_c=86.0),))
    first = node_alerts(warm, 85.0)
    assert [a.kind for a in first] == ["Temp"]
    first.clear()  # callers get their own list: the remembered answer is not theirs to change
    assert [a.kind for a in node_alerts(warm, 85.0)] == ["Temp"]
    assert node_alerts(warm, 90.0) == []  # another threshold is another answer
    assert warm == replace(warm)  # the memo is not part of what a node is
    cooled = replace(warm, gpus=(Gpu(0, "u0", temp_c=40.0),))
    assert node_alerts(cooled, 85.0) == [] and [a.kind for a in node_alerts(warm, 85.0)] == ["Temp"]


def test_a_node_asked_for_its_alerts_is_freed_with_its_snapshot():
    # The answer lives on the node: a memo beside the nodes kept every replaced node alive (at 65,000 nodes,
    # each DCGM read's worth, walked by every pass of the cycle collector).
    import gc
    import sys

    gc.collect()
    hot = node("hot", gpus=(Gpu(0, "u0", temp_c=90.0),))
    held = sys.getrefcount(hot)
    assert [a.kind for a in node_alerts(hot, 85.0)] == ["Temp"]
    assert sys.getrefcount(hot) == held
    assert not [r for r in gc.get_referrers(hot) if r is not globals() and not isinstance(r, type(sys._getframe()))]


def test_problems_rank_worst_first_and_one_lost_gpu_outranks_many_hot_ones():
    from gputui.policy.health import Severity, node_severity, problem_order, xid_text

    fell_off = node("fell-off", gpus=(Gpu(0, "u0", xid=79),))
    app_fault = node("app-fault", gpus=(Gpu(0, "u0", xid=31),))
    hot = node("hot", gpus=tuple(Gpu(i, f"u{i}", temp_c=90.0) for i in range(8)))
    lost = node("lost", gpu_capacity=8, gpu_allocatable=7)
    drifted = node("drifted", driver_version="535.1")
    cordoned = node("cordoned", unschedulable=True)
    fine = node("fine")
    down = node("down", ready=False)
    fleet = [fine, cordoned, drifted, hot, app_fault, lost, fell_off, down]
    majority = "550.127.05"
    ranked = sorted(fleet, key=lambda n: (problem_order(n, 85.0, majority), n.name))
    assert [n.name for n in ranked] == ["down", "fell-off", "lost", "app-fault", "hot", "drifted", "cordoned", "fine"]
    assert node_severity(hot, 85.0, majority) is Severity.THERMAL
    assert "fallen off the bus" in node_alerts(fell_off, 85.0)[0].message
    assert xid_text(999) == "XID 999 (unknown: not in NVIDIA's catalog)"  # never read as harmless


def test_why_not_says_read_only_or_which_permission_is_missing():
    from gputui.backends.base import Backend

    class Reader:
        def snapshot(self):
            raise AssertionError("not read")

        def close(self):
            pass

    assert Backend(Reader(), None, "ctx").why_not("cordon") == "read-only: cordon is unavailable"
    limited = Backend(Reader(), object(), "ctx", permissions={"evict": False})
    assert limited.why_not("cordon") is None
    assert limited.why_not("drain") == "your identity may not create pods/eviction: drain is unavailable"
