from gputui.backends.base import EvictionOutcome
from gputui.backends.demo import DemoCluster, demo_backend
from gputui.policy.health import majority_driver
from gputui.vocabulary.model import NodeState
from tests.demo_clock import ManualClock


def test_same_seed_same_cluster_different_seed_different_cluster():
    a = DemoCluster(seed=1, clock=ManualClock()).snapshot()
    b = DemoCluster(seed=1, clock=ManualClock()).snapshot()
    c = DemoCluster(seed=2, clock=ManualClock()).snapshot()
    assert a == b
    assert a != c


def test_fixed_clock_rereads_are_identical():
    cluster = DemoCluster(seed=3, clock=ManualClock())
    assert cluster.snapshot() == cluster.snapshot()


def test_fleet_has_the_promised_shape():
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    assert len(snap.nodes) >= 24
    assert len({n.gpu_product for n in snap.nodes}) >= 3
    states = {n.state for n in snap.nodes}
    assert {NodeState.READY, NodeState.CORDONED, NodeState.NOT_READY, NodeState.UPGRADING} <= states
    drifted = [n for n in snap.nodes if n.driver_version != majority_driver(snap.nodes)]
    assert len(drifted) == 1
    assert any(g.xid for n in snap.nodes for g in n.gpus)
    for n in snap.nodes:
        assert n.labels["nvidia.com/gpu.product"] == n.gpu_product
        assert n.labels["nvidia.com/cuda.driver-version.full"] == n.driver_version
    routers = {s.router_kind for s in snap.services}
    assert {"HTTPRoute", "VirtualService", ""} <= routers
    canary = next(s for s in snap.services if s.router_kind == "HTTPRoute")
    assert [v.weight for v in canary.versions] == [90, 10]


def test_sessions_arrive_and_end_over_time():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    before = dict(cluster.snapshot().session_counts)
    clock.advance(120)
    after = dict(cluster.snapshot().session_counts)
    assert sum(after.values()) > 0
    assert before != after


def test_weights_steer_new_sessions():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    cluster.set_weights("llm", "llama-3-70b-instruct", {"v1": 0, "v2": 100})
    for _ in range(3):  # far longer than sessions last (exponential, mean 70 s)
        clock.advance(600)
        cluster.snapshot()
    snap = cluster.snapshot()
    svc = snap.service("llm/llama-3-70b-instruct")
    assert snap.sessions_of(svc, "v1") == 0
    assert snap.sessions_of(svc, "v2") > 0


def test_cordon_and_uncordon():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    cluster.set_unschedulable("gpu-h100-01", True)
    assert cluster.snapshot().node("gpu-h100-01").state is NodeState.CORDONED
    cluster.set_unschedulable("gpu-h100-01", False)
    assert cluster.snapshot().node("gpu-h100-01").state is NodeState.READY


def test_pdb_blocks_eviction_and_evicting_a_pod_with_sessions_loses_them():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    pods = [p for p in snap.pods if p.service == "llama-3-70b-instruct" and p.version == "v1"]
    first, second = pods[0], pods[1]
    held = snap.sessions(first).live
    assert held > 0
    result = cluster.evict_pod(first.namespace, first.name)
    assert result.outcome is EvictionOutcome.EVICTED
    assert cluster.lost_sessions == held
    # maxUnavailable 1: the replacement is still loading, so the next eviction is refused.
    blocked = cluster.evict_pod(second.namespace, second.name)
    assert blocked.outcome is EvictionOutcome.BLOCKED
    assert "llama-3-70b-instruct-pdb" in blocked.reason
    assert cluster.lost_sessions == held
    # The replacement loads, the evicted pod finishes its grace period: headroom is back.
    clock.advance(60)
    assert cluster.pod_uid(first.namespace, first.name) is None
    assert cluster.evict_pod(second.namespace, second.name).outcome is EvictionOutcome.EVICTED


