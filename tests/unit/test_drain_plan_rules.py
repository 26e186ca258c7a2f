"""A drain plan's rules, fast, on hand-built snapshots: what counts as moving and recreated, how long a pod can
take, the capacity check (first-fit decreasing, in the units asked for, outside the batch, on Ready schedulable
nodes of the same model), the budget words, what `--dry-run --json` prints, and where a batch's guards stop and
what it cordons first. The mutants named in each docstring are one-line bugs of gputui/ops/drain/plan.py these
tests kill."""

from __future__ import annotations

import pytest

from gputui.ops.drain.batch_plan import BatchPlan, _beyond_max_unavailable, batch_json, plan_batch
from gputui.ops.drain.out_of_rotation import OutOfRotation
from gputui.ops.drain.plan import (
    NO_BUDGET,
    CapacityCheck,
    DrainOptions,
    DrainPlan,
    PodPlan,
    Step,
    _free_outside,
    _offered,
    _unguarded_warnings,
    capacity_after,
    classify,
    plan_drain,
    plan_json,
    selected,
    units_needed,
    why_unknown,
)
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary.gpu_resources import GpuResource, Scheme
from gputui.vocabulary.model import Budget, InferencePod, Node, PodSelector, UpgradePolicy
from gputui.vocabulary.sessions import NO_SIGNAL, PodSessions, SessionState


def pod(name: str = "p", **kw) -> InferencePod:
    base = dict(namespace="ns", name=name, uid=f"uid-{name}", node="n1", owner_kind="ReplicaSet")
    base.update(kw)
    return InferencePod(**base)


def node(name: str, product: str = "H100", gpus: int = 8, ready: bool = True, cordoned: bool = False, **kw) -> Node:
    return Node(name, ready, cordoned, product, gpus, gpus, **kw)


def snap(pods=(), nodes=None, budgets=(), **kw) -> ClusterSnapshot:
    nodes = nodes or (node("n1"), node("n2"))
    return ClusterSnapshot(0.0, "t", nodes=tuple(nodes), pods=tuple(pods), budgets=tuple(budgets), **kw)


def plan_of(p: InferencePod, step: Step = Step.EVICT, budgets=(), sessions=NO_SIGNAL) -> PodPlan:
    return PodPlan(p, sessions, step, "", tuple(budgets))


BUDGET = Budget("ns", "llm", {"app": "llm"}, disruptions_allowed=0, current_healthy=2, desired_healthy=2)


# -- what moves -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("p, step, recreated, moves", [
    (pod(gpu_request=1), Step.EVICT, True, True),
    (pod(gpu_request=1), Step.WAIT_SESSIONS, True, True),
    (pod(gpu_request=1), Step.SKIP, False, False),
    (pod(gpu_request=1), Step.ERROR, False, False),
    (pod(gpu_request=0), Step.EVICT, True, False),  # no GPUs: recreated, needs no GPU home
    (pod(gpu_request=1, phase="Succeeded"), Step.EVICT, False, False),
    (pod(gpu_request=1, deleting=True), Step.EVICT, False, False),
    (pod(gpu_request=1, owner_kind=""), Step.EVICT, False, False),  # forced: never comes back
])
def test_what_is_recreated_and_what_needs_a_gpu_home(p, step, recreated, moves):
    """Kills each condition of `recreated` and `moves` dropped or inverted (`in` → `not in`, `and` → `or`,
    `gpu_request > 0` → `>= 0` / `> 1`)."""
    plan = plan_of(p, step)
    assert (plan.recreated, plan.moves) == (recreated, moves)


def test_an_inference_pod_with_no_budget_is_unguarded_and_said_so():
    """Kills: `not self.budgets and ...` → `or`, `p.service or p.session_signal` → `and`, the budget words
    (none, one: its description, several: the eviction fails)."""
    assert plan_of(pod(service="llm")).unguarded and plan_of(pod(session_signal=True)).unguarded
    assert not plan_of(pod()).unguarded  # no service, no signal: not an inference pod
    assert not plan_of(pod(service="llm"), budgets=(BUDGET,)).unguarded
    assert not plan_of(pod(service="llm", owner_kind="")).unguarded
    assert plan_of(pod(service="llm")).budget_note == NO_BUDGET
    assert plan_of(pod()).budget_note == ""
    assert plan_of(pod(), budgets=(BUDGET,)).budget_note == "llm: 0 disruptions allowed (2 healthy, 2 needed)"
    assert plan_of(pod(), budgets=(BUDGET, BUDGET)).budget_note == \
        "more than one PodDisruptionBudget: the eviction will fail"


