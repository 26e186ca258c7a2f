"""Who is disrupting a node, from the Node alone (issue 40, first slice): each actor as it writes the node
(docs/disruption-actors.md), several at once, none, and a cordon nobody claims."""

from __future__ import annotations

import json

from gputui.backends.demo.simulation import Simulation
from gputui.backends.kube_objects import node_record
from gputui.ops.drain import lease, options
from gputui.policy.disruptions import node_disruptions
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.model import Node
from gputui.vocabulary.scheduling import NodeScheduling, Taint

NOW = 1_780_000_000.0
DAY = 86400.0


def node(*, cordoned: bool = False, taints: tuple[Taint, ...] = (), labels: dict | None = None,
         annotations: dict | None = None, upgrade_state: str = "") -> Node:
    return Node("n1", True, cordoned, "NVIDIA H100 80GB HBM3", 8, 8, upgrade_state=upgrade_state,
                labels=labels or {}, annotations=annotations or {}, scheduling=NodeScheduling(taints=taints))


def only(n: Node, snapshot: ClusterSnapshot | None = None) -> d.Disruption:
    found = node_disruptions(n, NOW, snapshot)
    assert len(found) == 1, found
    return found[0]


def test_a_node_nobody_touches_has_none():
    assert node_disruptions(node(), NOW) == []
    assert node_disruptions(node(labels={"nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}), NOW) == []
    # Karpenter's startup taint and its do-not-disrupt alone disrupt nothing.
    assert node_disruptions(node(taints=(Taint("karpenter.sh/unregistered", "", "NoExecute"),),
                                 annotations={d.KARPENTER_DO_NOT_DISRUPT: "true"}), NOW) == []


def test_a_cordon_nobody_claims_is_a_persons():
    x = only(node(cordoned=True))
    assert (x.actor, x.phase, x.since, x.stuck) == (d.PERSON, "cordoned", None, "")
    assert "owner unknown" in x.why


def test_cluster_autoscaler_deleting_claims_the_cordon_and_dates_from_its_taint():
    tainted = NOW - 300
    x = only(node(cordoned=True, taints=(Taint(d.CA_TO_BE_DELETED, str(int(tainted)), "NoSchedule"),)))
    assert (x.actor, x.phase, x.since, x.stuck) == (d.CLUSTER_AUTOSCALER, "deleting", tainted, "")
    old = only(node(cordoned=True, taints=(Taint(d.CA_TO_BE_DELETED, str(int(NOW - 2 * DAY)), "NoSchedule"),)))
    assert old.stuck.startswith("marked for deletion for 48h")


def test_cluster_autoscaler_candidate_is_never_stuck_and_a_bad_value_is_unknown_not_the_epoch():
    x = only(node(taints=(Taint(d.CA_DELETION_CANDIDATE, str(int(NOW - 9 * DAY)), "PreferNoSchedule"),)))
    assert (x.actor, x.phase, x.since, x.stuck) == (d.CLUSTER_AUTOSCALER, "deletion-candidate", NOW - 9 * DAY, "")
    assert only(node(taints=(Taint(d.CA_DELETION_CANDIDATE, "soon", "PreferNoSchedule"),))).since is None


def test_karpenter_taint_and_do_not_disrupt():
    x = only(node(taints=(Taint(d.KARPENTER_DISRUPTED, "", "NoSchedule"),),
                  annotations={d.KARPENTER_DO_NOT_DISRUPT: "true"}))
    assert (x.actor, x.phase, x.since) == (d.KARPENTER, "disrupting", None)
    assert "do-not-disrupt=true" in x.why
    # Karpenter taints instead of cordoning: a cordon beside its taint is someone else's.
    both = node_disruptions(node(cordoned=True, taints=(Taint(d.KARPENTER_DISRUPTED, "", "NoSchedule"),)), NOW)
    assert [x.actor for x in both] == [d.KARPENTER, d.PERSON]


def nvsentinel_quarantine(state: str = "quarantined", stamp: str = "2026-05-28T20-26-40Z") -> Node:
    event = [{"checkName": "GpuXidError", "isFatal": True, "message": "XID 79 GPU has fallen off the bus",
              "recommendedAction": 24, "nodeName": "n1", "generatedTimestamp": {"seconds": 1779997000, "nanos": 5}}]
    return node(cordoned=True, labels={
        d.NVSENTINEL_STATE: state, d.NVSENTINEL_CORDON_BY: "NVSentinel", d.NVSENTINEL_CORDON_REASON: "GpuXidError",
        d.NVSENTINEL_CORDON_TIMESTAMP: stamp},
        annotations={d.NVSENTINEL_EVENT: json.dumps(event), d.NVSENTINEL_IS_CORDONED: "True",
                     d.NVSENTINEL_APPLIED_TAINTS: json.dumps([{"Key": "nvidia.com/gpu-error", "Value": "fatal",
                                                              "Effect": "NoSchedule"}])})


def test_nvsentinel_quarantine_claims_the_cordon_with_its_event_and_time():
    x = only(nvsentinel_quarantine())
    assert (x.actor, x.phase, x.since, x.stuck) == (d.NVSENTINEL, "quarantined", 1780000000.0, "")
    assert "GpuXidError: XID 79 GPU has fallen off the bus" in x.why
    assert "nvidia.com/gpu-error=fatal:NoSchedule" in x.why


def test_nvsentinel_failed_drain_is_stuck_and_a_day_old_quarantine_too():
    assert only(nvsentinel_quarantine("drain-failed")).stuck.startswith("NVSentinel's drain failed")
    assert only(nvsentinel_quarantine("remediating", "2026-05-26T20-26-40Z")).stuck.startswith("remediating for 48h")


def test_nvsentinel_external_remediation_and_maintenance_request():
    found = node_disruptions(node(taints=(Taint(d.NVSENTINEL_EXTERNAL_REMEDIATION, "err-n1", "NoSchedule"),),
                                  annotations={d.NVSENTINEL_MAINTENANCE_REQUEST: "mr-7"}), NOW)
    # One hold per actor per node (gputui.policy.nvsentinel_holds): the taint's phase first, both named in the why.
    assert [(x.actor, x.phase) for x in found] == [(d.NVSENTINEL, "external-remediation")]
    assert "err-n1" in found[0].why and "mr-7" in found[0].why


def test_gpu_operator_upgrade_with_its_recorded_start():
    x = only(node(cordoned=True, upgrade_state="wait-for-jobs-required",
                  labels={"nvidia.com/gpu-driver-upgrade-state": "wait-for-jobs-required"},
                  annotations={d.UPGRADE_WAIT_START: str(int(NOW - 3 * DAY))}))
    assert (x.actor, x.phase, x.since) == (d.GPU_OPERATOR, "wait-for-jobs-required", NOW - 3 * DAY)
    assert x.stuck.startswith("wait-for-jobs-required for 72h")
    # upgrade-required: the operator has not taken the node, so a cordon on it is someone else's; no time known.
    found = node_disruptions(node(cordoned=True, upgrade_state="upgrade-required"), NOW)
    assert [(x.actor, x.since, x.stuck) for x in found] == [(d.GPU_OPERATOR, None, ""), (d.PERSON, None, "")]


def test_gpu_operator_holds_come_from_the_upgrade_policy_with_a_snapshot():
    failed = node(cordoned=True, upgrade_state="upgrade-failed")
    snap = ClusterSnapshot(taken_at=NOW, context="t", nodes=(failed,))
    assert only(failed, snap).stuck.startswith("upgrade failed")


def drain(phase: str, renewed: float | None, cordoned: bool = True) -> Node:
    notes = {options.PHASE: phase, options.BY: "alice", options.STARTED: "2026-05-28T20:40:00Z"}
    if renewed is not None:
        notes[lease.LEASE] = json.dumps({"who": "alice", "host": "h", "pid": 1, "token": "t", "renewed": renewed})
    return node(cordoned=cordoned, annotations=notes)


def test_gputui_drain_running_interrupted_and_finished():
    running = only(drain("waiting", NOW - 10))
    assert (running.actor, running.phase, running.since, running.stuck) == (d.GPUTUI, "waiting", 1780000800.0, "")
    assert "alice" in running.why
    assert "renewed 600s ago" in only(drain("evicting", NOW - 600)).stuck
    assert only(drain("cordoned", None)).stuck.startswith("interrupted")
    done = only(drain("done", NOW - 600))
    assert (done.phase, done.stuck) == ("done", "")  # drained and still cordoned: gputui's cordon, not a person's
    assert node_disruptions(drain("done", NOW - 600, cordoned=False), NOW) == []


def test_several_at_once_stuck_first():
    n = nvsentinel_quarantine("drain-failed")
    n = node(cordoned=True, labels=dict(n.labels), annotations=dict(n.annotations), upgrade_state="drain-required",
             taints=(Taint(d.CA_DELETION_CANDIDATE, str(int(NOW)), "PreferNoSchedule"),
                     Taint(d.KARPENTER_DISRUPTED, "", "NoSchedule")))
    found = node_disruptions(n, NOW)
    assert [x.actor for x in found] == [d.NVSENTINEL, d.CLUSTER_AUTOSCALER, d.KARPENTER, d.GPU_OPERATOR]
    assert found[0].stuck and not any(x.stuck for x in found[1:])


def test_the_vocabulary_spells_gputuis_drain_record_as_ops_writes_it():
    assert (d.DRAIN_BY, d.DRAIN_STARTED, d.DRAIN_LEASE, d.DRAIN_LEASE_S, d.DRAIN_IN_PROGRESS) == \
        (options.BY, options.STARTED, lease.LEASE, lease.LEASE_S, options.IN_PROGRESS)


def test_the_node_parser_keeps_taint_values_and_the_actors_annotations_only():
    raw = {"metadata": {"name": "n1", "annotations": {
        d.NVSENTINEL_EVENT: "[]", d.UPGRADE_WAIT_START: "1780000000", "gputui.io/drain-phase": "waiting",
        "node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {"unschedulable": True, "taints": [
            {"key": d.CA_TO_BE_DELETED, "value": "1780000000", "effect": "NoSchedule"}]}}
    rec = node_record(raw)
    assert dict(rec.annotations) == {d.NVSENTINEL_EVENT: "[]", d.UPGRADE_WAIT_START: "1780000000",
                                     "gputui.io/drain-phase": "waiting"}
    assert rec.scheduling is not None
    assert rec.scheduling.taints == (Taint(d.CA_TO_BE_DELETED, "1780000000", "NoSchedule"),)


def test_the_demo_has_a_cluster_autoscaler_candidate():
    sim = Simulation(clock=lambda: NOW)
    snap = sim.snapshot()
    found = {n.name: node_disruptions(n, snap.taken_at, snap) for n in snap.nodes}
    x = only(next(n for n in snap.nodes if n.name == "gpu-l40s-05"))
    assert (x.actor, x.phase, x.since) == (d.CLUSTER_AUTOSCALER, "deletion-candidate", NOW - 2 * 3600)
    assert found["gpu-l40s-05"] == [x]