def test_evicting_a_missing_pod_is_gone():
    cluster = DemoCluster(seed=7, clock=ManualClock())
    assert cluster.evict_pod("llm", "nope").outcome is EvictionOutcome.GONE


def test_replacement_avoids_cordoned_nodes():
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    snap = cluster.snapshot()
    victim = next(p for p in snap.pods if p.service == "bge-large")
    for n in snap.nodes:
        if n.gpu_product == "NVIDIA-L40S" and n.name != "gpu-l40s-05":
            cluster.set_unschedulable(n.name, True)
    cluster.evict_pod(victim.namespace, victim.name)
    clock.advance(60)
    replacements = [p for p in cluster.snapshot().pods if p.service == "bge-large" and p.node == "gpu-l40s-05"]
    assert len(replacements) == 1


def test_read_only_backend_has_no_writer_at_all():
    backend = demo_backend(seed=7, clock=ManualClock(), read_only=True)
    assert backend.writer is None
    assert backend.read_only
    assert not hasattr(backend.reader, "set_unschedulable")
    assert not hasattr(backend.reader, "evict_pod")
    assert backend.reader.snapshot().nodes


def test_an_eviction_without_a_grace_period_keeps_the_pods_own():
    """bge-large's pods have 10 s of grace: evicted without one, they are gone after 10 s, not the default 30."""
    clock = ManualClock()
    cluster = DemoCluster(seed=7, clock=clock)
    pod = next(p for p in cluster.snapshot().pods if p.service == "bge-large" and p.node)
    assert pod.termination_grace_s == 10
    cluster.evict_pod(pod.namespace, pod.name)
    clock.advance(12)
    assert cluster.pod_uid(pod.namespace, pod.name) is None


def test_the_demo_hands_out_gpus_as_mig_slices_shared_replicas_and_dra_devices():
    """One node per scheme beyond whole cards; what each hands out is counted here from the pods, independently
    of gputui's own per-node figures, and a drain's capacity guard asks for the same units the pods hold."""
    from gputui.ops.drain.batch_plan import plan_batch
    from gputui.ops.drain.plan import DrainOptions
    from gputui.vocabulary.gpu_resources import Scheme

    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    nodes = {n.name: n for n in snap.nodes}
    expected = {"gpu-a100-09": ({"nvidia.com/mig-3g.40gb": (8, Scheme.MIG), "nvidia.com/mig-1g.10gb": (28, Scheme.MIG)},
                                "nvidia.com/mig-3g.40gb", 1),
                "gpu-l40s-07": ({"nvidia.com/gpu.shared": (16, Scheme.SHARED)}, "nvidia.com/gpu.shared", 1),
                "gpu-h100-11": ({"dra:gpu.nvidia.com": (8, Scheme.DRA)}, "dra:gpu.nvidia.com", 2)}
    for name, (offered, asked, per_pod) in expected.items():
        node = nodes[name]
        assert {r.name: (r.capacity, r.scheme) for r in node.gpu_resources} == offered
        assert node.gpu_count == (4 if "l40s" in name else 8)  # the cards, not the units
        on_node = [p for p in snap.pods if p.node == name and not p.terminated and p.gpu_request]
        assert on_node and all(dict(p.gpu_units) == {asked: per_pod} for p in on_node)
        assert snap.allocated_by_resource(name) == {asked: per_pod * len(on_node)}
        # Busy slices make a busy card: the node is not shown idle.
        assert any(g.util_pct for g in node.gpus)
    assert nodes["gpu-l40s-07"].labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert nodes["gpu-a100-09"].labels["nvidia.com/mig.strategy"] == "mixed"
    # Whole-card pods never land on a sliced node, and the guard counts MIG slices, not cards.
    assert not any(p.gpu_units.get("nvidia.com/gpu") for p in snap.pods if p.node in expected)
    batch = plan_batch(snap, ["gpu-a100-09"], DrainOptions())
    assert "needs 5 nvidia.com/mig-3g.40gb on NVIDIA-A100-SXM4-80GB (5 pods); 0 are free" in batch.describe()[0]
