"""The drain's placement preview (gputui.ops.drain.placement), rule by rule, against the scheduler's documented
behaviour; each verdict's words; whether it holds whatever the batch's other pods do. The same rules are
compared with the real kube-scheduler in tests/integration/test_placement_real.py and benchmarks/placement.py."""

from __future__ import annotations

from gputui.ops.drain.placement import CAVEAT, Verdict, preview
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.label_selectors import Requirement
from gputui.vocabulary.model import Condition, InferencePod, Node
from gputui.vocabulary.scheduling import NodeScheduling, NodeTerm, PodScheduling, PodTerm, Spread, Taint, Toleration

ALLOC = (("cpu", 96_000), ("memory", 512 * 2**30), ("pods", 110))
HOST = "kubernetes.io/hostname"


def node(name: str, zone: str = "z1", *, gpus: int = 8, taints: tuple[Taint, ...] = (), ready: bool = True,
         cordoned: bool = False, labels: dict[str, str] | None = None, alloc=ALLOC, read: bool = True) -> Node:
    conditions = () if ready else (Condition("Ready", "False"),)
    return Node(name, ready, cordoned, "NVIDIA-H100", gpus, gpus, conditions=conditions,
                labels={"zone": zone, HOST: name, **(labels or {})},
                scheduling=NodeScheduling(taints, alloc) if read else None)


def pod(name: str, on: str, gpus: int = 1, spec: PodScheduling | None = PodScheduling(), *, app: str = "",
        service: str = "", **kw) -> InferencePod:
    return InferencePod("ns", name, name, on, gpu_request=gpus, gpu_units={"nvidia.com/gpu": gpus} if gpus else {},
                        labels={"app": app or name}, service=service, scheduling=spec, **kw)


def run(nodes, pods, batch, moving=None):
    snap = ClusterSnapshot(0.0, "t", nodes=tuple(nodes), pods=tuple(pods))
    moving = moving if moving is not None else [p for p in pods if p.node in batch]
    return preview(snap, batch, moving), snap


def app(name: str) -> tuple[Requirement, ...]:
    return (Requirement("app", "In", (name,)),)


def test_the_issue_pod_pinned_to_a_full_zone_has_nowhere_to_go():
    """An 8-GPU pod with nodeSelector zone=z1; the zone's other node is full; 16 GPUs are free in z2."""
    z1 = PodScheduling(node_selector=(("zone", "z1"),))
    nodes = [node("a1"), node("a2"), node("b1", "z2"), node("b2", "z2")]
    pods = [pod("big", "a1", 8, z1), pod("full", "a2", 8)]
    got, _ = run(nodes, pods, {"a1"})
    (p,) = got.placements
    assert p.verdict is Verdict.NOWHERE and p.sure
    assert p.why == "no node with zone=z1 outside the batch has 8 free NVIDIA-H100 GPUs"
    assert [e.words for e in p.excluded] == ["1 node in the batch", "2 nodes without zone=z1",
                                            "1 node without 8 free NVIDIA-H100 GPUs (the most free: 0)"]


def test_pods_are_placed_one_after_another_and_do_not_count_the_same_gpu_twice():
    nodes = [node("a"), node("b"), node("c", gpus=8)]
    pods = [pod("p1", "a", 4), pod("p2", "a", 4), pod("full", "c", 4)]  # c has 4 free: room for one of them
    got, _ = run(nodes, pods, {"a", "b"})
    first, second = got.placements
    assert first.verdict is Verdict.CAN_GO and first.nodes == ("c",) and first.chosen == "c"
    assert second.verdict is Verdict.NOWHERE
    # Which of the two gets the room is the scheduler's order, not known: both say they are contended.
    assert not first.sure and not second.sure and second.contended == ("ns/p1",)
    assert "contended with ns/p1" in second.text()