def test_a_budget_blocks_now_only_at_zero_headroom_on_a_running_pod():
    """Kills: `disruptions_allowed <= 0` → `< 0` / `<= 1`, `len(budgets) == 1` → `!=`, the phase check."""
    one = Budget("ns", "llm", {}, disruptions_allowed=1)
    assert plan_of(pod(), budgets=(BUDGET,)).pdb_blocks_now
    assert not plan_of(pod(), budgets=(one,)).pdb_blocks_now
    assert not plan_of(pod(phase="Pending"), budgets=(BUDGET,)).pdb_blocks_now
    assert not plan_of(pod(), budgets=(BUDGET, BUDGET)).pdb_blocks_now
    assert not plan_of(pod()).pdb_blocks_now


def test_the_longest_a_pod_can_take_is_its_wait_then_its_grace():
    """Kills: the wait counted for a pod evicted at once, the API's default grace 30 changed, the operator's
    grace ignored (`is not None` → `is None`), `+` → `-`."""
    opts = DrainOptions(session_deadline_s=600)
    assert plan_of(pod(), Step.WAIT_SESSIONS).max_seconds(opts) == 630
    assert plan_of(pod(), Step.EVICT).max_seconds(opts) == 30
    assert plan_of(pod(termination_grace_s=5), Step.EVICT).max_seconds(opts) == 5
    assert plan_of(pod(termination_grace_s=5), Step.WAIT_SESSIONS).max_seconds(
        DrainOptions(session_deadline_s=100, grace_seconds=0)) == 100


def test_a_grace_shorter_than_prestop_and_engine_shutdown_is_warned_only_for_a_pod_waited_on():
    """Kills: `grace >= needed` → `>`, the operator's grace not preferred, `not needed` dropped, the words."""
    p = pod(termination_grace_s=20, prestop_sleep_s=15)
    opts = DrainOptions(engine_shutdown_s=5)
    assert plan_of(p, Step.WAIT_SESSIONS).grace_warning(opts) == ""  # 20 >= 15 + 5
    short = DrainOptions(engine_shutdown_s=5, grace_seconds=19)
    assert plan_of(p, Step.WAIT_SESSIONS).grace_warning(short) == (
        "terminationGracePeriodSeconds 19 is shorter than its preStop sleep 15s + engine shutdown 5s: it is "
        "killed before it stops cleanly")
    assert plan_of(p, Step.EVICT).grace_warning(short) == ""
    assert plan_of(pod(), Step.WAIT_SESSIONS).grace_warning(short) == ""  # grace not read
    assert plan_of(pod(termination_grace_s=0), Step.WAIT_SESSIONS).grace_warning(DrainOptions(engine_shutdown_s=0)) == ""


# -- capacity ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("needed, free, fits", [
    ((4, 4), {"a": 4, "b": 4}, True),
    ((4, 4), {"a": 8}, True),
    ((4, 4), {"a": 7}, False),
    ((6, 2), {"a": 4, "b": 4}, False),  # 8 free in all, but no node has room for the 6: whole pods per node
    ((2, 6), {"a": 6, "b": 2}, True),  # biggest first: 6 on a, 2 on b
    ((3, 3, 2), {"a": 5, "b": 3}, True),
    ((), {}, True),
    ((1,), {}, False),
    # Biggest pod first, into the rooms largest first: the 3 goes to b, a 2 to a, and the last 2 finds 1 and 1.
    # Packed tightly (3 on a, both 2s on b) they would fit; the guard does not count on a packing that nothing
    # makes (the placement preview, too, puts each pod where the most is free: placement._choose).
    ((2, 2, 3), {"a": 3, "b": 4}, False),
    ((2, 2, 3), {"a": 4, "b": 3}, False),
])
def test_capacity_is_first_fit_decreasing_whole_pods_per_node(needed, free, fits):
    """Kills: `room >= need` → `>`, `free[i] -= need` → `+=`/`=`, `break` → `continue`, either sort order
    flipped (the free rooms' ascending order is a best fit, which says "fits" for (2, 2, 3) in 3 and 4),
    `return True` / `return False` swapped."""
    assert CapacityCheck("H100", needed, free).fits is fits


def test_a_capacity_check_says_what_moves_against_what_is_free():
    """Kills: the words of each scheme (whole GPUs by model, other resources by resource), `pod_count`'s singular,
    `free_total` not the sum, the verdict inverted."""
    assert CapacityCheck("H100", (), {"a": 1}).describe() == "no GPU pods to place elsewhere"
    assert CapacityCheck("H100", (2, 1), {"a": 2, "b": 1}).describe() == \
        "3 H100 GPUs in 2 pods need a new home; 3 free on other schedulable nodes: fits"
    assert CapacityCheck("", (4,), {"a": 3}).describe() == \
        "4 GPUs GPUs in 1 pod need a new home; 3 free on other schedulable nodes: does NOT fit"
    assert CapacityCheck("A100", (1,), {"a": 2}, "nvidia.com/mig-1g.10gb").describe() == \
        "1 nvidia.com/mig-1g.10gb on A100 in 1 pod need a new home; 2 free on other schedulable nodes: fits"
    assert CapacityCheck("", (1,), {}, "nvidia.com/mig-1g.10gb").describe().startswith(
        "1 nvidia.com/mig-1g.10gb on any model in 1 pod")


