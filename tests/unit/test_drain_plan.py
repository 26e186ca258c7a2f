"""Drain planning, table-driven from kubectl's filter rules (pkg/drain/filters.go)."""

import pytest

from gputui.backends.demo import DemoCluster
from gputui.ops.drain.plan import DrainOptions, Step, classify, plan_drain, plan_json
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import Budget, InferencePod, Node
from gputui.vocabulary.sessions import NO_SIGNAL, UNREADABLE, PodSessions, SessionState
from tests.demo_clock import ManualClock


def pod(**kw) -> InferencePod:
    base = dict(namespace="ns", name="p", uid="u", node="n1", owner_kind="ReplicaSet")
    base.update(kw)
    return InferencePod(**base)


DEFAULT = DrainOptions()
ALL = DrainOptions(ignore_daemonsets=True, delete_emptydir_data=True, force=True)


def known(n: int) -> PodSessions:
    return PodSessions(SessionState.KNOWN, n)


@pytest.mark.parametrize("the_pod, options, step, note", [
    (pod(), DEFAULT, Step.EVICT, ""),
    ((pod(), known(3)), DEFAULT, Step.WAIT_SESSIONS, ""),
    ((pod(), known(0)), DEFAULT, Step.WAIT_SESSIONS, ""),
    (pod(owner_kind="DaemonSet"), DEFAULT, Step.SKIP, "ignoring DaemonSet-managed pod"),
    (pod(owner_kind="DaemonSet"), DrainOptions(ignore_daemonsets=False), Step.ERROR, "DaemonSet-managed pod"),
    (pod(mirror=True, owner_kind="Node"), DEFAULT, Step.SKIP, "mirror pod"),
    (pod(has_emptydir=True), DEFAULT, Step.ERROR, "emptyDir"),
    (pod(has_emptydir=True), ALL, Step.EVICT, "deleting emptyDir data"),
    (pod(owner_kind=""), DEFAULT, Step.ERROR, "not managed by a controller"),
    (pod(owner_kind=""), ALL, Step.EVICT, "not managed by a controller"),
    # Finished pods pass the checks even with emptyDir and no controller.
    (pod(owner_kind="", has_emptydir=True, phase="Succeeded"), DEFAULT, Step.EVICT, ""),
    (pod(owner_kind="", phase="Failed"), DEFAULT, Step.EVICT, ""),
    # DaemonSet comes before mirror and emptyDir in kubectl's order.
    (pod(owner_kind="DaemonSet", has_emptydir=True), DEFAULT, Step.SKIP, "ignoring DaemonSet-managed pod"),
    (pod(owner_kind="", has_emptydir=True), DrainOptions(delete_emptydir_data=True), Step.ERROR, "not managed"),
])
def test_kubectl_filters(the_pod, options, step, note):
    the_pod, sessions = the_pod if isinstance(the_pod, tuple) else (the_pod, NO_SIGNAL)
    got_step, got_note = classify(the_pod, sessions, options)
    assert got_step is step
    assert note in got_note


def snapshot_with(pods, budgets=(), nodes=None, counts=None) -> ClusterSnapshot:
    """`counts`: pod name (in namespace ns) -> live requests, as the session read gives them."""
    nodes = nodes or (Node("n1", True, False, "H100", 8, 8), Node("n2", True, False, "H100", 8, 8),
                      Node("n3", True, True, "H100", 8, 8), Node("n4", True, False, "A100", 8, 8))
    return ClusterSnapshot(0.0, "t", nodes=nodes, pods=tuple(pods), budgets=tuple(budgets),
                           session_counts={("ns", name): c for name, c in (counts or {}).items()})


def test_plan_names_budgets_sessions_and_errors():
    pods = [
        pod(name="a", labels={"app": "llm"}, gpu_request=4),
        pod(name="b", labels={"app": "llm"}, gpu_request=2),
        pod(name="local", has_emptydir=True),
        pod(name="ds", owner_kind="DaemonSet"),
        pod(name="elsewhere", node="n2", gpu_request=6),
    ]
    budgets = [Budget("ns", "llm-pdb", {"app": "llm"}, disruptions_allowed=0, current_healthy=3, desired_healthy=3)]
    plan = plan_drain(snapshot_with(pods, budgets, counts={"a": 6}), "n1")
    by = {p.pod.name: p for p in plan.pods}
    assert set(by) == {"a", "b", "local", "ds"}
    assert by["a"].step is Step.WAIT_SESSIONS and plan.live_sessions == 6
    assert by["a"].pdb_blocks_now and "llm-pdb: 0 disruptions allowed" in by["a"].budget_note
    assert plan.blocked and plan.errors == ["ns/local: has local storage (emptyDir); use delete-emptydir-data"]
    # n2 has 2 free (6 used), n3 is cordoned, n4 is another model: 4+2 GPUs do not fit.
    assert plan.capacity.free_by_node == {"n2": 2}
    assert not plan.capacity.fits
    data = plan_json(plan)
    assert data["pods"][0]["budgets"][0]["name"] == "llm-pdb"


