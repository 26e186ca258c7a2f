"""The demo's nodes in other actors' hands (issue 40 item 6), written as each actor writes them on the Node
(docs/disruption-actors.md; the names: gputui.vocabulary.disruptions). Only what the Node object can carry: the
actors' own objects the Nodes imply are in actor_objects (below). Applied after the initial placement, so the demo's pods and GPU figures are unchanged;
times are relative to the demo's start, so the demo stays deterministic.

- gpu-a100-03: quarantined by NVSentinel three hours ago on a fatal XID (cordon, its labels, annotations and the
  taint its rule set applies: the chart's commented example, nvidia.com/gpu-error=fatal:NoSchedule). No
  cordon-reason label (how a rule match words it was not read from NVSentinel's source) and no node condition
  (it would make the node a problem and move every demo figure that counts problems);
- gpu-a100-07: Karpenter is disrupting it (karpenter.sh/disrupted:NoSchedule; Karpenter taints, never cordons);
- gpu-l40s-04: the cluster autoscaler is deleting it (ToBeDeletedByClusterAutoscaler=<Unix seconds>:NoSchedule,
  and the cordon it sets before terminating, --cordon-node-before-terminating's default);
- gpu-a100-06: a person's cordon through gputui (`gputui cordon --reason … --ticket … --expires …`): spec.unschedulable
  and gputui's cordon record (gputui.io/cordon) by another user than the demo's own (demo-operator), its expiry
  passed six hours before the demo starts: the dashboard counts it as a problem (cordon expired), and `u` on it asks
  first, naming that user.
- the A100 nodes gpu-a100-01..08 are Karpenter's, of NodePool gpu-a100 (label karpenter.sh/nodepool, as Karpenter
  labels the nodes it launches), whose disruption budgets are DEMO_BUDGETS: 75% at any time (6 of 8 nodes, rounded up
  as Karpenter rounds), none on weekdays 09:00-17:00 UTC (closed when the demo starts, a Friday at midnight), and
  none for drift. Four of its nodes are in other hands already (NVSentinel, Karpenter, the GPU Operator, a person):
  a batch of A100 nodes drains at most 2 at once, and its plan names the NodePool as the limit. The
  snapshot carries them once the simulation hands them in (`batch_budgets=DEMO_BUDGETS` in Simulation.snapshot).
- gpu-h100-10: NVIDIA's maintenance-operator drains it for the Network Operator (a NodeMaintenance requested two
  hours before the demo starts, cordoned, in Draining far past its 10-minute drain timeout: stuck), and gpu-a100-07's
  NodeClaim says why Karpenter disrupts it (DisruptionReason Underutilized: a consolidation). These are the actors'
  own objects (actor_objects), handed in with every source read, and the NodePool budgets beside them.
- gpu-l40s-06: the GPU Operator's driver upgrade stuck for days: in validation-required for three days (the
  operator cordoned it, and dates the step with its validation-start-time annotation, Unix seconds as
  k8s-operator-libs writes it); the node is NotReady (scenario.py), so the validator never passes.
The GPU Operator's other holds are gpu-a100-08's upgrade-failed and gpu-l40s-03 mid-upgrade (scenario.py): the operator
records no time for those states. gpu-l40s-05's deletion candidate is set in Simulation.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from gputui.backends.demo.scenario import SimNode
from gputui.policy.cordon_record import CordonRecord
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.batch_budgets import (
    MAINTENANCE_CONFIG,
    NODEPOOL,
    NODEPOOL_LABEL,
    BudgetObjects,
    NodePoolBudget,
    NodePoolRecord,
)
from gputui.vocabulary.disruptions import ActorObjects, Condition, NodeClaimRecord, NodeMaintenanceRecord
from gputui.vocabulary.nvsentinel_janitor import KINDS as JANITOR_KINDS
from gputui.vocabulary.scheduling import Taint

NVSENTINEL_NODE = "gpu-a100-03"
KARPENTER_NODE = "gpu-a100-07"
AUTOSCALER_NODE = "gpu-l40s-04"
PERSON_NODE = "gpu-a100-06"
QUARANTINED_S = 3 * 3600  # NVSentinel cordoned it this long before the demo starts
# The person's cordon: by someone else than the demo's identity, with a reason and a ticket, two days before the demo
# starts, for a day and a half (expired six hours before the start).
PERSON = "priya@example.com"
PERSON_REASON = "NVLink CRC errors on GPU 5: waiting for the vendor's RMA"
PERSON_TICKET = "HW-4217"
PERSON_SINCE_S = 2 * 86400
PERSON_EXPIRED_S = 6 * 3600
DELETING_S = 20 * 60  # the autoscaler tainted it this long before
MAINTENANCE_NODE = "gpu-h100-10"
MAINTENANCE_S = 2 * 3600  # the NodeMaintenance was requested this long before the demo starts
MAINTENANCE_REQUESTOR = "network.nvidia.com"  # the Network Operator's requestorID (a domain name, as the CRD asks)
CONSOLIDATING_S = 15 * 60  # Karpenter chose gpu-a100-07 for consolidation this long before
UPGRADE_STALLED_NODE = "gpu-l40s-06"
UPGRADE_STALLED_S = 3 * 86400  # in validation-required this long before the demo starts
GPU_ERROR_TAINT = Taint("nvidia.com/gpu-error", "fatal", "NoSchedule")
KARPENTER_POOL = "gpu-a100"
KARPENTER_POOL_NODES = tuple(f"gpu-a100-{i:02d}" for i in range(1, 9))
# As a NodePool's owner writes spec.disruption.budgets (sigs.k8s.io/karpenter v1.13.0 pkg/apis/v1/nodepool.go Budget).
DEMO_BUDGETS = BudgetObjects(
    nodepools=(NodePoolRecord(KARPENTER_POOL, (
        NodePoolBudget("75%"),
        NodePoolBudget("0", "0 9 * * 1-5", "8h"),
        NodePoolBudget("0", reasons=("Drifted",)),
    )),),
    reads={NODEPOOL: d.READ, MAINTENANCE_CONFIG: d.NOT_INSTALLED})


def hand_to_actors(nodes: Mapping[str, SimNode], start: float) -> None:
    quarantined = nodes[NVSENTINEL_NODE]
    at = int(start - QUARANTINED_S)
    quarantined.unschedulable = True
    quarantined.taints = (*quarantined.taints, GPU_ERROR_TAINT)
    quarantined.labels.update({
        d.NVSENTINEL_CORDON_BY: "NVSentinel",
        d.NVSENTINEL_CORDON_TIMESTAMP: time.strftime(d.NVSENTINEL_TIMESTAMP_FORMAT, time.gmtime(at)),
        d.NVSENTINEL_STATE: "quarantined",
    })
    event = {"checkName": "GpuXidError", "isFatal": True, "isHealthy": False, "nodeName": NVSENTINEL_NODE,
             "message": "XID 48: double-bit ECC error on GPU 2", "errorCode": ["48"],
             "recommendedAction": "RESTART_BM", "generatedTimestamp": {"seconds": at, "nanos": 0}}
    quarantined.annotations.update({
        d.NVSENTINEL_EVENT: json.dumps([event]),
        d.NVSENTINEL_APPLIED_TAINTS: json.dumps([{"Key": GPU_ERROR_TAINT.key, "Value": GPU_ERROR_TAINT.value,
                                                  "Effect": GPU_ERROR_TAINT.effect}]),
        d.NVSENTINEL_IS_CORDONED: "True",
    })
    for name in KARPENTER_POOL_NODES:
        nodes[name].labels[NODEPOOL_LABEL] = KARPENTER_POOL
    karpenter = nodes[KARPENTER_NODE]
    karpenter.taints = (*karpenter.taints, Taint(d.KARPENTER_DISRUPTED, "", "NoSchedule"))
    deleting = nodes[AUTOSCALER_NODE]
    deleting.unschedulable = True
    deleting.taints = (*deleting.taints, Taint(d.CA_TO_BE_DELETED, str(int(start - DELETING_S)), "NoSchedule"))
    nodes[MAINTENANCE_NODE].unschedulable = True  # the maintenance-operator cordons first (spec.cordon: true)
    stalled = nodes[UPGRADE_STALLED_NODE]
    stalled.unschedulable, stalled.upgrade_state = True, "validation-required"
    stalled.annotations[d.UPGRADE_VALIDATION_START] = str(int(start - UPGRADE_STALLED_S))
    person = nodes[PERSON_NODE]
    person.unschedulable = True
    record = CordonRecord(PERSON, PERSON_REASON, float(int(start - PERSON_SINCE_S)), PERSON_TICKET,
                          float(int(start - PERSON_EXPIRED_S)))
    person.annotations[d.CORDON_RECORD] = record.to_annotation()  # as gputui.ops.cordon writes it


def actor_objects(start: float) -> ActorObjects:
    """The actors' own objects behind the Nodes above, as their controllers write them (docs/disruption-actors.md
    §2, §3): every kind read (the simulated cluster serves them all), and the NodePool budgets beside them."""
    requested = float(int(start - MAINTENANCE_S))
    maintenance = NodeMaintenanceRecord(
        namespace="nvidia-maintenance-operator", name=f"{MAINTENANCE_NODE}-network-operator", node=MAINTENANCE_NODE,
        requestor=MAINTENANCE_REQUESTOR, created=requested,
        conditions=(Condition(d.NM_READY, "False", d.NM_DRAINING, "", requested + 30),),
        drain_timeout_s=600)
    chosen = float(int(start - CONSOLIDATING_S))
    claim = NodeClaimRecord(name=f"{KARPENTER_POOL}-x7k2p", node=KARPENTER_NODE, nodepool=KARPENTER_POOL,
                            conditions=(Condition(d.KC_DISRUPTION_REASON, "True", "Underutilized", "Underutilized",
                                                  chosen),))
    reads = dict.fromkeys(("NodeMaintenance", "NodeClaim", "ExternalRemediationRequest", "MaintenanceRequest",
                           *JANITOR_KINDS), d.READ)
    return ActorObjects(maintenances=(maintenance,), claims=(claim,), reads=reads, budgets=DEMO_BUDGETS)