def test_free_capacity_counts_only_ready_schedulable_nodes_of_the_model_outside_the_batch():
    """Kills: each filter of `_free_outside` dropped or inverted, `max(0, ...)` dropped (a node over-allocated
    read as negative room), `_offered` counting another resource, allocation subtracted from the wrong node."""
    nodes = (node("n1"), node("n2"), node("cordoned", cordoned=True), node("down", ready=False),
             node("a100", product="A100"), node("full", gpus=2), node("excluded"))
    pods = (pod("x", node="n2", gpu_request=3), pod("y", node="full", gpu_request=4))
    s = snap(pods, nodes)
    assert _free_outside(s, ["n1", "excluded"], "H100", "nvidia.com/gpu") == {"n2": 5, "full": 0}
    check = capacity_after(s, {"n1", "excluded"}, "H100", [5, 1])
    assert check == CapacityCheck("H100", (5, 1), {"n2": 5, "full": 0}) and not check.fits


def test_offered_units_are_the_nodes_resources_or_its_whole_card_count():
    """Kills: `if not node.gpu_resources` → `if node.gpu_resources`, `== WHOLE_GPU` → `!=`, the sum over
    another resource's allocatable."""
    mig = node("m", gpu_resources=(GpuResource("nvidia.com/mig-1g.10gb", Scheme.MIG, 7, 7),
                                  GpuResource("nvidia.com/gpu", Scheme.WHOLE, 2, 2)))
    assert _offered(node("plain", gpus=4), "nvidia.com/gpu") == 4
    assert _offered(node("plain", gpus=4), "nvidia.com/mig-1g.10gb") == 0
    assert _offered(mig, "nvidia.com/mig-1g.10gb") == 7 and _offered(mig, "nvidia.com/gpu") == 2


def test_units_needed_are_the_moving_pods_requests_in_the_units_asked_for():
    """Kills: `if p.moves` dropped, `gpu_units or {...}` → `and`, `setdefault(...).append` → a list per pod."""
    plans = [plan_of(pod("a", gpu_request=2)), plan_of(pod("b", gpu_request=1)),
             plan_of(pod("c", gpu_request=1, gpu_units={"nvidia.com/mig-1g.10gb": 3})),
             plan_of(pod("d", gpu_request=4), Step.SKIP)]
    assert units_needed(plans) == {"nvidia.com/gpu": [2, 1], "nvidia.com/mig-1g.10gb": [3]}


# -- words before anything is written ----------------------------------------------------------------------------

def test_an_unguarded_service_is_named_once_with_its_pods_count():
    """Kills: the service key (`namespace/service or name`), the singular/plural, the sort, `if not by_service`
    inverted."""
    plans = [plan_of(pod("a", service="llm")), plan_of(pod("b", service="llm")), plan_of(pod("c", session_signal=True))]
    tail = ": nothing but this drain limits how many of its pods go at once (a driver upgrade or another drain " \
           "may take the rest)"
    assert _unguarded_warnings(snap(), plans) == [
        f"ns/c: {NO_BUDGET} covers its pod here{tail}", f"ns/llm: {NO_BUDGET} covers its 2 pods here{tail}"]
    assert _unguarded_warnings(snap(), [plan_of(pod("a"))]) == []


def test_budgets_not_read_are_said_not_known_never_absent():
    """Fail closed: an API that failed may have failed on the budgets too. Kills: `api is not None and
    api.error` → `or` / dropped, the plural, the words."""
    s = snap(sources=(SourceStatus("API", 1.0, "503 from the apiserver"),))
    plans = [plan_of(pod("a", service="llm")), plan_of(pod("b", service="chat"))]
    assert _unguarded_warnings(s, plans) == [
        "PodDisruptionBudgets not known (503 from the apiserver): 2 services may have none: ns/chat, ns/llm"]
    assert _unguarded_warnings(s, plans[:1]) == [
        "PodDisruptionBudgets not known (503 from the apiserver): 1 service may have none: ns/llm"]
    fine = snap(sources=(SourceStatus("API", 1.0),))
    assert _unguarded_warnings(fine, plans[:1])[0].startswith(f"ns/llm: {NO_BUDGET}")