def test_an_unknown_session_count_is_waited_on_never_read_as_zero():
    """The bug this replaces: with Prometheus up but a serving pod's series gone, the plan said
    "0 live sessions" and evicted it at once."""
    from dataclasses import replace

    from gputui.snapshot import SourceStatus

    pods = [pod(name="llm", service="llama", version="v1", gpu_request=4, session_signal=True),
            pod(name="nan", service="llama", session_signal=True),
            pod(name="batch", gpu_request=1)]
    for source in (SourceStatus("metrics", 10.0, "unavailable: connection refused"), SourceStatus("metrics", 10.0)):
        snap = replace(snapshot_with(pods, counts={"nan": UNREADABLE}), sources=(source,))
        plan = plan_drain(snap, "n1")
        by = {p.pod.name: p for p in plan.pods}
        for name in ("llm", "nan"):
            assert by[name].sessions.state is SessionState.UNKNOWN and by[name].sessions.live is None
            assert by[name].step is Step.WAIT_SESSIONS and "sessions unknown" in by[name].note
            assert "left in place at its deadline" in by[name].note
        assert by["batch"].step is Step.EVICT  # no session signal: kubectl's behaviour
        assert not plan.blocked and plan.live_sessions == 0 and len(plan.unknown_pods) == 2
        assert "2 pods with sessions unknown" in plan.describe_sessions()
        assert plan_json(plan)["pods"][1]["session_state"] == "unknown"
    down = plan_drain(replace(snapshot_with(pods), sources=(SourceStatus("metrics", 10.0, "unavailable: x"),)), "n1")
    assert "metrics unavailable: x" in down.pods[1].note
    chosen = plan_drain(snapshot_with(pods), "n1", DrainOptions(evict_unknown_at_deadline=True))
    assert "possibly cut (chosen)" in chosen.pods[1].note


def test_selector_and_multiple_budgets():
    pods = [pod(name="a", labels={"app": "x", "tier": "gpu"}), pod(name="b", labels={"app": "y"})]
    budgets = [Budget("ns", "one", {"app": "x"}, 1), Budget("ns", "two", {"tier": "gpu"}, 1)]
    plan = plan_drain(snapshot_with(pods, budgets), "n1", DrainOptions(pod_selector={"app": "x"}))
    assert [p.pod.name for p in plan.pods] == ["a"]
    assert "more than one PodDisruptionBudget" in plan.pods[0].budget_note


def test_capacity_is_whole_pods_per_node():
    nodes = (Node("n1", True, False, "H100", 8, 8), Node("n2", True, False, "H100", 8, 8), Node("n3", True, False, "H100", 8, 8))
    busy = [pod(name="x2", node="n2", gpu_request=5), pod(name="x3", node="n3", gpu_request=5)]
    plan = plan_drain(snapshot_with([pod(name="big", gpu_request=4), *busy], nodes=nodes), "n1")
    assert plan.capacity.free_total == 6 and not plan.capacity.fits  # 3+3 free, but no node has 4
    plan = plan_drain(snapshot_with([pod(name="small", gpu_request=3), *busy], nodes=nodes), "n1")
    assert plan.capacity.fits


def test_demo_node_plan():
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    plan = plan_drain(snap, "gpu-h100-01")
    assert not plan.blocked
    assert {p.step for p in plan.pods} == {Step.WAIT_SESSIONS, Step.SKIP}
    assert plan.capacity.fits  # three idle H100 nodes
    job = plan_drain(snap, next(n for n in snap.nodes if any(p.owner_kind == "Job" for p in snap.pods_on(n.name))).name)
    assert job.blocked and "emptyDir" in job.errors[0]


def test_options_round_trip_through_the_node_and_bad_records_are_one_line():
    from gputui.ops.drain.options import OPTIONS, DrainRecordError, saved_drain
    from gputui.vocabulary.model import Node

    chosen = DrainOptions(pod_selector={"app": "x"}, disable_eviction=True, force=True, session_threshold=2,
                          session_deadline_s=600.0, grace_seconds=30, evict_unknown_at_deadline=True)
    node = Node("n1", True, True, "H100", 8, 8, annotations={OPTIONS: chosen.to_json(), "gputui.io/drain-deadline": "99"})
    assert saved_drain(node) == (chosen, 99.0)
    for bad in ("{", "[]", '{"session_deadline_s": "soon"}', '{"pod_selector": ["a"]}', '{"force": "yes"}',
                '{"grace_seconds": -3}'):
        node = Node("n1", True, True, "H100", 8, 8, annotations={OPTIONS: bad})
        with pytest.raises(DrainRecordError) as err:
            saved_drain(node)
        assert str(err.value).startswith("node n1: cannot resume its drain:") and "\n" not in str(err.value)


