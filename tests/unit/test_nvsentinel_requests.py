"""NVIDIA NVSentinel's requests read from their objects (issue 40 item 1), each written here as NVSentinel writes it,
field for field (repository NVIDIA/NVSentinel, read from the public source index; docs/disruption-actors.md §1):

- ExternalRemediationRequest: created by fault-remediation from the template of
  docs/tutorials/integrating-external-remediation.md @435565d (name `extrr-<HealthEventID>`, label
  app.kubernetes.io/managed-by=nvsentinel, annotations nvsentinel.nvidia.com/preserve, trace-id, span-id,
  spec.healthEvent {version, agent, componentClass, checkName, nodeName, isFatal, message, recommendedAction,
  customRecommendedAction, processingStrategy}); status by janitor,
  janitor/pkg/controller/externalremediationrequest_controller.go @079ddc5 (finalizer
  nvsentinel.dgxc.nvidia.com/external-remediation-cleanup; setInitialConditions: NVSentinelOwnershipReleased
  Unknown/Initializing, ExternalRemediationComplete Unknown/AwaitingExternalSystem, with meta.SetStatusCondition;
  reconcileApply: Released True/ReleaseTaintApplied, message "applied release taint ..."); the external system writes
  ExternalRemediationComplete True (the tutorial's "RepairSucceeded") or False. Conditions go out through janitor's
  proto Condition (data-models/protobufs/external_remediation.proto), so protojson writes observedGeneration (int64)
  as a string and lastTransitionTime with nanoseconds.
- MaintenanceRequest: spec by the requester as docs/tutorials/requesting-node-maintenance.md @435565d shows
  (healthEvent {version, agent, componentClass, checkName, nodeName, isHealthy, isFatal, recommendedAction,
  message}); lifecycle-manager/internal/controller/maintenancerequest_controller.go @5f596c5: finalizer
  nvsentinel.dgxc.nvidia.com/maintenance-request-cleanup, setCondition HealthEventEmitted Unknown/Initializing
  "MaintenanceRequest accepted; preparing to emit health event.", then True/Emitted "Submitted health event to
  platform-connector." or False/Blocked "Node <n> already has active MaintenanceRequest <m>." (timestamppb.Now());
  autoPopulateEventFields (id he-mr-<uid>, generatedTimestamp), stampTraceability (metadata
  maintenanceRequestName/UID); claimNode writes the node annotation nvsentinel.dgxc.nvidia.com/active-maintenance-request.
"""

from __future__ import annotations

import time

from gputui.backends.kube_actors import MAINTENANCE, NODECLAIM, ActorReader
from gputui.backends.kube_nvsentinel import (
    MAINTENANCE_REQUEST,
    REMEDIATION,
    maintenance_request_record,
    remediation_record,
)
from gputui.policy.disruptions import node_disruptions
from gputui.present.disruptions import disruption_rows, unknown_because
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.disruptions import ActorObjects
from gputui.vocabulary.model import Node
from gputui.vocabulary.scheduling import NodeScheduling, Taint

NOW = 1_780_000_000.0
READS = {MAINTENANCE: d.NOT_INSTALLED, NODECLAIM: d.NOT_INSTALLED, REMEDIATION: d.READ, MAINTENANCE_REQUEST: d.READ}