def test_why_session_counts_may_be_unknown():
    """Kills: each branch's words, `fetched_at` read inverted."""
    assert why_unknown(snap()) == ""
    assert why_unknown(snap(sources=(SourceStatus("metrics", None, "timeout"),))) == "metrics timeout"
    assert why_unknown(snap(sources=(SourceStatus("metrics", None),))) == "metrics not read yet"
    assert why_unknown(snap(sources=(SourceStatus("metrics", 3.0),))) == ""


def test_a_plans_sessions_are_counted_known_and_unknown_apart():
    """Kills: `live or 0` → `or 1`, the WAIT_SESSIONS filter dropped, the unknown count's words."""
    plans = (plan_of(pod("a"), Step.WAIT_SESSIONS, sessions=PodSessions(SessionState.KNOWN, 3)),
             plan_of(pod("b"), Step.WAIT_SESSIONS, sessions=PodSessions(SessionState.UNKNOWN, None)),
             plan_of(pod("c"), Step.EVICT, sessions=PodSessions(SessionState.KNOWN, 5)),
             plan_of(pod("d"), Step.ERROR))
    plan = DrainPlan("n1", DrainOptions(), plans, CapacityCheck("H100", (), {}), False)
    assert plan.live_sessions == 3 and [p.pod.name for p in plan.unknown_pods] == ["b"]
    assert plan.describe_sessions() == "3 live sessions to wait for, 1 pods with sessions unknown"
    assert [p.pod.name for p in plan.to_evict] == ["a", "b", "c"]
    assert plan.blocked and plan.errors == ["ns/d: "]
    assert DrainPlan("n1", DrainOptions(), plans[:1], plan.capacity, False).describe_sessions() == \
        "3 live sessions to wait for"


# -- what --dry-run --json prints ----------------------------------------------------------------------------------

def test_the_json_plan_names_every_field():
    """`gputui drain --dry-run --json` is read by scripts: every key and value pinned. Kills each key renamed
    and each value swapped (max_seconds None for skipped and blocked pods, the budget figures, the options)."""
    budget = Budget("ns", "llm", {"app": "llm"}, disruptions_allowed=1, current_healthy=3, desired_healthy=2)
    pods = (pod("a", labels={"app": "llm"}, gpu_request=2, service="llm", version="v1", session_signal=True),
            pod("ds", owner_kind="DaemonSet"))
    s = snap(pods, budgets=(budget,), session_counts={("ns", "a"): 4})
    opts = DrainOptions(session_threshold=1, session_deadline_s=120, evict_unknown_at_deadline=True)
    data = plan_json(plan_drain(s, "n1", opts, preview=False))
    assert data == {
        "node": "n1", "blocked": False, "errors": [], "already_cordoned": False,
        "warnings": ["every pod of ns/llm (1) is on the nodes drained and no version serves elsewhere to shift its "
                     "traffic to: its last pods keep taking new sessions until replacements serve"],
        "live_sessions": 4, "pods_with_sessions_unknown": 0,
        "options": {"selector": {}, "disable_eviction": False, "session_threshold": 1, "session_deadline_s": 120,
                    "evict_unknown_at_deadline": True},
        "capacity": {"product": "H100", "resource": "nvidia.com/gpu", "needed_gpus": [2], "free_gpus": 8, "fits": True},
        "pods": [
            {"namespace": "ns", "name": "a", "step": "wait", "note": "", "gpus": 2, "service": "llm", "version": "v1",
             "session_state": "known", "live_sessions": 4, "max_seconds": 150, "placement": None,
             "budgets": [{"name": "llm", "disruptions_allowed": 1, "current_healthy": 3, "desired_healthy": 2}]},
            {"namespace": "ns", "name": "ds", "step": "skip", "note": "ignoring DaemonSet-managed pod", "gpus": 0,
             "service": "", "version": "", "session_state": "none", "live_sessions": None, "max_seconds": None,
             "placement": None, "budgets": []},
        ],
        "via": {"via": "cordon"}}


def test_the_json_batch_names_its_capacity_and_stops():
    """Kills each key of `batch_json` renamed and each value swapped (needed as a sum, pods as a count)."""
    pods = (pod("a", gpu_request=6), pod("b", node="n2", gpu_request=4), pod("c", node="n3", gpu_request=6))
    s = snap(pods, (node("n1"), node("n2"), node("n3")))
    data = batch_json(plan_batch(s, ["n1", "n2"], DrainOptions()))
    assert [n["node"] for n in data["nodes"]] == ["n1", "n2"]
    assert data["capacity"] == [{"product": "H100", "resource": "nvidia.com/gpu", "needed_gpus": 10, "pods": 2,
                                 "free_gpus": 2, "fits": False}]
    assert data["guard_stops_before"] == "n1" and data["placement_stops_before"] is None
    assert data["beyond_max_unavailable"] is None and "placement" in data


