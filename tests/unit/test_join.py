"""The pure join: raw Kubernetes JSON + metric samples -> snapshot."""

from gputui.backends import kube_objects as ko
from gputui.backends.join import KubeState, Metrics, join
from gputui.backends.join_fleet import GpuSample
from gputui.policy.health import majority_driver
from gputui.vocabulary.gpu_metrics import Figures
from gputui.vocabulary.model import Health, NodeState
from tests.support.kube_json import deployment_json, node_json, pod_json


def test_nodes_pods_and_routed_service_join():
    route = ko.httproute_record({
        "metadata": {"name": "llama", "namespace": "llm"},
        "spec": {"rules": [{"backendRefs": [{"name": "llama-v1", "weight": 90}, {"name": "llama-v2", "weight": 10}]}]},
    })
    services = (
        ko.service_record({"metadata": {"name": "llama-v1", "namespace": "llm"}, "spec": {"selector": {"app.kubernetes.io/name": "llama", "app.kubernetes.io/version": "v1"}}}),
        ko.service_record({"metadata": {"name": "llama-v2", "namespace": "llm"}, "spec": {"selector": {"app.kubernetes.io/name": "llama", "app.kubernetes.io/version": "v2"}}}),
    )
    state = KubeState(
        nodes=(ko.node_record(node_json("gpu-1")), ko.node_record(node_json("gpu-2", driver="535.1", alloc=7)),
               ko.node_record({"metadata": {"name": "cpu-1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})),
        pods=(ko.pod_record(pod_json("llama-v1-a", "gpu-1", 4, {"app.kubernetes.io/name": "llama", "app.kubernetes.io/version": "v1"})),
              ko.pod_record(pod_json("llama-v2-a", "gpu-2", 4, {"app.kubernetes.io/name": "llama", "app.kubernetes.io/version": "v2"})),
              ko.pod_record(pod_json("web", "cpu-1", 0)),
              ko.pod_record(pod_json("waiting", "", 8, phase="Pending"))),
        workloads=(ko.deployment_record(deployment_json("llama-v1", "v1", 3, 3)), ko.deployment_record(deployment_json("llama-v2", "v2", 1, 0))),
        services=services, routes=(route,),
    )
    metrics = Metrics(
        gpus={("gpu-1", 0): GpuSample("gpu-1", 0, "GPU-a", Figures({"util_pct": 50.0, "mem_used_mib": 1000.0, "mem_total_mib": 4096.0, "temp_c": 60.0, "power_w": 300.0}), health=20),
              ("gpu-1", 1): GpuSample("gpu-1", 1, "GPU-b", Figures({"util_pct": 100.0}), xid=79)},
        sessions={("llm", "llama-v1-a"): 7},
    )
    snap = join(state, metrics, now=10.0, context="prod", sources=())
    assert [n.name for n in snap.nodes] == ["gpu-1", "gpu-2"]  # CPU nodes are not shown
    n1 = snap.node("gpu-1")
    assert n1.state is NodeState.DRAINING  # the gputui annotation travels
    assert "other" not in n1.annotations
    assert n1.gpus[0].mem_total_mib == 81559.0  # the card size from the node label
    assert n1.gpus[0].health is Health.FAIL
    assert n1.gpus[1].xid == 79 and snap.gauges(n1).util_pct == 75.0
    assert snap.node("gpu-2").gpus == ()  # no series for it: blanks, not zeros
    assert snap.node("gpu-2").gpu_allocatable == 7
    assert snap.gpus_allocated("gpu-1") == 4
    assert {p.name for p in snap.pods} == {"llama-v1-a", "llama-v2-a", "waiting"}
    pod = next(p for p in snap.pods if p.name == "llama-v1-a")
    assert (pod.service, pod.version, snap.sessions(pod).live, pod.restarts, pod.has_emptydir) == ("llama", "v1", 7, 3, True)
    svc = snap.service("llm/llama")
    assert svc.router_kind == "HTTPRoute"
    assert [(v.name, v.weight, v.workload) for v in svc.versions] == [("v1", 90, "llama-v1"), ("v2", 10, "llama-v2")]
    assert svc.versions[1].rollout.status == "0 of 1 available"
    assert len(snap.services) == 1  # the routed deployments are not listed again
    # Each node's driver from its own label, and the fleet's: one node each is a tie, which goes to the newer.
    assert [(n.name, n.driver_version) for n in snap.nodes] == [("gpu-1", "550.127.05"), ("gpu-2", "535.1")]
    assert majority_driver(snap.nodes) == "550.127.05"


def test_unrouted_gpu_deployments_group_by_service_label():
    state = KubeState(
        nodes=(ko.node_record(node_json("gpu-1")),),
        workloads=(ko.deployment_record(deployment_json("bge", "v1.5", service="bge")),
                   ko.deployment_record(deployment_json("cpu-thing", "v1", gpus=0, service="web"))),
    )
    snap = join(state, None, now=0.0, context="c", sources=())
    assert [(s.name, [v.name for v in s.versions], s.router_kind) for s in snap.services] == [("bge", ["v1.5"], "")]


def test_hostile_label_values_are_kept_as_data():
    raw = node_json("gpu-x", driver="[/]", labels={"nvidia.com/gpu.product": "[bold]X"})
    rec = ko.node_record(raw)
    assert rec.driver_version == "[/]" and rec.gpu_product == "[bold]X"


def test_virtualservice_and_pdb_records():
    vs = ko.ROUTER_KINDS["VirtualService"].record({"metadata": {"name": "m", "namespace": "llm"}, "spec": {"http": [{"route": [
        {"destination": {"host": "m.llm.svc.cluster.local", "subset": "stable"}, "weight": 80},
        {"destination": {"host": "m.llm.svc.cluster.local", "subset": "canary"}, "weight": 20}]}]}})
    assert [(b.service, b.subset, b.weight) for b in vs.backends] == [("m", "stable", 80), ("m", "canary", 20)]
    stale = ko.pdb_record({"metadata": {"name": "p", "namespace": "llm", "generation": 2},
                           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}},
                           "status": {"observedGeneration": 1, "disruptionsAllowed": 3}})
    assert stale.disruptions_allowed == 0  # not yet processed: the apiserver answers 429 too
    assert stale.min_available == "1" and stale.selector == {"a": "b"}


def _fleet_state(pods=None, workloads=None, nodes=None):
    nodes = nodes if nodes is not None else tuple(ko.node_record(node_json(f"gpu-{i}")) for i in range(3))
    pods = pods if pods is not None else tuple(
        ko.pod_record(pod_json(f"bge-{i}", f"gpu-{i}", 1, {"app.kubernetes.io/name": "bge", "app.kubernetes.io/version": "v1"}))
        for i in range(3))
    workloads = workloads if workloads is not None else (ko.deployment_record(deployment_json("bge", "v1", service="bge")),)
    return KubeState(nodes=nodes, pods=pods, workloads=workloads)


def _summaries(util):
    from gputui.vocabulary.model import GpuSummary

    return {f"gpu-{i}": GpuSummary(8, util_pct=util + i, temp_c=50.0) for i in range(3)}


def test_istio_subsets_select_the_labels_their_destinationrule_gives():
    vs = ko.ROUTER_KINDS["VirtualService"].record({"metadata": {"name": "m", "namespace": "llm"}, "spec": {"http": [{"route": [
        {"destination": {"host": "m.llm.svc.cluster.local", "subset": "stable"}, "weight": 80},
        {"destination": {"host": "m.llm.svc.cluster.local", "subset": "canary"}, "weight": 20}]}]}})
    rule = ko.destinationrule_record({"metadata": {"name": "m", "namespace": "llm"}, "spec": {
        "host": "m.llm.svc.cluster.local", "subsets": [
            {"name": "stable", "labels": {"track": "stable"}}, {"name": "canary", "labels": {"track": "canary"}},
            {"name": "broken", "labels": "not a mapping"}, "hostile"]}})
    assert rule.host == "m" and rule.subsets == {"stable": {"track": "stable"}, "canary": {"track": "canary"}}
    svc = ko.service_record({"metadata": {"name": "m", "namespace": "llm"}, "spec": {"selector": {"app": "m"}}})

    def deploy(name, track):
        raw = deployment_json(name, "ignored", service="m")
        raw["spec"]["template"]["metadata"]["labels"] = {"app": "m", "track": track}
        return ko.deployment_record(raw)

    workloads = (deploy("m-stable", "stable"), deploy("m-canary", "canary"))
    pods = (ko.pod_record(pod_json("m-canary-0", "gpu-0", 1, {"app": "m", "track": "canary"})),)
    nodes = (ko.node_record(node_json("gpu-0")),)
    state = KubeState(nodes=nodes, pods=pods, workloads=workloads, services=(svc,), routes=(vs,), subset_rules=(rule,))
    snap = join(state, None, now=1.0, context="c", sources=())
    [service] = snap.services
    assert [(v.name, v.weight, v.workload) for v in service.versions] == [
        ("stable", 80, "m-stable"), ("canary", 20, "m-canary")]
    assert (snap.pods[0].service, snap.pods[0].version) == ("m", "canary")
    # No DestinationRule in sight: Istio's convention, the subset is the pod's version label.
    bare = join(KubeState(nodes=nodes, pods=pods, workloads=workloads, services=(svc,), routes=(vs,)),
                None, now=1.0, context="c", sources=())
    assert [v.workload for v in bare.services[0].versions] == ["", ""]


def test_incremental_join_matches_a_fresh_join_and_reuses_what_did_not_change():
    from gputui.backends.join import Joiner

    joiner = Joiner()
    state = _fleet_state()
    m1 = Metrics(nodes=_summaries(10.0), sessions={("llm", "bge-0"): 1})
    first = joiner.join(state, m1, now=1.0, context="c", sources=())
    assert first == join(state, m1, now=1.0, context="c", sources=())

    # Same records, equal metrics in new objects (a static Prometheus): every object is reused.
    m2 = Metrics(nodes=_summaries(10.0), sessions={("llm", "bge-0"): 1})
    second = joiner.join(state, m2, now=2.0, context="c", sources=())
    assert all(a is b for a, b in zip(first.nodes, second.nodes, strict=True))
    assert all(a is b for a, b in zip(first.pods, second.pods, strict=True))

    # Metrics moved on one node and one pod's sessions: no node and no pod is rebuilt (gputui.vocabulary.gauges,
    # gputui.vocabulary.sessions: a summary and a count live beside them), and the snapshot says the new figures.
    m3 = Metrics(nodes={**_summaries(10.0), "gpu-1": _summaries(90.0)["gpu-1"]}, sessions={("llm", "bge-0"): 5})
    third = joiner.join(state, m3, now=3.0, context="c", sources=())
    assert third == join(state, m3, now=3.0, context="c", sources=())
    assert third.nodes is second.nodes and third.pods is second.pods
    assert third.gauges(third.nodes[1]).util_pct == 91.0 and third != second
    assert third.sessions(third.pods[0]).live == 5 and third.pods[0].service == "bge"


def test_a_quiet_refresh_gets_the_same_tuples_back_and_a_change_still_shows():
    from gputui.backends.join import Joiner

    joiner = Joiner()
    state = _fleet_state()
    metrics = Metrics(nodes=_summaries(10.0), sessions={("llm", "bge-0"): 1})
    first = joiner.join(state, metrics, now=1.0, context="c", sources=())
    # The caches and the metrics reader hand over the very same tuples and maps when nothing moved.
    quiet = joiner.join(state, metrics, now=2.0, context="c", sources=())
    assert quiet.nodes is first.nodes and quiet.pods is first.pods
    assert quiet._pods_by_node is first._pods_by_node  # the per-node indexes are not rebuilt either
    # Only sessions moved (the gauges wait for their interval): nodes, pods and their indexes stay; the counts
    # are the snapshot's own map (issue 18: a scrape rebuilt every pod whose count moved, and its node's list).
    sessions = Metrics(nodes=metrics.nodes, gpus=metrics.gpus, sessions={("llm", "bge-0"): 7})
    moved = joiner.join(state, sessions, now=3.0, context="c", sources=())
    assert moved.nodes is first.nodes and moved.pods is first.pods and moved._pods_by_node is first._pods_by_node
    assert moved.sessions(moved.pods[0]).live == 7 and moved == join(state, sessions, now=3.0, context="c", sources=())
    assert moved != first  # the counts are part of what the snapshot says
    # A node record replaced by the watch (a new tuple from the cache) is joined again.
    cordoned = _fleet_state(nodes=(ko.node_record(node_json("gpu-0", unschedulable=True)), *state.nodes[1:]))
    after = joiner.join(cordoned, sessions, now=4.0, context="c", sources=())
    assert after.nodes[0].unschedulable and after.nodes[1] is first.nodes[1]
    assert after.gpus_allocated("gpu-0") == first.gpus_allocated("gpu-0")


def test_incremental_join_follows_changed_records_and_services():
    from gputui.backends.join import Joiner

    joiner = Joiner()
    state = _fleet_state()
    joiner.join(state, None, now=1.0, context="c", sources=())
    # A pod replaced by the watch (new record) and a new version of the service.
    moved = ko.pod_record(pod_json("bge-2", "gpu-2", 1, {"app.kubernetes.io/name": "bge", "app.kubernetes.io/version": "v2"}))
    workloads = (*state.workloads, ko.deployment_record(deployment_json("bge-v2", "v2", service="bge")))
    changed = _fleet_state(pods=(*state.pods[:2], moved), workloads=workloads)
    snap = joiner.join(changed, None, now=2.0, context="c", sources=())
    assert snap == join(changed, None, now=2.0, context="c", sources=())
    assert [(s.name, [v.name for v in s.versions]) for s in snap.services] == [("bge", ["v1", "v2"])]
    assert [p.version for p in snap.pods] == ["v1", "v1", "v2"]
    # The service goes away: pods lose it even though their records did not change.
    gone = _fleet_state(pods=changed.pods, workloads=())
    assert {p.service for p in joiner.join(gone, None, now=3.0, context="c", sources=()).pods} == {""}


def test_service_and_version_labels_are_configurable():
    labels = {"team.example.com/model": "ranker", "team.example.com/rev": "r7", "app.kubernetes.io/name": "ignored"}
    raw = deployment_json("ranker-r7", "v9", service="other")
    raw["spec"]["template"]["metadata"]["labels"] = labels
    state = KubeState(nodes=(ko.node_record(node_json("gpu-1")),), workloads=(ko.deployment_record(raw),),
                      pods=(ko.pod_record(pod_json("ranker-a", "gpu-1", 1, labels)),))
    custom = join(state, None, now=0.0, context="c", sources=(),
                  service_labels=("team.example.com/model",), version_labels=("team.example.com/rev",))
    assert [(s.name, [v.name for v in s.versions]) for s in custom.services] == [("ranker", ["r7"])]
    assert (custom.pods[0].service, custom.pods[0].version) == ("ranker", "r7")
    default = join(state, None, now=0.0, context="c", sources=())
    assert [s.name for s in default.services] == ["ignored"]  # app.kubernetes.io/name comes first by default
    assert default.services[0].versions[0].name == "ranker-r7"  # no default version label: the workload's name


def test_first_matching_selector_wins_among_many_services():
    # The index must keep the scan's order: the route's version, not the catch-all workload, names the pod.
    route = ko.httproute_record({"metadata": {"name": "llama", "namespace": "llm"},
                                 "spec": {"rules": [{"backendRefs": [{"name": "llama-v1", "weight": 100}]}]}})
    svc = ko.service_record({"metadata": {"name": "llama-v1", "namespace": "llm"},
                             "spec": {"selector": {"app.kubernetes.io/version": "v1", "app.kubernetes.io/name": "llama"}}})
    many = tuple(ko.deployment_record(deployment_json(f"other-{i}", "v1", service=f"other-{i}")) for i in range(50))
    state = KubeState(nodes=(ko.node_record(node_json("gpu-1")),), services=(svc,), routes=(route,),
                      workloads=(*many, ko.deployment_record(deployment_json("llama-v1", "v1"))),
                      pods=(ko.pod_record(pod_json("llama-a", "gpu-1", 1, {"app.kubernetes.io/name": "llama", "app.kubernetes.io/version": "v1"})),
                            ko.pod_record(pod_json("other-7-a", "gpu-1", 1, {"app.kubernetes.io/name": "other-7", "app.kubernetes.io/version": "v1"})),
                            ko.pod_record(pod_json("stray", "gpu-1", 1, {"app.kubernetes.io/version": "v1"}))))
    snap = join(state, None, now=0.0, context="c", sources=())
    assert [(p.name, p.service, p.version) for p in snap.pods] == [
        ("llama-a", "llama", "v1"), ("other-7-a", "other-7", "v1"), ("stray", "", "")]


def test_dra_devices_follow_their_claims_from_one_refresh_to_the_next():
    """A pod's DRA devices are in no container's limits: they come from claims reserved for it, and go
    when the claim is released, though the pod's record did not change (the join's per-record cache)."""
    from gputui.backends.join import Joiner
    from gputui.backends.kube_dra import claim_record, slice_record

    node = {"metadata": {"name": "d1", "uid": "d1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            "status": {"capacity": {}, "allocatable": {}, "conditions": [{"type": "Ready", "status": "True"}]}}
    pod = pod_json("p", "d1", gpus=0)
    slices = (slice_record({"spec": {"driver": "gpu.nvidia.com", "nodeName": "d1", "pool": {"name": "d1"},
                                     "devices": [{"name": f"gpu-{i}"} for i in range(4)]}}),)
    claim = claim_record({"metadata": {"namespace": "llm", "name": "c"}, "status": {
        "allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "pool": "d1", "device": "gpu-0"},
                                               {"driver": "gpu.nvidia.com", "pool": "d1", "device": "gpu-1"}]}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "p-uid"}]}})
    nodes, pods = (ko.node_record(node),), (ko.pod_record(pod),)
    joiner = Joiner()
    held = joiner.join(KubeState(nodes=nodes, pods=pods, resource_slices=slices, resource_claims=(claim,)),
                       None, now=0, context="t", sources=())
    assert [n.name for n in held.nodes] == ["d1"] and held.nodes[0].gpu_allocatable == 4
    assert held.pods[0].gpu_units == {"dra:gpu.nvidia.com": 2} and held.allocated_by_resource("d1") == {
        "dra:gpu.nvidia.com": 2}
    released = joiner.join(KubeState(nodes=nodes, pods=pods, resource_slices=slices), None, now=1, context="t",
                           sources=())
    assert released.pods[0].gpu_units == {} and released.gpus_allocated("d1") == 0