def test_a_pod_tolerating_only_a_dedicated_taint_held_by_batch_nodes():
    llm, other = Taint("dedicated", "llm"), Taint("dedicated", "batch")
    spec = PodScheduling(tolerations=(Toleration("dedicated", "Equal", "llm", "NoSchedule"),
                                      Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute")))
    nodes = [node(f"d{i}", taints=(llm,)) for i in range(3)] + [node("o1", taints=(other,)), node("o2", cordoned=True)]
    got, _ = run(nodes, [pod("llm", "d0", 1, spec)], {"d0", "d1", "d2"})
    (p,) = got.placements
    assert p.why == "tolerates only dedicated=llm:NoSchedule, held by 3 nodes, all in the batch"
    assert "1 node tainted dedicated=batch:NoSchedule (not tolerated)" in [e.words for e in p.excluded]


def test_taint_effects_and_tolerations_as_the_scheduler_reads_them():
    nodes = [node("gone"), node("ns", taints=(Taint("k", "v", "NoSchedule"),)),
             node("nx", taints=(Taint("k", "v", "NoExecute"),)), node("pref", taints=(Taint("k", "v", "PreferNoSchedule"),))]
    got, _ = run(nodes, [pod("plain", "gone")], {"gone"})
    assert got.placements[0].nodes == ("pref",)  # PreferNoSchedule is scoring; NoExecute repels as NoSchedule
    any_key = PodScheduling(tolerations=(Toleration("", "Exists"),))
    got, _ = run(nodes, [pod("all", "gone", 1, any_key)], {"gone"})
    assert got.placements[0].count == 3


def test_cordoned_and_not_ready_nodes_unless_tolerated():
    nodes = [node("gone"), node("cordoned", cordoned=True), node("down", ready=False)]
    got, _ = run(nodes, [pod("p", "gone")], {"gone"})
    assert got.placements[0].verdict is Verdict.NOWHERE
    assert [e.words for e in got.placements[0].excluded][1:] == ["1 node cordoned", "1 node not ready"]
    spec = PodScheduling(tolerations=(Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),
                                      Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoSchedule")))
    got, _ = run(nodes, [pod("p", "gone", 1, spec)], {"gone"})
    assert got.placements[0].nodes == ("cordoned", "down")
    # The batch's own nodes are never a place to go, even for a pod that tolerates a cordon.
    assert "gone" not in got.placements[0].nodes


def test_node_affinity_operators():
    nodes = [node("gone", labels={"gen": "5"}), node("old", labels={"gen": "2"}), node("new", labels={"gen": "4"}),
             node("none", labels={})]

    def where(*reqs: Requirement) -> tuple[str, ...]:
        spec = PodScheduling(node_terms=(NodeTerm(reqs),))
        return run(nodes, [pod("p", "gone", 1, spec)], {"gone"})[0].placements[0].nodes

    assert where(Requirement("gen", "In", ("4",))) == ("new",)
    assert where(Requirement("gen", "NotIn", ("4",))) == ("none", "old")  # NotIn holds where the label is absent
    assert where(Requirement("gen", "Exists")) == ("new", "old")
    assert where(Requirement("gen", "DoesNotExist")) == ("none",)
    assert where(Requirement("gen", "Gt", ("3",))) == ("new",)
    assert where(Requirement("gen", "Lt", ("3",))) == ("old",)
    # Terms are ORed; an affinity whose terms were all empty matches no node.
    either = PodScheduling(node_terms=(NodeTerm((Requirement("gen", "In", ("2",)),)),
                                       NodeTerm((Requirement("gen", "In", ("4",)),))))
    assert run(nodes, [pod("p", "gone", 1, either)], {"gone"})[0].placements[0].nodes == ("new", "old")
    nothing = PodScheduling(node_terms=())
    assert run(nodes, [pod("p", "gone", 1, nothing)], {"gone"})[0].placements[0].verdict is Verdict.NOWHERE


def test_anti_affinity_its_own_and_that_of_the_pods_in_place():
    spread_out = PodScheduling(anti_affinity=(PodTerm(app("x"), "zone", frozenset({"ns"})),))
    nodes = [node("gone", "z1"), node("a", "z1"), node("b", "z2"), node("c", "z3")]
    pods = [pod("x1", "gone", 1, spread_out, app="x"), pod("x2", "b", 1, spread_out, app="x")]
    got, _ = run(nodes, pods, {"gone"})
    assert got.placements[0].nodes == ("a", "c")  # z2 already runs an x
    # A pod in place whose anti-affinity selects the moving pod keeps it out of its domain.
    guard = PodScheduling(anti_affinity=(PodTerm(app("y"), HOST, frozenset({"ns"})),))
    pods = [pod("y", "gone", 1, app="y"), pod("g", "a", 1, guard, app="g")]
    got, _ = run(nodes, pods, {"gone"})
    assert got.placements[0].nodes == ("b", "c")
    assert "1 node where a pod's anti-affinity over kubernetes.io/hostname keeps it out" in \
        [e.words for e in run(nodes[:2], pods, {"gone"})[0].placements[0].excluded]


def test_affinity_needs_a_matching_pod_in_the_domain_or_is_the_first_of_its_series():
    near_cache = PodScheduling(affinity=(PodTerm(app("cache"), "zone", frozenset({"ns"})),))
    nodes = [node("gone", "z1"), node("a", "z2"), node("b", "z3")]
    pods = [pod("llm", "gone", 1, near_cache, app="llm"), pod("cache", "b", 0, app="cache")]
    assert run(nodes, pods, {"gone"})[0].placements[0].nodes == ("b",)
    # No cache pod anywhere: a pod that does not match its own term has nowhere to go; one that does, anywhere.
    got, _ = run(nodes, pods[:1], {"gone"})
    assert got.placements[0].verdict is Verdict.NOWHERE
    assert "in a zone without app=cache (its affinity)" in got.placements[0].why
    itself = PodScheduling(affinity=(PodTerm(app("llm"), "zone", frozenset({"ns"})),))
    assert run(nodes, [pod("llm", "gone", 1, itself, app="llm")], {"gone"})[0].placements[0].count == 2


def test_spread_counts_the_batch_zone_drained_to_zero():
    """maxSkew 1 over zones: the batch empties z1 of x pods, so z2 and z3, holding one each, can take none."""
    spread = PodScheduling(spread=(Spread(1, "zone", app("x")),))
    nodes = [node("gone", "z1"), node("b", "z2"), node("c", "z3")]
    pods = [pod("x1", "gone", 1, spread, app="x"), pod("x2", "b", 1, spread, app="x"), pod("x3", "c", 1, spread, app="x")]
    got, _ = run(nodes, pods, {"gone"})
    (p,) = got.placements
    assert p.verdict is Verdict.NOWHERE and p.sure
    assert "where one more breaks maxSkew 1 of app=x over zone" in p.why
    # With a node of its own outside the batch in z1, it goes back to z1.
    got, _ = run([*nodes, node("a", "z1")], pods, {"gone"})
    assert got.placements[0].nodes == ("a",)


def test_cpu_memory_and_pod_count_where_requests_are_set():
    hungry = PodScheduling(requests=(("cpu", 64_000), ("memory", 256 * 2**30)))
    nodes = [node("gone"), node("busy"), node("small", alloc=(("cpu", 32_000), ("memory", 2**40), ("pods", 110))),
             node("packed", alloc=(("cpu", 96_000), ("memory", 2**40), ("pods", 1))), node("free")]
    pods = [pod("p", "gone", 1, hungry), pod("b", "busy", 0, PodScheduling(requests=(("cpu", 40_000),))),
            pod("q", "packed", 0)]
    got, _ = run(nodes, pods, {"gone"})
    (p,) = got.placements
    assert p.nodes == ("free",)
    # A node running a pod whose requests were not read cannot say it has room for CPU.
    pods.append(pod("opaque", "free", 0, None))
    got, _ = run(nodes, pods, {"gone"})
    assert got.placements[0].verdict is Verdict.NOWHERE
    assert "1 node running pods whose requests were not read" in [e.words for e in got.placements[0].excluded]


def test_unknown_when_its_rules_were_not_read_or_include_one_not_modelled():
    nodes = [node("gone"), node("free")]
    got, _ = run(nodes, [pod("a", "gone", 1, None), pod("b", "gone", 1, PodScheduling(unread="a hostPort"))], {"gone"})
    assert [p.verdict for p in got.placements] == [Verdict.UNKNOWN, Verdict.UNKNOWN]
    assert got.placements[1].text() == "unknown: it has a hostPort"
    assert not got.stranded
    # A node whose taints and resources were not read is no place it can go.
    got, _ = run([node("gone"), node("dark", read=False)], [pod("c", "gone")], {"gone"})
    assert got.placements[0].verdict is Verdict.NOWHERE
    assert "1 node whose taints and resources were not read" in [e.words for e in got.placements[0].excluded]


def test_sure_when_the_others_cannot_close_all_its_nodes():
    nodes = [node("g1"), node("g2")] + [node(f"n{i}", gpus=8) for i in range(4)]
    pods = [pod("p1", "g1", 8), pod("p2", "g1", 8), pod("p3", "g2", 8)]
    got, _ = run(nodes, pods, {"g1", "g2"})
    # Three pods, four empty nodes: whatever the scheduler picks, each finds one.
    assert all(p.verdict is Verdict.CAN_GO and p.sure for p in got.placements)
    got, _ = run(nodes[:5], pods, {"g1", "g2"})  # three empty nodes: the same
    assert all(p.sure for p in got.placements)
    assert CAVEAT in got.describe(ClusterSnapshot(0.0, "t"))[0]


def test_lost_replicas_per_service():
    nodes = [node("gone"), node("full", gpus=1)]
    pods = [pod("chat-1", "gone", 4, service="chat"), pod("chat-2", "full", 1, service="chat"),
            pod("chat-3", "gone", 4, service="chat")]
    got, snap = run(nodes, pods, {"gone"})
    assert got.lost(snap) == [("ns/chat", 2, 3)]
    assert "ns/chat loses 2 of 3 replicas" in got.describe(snap)[1]


def test_others_that_cannot_run_the_room_out_do_not_make_it_contended():
    # One node with room for both: whatever the order, each finds its place there.
    nodes = [node("gone"), node("big", gpus=8)]
    got, _ = run(nodes, [pod("a", "gone", 2), pod("b", "gone", 2)], {"gone"})
    assert [(p.verdict, p.sure) for p in got.placements] == [(Verdict.CAN_GO, True)] * 2
    # Room for one only: contended.
    got, _ = run([node("gone"), node("small", gpus=3)], [pod("a", "gone", 2), pod("b", "gone", 2)], {"gone"})
    assert not got.placements[0].sure


def test_a_pod_already_waiting_for_a_node_competes_for_the_room():
    nodes = [node("gone"), node("spare", gpus=2)]
    waiting = pod("waiting", "", 2)
    got, _ = run(nodes, [pod("a", "gone", 2), waiting], {"gone"}, moving=[pod("a", "gone", 2)])
    (p,) = got.placements
    assert p.verdict is Verdict.CAN_GO and not p.sure and "ns/waiting" in p.contended