# -- a batch ----------------------------------------------------------------------------------------------------

def _batch(*stops: str | None, accepted=()) -> BatchPlan:
    names = ["n1", "n2", "n3"]
    plans = []
    for n in names:
        p = plan_of(pod(f"p-{n}", node=n, gpu_request=1))
        plans.append(DrainPlan(n, DrainOptions(), (p,), CapacityCheck("H100", (1,), {}), False))
    return BatchPlan(tuple(plans), (), stops[0], placement_stop=stops[1] if len(stops) > 1 else None,
                     accepted=frozenset(accepted))


def test_a_batch_stops_at_the_first_of_its_guards_and_cordons_only_the_nodes_before():
    """Kills: `min(stops, key=names.index)` → `max`, `if n in names` dropped, `names[:index]` → `[index:]`,
    `fits` inverted."""
    assert _batch(None).first_stop is None and _batch(None).cordon_first == ["n1", "n2", "n3"] and _batch(None).fits
    assert _batch("n3", "n2").first_stop == "n2" and _batch("n3", "n2").cordon_first == ["n1"]
    assert _batch("n2", "n3").first_stop == "n2" and not _batch("n2").fits
    assert _batch(None, "n1").cordon_first == [] and _batch("gone", None).first_stop is None


def _placement_stub(stranded: bool):
    from types import SimpleNamespace

    return SimpleNamespace(stranded=stranded)


def test_a_stranded_pod_blocks_the_batch_only_on_a_node_it_reaches_and_only_unaccepted():
    """Kills: `names[: names.index(stop)]` → all names (a pod past the capacity guard's stop blocking), the
    accepted pods not left out, `bool(self.stranding)` inverted."""
    from dataclasses import replace

    def with_stranded(b: BatchPlan, on: str) -> BatchPlan:
        plans = tuple(replace(pl, pods=tuple(replace(p, placement=_placement_stub(True)) for p in pl.pods))
                      if pl.node == on else pl for pl in b.plans)
        return replace(b, plans=plans)

    b = with_stranded(_batch(None), "n3")
    assert [p.pod.name for p in b.stranded] == ["p-n3"] and b.blocked_by_placement
    past = with_stranded(_batch("n2"), "n3")
    assert past.stranded and not past.blocked_by_placement
    accepted = replace(b, accepted=frozenset({"ns/p-n3"}))
    assert not accepted.blocked_by_placement and not _batch(None).blocked_by_placement


def test_the_gpu_operators_max_unavailable_is_said_only_beyond_it():
    """Kills: `len(after) <= limit` → `<`, nodes already unavailable not counted (`or not n.ready` dropped),
    the batch not added, the words."""
    nodes = (node("n1"), node("n2"), node("n3", cordoned=True), node("n4", ready=False))
    assert _beyond_max_unavailable(snap(nodes=nodes), {"n1"}) == ""  # no policy read: nothing said
    s = snap(nodes=nodes, upgrade_policy=UpgradePolicy(True, 1, "3"))
    assert _beyond_max_unavailable(s, {"n1"}) == ""  # 3 of 4: at the limit
    assert _beyond_max_unavailable(s, {"n1", "n2"}) == (
        "draining these leaves 4 of 4 GPU nodes unavailable, beyond the GPU Operator's maxUnavailable 3 (3): its "
        "driver upgrades wait meanwhile")


def test_a_batch_plans_capacity_and_stop_in_its_order_outside_the_whole_batch():
    """n1's 6 fit on n3 (8 free); n2's 4 more do not (2 left): the guard stops before n2, and the batch's
    nodes are never counted as room. Kills: the units not accumulated across nodes (`extend` dropped), the
    first stop overwritten by a later one (`stop_before is None` dropped), `away` without the batch."""
    pods = (pod("a", gpu_request=6), pod("b", node="n2", gpu_request=4), pod("c", node="n4", gpu_request=4))
    s = snap(pods, (node("n1"), node("n2"), node("n3"), node("n4")))
    batch = plan_batch(s, ["n1", "n2", "n4"], DrainOptions())
    assert batch.stop_before == "n2"
    assert batch.capacity == (CapacityCheck("H100", (6, 4, 4), {"n3": 8}),)
    assert batch.describe()[0] == "this batch needs 14 H100 GPUs (3 pods); 8 are free outside it: does NOT fit"
    assert batch.describe()[-1] == "the capacity guard would stop before n2: 1 of 3 nodes drained (n1)"
    assert plan_batch(s, ["n2", "n1", "n4"], DrainOptions()).describe()[-1] == \
        "the capacity guard would stop before n1: 1 of 3 nodes drained (n2)"
    first = plan_batch(s, ["n1"], DrainOptions())
    assert first.fits and first.cordon_first == ["n1"]
    assert not any(line.startswith("cordons") for line in first.describe())  # one node: no cordon-first line