@pytest.mark.parametrize("budget, says", [
    (Budget("ns", "b", {"app": "x"}, max_unavailable="0", expected_pods=3, current_healthy=3), "maxUnavailable 0"),
    (Budget("ns", "b", {"app": "x"}, min_available="2", expected_pods=2, current_healthy=2), "scale the workload up"),
    (Budget("ns", "b", {"app": "x"}, min_available="100%", expected_pods=4, current_healthy=4), "never allows"),
    (Budget("ns", "b", {"app": "x"}, min_available="2", expected_pods=3, current_healthy=1, disruptions_allowed=0),
     "unhealthyPodEvictionPolicy: AlwaysAllow"),
    (Budget("ns", "b", {"app": "x"}, min_available="2", expected_pods=3, current_healthy=3, disruptions_allowed=1), ""),
    (Budget("ns", "b", {"app": "x"}, min_available="2", expected_pods=3, current_healthy=1,
            unhealthy_pod_eviction_policy="AlwaysAllow"), ""),
])
def test_plan_lint_names_pdb_deadlocks_and_their_remedy_before_anything_is_written(budget, says):
    plan = plan_drain(snapshot_with([pod(name="a", labels={"app": "x"})], [budget]), "n1")
    if says:
        assert len(plan.warnings) == 1 and says in plan.warnings[0] and plan.warnings[0].startswith("ns/a: b:")
        assert plan_json(plan)["warnings"] == list(plan.warnings)
    else:
        assert plan.warnings == ()


def test_plan_warns_when_the_grace_period_is_shorter_than_prestop_plus_engine_shutdown():
    from gputui.backends.kube_objects import pod_record

    def record(lifecycle, grace):
        return pod_record({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                           "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": grace,
                                    "containers": [{"name": "a"}, {"name": "vllm", "lifecycle": {"preStop": lifecycle}}]}})

    assert record({"sleep": {"seconds": 45}}, 30).prestop_sleep_s == 45
    assert record({"exec": {"command": ["/bin/sh", "-c", "sleep 20 && kill -TERM 1"]}}, 30).prestop_sleep_s == 20
    assert record({"httpGet": {"path": "/drain"}}, 30).prestop_sleep_s == 0
    short = pod(name="llm", service="s", termination_grace_s=30, prestop_sleep_s=45)
    plan = plan_drain(snapshot_with([short], counts={"llm": 1}), "n1", DrainOptions(session_deadline_s=600, engine_shutdown_s=10))
    assert any("terminationGracePeriodSeconds 30 is shorter than its preStop sleep 45s + engine shutdown 10s" in w
               for w in plan.warnings)
    assert plan.pods[0].max_seconds(plan.options) == 630  # the session wait, then the grace period
    assert plan_json(plan)["pods"][0]["max_seconds"] == 630
    ample = pod(name="llm", service="s", termination_grace_s=120, prestop_sleep_s=45)
    assert plan_drain(snapshot_with([ample], counts={"llm": 1}), "n1", DrainOptions(engine_shutdown_s=10)).warnings == (
        "ns/s: no PodDisruptionBudget covers its pod here: nothing but this drain limits how many of its pods go "
        "at once (a driver upgrade or another drain may take the rest)",)


def test_the_capacity_guard_counts_in_the_units_the_pods_ask_for():
    """A MIG pod needs a free slice of its own profile elsewhere: free whole GPUs and other profiles do not
    count (the old guard added them all up as GPUs)."""
    from gputui.vocabulary.gpu_resources import GpuResource, Scheme

    small, large = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"

    def mig_node(name, small_n, large_n):
        res = (GpuResource(small, Scheme.MIG, small_n, small_n), GpuResource(large, Scheme.MIG, large_n, large_n))
        return Node(name, True, False, "A100", small_n + large_n, small_n + large_n, gpu_resources=res, gpu_count=2)

    nodes = (mig_node("n1", 7, 2), mig_node("n2", 7, 2),
             Node("n3", True, False, "A100", 8, 8, gpu_resources=(GpuResource("nvidia.com/gpu", Scheme.WHOLE, 8, 8),)))
    pods = [pod(name="a", gpu_request=2, gpu_units={small: 2}),
            pod(name="full", node="n2", gpu_request=6, gpu_units={small: 6}),
            pod(name="big", node="n2", gpu_request=1, gpu_units={large: 1})]
    plan = plan_drain(snapshot_with(pods, nodes=nodes), "n1")
    assert plan.capacity.resource == small and plan.capacity.free_by_node == {"n2": 1, "n3": 0}
    assert not plan.capacity.fits  # 2 slices needed, 1 free: 8 whole GPUs on n3 are no help
    assert "2 nvidia.com/mig-1g.10gb on A100 in 1 pod need a new home; 1 free" in plan.capacity.describe()
    assert plan_json(plan)["capacity"]["resource"] == small


