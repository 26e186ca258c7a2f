"""Why a GPU Operator driver upgrade does not move, from the node's labels, its pods and the ClusterPolicy."""

from gputui.policy.upgrades import SKIP_LABEL, max_unavailable, owner_warning, policy_from, stuck_because
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, Node, UpgradePolicy


def node(name, state="", unschedulable=False, labels=None) -> Node:
    return Node(name, True, unschedulable, "H100", 8, 8, upgrade_state=state, labels=labels or {})


def test_max_unavailable_rounds_a_percentage_up_as_the_operator_does():
    assert max_unavailable(UpgradePolicy(max_unavailable="25%"), 10) == 3
    assert max_unavailable(UpgradePolicy(max_unavailable="2"), 10) == 2
    assert policy_from({"spec": {"driver": {"upgradePolicy": {"maxParallelUpgrades": 0}}}}) == UpgradePolicy(
        False, 0, "25%")


def test_each_reason_a_node_is_held():
    skip = node("a", "upgrade-required", labels={SKIP_LABEL: "true"})
    busy = node("b", "pod-restart-required")
    waiting = node("c", "upgrade-required")
    cordoned = [node(f"x{i}", unschedulable=True) for i in range(3)]
    crash = InferencePod("gpu-operator", "nvidia-driver-daemonset-abcde", "u", "b", ready=False, restarts=7,
                         owner_kind="DaemonSet")
    snap = ClusterSnapshot(0, "t", nodes=(skip, busy, waiting, *cordoned), pods=(crash,),
                           upgrade_policy=UpgradePolicy(max_parallel=2, max_unavailable="50%"))
    assert stuck_because(snap, skip) == f"skipped: labelled {SKIP_LABEL}=true"
    assert stuck_because(snap, busy).startswith("driver pod nvidia-driver-daemonset-abcde restarting (7 restarts")
    # One node upgrading of two allowed; 3 of 6 unavailable reaches maxUnavailable 50% (3 nodes).
    assert stuck_because(snap, waiting) == "waiting: 3 nodes unavailable, maxUnavailable 50% (3 nodes)"
    assert "mid driver upgrade under the GPU Operator (state pod-restart-required)" in owner_warning(busy)
    assert owner_warning(waiting) == ""  # not taken yet: the operator is not acting on it
    # Failed: the operator has let go of it. The warning must agree with :versions' "stuck because".
    failed = owner_warning(node("f", "upgrade-failed"))
    assert "mid driver upgrade" not in failed and "manual recovery" in failed
    assert "upgrade-required" in failed and "manual recovery" in stuck_because(snap, node("f", "upgrade-failed"))
    one_at_a_time = ClusterSnapshot(0, "t", nodes=(busy, waiting), upgrade_policy=UpgradePolicy(max_parallel=1))
    assert stuck_because(one_at_a_time, waiting) == "waiting its turn: 1 node upgrading, maxParallelUpgrades 1"