def test_a_batch_started_while_other_drains_run_counts_their_pods_first():
    """Kills: the running drains not counted ahead (`_needs(before)` → {}), a running drain inside the batch
    counted twice (`n not in members` dropped), an unknown node counted, the ahead line's words."""
    pods = (pod("a", gpu_request=4), pod("r", node="n2", gpu_request=4))
    s = snap(pods, (node("n1"), node("n2"), node("n3", gpus=6)))
    alone = plan_batch(s, ["n1"], DrainOptions())
    assert alone.fits
    beside = plan_batch(s, ["n1"], DrainOptions(), draining=["n2", "n2", "n1", "no-such-node"])
    assert beside.ahead == ("n2",) and beside.stop_before == "n1"
    assert beside.describe()[0] == ("the drains running on n2 still move 4 H100 GPUs (1 pod): counted below, "
                                    "before this batch's")
    assert beside.ahead_needed == (CapacityCheck("H100", (4,), {"n3": 6}),)


# -- what a batch plan says, what a drain without -l selects --------------------------------------------------

MIG = "nvidia.com/mig-1g.10gb"
_NONE = CapacityCheck("H100", (), {})


def _plans(*names: str) -> tuple[DrainPlan, ...]:
    return tuple(DrainPlan(n, DrainOptions(), (), _NONE, False) for n in names)


def test_a_batch_says_what_running_drains_and_it_move_in_each_unit_against_what_is_free():
    """Kills, in `describe`: `', '.join(self.ahead)` → `'XX, XX'.join`, `c.resource == WHOLE_GPU` → `... or True`
    (another resource said as whole GPUs) in the running drains' line and in the batch's, the `or 'GPUs'` of a
    check with no GPU model changed (`'XXGPUsXX'`, `'gpus'`, `'GPUS'`) in both, `'fits' if c.fits` → `... and
    False` or its word changed (`'XXfitsXX'`, `'FITS'`)."""
    batch = BatchPlan(
        _plans("n1"),
        capacity=(CapacityCheck("", (2, 1), {"n4": 8}), CapacityCheck("A100", (1, 1), {"n5": 1}, MIG), _NONE),
        stop_before=None,
        ahead=("n8", "n9"),
        ahead_needed=(CapacityCheck("", (4,), {"n4": 8}), CapacityCheck("A100", (1,), {"n5": 1}, MIG)))
    assert batch.describe() == [
        "the drains running on n8, n9 still move 4 GPUs GPUs (1 pod): counted below, before this batch's",
        f"the drains running on n8, n9 still move 1 {MIG} on A100 (1 pod): counted below, before this batch's",
        "this batch needs 3 GPUs GPUs (2 pods); 8 are free outside it: fits",
        f"this batch needs 2 {MIG} on A100 (2 pods); 1 are free outside it: does NOT fit",
    ]


def test_a_batch_of_two_says_which_nodes_it_cordons_first_and_where_its_guard_stops():
    """Kills: `len(self.plans) > 1` → `> 2` (a batch of two not said to cordon both first), `', '.join(
    self.cordon_first)` → `'XX, XX'.join`; and the guard's stop line's `(done)` said when no node is drained
    first (`if done` → `... or True`: "0 of 2 nodes drained ()")."""
    two = BatchPlan(_plans("n1", "n2"), capacity=(), stop_before=None)
    assert two.describe() == ["cordons n1, n2 before the first eviction: no pod moves onto a node this batch drains"]
    three = BatchPlan(_plans("n1", "n2", "n3"), capacity=(), stop_before="n3")
    assert three.describe() == [
        "cordons n1, n2 before the first eviction: no pod moves onto a node this batch drains",
        "the capacity guard would stop before n3: 2 of 3 nodes drained (n1, n2)"]
    at_once = BatchPlan(_plans("n1", "n2"), capacity=(), stop_before="n1")
    assert at_once.describe() == ["the capacity guard would stop before n1: 0 of 2 nodes drained"]


def test_a_drain_without_a_selector_selects_every_pod():
    """kubectl drain without `-l` drains every pod: `selected` with an empty selector is True (unlike a
    Service's, which selects nothing). Kills `empty_matches=True` → `False` / `None`."""
    p = pod(labels={"app": "x"})
    assert selected(p, {}) is True
    assert selected(p, {"app": "x"}) and not selected(p, {"app": "y"})