def test_a_batch_beyond_the_gpu_operators_max_unavailable_says_so():
    from gputui.ops.drain.batch_plan import batch_json, plan_batch
    from gputui.vocabulary.model import UpgradePolicy

    nodes = tuple(Node(f"n{i}", True, i == 0, "H100", 8, 8) for i in range(8))  # n0 cordoned already
    snap = ClusterSnapshot(0.0, "t", nodes=nodes, upgrade_policy=UpgradePolicy(max_unavailable="25%"))
    assert plan_batch(snap, ["n1"], DrainOptions()).unavailable_note == ""  # 2 of 8: within 25% (2)
    batch = plan_batch(snap, ["n1", "n2"], DrainOptions())
    assert batch.unavailable_note.startswith("draining these leaves 3 of 8 GPU nodes unavailable, beyond the GPU "
                                             "Operator's maxUnavailable 25% (2)")
    assert batch.unavailable_note in batch.describe() and batch_json(batch)["beyond_max_unavailable"]
    without = ClusterSnapshot(0.0, "t", nodes=nodes)
    assert plan_batch(without, ["n1", "n2"], DrainOptions()).unavailable_note == ""  # no policy read: nothing said


def test_an_inference_pod_no_budget_covers_is_named_in_the_plan():
    """Issue 35 item 6: a pod with no PDB showed an empty Budget column, with no word of warning."""
    from gputui.snapshot import SourceStatus

    pods = [pod(name="a", service="llm", gpu_request=4), pod(name="b", service="llm", gpu_request=2),
            pod(name="guarded", service="emb", labels={"app": "emb"}, gpu_request=1),
            pod(name="batch-job", gpu_request=1),  # no service, no session signal: not an inference pod
            pod(name="ds", service="llm", owner_kind="DaemonSet")]  # skipped: the drain does not move it
    budgets = [Budget("ns", "emb-pdb", {"app": "emb"}, disruptions_allowed=1, current_healthy=2, desired_healthy=1)]
    plan = plan_drain(snapshot_with(pods, budgets), "n1")
    notes = {p.pod.name: p.budget_note for p in plan.pods}
    assert notes["a"] == notes["b"] == "no PodDisruptionBudget"
    assert notes["guarded"].startswith("emb-pdb: 1 disruption allowed") and notes["batch-job"] == notes["ds"] == ""
    said = [w for w in plan.warnings if "PodDisruptionBudget" in w]
    assert said == ["ns/llm: no PodDisruptionBudget covers its 2 pods here: nothing but this drain limits how "
                    "many of its pods go at once (a driver upgrade or another drain may take the rest)"]
    # An API that did not answer may have failed on the budgets too: not known, never "none".
    failed = snapshot_with(pods, budgets)
    failed = ClusterSnapshot(0.0, "t", nodes=failed.nodes, pods=failed.pods, budgets=failed.budgets,
                             sources=(SourceStatus("API", None, "forbidden: poddisruptionbudgets"),))
    said = [w for w in plan_drain(failed, "n1").warnings if "PodDisruptionBudget" in w]
    assert said == ["PodDisruptionBudgets not known (forbidden: poddisruptionbudgets): 1 service may have none: "
                    "ns/llm"]


def test_a_plan_made_while_another_drain_runs_counts_its_pods_first():
    """Issue 35 item 2: concurrent drains together respect the capacity the plans count. n1 is being drained
    and its 4-GPU pod has not gone yet; n5's 4 free GPUs are all there is for it and for n2's pod."""
    from gputui.ops.drain.batch_plan import plan_batch

    nodes = (Node("n1", True, True, "H100", 8, 8), Node("n2", True, False, "H100", 8, 8),
             Node("n3", True, True, "H100", 8, 8), Node("n5", True, False, "H100", 8, 8))
    pods = [pod(name="going", node="n1", gpu_request=4), pod(name="next", node="n2", gpu_request=4),
            pod(name="busy", node="n5", gpu_request=4)]
    snap = snapshot_with(pods, nodes=nodes)
    alone = plan_batch(snap, ["n2"], DEFAULT)
    assert alone.fits and alone.ahead == ()
    together = plan_batch(snap, ["n2"], DEFAULT, draining=["n1", "n2", "gone-node", "n1"])
    assert together.ahead == ("n1",) and not together.fits and together.stop_before == "n2"
    assert together.describe()[:2] == [
        "the drains running on n1 still move 4 H100 GPUs (1 pod): counted below, before this batch's",
        "this batch needs 8 H100 GPUs (2 pods); 4 are free outside it: does NOT fit"]
