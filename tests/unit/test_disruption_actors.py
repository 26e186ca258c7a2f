"""The disrupting actors read from their own objects (issue 40 item 1): NVIDIA maintenance-operator's
NodeMaintenance and Karpenter's NodeClaim, each written here as its controller writes it, field for field:

- NodeMaintenance (github.com/Mellanox/maintenance-operator, tag v0.3.0): spec from api/v1alpha1
  nodemaintenance_types.go; status by internal/k8sutils SetReadyConditionReasonMsg (condition Ready, reason = the
  phase, status True only for Ready, message "", lastTransitionTime moved only when the status changes:
  meta.SetStatusCondition), the drain status by nodemaintenance_controller.go updateDrainStatus (totalPods,
  evictionPods, drainProgress = removed/evictionPods*100, waitForEviction "ns/name"), the wait's start annotation by
  internal/podcompletion (RFC3339).
- NodeClaim (sigs.k8s.io/karpenter v1.13.0): conditions from pkg/apis/v1/nodeclaim_status.go, DisruptionReason set
  by pkg/controllers/disruption/queue.go SetTrueWithReason(reason, reason), Drained Unknown/"Draining" by
  pkg/controllers/node/termination/controller.go, status.nodeName, label karpenter.sh/nodepool.
"""

from __future__ import annotations

import time

from gputui.backends.kube_actors import MAINTENANCE, NODECLAIM, ActorReader, maintenance_record, nodeclaim_record
from gputui.policy.disruptions import node_disruptions
from gputui.present.disruptions import disruption_rows, sources, unknown_because
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.disruptions import ActorObjects
from gputui.vocabulary.model import Node
from gputui.vocabulary.scheduling import NodeScheduling, Taint

NOW = 1_780_000_000.0


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def nodemaintenance(node: str, phase: str, *, created: float, pending_at: float, drain: dict | None = None,
                    wait_started: float | None = None, extra: list[str] | None = None,
                    failed: bool = False) -> dict:
    """A NodeMaintenance as the operator leaves it in `phase` (the requestor wrote the spec)."""
    conditions = [{"type": "Ready", "status": "True" if phase == "Ready" else "False", "reason": phase,
                   "message": "", "observedGeneration": 1, "lastTransitionTime": stamp(pending_at)}]
    if failed:  # the requestor's own condition (ConditionTypeRequestorFailed, reason FailedMaintenance)
        conditions.append({"type": "RequestorFailed", "status": "True", "reason": "FailedMaintenance",
                           "message": "firmware flash failed", "lastTransitionTime": stamp(pending_at + 60)})
    notes = {"maintenance.nvidia.com/node-initial-state.unschedulable": "false"}
    if wait_started is not None:
        notes["maintenance.nvidia.com/wait-pod-completion-start-time"] = stamp(wait_started)
    return {
        "apiVersion": "maintenance.nvidia.com/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": f"{node}-fw", "namespace": "maintenance", "creationTimestamp": stamp(created),
                     "annotations": notes, "finalizers": ["maintenance.nvidia.com/finalizer"]},
        "spec": {"requestorID": "network-operator.nvidia.com", "additionalRequestors": extra or [],
                 "nodeName": node, "cordon": True,
                 "waitForPodCompletion": {"podSelector": "app=training", "timeoutSeconds": 600},
                 "drainSpec": {"force": False, "podSelector": "", "timeoutSeconds": 300, "deleteEmptyDir": False}},
        "status": {"conditions": conditions, **({"drain": drain} if drain else {})},
    }


def nodeclaim(name: str, node: str, conditions: list[dict], deleting: float | None = None) -> dict:
    meta: dict = {"name": name, "labels": {"karpenter.sh/nodepool": "gpu-h100"}, "creationTimestamp": stamp(NOW - 9e5),
                  "finalizers": ["karpenter.sh/termination"]}
    if deleting is not None:
        meta["deletionTimestamp"] = stamp(deleting)
    base = [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": stamp(NOW - 9e5)}
            for t in ("Launched", "Registered", "Initialized")]
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta,
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                     "requirements": []},
            "status": {"nodeName": node, "providerID": f"aws:///us-east-1a/i-{name}", "conditions": base + conditions}}


def node(name: str, *, cordoned: bool = False, taints: tuple[Taint, ...] = ()) -> Node:
    return Node(name, True, cordoned, "NVIDIA H100 80GB HBM3", 8, 8, scheduling=NodeScheduling(taints=taints))


def snap(*nodes: Node, actors: ActorObjects | None) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=NOW, context="t", nodes=nodes, sources=(SourceStatus("API", NOW),), actors=actors)


READS = {MAINTENANCE: d.READ, NODECLAIM: d.READ}