def test_each_node_of_a_batch_is_planned_with_its_own_options_and_counts_no_batch_node_as_room():
    """What `--dry-run --json` prints per node of a batch. Kills, in `plan_batch`: `per_node[n]` dropped (each
    node planned with the default options: its selector, force, deadline ignored), `batch=away` → `batch=None`
    (each node's own capacity check counting the other nodes of the batch as free room)."""
    pods = (pod("a", gpu_request=6), pod("x", owner_kind=""), pod("b", node="n2", gpu_request=4))
    s = snap(pods, (node("n1"), node("n2"), node("n3", gpus=2)))
    mine = DrainOptions(force=True, session_deadline_s=60.0)
    batch = plan_batch(s, ["n1", "n2"], {"n1": mine, "n2": DrainOptions()})
    n1 = batch.plans[0]
    assert n1.options is mine and not n1.blocked  # force: the pod with no controller does not block
    assert n1.capacity == CapacityCheck("H100", (6,), {"n3": 2})  # n2 drains too: no room there
    assert dict(n1.capacity.free_by_node) == {"n3": 2} and not n1.capacity.fits


def test_a_batch_of_mig_pods_is_counted_and_stopped_in_mig_slices_not_whole_cards():
    """n1's 4 slices fit in n3's 7; n2's 4 more do not, though n3 has 8 whole cards free. Kills, in
    `plan_batch`: the stop's `capacity_after(..., resource)` → `capacity_after(...)` (counted against whole
    cards: no stop), the batch's checks' `resource` dropped (said in whole cards), and the running drains'
    (`ahead_needed`'s `resource` dropped)."""
    mig, gpu = "nvidia.com/mig-1g.10gb", "nvidia.com/gpu"

    def mig_node(name: str) -> Node:
        return node(name, gpu_resources=(GpuResource(mig, Scheme.MIG, 7, 7), GpuResource(gpu, Scheme.WHOLE, 8, 8)))

    pods = (pod("a", gpu_request=1, gpu_units={mig: 4}), pod("b", node="n2", gpu_request=1, gpu_units={mig: 4}))
    batch = plan_batch(snap(pods, (mig_node("n1"), mig_node("n2"), mig_node("n3"))), ["n1", "n2"], DrainOptions())
    assert batch.stop_before == "n2"
    assert batch.capacity == (CapacityCheck("H100", (4, 4), {"n3": 7}, mig),)
    beside = plan_batch(snap(pods, (mig_node("n1"), mig_node("n2"), mig_node("n3"))), ["n1"], DrainOptions(),
                        draining=["n2"])
    assert beside.ahead_needed == (CapacityCheck("H100", (4,), {"n3": 7}, mig),)
    assert beside.describe()[0] == f"the drains running on n2 still move 4 {mig} on H100 (1 pod): counted below, " \
        "before this batch's"


def test_no_grace_period_known_is_no_warning_whatever_the_prestop():
    """A pod with no terminationGracePeriodSeconds read and no operator's grace: nothing to compare, no warning
    (and no error). Kills `grace is None or not needed` → `grace is None and not needed` (None compared with the
    preStop's seconds: a TypeError that stops the plan)."""
    p = plan_of(pod(termination_grace_s=None, prestop_sleep_s=10), Step.WAIT_SESSIONS)
    assert p.grace_warning(DrainOptions(engine_shutdown_s=5.0)) == ""


def test_a_plan_names_what_it_takes_out_of_rotation_first_and_since_when():
    """The drain plan screen and the run read each waited-on pod's rotation entry. Kills, in `_with_rotation`:
    `choose(snapshot, waited, snapshot.taken_at)` → `None` (no time on the entry) and `rotation=entry` →
    `rotation=None` (the plan saying it stays in rotation)."""
    labels = {"app": "llm", "serving": "true"}
    selectors = (PodSelector("Service", "ns", "llm", labels),
                 PodSelector("Deployment", "ns", "llm", {"app": "llm"}, frozenset({"app"})))
    pods = tuple(pod(n, node=where, service="llm", labels=labels, session_signal=True, ready=True)
                 for n, where in (("a", "n1"), ("b", "n2")))
    s = ClusterSnapshot(7.0, "t", nodes=(node("n1"), node("n2")), pods=pods, selectors=selectors)
    (a,) = plan_drain(s, "n1", DrainOptions(), preview=False).pods
    assert a.step is Step.WAIT_SESSIONS
    assert a.rotation == OutOfRotation("ns/a", "uid-a", {"serving": "true"}, 7.0)
    assert a.switch is not None and a.rotation_note.startswith("out of rotation (label serving removed")


def test_a_node_unknown_to_the_snapshot_is_named_in_the_error():
    """Kills `raise KeyError(node)` → `KeyError(None)` (the CLI says which node it does not know)."""
    with pytest.raises(KeyError) as err:
        plan_drain(snap(), "nope")
    assert err.value.args == ("nope",)