def test_a_dcgm_read_of_a_summarised_fleet_builds_no_node_and_a_hot_gpu_still_shows():
    """At 65,000 nodes every DCGM read built every node anew (its summary was a field) and worked every node's
    alerts out again; the summaries now live beside the nodes (gputui.vocabulary.gauges). The hot-GPU alert, the one a
    summary gives, comes and goes with the summary."""
    from dataclasses import replace as with_

    from gputui.backends.join import Joiner
    from gputui.policy.health import fleet_alerts, node_alerts

    joiner = Joiner()
    state = _fleet_state(nodes=(ko.node_record(node_json("gpu-0", ready=False)),
                                *(ko.node_record(node_json(f"gpu-{i}")) for i in (1, 2))))
    first = joiner.join(state, Metrics(nodes=_summaries(10.0)), now=1.0, context="c", sources=())
    before = {n.name: node_alerts(n, 85.0, first.summary(n)) for n in first.nodes}
    assert [a.kind for a in before["gpu-0"]] == ["NotReady"]
    moved = joiner.join(state, Metrics(nodes=_summaries(60.0)), now=2.0, context="c", sources=())
    assert moved.nodes is first.nodes and moved.gauges(moved.nodes[1]).util_pct == 61.0  # (60 + its index)
    hot = joiner.join(state, Metrics(nodes={**_summaries(70.0), "gpu-1": with_(_summaries(70.0)["gpu-1"], temp_c=91.0)}),
                      now=3.0, context="c", sources=())
    assert hot.nodes is first.nodes
    assert [a.kind for a in node_alerts(hot.node("gpu-1"), 85.0, hot.summary(hot.node("gpu-1")))] == ["Temp"]
    assert [(a.node, a.kind) for a in fleet_alerts(hot, 85.0)] == [("gpu-0", "NotReady"), ("gpu-1", "Temp")]
    cooled = joiner.join(state, Metrics(nodes=_summaries(80.0)), now=4.0, context="c", sources=())
    assert node_alerts(cooled.node("gpu-1"), 85.0, cooled.summary(cooled.node("gpu-1"))) == []
    assert {n.name: node_alerts(n, 85.0, cooled.summary(n)) for n in cooled.nodes} == before