def test_a_draining_nodemaintenance_is_read_into_its_record():
    obj = nodemaintenance("n1", "Draining", created=NOW - 3600, pending_at=NOW - 3590, wait_started=NOW - 3000,
                          extra=["gputui.io"], drain={"totalPods": 12, "evictionPods": 4, "drainProgress": 50,
                                                     "waitForEviction": ["llm/chat-0", "llm/chat-1"]})
    obj["status"]["waitForCompletion"] = []
    m = maintenance_record(obj)
    assert (m.namespace, m.name, m.node, m.requestor, m.additional_requestors) == \
        ("maintenance", "n1-fw", "n1", "network-operator.nvidia.com", ("gputui.io",))
    assert (m.phase, m.created, m.wait_started, m.drain_timeout_s, m.wait_timeout_s) == \
        ("Draining", NOW - 3600, NOW - 3000, 300, 600)
    assert (m.drain_progress, m.eviction_pods, m.waiting_pods) == (50, 4, ("llm/chat-0", "llm/chat-1"))
    assert m.condition("Ready") is not None and m.condition("Ready").since == NOW - 3590  # type: ignore[union-attr]
    # No status yet (just created): phase "" (the operator's ConditionReasonUninitialized); no drainSpec: None.
    bare = maintenance_record({"metadata": {"name": "x", "namespace": "m"}, "spec": {"nodeName": "n", "requestorID": "a.b"}})
    assert (bare.phase, bare.drain_timeout_s, bare.drain_progress, bare.created) == ("", None, None, None)


def test_a_nodeclaim_is_read_into_its_record_with_only_its_disruption_conditions():
    c = nodeclaim_record(nodeclaim("gpu-abc", "n2", [
        {"type": "Consolidatable", "status": "True", "reason": "Consolidatable", "lastTransitionTime": stamp(NOW - 700)},
        {"type": "DisruptionReason", "status": "True", "reason": "Underutilized", "message": "Underutilized",
         "lastTransitionTime": stamp(NOW - 120)}]))
    assert (c.name, c.node, c.nodepool, c.deleting_since) == ("gpu-abc", "n2", "gpu-h100", None)
    assert [(x.type, x.status, x.reason, x.since) for x in c.conditions] == \
        [("DisruptionReason", "True", "Underutilized", NOW - 120)]


def test_nodemaintenance_rows_name_the_requestors_phase_progress_and_stuck_past_the_drain_timeout():
    drain = {"totalPods": 12, "evictionPods": 4, "drainProgress": 50, "waitForEviction": ["llm/chat-0"]}
    recent = maintenance_record(nodemaintenance("n1", "Draining", created=NOW - 400, pending_at=NOW - 399,
                                                wait_started=NOW - 390, drain=drain, extra=["gputui.io"]))
    # Waited (its wait started 2h ago, timeout 600s) and still draining: past 300s + 600s.
    old = maintenance_record(nodemaintenance("n2", "Draining", created=NOW - 7300, pending_at=NOW - 7299,
                                             wait_started=NOW - 7200, drain=drain))
    actors = ActorObjects(maintenances=(recent, old), reads=READS)
    s = snap(node("n1", cordoned=True), node("n2", cordoned=True), actors=actors)
    [x1] = node_disruptions(s.nodes[0], NOW, s)
    assert (x1.actor, x1.phase, x1.since, x1.stuck, x1.cordons) == ("maintenance-operator", "Draining", NOW - 400,
                                                                    "", True)
    assert "requested by network-operator.nvidia.com (also gputui.io)" in x1.why
    assert "drained 50% of 4 pods" in x1.why and "waiting on 1 pod: llm/chat-0" in x1.why
    [x2] = node_disruptions(s.nodes[1], NOW, s)
    assert x2.stuck.startswith("Draining, 2h after its last dated step, past its drain timeout of 300s")
    # Neither node is a person's cordon: the NodeMaintenance holds it.
    assert all(r.actor == "maintenance-operator" for r in disruption_rows(s))


def test_a_failed_requestor_is_stuck_and_pending_does_not_hold_the_cordon():
    failed = maintenance_record(nodemaintenance("n1", "RequestorFailed", created=NOW - 900, pending_at=NOW - 899,
                                                failed=True))
    pending = maintenance_record(nodemaintenance("n2", "Pending", created=NOW - 60, pending_at=NOW - 59))
    s = snap(node("n1", cordoned=True), node("n2"), actors=ActorObjects(maintenances=(failed, pending), reads=READS))
    [x1] = node_disruptions(s.nodes[0], NOW, s)
    assert x1.phase == "RequestorFailed" and "firmware flash failed" in x1.stuck and x1.cordons
    [x2] = node_disruptions(s.nodes[1], NOW, s)
    assert (x2.phase, x2.stuck, x2.cordons) == ("Pending", "", False)