def proto_time(t: float) -> str:
    """A google.protobuf.Timestamp as protojson writes one with nanoseconds (timestamppb.Now())."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".123456789Z"


def k8s_time(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def condition(kind: str, status: str, reason: str, message: str, at: float) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message, "observedGeneration": "1",
            "lastTransitionTime": proto_time(at)}


def err(node: str, *, created: float, released: str | None = "True", complete: tuple[str, str, str] | None = None,
        name: str = "extrr-he-7f3a") -> dict:
    """An ERR as fault-remediation creates it and janitor (then the external system) leaves it."""
    conditions = []
    if released is not None:
        conditions.append(condition(d.ERR_RELEASED, released,
                                    "ReleaseTaintApplied" if released == "True" else "Initializing",
                                    f"applied release taint nvsentinel.dgxc.nvidia.com/external-remediation={name} "
                                    f"and managed=false label to node \"{node}\"" if released == "True" else
                                    "Reconciler has not yet applied the release taint and managed=false label.",
                                    created + 2))
        status, reason, message = complete or ("Unknown", "AwaitingExternalSystem",
                                               "External system has not yet reported completion.")
        conditions.append(condition(d.ERR_COMPLETE, status, reason, message, created + 1))
    return {
        "apiVersion": "nvsentinel.dgxc.nvidia.com/v1", "kind": "ExternalRemediationRequest",
        "metadata": {"name": name, "creationTimestamp": k8s_time(created), "generation": 1,
                     "labels": {"app.kubernetes.io/managed-by": "nvsentinel"},
                     "annotations": {"nvsentinel.nvidia.com/preserve": "true",
                                     "nvsentinel.nvidia.com/trace-id": "4bf92f3577b34da6a3ce929d0e0e4736",
                                     "nvsentinel.nvidia.com/span-id": "00f067aa0ba902b7"},
                     "finalizers": ["nvsentinel.dgxc.nvidia.com/external-remediation-cleanup"]},
        "spec": {"healthEvent": {
            "version": 1, "agent": "gpu-health-monitor", "componentClass": "GPU", "checkName": "GpuXidError",
            "nodeName": node, "isFatal": True, "message": "XID 79 GPU has fallen off the bus",
            "recommendedAction": "CUSTOM", "customRecommendedAction": "external-remediation",
            "processingStrategy": "EXECUTE_REMEDIATION", "errorCode": ["79"]}},
        "status": {"conditions": conditions} if conditions else {},
    }


def mr(node: str, *, created: float, emitted: tuple[str, str, str] | None = ("True", "Emitted",
                                                                            "Submitted health event to platform-connector."),
       message: str = "Planned hardware maintenance", start: float | None = None) -> dict:
    """An MR as its requester writes the spec and lifecycle-manager leaves it."""
    spec: dict = {"healthEvent": {
        "version": 1, "agent": "lifecycle-manager", "componentClass": "Node", "checkName": "PlannedMaintenance",
        "nodeName": node, "isHealthy": False, "isFatal": False, "recommendedAction": "NONE", "message": message,
        "id": "he-mr-6c1f0a2e", "generatedTimestamp": proto_time(created + 1),
        "metadata": {"maintenanceRequestName": f"maintenance-{node}", "maintenanceRequestUID": "6c1f0a2e",
                     "maintenanceRequestRequesterAgent": "my-maintenance-tool"}}}
    if start is not None:
        spec["startTime"] = proto_time(start)
    return {
        "apiVersion": "nvsentinel.dgxc.nvidia.com/v1", "kind": "MaintenanceRequest",
        "metadata": {"name": f"maintenance-{node}", "creationTimestamp": k8s_time(created), "generation": 1,
                     "finalizers": ["nvsentinel.dgxc.nvidia.com/maintenance-request-cleanup"]},
        "spec": spec,
        "status": {"conditions": [condition(d.MR_EMITTED, *emitted, created + 1)]} if emitted else {},
    }


def quarantined(name: str, *, cordoned: bool = True, taints: tuple[Taint, ...] = (), state: str = "drain-succeeded",
                at: float = NOW - 3600, annotations: dict | None = None) -> Node:
    """The node as fault-quarantine and node-drainer leave it (docs/disruption-actors.md §1)."""
    labels = {d.NVSENTINEL_CORDON_BY: "NVSentinel", d.NVSENTINEL_STATE: state,
              d.NVSENTINEL_CORDON_TIMESTAMP: time.strftime(d.NVSENTINEL_TIMESTAMP_FORMAT, time.gmtime(at))}
    notes = {d.NVSENTINEL_IS_CORDONED: "True", **(annotations or {})}
    return Node(name, True, cordoned, "NVIDIA H100 80GB HBM3", 8, 8, labels=labels, annotations=notes,
                scheduling=NodeScheduling(taints=taints))


def snap(*nodes: Node, errs: tuple = (), mrs: tuple = (), reads: dict | None = None) -> ClusterSnapshot:
    actors = ActorObjects(reads=reads or READS, remediations=tuple(remediation_record(o) for o in errs),
                          maintenance_requests=tuple(maintenance_request_record(o) for o in mrs))
    return ClusterSnapshot(taken_at=NOW, context="t", nodes=nodes, sources=(SourceStatus("API", NOW),), actors=actors)


def test_records_read_the_objects_as_nvsentinel_writes_them():
    r = remediation_record(err("n1", created=NOW - 600))
    assert (r.name, r.node, r.created, r.deleting, r.completed) == ("extrr-he-7f3a", "n1", NOW - 600, False, None)
    assert [(c.type, c.status, c.reason, c.since) for c in r.conditions] == [
        (d.ERR_RELEASED, "True", "ReleaseTaintApplied", NOW - 598),  # nanoseconds dropped, not the time
        (d.ERR_COMPLETE, "Unknown", "AwaitingExternalSystem", NOW - 599)]
    assert r.open
    assert r.event.words() == ("GpuXidError: XID 79 GPU has fallen off the bus; recommended action CUSTOM "
                               "(external-remediation); error code 79")
    m = maintenance_request_record(mr("n2", created=NOW - 300, start=NOW + 3600))
    assert (m.name, m.node, m.created, m.start) == ("maintenance-n2", "n2", NOW - 300, NOW + 3600)
    assert [(c.type, c.status, c.reason) for c in m.conditions] == [(d.MR_EMITTED, "True", "Emitted")]
    assert m.event.words() == "PlannedMaintenance: Planned hardware maintenance; recommended action NONE"
    # Completed by the external system: not open. Fresh (no status yet): open, uninitialised.
    assert not remediation_record(err("n1", created=NOW, complete=("True", "RepairSucceeded", "done"))).open
    assert remediation_record(err("n1", created=NOW, released=None)).open
    # Text from outside is bounded; a shape that is not NVSentinel's reads as nothing, never raises.
    long = maintenance_request_record(mr("n3", created=NOW, message="x" * 5000))
    assert len(long.event.message) == d.EVENT_TEXT_MAX + 1
    junk = remediation_record({"metadata": "no", "spec": {"healthEvent": ["x"]}, "status": {"conditions": "y"}})
    assert (junk.node, junk.conditions, junk.event.words()) == ("", (), "")


def test_an_open_err_is_one_nvsentinel_hold_merged_with_its_quarantine():
    n = quarantined("n1", taints=(Taint(d.NVSENTINEL_EXTERNAL_REMEDIATION, "extrr-he-7f3a", "NoSchedule"),))
    found = node_disruptions(n, NOW, snap(n, errs=(err("n1", created=NOW - 600),)))
    assert [(x.actor, x.phase, x.since, x.cordons) for x in found] == \
        [(d.NVSENTINEL, "AwaitingExternalSystem", NOW - 3600, True)]  # since the quarantine: the hold's start
    why = found[0].why
    assert why.startswith("ExternalRemediationRequest extrr-he-7f3a for GpuXidError: XID 79")
    assert "quarantined by NVSentinel" in why and "handed to an external" not in why  # its taint is that ERR
    assert found[0].stuck == ""


def test_err_phases_from_its_conditions_and_a_stopped_external_system_is_stuck():
    n = quarantined("n1")
    fresh = node_disruptions(n, NOW, snap(n, errs=(err("n1", created=NOW - 5, released=None),)))
    assert fresh[0].phase == "Uninitialized"
    seeded = err("n1", created=NOW - 5, released="Unknown")
    assert node_disruptions(n, NOW, snap(n, errs=(seeded,)))[0].phase == "Initializing"
    stopped = err("n1", created=NOW - 600, complete=("False", "RepairAbandoned", "no spare GPU"))
    x = node_disruptions(n, NOW, snap(n, errs=(stopped,)))[0]
    assert x.phase == "RepairAbandoned"
    assert x.stuck.startswith("the external system stopped work on the node (no spare GPU)")
    # Complete=True: janitor takes the node back; the ERR no longer holds it (the quarantine still may).
    done = err("n1", created=NOW - 600, complete=("True", "RepairSucceeded", "repaired"))
    assert node_disruptions(n, NOW, snap(n, errs=(done,)))[0].phase == "drain-succeeded"
    assert node_disruptions(Node("n9", True, False, "g", 8, 8), NOW,
                            snap(errs=(done,))) == []


def test_an_mr_holds_its_node_with_its_phase_and_why_and_a_forgotten_one_is_stuck():
    bare = Node("n2", True, False, "NVIDIA H100 80GB HBM3", 8, 8,
                annotations={d.NVSENTINEL_MAINTENANCE_REQUEST: "maintenance-n2"})
    x = node_disruptions(bare, NOW, snap(bare, mrs=(mr("n2", created=NOW - 120, start=NOW + 3600),)))
    assert [(y.actor, y.phase, y.since, y.cordons) for y in x] == [(d.NVSENTINEL, "Emitted", NOW - 120, False)]
    assert x[0].why == ("MaintenanceRequest maintenance-n2 for PlannedMaintenance: Planned hardware maintenance; "
                        f"recommended action NONE; window opens {k8s_time(NOW + 3600)}")
    blocked = mr("n2", created=NOW - 60, emitted=("False", "Blocked",
                                                  "Node n2 already has active MaintenanceRequest other."))
    y = node_disruptions(bare, NOW, snap(bare, mrs=(blocked,)))[0]
    assert y.phase == "Blocked" and "already has active MaintenanceRequest other" in y.why
    # Merged with the quarantine it caused: one row, the MR's phase, cordons (the node is cordoned).
    q = quarantined("n2", state="draining", annotations={d.NVSENTINEL_MAINTENANCE_REQUEST: "maintenance-n2"})
    z = node_disruptions(q, NOW, snap(q, mrs=(mr("n2", created=NOW - 2 * 86400),)))
    assert [(w.actor, w.phase, w.cordons) for w in z] == [(d.NVSENTINEL, "Emitted", True)]
    assert z[0].stuck.startswith("under maintenance (Emitted) for 48h") and "until the MaintenanceRequest is" \
        in z[0].stuck


def test_marks_without_their_objects_still_merge_into_one_hold():
    n = quarantined("n1", taints=(Taint(d.NVSENTINEL_EXTERNAL_REMEDIATION, "extrr-x", "NoSchedule"),),
                    annotations={d.NVSENTINEL_MAINTENANCE_REQUEST: "mr-7"})
    found = node_disruptions(n, NOW, snap(n))
    assert len(found) == 1 and found[0].phase == "drain-succeeded"
    assert "ExternalRemediationRequest extrr-x" in found[0].why and "MaintenanceRequest mr-7" in found[0].why


def test_unreadable_requests_are_unknown_and_a_cordon_names_them():
    reads = {**READS, REMEDIATION: "unknown: forbidden: externalremediationrequests is forbidden"}
    cordoned = Node("n1", True, True, "NVIDIA H100 80GB HBM3", 8, 8)
    s = snap(cordoned, reads=reads)
    assert unknown_because(s).startswith("ExternalRemediationRequest objects could not be read (forbidden")
    row = disruption_rows(s)[0]
    assert row.actor == d.PERSON and "ExternalRemediationRequest objects could not be read" in row.why


class FakeCache:
    def __init__(self, error: str | None = None) -> None:
        import threading
        self.error, self.synced = error, threading.Event()
        self.synced.set()

    def items(self) -> tuple:
        return ()


def test_actor_reader_watches_the_served_kinds_cluster_wide_and_names_each_state():
    made = {}

    def make(path, transform):
        made[path] = cache = FakeCache("forbidden: maintenancerequests is forbidden" if "maintenancer" in path
                                       else None)
        return cache

    reader = ActorReader(make, None, None, remediations="v1", maintenance_requests="v1")
    assert sorted(made) == ["/apis/nvsentinel.dgxc.nvidia.com/v1/externalremediationrequests",
                            "/apis/nvsentinel.dgxc.nvidia.com/v1/maintenancerequests"]
    reads = reader.objects().reads
    assert reads[REMEDIATION] == d.READ
    assert reads[MAINTENANCE_REQUEST] == "unknown: forbidden: maintenancerequests is forbidden"
    assert [(s.name, s.error) for s in ActorReader.sources(reader.objects())] == \
        [(MAINTENANCE_REQUEST, "unknown: not readable (forbidden)")]
    absent = ActorReader(make, None, None).objects().reads
    assert absent[REMEDIATION] == absent[MAINTENANCE_REQUEST] == d.NOT_INSTALLED