def test_a_selector_leaves_out_the_pods_it_does_not_select_and_keeps_the_next():
    """Kills `continue` → `break` after a pod the `-l` selector leaves out (every pod after it dropped too)."""
    pods = (pod("a", labels={"app": "x"}), pod("b", labels={"app": "y"}), pod("c", labels={"app": "y"}))
    plan = plan_drain(snap(pods), "n1", DrainOptions(pod_selector={"app": "y"}), preview=False)
    assert [p.pod.name for p in plan.pods] == ["b", "c"]


def test_a_plan_shows_the_capacity_check_that_does_not_fit_and_names_the_model_with_nothing_to_move():
    """Kills `next((c for c in checks if not c.fits), ...)` → `if c.fits` (a node whose MIG slices fit but whose
    whole cards do not shown as fitting), and the empty check's `target.gpu_product` → None."""
    mig, gpu = "nvidia.com/mig-1g.10gb", "nvidia.com/gpu"
    room = node("n2", gpu_resources=(GpuResource(mig, Scheme.MIG, 7, 7), GpuResource(gpu, Scheme.WHOLE, 2, 2)))
    pods = (pod("a", gpu_request=1, gpu_units={mig: 1}), pod("b", gpu_request=4))
    plan = plan_drain(snap(pods, (node("n1"), room)), "n1", preview=False)
    assert plan.capacity == CapacityCheck("H100", (4,), {"n2": 2}, gpu) and not plan.capacity.fits
    assert plan_drain(snap(), "n1", preview=False).capacity == CapacityCheck("H100", (), {"n2": 8})


def test_a_node_the_gpu_operator_is_upgrading_is_warned_first():
    """Kills `owner = owner_warning(target)` → `None` (the drain of a node mid driver upgrade not warned)."""
    busy = node("n1", upgrade_state="drain-required")
    plan = plan_drain(snap((), (busy, node("n2"))), "n1", preview=False)
    assert plan.warnings[0].startswith("n1 is mid driver upgrade under the GPU Operator")


def test_kubectls_filters_say_what_they_skip_or_refuse_in_kubectls_words():
    """Kills each note of `classify` changed: the DaemonSet refusal, the mirror pod's, a finished pod's (none),
    and the default `why_unknown=""` → `"XXXX"` (an unknown count said without its generic reason)."""
    opts = DrainOptions(ignore_daemonsets=False)
    assert classify(pod(owner_kind="DaemonSet"), NO_SIGNAL, opts) == (
        Step.ERROR, "DaemonSet-managed pod (use ignore-daemonsets)")
    assert classify(pod(mirror=True), NO_SIGNAL, opts) == (Step.SKIP, "mirror pod")
    assert classify(pod(phase="Succeeded"), NO_SIGNAL, opts) == (Step.EVICT, "")
    step, note = classify(pod(), PodSessions(SessionState.UNKNOWN), opts)
    assert (step, note) == (Step.WAIT_SESSIONS, "sessions unknown (no readable session series): waits for a count; "
                                                "left in place at its deadline")


def test_the_warnings_of_a_pod_drained_anyway_say_what_is_lost():
    """Kills each warning of `classify` changed: the emptyDir data deleted, the pod with no controller refused
    (and, forced, not coming back), an unknown count evicted at its deadline when chosen."""
    assert classify(pod(owner_kind=""), NO_SIGNAL, DrainOptions()) == (
        Step.ERROR, "not managed by a controller (use force)")
    forced = DrainOptions(force=True, delete_emptydir_data=True, evict_unknown_at_deadline=True)
    assert classify(pod(owner_kind="", has_emptydir=True), PodSessions(SessionState.UNKNOWN), forced, "metrics down") \
        == (Step.WAIT_SESSIONS, "deleting emptyDir data; not managed by a controller: it will not come back; "
                                "sessions unknown (metrics down): waits for a count; evicted at its deadline, its "
                                "sessions possibly cut (chosen)")


def test_a_running_drains_emptydir_pods_count_ahead_of_a_new_batch():
    """A drain already running moves its pods with emptyDir volumes too (it was started with
    delete-emptydir-data, or it could not run): planned without it, they were read as errors and not counted
    ahead, so a new batch counted the same free GPUs twice ("fits" with 8 GPUs needed and 6 free)."""
    pods = (pod("a", gpu_request=4), pod("r", node="n2", gpu_request=4, has_emptydir=True))
    s = snap(pods, (node("n1"), node("n2"), node("n3", gpus=6)))
    batch = plan_batch(s, ["n1"], DrainOptions(delete_emptydir_data=True), draining=["n2"])
    assert [sum(c.needed) for c in batch.ahead_needed] == [4]
    assert not batch.fits