def test_a_pod_using_gpus_without_requesting_them_is_why_a_taken_node_stays():
    from gputui.backends.kube_objects import pod_record

    def pod(name: str, env: list, resources: dict | None = None) -> dict:
        return {"metadata": {"name": name, "namespace": "mon", "uid": name},
                "spec": {"nodeName": "b", "containers": [{"name": "c", "env": env, "resources": resources or {}}]},
                "status": {"phase": "Running"}}

    seen = pod_record(pod("gpu-agent-x", [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]))
    asked = pod_record(pod("chat-0", [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
                           {"limits": {"nvidia.com/gpu": "1"}}))
    void = pod_record(pod("cpu-job", [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]))
    assert (seen.gpus_unrequested, asked.gpus_unrequested, void.gpus_unrequested) == (True, False, False)
    agent = InferencePod("mon", "gpu-agent-x", "u1", "b", gpus_unrequested=True)
    plugin = InferencePod("gpu-operator", "nvidia-device-plugin-daemonset-q", "u2", "b", gpus_unrequested=True,
                          owner_kind="DaemonSet")  # the operator's own pods see GPUs by design
    taken, waiting = node("b", "pod-restart-required"), node("c", "upgrade-required")
    snap = ClusterSnapshot(0, "t", nodes=(taken, waiting), pods=(agent, plugin,
                                                                  InferencePod("mon", "agent-c", "u3", "c", gpus_unrequested=True)))
    assert stuck_because(snap, taken) == ("1 pod uses GPUs without requesting any (NVIDIA_VISIBLE_DEVICES): the "
                                          "operator never evicts it and the driver stays in use: mon/gpu-agent-x")
    assert stuck_because(snap, waiting) == ""  # not taken yet: the pod is not what holds it


def test_idle_gpus_are_unknown_without_pod_attribution_and_pools_sum_to_the_fleet():
    from gputui.backends.prom_review import idle_gpus
    from gputui.policy.node_pools import FLEET, IdleReading, idle_why, pool_rows

    class NoPods:
        host_labels = ("Hostname",)

        def query(self, promql):
            return []  # no GPU series names a pod

    assert idle_gpus(NoPods(), 3600, 5) is None  # never "none idle"
    nodes = (Node("a", True, False, "H100", 8, 8, labels={"gpu.pool": "p1"}),
             Node("b", True, False, "H100", 8, 8, labels={"karpenter.sh/nodepool": "p2"}), Node("c", True, False, "H100", 4, 4))
    snap = ClusterSnapshot(0, "t", nodes=nodes, pods=(InferencePod("ns", "x", "u", "a", gpu_request=3),))
    rows = {r.pool: r for r in pool_rows(snap, IdleReading({"a": 2}, {"a": 3}))}
    assert set(rows) == {"p1", "p2", "(no pool)", FLEET}
    assert (rows["p1"].allocated, rows["p1"].unallocated, rows["p1"].idle) == (3, 5, 2)
    assert (rows[FLEET].gpus, rows[FLEET].allocated, rows[FLEET].idle) == (20, 3, 2)
    assert all(r.idle is None for r in pool_rows(snap, None))
    # Three GPUs allocated on a, two of them mapped to a pod by the exporter: a's idle figure cannot be told,
    # so neither can its pool's nor the fleet's; the pools with nothing allocated still can (0).
    rows = {r.pool: r for r in pool_rows(snap, IdleReading({"a": 2}, {"a": 2}))}
    assert (rows["p1"].idle, rows["p1"].unattributed, rows[FLEET].idle) == (None, 1, None)
    assert (rows["p2"].idle, rows["(no pool)"].idle) == (0, 0)
    assert idle_why(rows[FLEET], "") == "no pod attribution on 1 node with GPUs allocated"


def test_time_in_upgrade_state_is_a_lower_bound_until_a_change_is_seen():
    from gputui.policy.upgrades import StateClock

    clock = StateClock()
    snap = ClusterSnapshot(0, "t", nodes=(node("a", "drain-required"), node("b", "")))
    clock.observe(snap, 100.0)
    assert clock.since("a", 160.0) == (60.0, False)  # in that state since before gputui looked: at least 60 s
    clock.observe(snap, 130.0)
    assert clock.since("a", 160.0) == (60.0, False)  # the same state: the clock keeps running
    moved = ClusterSnapshot(0, "t", nodes=(node("a", "pod-restart-required"), node("b", ""), node("c", "upgrade-required")))
    clock.observe(moved, 150.0)
    assert clock.since("a", 160.0) == (10.0, True)  # the move was seen: exact
    assert clock.since("c", 160.0) == (10.0, False)  # a node new to gputui: since at least then
    assert clock.since("x", 160.0) is None
    started = ClusterSnapshot(0, "t", nodes=(node("a", "pod-restart-required"), node("b", "upgrade-required"),
                                             node("c", "upgrade-required")))
    clock.observe(started, 170.0)
    assert clock.since("b", 180.0) == (10.0, True)  # seen in no state, then in one: the move was seen, exact
    assert clock.since("a", 180.0) == (30.0, True) and clock.since("c", 180.0) == (30.0, False)  # kept
    clock.observe(ClusterSnapshot(0, "t", nodes=(node("a", ""),)), 190.0)
    assert clock.since("a", 200.0) is None and clock.since("b", 200.0) is None  # done, and gone


def test_a_state_the_operator_dates_is_timed_from_its_annotation_and_stuck_after_a_day():
    """validation-required and wait-for-jobs-required carry the operator's own start (Unix seconds): the versions
    view's clock is exact from it at gputui's first look, and a day in it is stuck, as :disruptions says."""
    from dataclasses import replace

    from gputui.policy.upgrades import StateClock
    from gputui.vocabulary.disruptions import UPGRADE_VALIDATION_START

    now = 1_000_000.0
    dated = replace(node("a", "validation-required"), annotations={UPGRADE_VALIDATION_START: str(int(now - 3 * 86400))})
    fresh = replace(node("b", "validation-required"), annotations={UPGRADE_VALIDATION_START: str(int(now - 600))})
    garbage = replace(node("c", "validation-required"), annotations={UPGRADE_VALIDATION_START: "soon"})
    snap = ClusterSnapshot(now, "t", nodes=(dated, fresh, garbage))
    clock = StateClock()
    clock.observe(snap, now)
    assert clock.since("a", now) == (3 * 86400.0, True)
    assert clock.since("b", now) == (600.0, True)
    assert clock.since("c", now) == (0.0, False)  # unreadable: gputui's own watch, a lower bound
    assert stuck_because(snap, dated) == "validation-required for 72h (over 24h)"
    assert stuck_because(snap, fresh) == "" and stuck_because(snap, garbage) == ""