def test_nodeclaim_rows_give_karpenters_reason_and_since_in_place_of_its_bare_taint():
    chosen = nodeclaim_record(nodeclaim("gpu-a", "n1", [
        {"type": "DisruptionReason", "status": "True", "reason": "Underutilized", "message": "Underutilized",
         "lastTransitionTime": stamp(NOW - 120)}]))
    terminating = nodeclaim_record(nodeclaim("gpu-b", "n2", [
        {"type": "DisruptionReason", "status": "True", "reason": "Drifted", "message": "Drifted",
         "lastTransitionTime": stamp(NOW - 400)},
        {"type": "Drained", "status": "Unknown", "reason": "Draining", "message": "Draining",
         "lastTransitionTime": stamp(NOW - 300)}], deleting=NOW - 300))
    drifted = nodeclaim_record(nodeclaim("gpu-c", "n3", [
        {"type": "Drifted", "status": "True", "reason": "NodePoolDrifted", "message": "NodePoolDrifted",
         "lastTransitionTime": stamp(NOW - 50)}]))
    quiet = nodeclaim_record(nodeclaim("gpu-d", "n4", []))
    taint = (Taint(d.KARPENTER_DISRUPTED, "", "NoSchedule"),)
    s = snap(node("n1", taints=taint), node("n2", taints=taint), node("n3"), node("n4"),
             actors=ActorObjects(claims=(chosen, terminating, drifted, quiet), reads=READS))
    got = {n.name: [(x.actor, x.phase, x.since) for x in node_disruptions(n, NOW, s)] for n in s.nodes}
    assert got == {"n1": [("karpenter", "Underutilized", NOW - 120)], "n2": [("karpenter", "Draining", NOW - 300)],
                   "n3": [("karpenter", "Drifted", NOW - 50)], "n4": []}
    assert "NodeClaim gpu-a, NodePool gpu-h100" in node_disruptions(s.nodes[0], NOW, s)[0].why
    # Without the NodeClaims (the demo, or an older snapshot) the taint alone still says Karpenter, undated.
    bare = snap(node("n1", taints=taint), actors=None)
    assert [(x.phase, x.since) for x in node_disruptions(bare.nodes[0], NOW, bare)] == [("disrupting", None)]


def test_sources_say_read_not_installed_or_unknown_never_none():
    forbidden = 'unknown: forbidden: nodemaintenances.maintenance.nvidia.com is forbidden'
    s = snap(node("n1"), actors=ActorObjects(reads={MAINTENANCE: forbidden, NODECLAIM: d.NOT_INSTALLED}))
    got = sources(s)
    assert got["NodeMaintenance"] == forbidden and got["NodeClaim"] == "not installed"
    assert got["Node objects"] == "read"
    assert unknown_because(s).startswith("NodeMaintenance objects could not be read (forbidden")
    ok = snap(node("n1"), actors=ActorObjects(reads={MAINTENANCE: d.NOT_INSTALLED, NODECLAIM: d.READ}))
    assert unknown_because(ok) == "" and sources(ok)["NodeClaim"] == "read"
    assert "none" not in " ".join(sources(snap(node("n1"), actors=None)).values())


class FakeCache:
    def __init__(self, error: str | None = None, synced: bool = True) -> None:
        import threading
        self.error, self.synced = error, threading.Event()
        if synced:
            self.synced.set()

    def items(self) -> tuple:
        return ()


def test_actor_reader_states_absent_forbidden_and_discovery_failed():
    made = {}

    def make(path, transform):
        made[path] = cache = FakeCache("forbidden: nodemaintenances is forbidden" if "maintenance" in path else None)
        return cache

    reader = ActorReader(make, "v1alpha1", None)
    assert list(made) == ["/apis/maintenance.nvidia.com/v1alpha1/nodemaintenances",  # cluster-wide
                          "/apis/maintenance.nvidia.com/v1alpha1/maintenanceoperatorconfigs"]
    objects = reader.objects()
    assert objects.reads == {MAINTENANCE: "unknown: forbidden: nodemaintenances is forbidden",
                             NODECLAIM: "not installed", "ExternalRemediationRequest": "not installed",
                             "MaintenanceRequest": "not installed", "RebootNode": "not installed",
                             "TerminateNode": "not installed", "GPUReset": "not installed"}
    assert [(s.name, s.error) for s in ActorReader.sources(objects)] == \
        [("NodeMaintenance", "unknown: not readable (forbidden)"),  # the header's words
         ("MaintenanceOperatorConfig", "unknown: not readable (forbidden)")]
    blind = ActorReader(make, None, None, RuntimeError("503: discovery down"))
    assert all(v.startswith("unknown: API discovery failed") for v in blind.objects().reads.values())
