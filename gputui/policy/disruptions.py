"""Who is disrupting a node, and why, read from the Node object and, where the snapshot carries them, the actors'
own objects: NodeMaintenances, Karpenter NodeClaims, NVSentinel's ExternalRemediationRequests, MaintenanceRequests
and janitor actions (issue 40; the names and where each actor writes them: gputui.vocabulary.disruptions and
docs/disruption-actors.md). Pure. One hold per actor per node for NVSentinel: its quarantine marks on the Node and
its requests are one story (a MaintenanceRequest raises the fault that quarantines the node; the quarantined node is
then handed to an external system by an ExternalRemediationRequest), told in one row.

What can be known from the Node: the cluster autoscaler's taints carry the time it tainted; NVSentinel's cordon
label carries the time it cordoned; the GPU Operator records a start time only in wait-for-jobs-required and
validation-required; gputui's drain records its start; a NodeClaim's condition its lastTransitionTime. What cannot:
when Karpenter tainted, without its NodeClaim (the taint has no value), when a NodeMaintenance entered a step other
than WaitForPodCompletion or Ready (the operator dates none of the others: gputui.vocabulary.disruptions), when the GPU Operator entered any other state (gputui's StateClock
knows only what it watched live), and who cordoned a node nobody claims (a person, or a tool gputui does not know).
"""

from __future__ import annotations

import json
import math

from gputui.policy.cordon_record import CordonRecord, read_record
from gputui.policy.disruption_time import age as _age
from gputui.policy.disruption_time import seconds as _seconds
from gputui.policy.disruption_time import stale as _stale
from gputui.policy.disruption_time import utc as _utc
from gputui.policy.lifecycle_holds import lifecycle_holds
from gputui.policy.nvsentinel_holds import nvsentinel_hold, nvsentinel_objects
from gputui.policy.upgrades import dated_since, stuck_because
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.disruptions import Disruption, NodeClaimRecord, NodeMaintenanceRecord
from gputui.vocabulary.model import DRAIN_PHASE_ANNOTATION, UPGRADE_FAILED, UPGRADE_IN_PROGRESS, Node
from gputui.vocabulary.scheduling import Taint

# From cordon-required on, the operator has cordoned the node (or is about to) and uncordons it at the end.
_UPGRADE_CORDONS = frozenset(UPGRADE_IN_PROGRESS[1:]) | {UPGRADE_FAILED}


def node_disruptions(node: Node, now: float, snapshot: ClusterSnapshot | None = None) -> list[Disruption]:
    """Every actor's hold on `node`, stuck ones first. `snapshot` lets the GPU Operator's holds be named
    (gputui.policy.upgrades.stuck_because reads the node's pods and the fleet); without it they are not."""
    taints = node.scheduling.taints if node.scheduling is not None else ()
    maintenances, claims = _objects(node.name, snapshot)
    found = [*_autoscaler(taints, now), *_karpenter(node, taints, claims, now),
             *nvsentinel_hold(node, taints, now, nvsentinel_objects(node.name, snapshot)),
             *_gpu_operator(node, now, snapshot), *_gputui(node, now), *(_maintenance(m, now) for m in maintenances),
             *lifecycle_holds(node, now)]
    record = read_record(node.annotations) if node.unschedulable else None
    if record is not None:  # a cordon through gputui: its person, reason and expiry (a record left on a node
        found.append(_recorded(record, now))  # uncordoned by hand since is history, not a hold)
    elif node.unschedulable and not any(x.cordons for x in found):
        unread = [name for name, state in (snapshot.actors.reads.items() if snapshot and snapshot.actors else ())
                  if state.startswith(d.UNKNOWN)]
        maybe = f"; {' and '.join(unread)} objects could not be read: one may hold it" if unread else ""
        found.append(Disruption(d.PERSON, "cordoned", None, "cordoned, owner unknown (no actor gputui reads claims "
                                f"it: kubectl cordon, or a tool gputui does not know){maybe}", cordons=True))
    return sorted(found, key=lambda x: not x.stuck)  # stable: otherwise in the order above


def _autoscaler(taints: tuple[Taint, ...], now: float) -> list[Disruption]:
    out = []
    for t in taints:
        if t.key == d.CA_TO_BE_DELETED:
            since = _seconds(t.value)
            out.append(Disruption(d.CLUSTER_AUTOSCALER, "deleting", since,
                                  f"scale-down: the cluster autoscaler is removing this node ({t})",
                                  _stale(since, now, "marked for deletion"), cordons=True))
        elif t.key == d.CA_DELETION_CANDIDATE:
            # A candidate is only unneeded so far: it may stay one for as long as it is unneeded, never stuck.
            out.append(Disruption(d.CLUSTER_AUTOSCALER, "deletion-candidate", _seconds(t.value),
                                  f"scale-down candidate: the cluster autoscaler finds this node unneeded ({t})"))
    return out


_NO_OBJECTS: tuple[list[NodeMaintenanceRecord], list[NodeClaimRecord]] = ([], [])


def _objects(node: str, snapshot: ClusterSnapshot | None) -> tuple[list[NodeMaintenanceRecord], list[NodeClaimRecord]]:
    """The node's NodeMaintenances and NodeClaims in this snapshot (indexed once per snapshot)."""
    actors = snapshot.actors if snapshot is not None else None
    if actors is None or snapshot is None:
        return _NO_OBJECTS
    return snapshot.derived("actors_by_node", actors.by_node).get(node, _NO_OBJECTS)


def _karpenter(node: Node, taints: tuple[Taint, ...], claims: list[NodeClaimRecord], now: float) -> list[Disruption]:
    guarded = node.annotations.get(d.KARPENTER_DO_NOT_DISRUPT) == "true"
    guard = (f"; the node is annotated {d.KARPENTER_DO_NOT_DISRUPT}=true, which blocks voluntary disruption"
             if guarded else "")
    out = [x for c in claims if (x := _nodeclaim(c, guard, now)) is not None]
    for t in taints:
        if t.key == d.KARPENTER_DISRUPTED and out:
            continue  # its NodeClaim says which disruption, and since when
        if t.key == d.KARPENTER_DISRUPTED:
            out.append(Disruption(d.KARPENTER, "disrupting", None, "Karpenter is disrupting this node "
                                  f"(consolidation, drift, expiry, repair or termination: its NodeClaim says which) "
                                  f"({t}){guard}"))
        elif t.key == d.KARPENTER_REBOOTING:
            out.append(Disruption(d.KARPENTER, "rebooting", None, f"Karpenter is rebooting this node ({t}){guard}"))
    return out


def _nodeclaim(claim: NodeClaimRecord, guard: str, now: float) -> Disruption | None:
    """A NodeClaim's hold: terminating (deletionTimestamp; Drained Unknown/Draining while its pods go), else a
    disruption Karpenter chose (DisruptionReason=True: Underutilized, Empty, Drifted), else drifted (it will be
    replaced). None when it is in none of these."""
    of = f"NodeClaim {claim.name}" + (f", NodePool {claim.nodepool}" if claim.nodepool else "")
    reason = claim.condition(d.KC_DISRUPTION_REASON)
    chosen = reason is not None and reason.status == "True"
    if claim.deleting_since is not None:
        drained = claim.condition(d.KC_DRAINED)
        phase = "Draining" if drained is not None and drained.status != "True" else "Terminating"
        why = f"Karpenter is terminating this node ({of})" + (f": {reason.reason}" if chosen and reason else "")
        return Disruption(d.KARPENTER, phase, claim.deleting_since, why + guard,
                          _stale(claim.deleting_since, now, "terminating"))
    if chosen and reason is not None:
        return Disruption(d.KARPENTER, reason.reason or d.KC_DISRUPTION_REASON, reason.since,
                          f"Karpenter chose this node for disruption: {reason.reason or 'no reason given'} "
                          f"({of}){guard}", _stale(reason.since, now, f"chosen for disruption ({reason.reason})"))
    drifted = claim.condition(d.KC_DRIFTED)
    if drifted is not None and drifted.status == "True":
        return Disruption(d.KARPENTER, d.KC_DRIFTED, drifted.since,
                          f"drifted from its NodePool ({drifted.reason or 'no reason given'}): Karpenter will replace "
                          f"it ({of}){guard}")
    return None


def _maintenance(m: NodeMaintenanceRecord, now: float) -> Disruption:
    """A NodeMaintenance's hold: since its request (the operator dates no step but WaitForPodCompletion and Ready),
    why = its requestors and where it is; stuck when it looks so (Draining past its drain timeout, a failed
    requestor, or a day in one phase)."""
    phase = m.phase or "Uninitialized"
    parts = [f"NodeMaintenance {m.namespace}/{m.name} requested by {m.requestor or 'unknown'}"]
    if m.additional_requestors:
        parts[0] += f" (also {', '.join(m.additional_requestors)})"
    if m.drain_progress is not None and phase == d.NM_DRAINING:
        parts.append(f"drained {m.drain_progress}% of {m.eviction_pods if m.eviction_pods is not None else '?'} pods")
    if m.waiting_pods:
        shown = ", ".join(m.waiting_pods[:3]) + (f" and {len(m.waiting_pods) - 3} more" if len(m.waiting_pods) > 3
                                                 else "")
        parts.append(f"waiting on {len(m.waiting_pods)} pod{'s' * (len(m.waiting_pods) != 1)}: {shown}")
    ready, failed = m.condition(d.NM_READY), m.condition(d.NM_REQUESTOR_FAILED)
    if ready is not None and ready.message:
        parts.append(ready.message)
    if m.deleting:
        parts.append("being removed: the operator ends the maintenance (uncordons if it cordoned)")
    stuck = ""
    if phase == d.NM_REQUESTOR_FAILED or (failed is not None and failed.status == "True"):
        detail = failed.message or failed.reason if failed is not None else ""
        stuck = "its requestor reported a failure" + (f" ({detail})" if detail else "") + \
            ": the operator keeps the node (no garbage collection) until a person acts"
    elif phase == d.NM_DRAINING and m.drain_timeout_s:
        # The Draining step records no start: the latest dated step before it bounds it from below (the wait's
        # start, else Pending's, else the request), so the time counted is at least as long as the drain's.
        began = max((t for t in (m.wait_started, ready.since if ready else None, m.created) if t is not None),
                    default=None)
        if began is not None and now - began > m.drain_timeout_s + (m.wait_timeout_s or 0):
            stuck = (f"Draining, {_age(now - began)} after its last dated step, past its drain timeout of "
                     f"{m.drain_timeout_s}s{' plus its wait' if m.wait_timeout_s else ''} (the operator retries a "
                     "timed-out drain for ever)")
    stuck = stuck or _stale(m.created, now, phase)
    cordons = m.cordon and phase in ("Cordon", "WaitForPodCompletion", d.NM_DRAINING, "Ready", d.NM_REQUESTOR_FAILED)
    return Disruption(d.MAINTENANCE_OPERATOR, phase, m.created, "; ".join(parts), stuck, cordons=cordons,
                      ref=f"{m.namespace}/{m.name}", requestor=m.requestor)


def _gpu_operator(node: Node, now: float, snapshot: ClusterSnapshot | None) -> list[Disruption]:
    state = node.upgrade_state
    if state not in UPGRADE_IN_PROGRESS and state != UPGRADE_FAILED:
        return []
    since = dated_since(node)
    hold = stuck_because(snapshot, node) if snapshot is not None else \
        ("upgrade failed: the operator leaves the node for manual recovery" if state == UPGRADE_FAILED else "")
    why = "driver upgrade (GPU Operator)"
    if node.annotations.get(d.UPGRADE_INITIAL_UNSCHEDULABLE) == "true":
        why += "; the node was cordoned before the upgrade: the operator will not uncordon it"
    return [Disruption(d.GPU_OPERATOR, state, since, why, hold or _stale(since, now, state),
                       cordons=state in _UPGRADE_CORDONS)]


def _gputui(node: Node, now: float) -> list[Disruption]:
    phase = node.annotations.get(DRAIN_PHASE_ANNOTATION, "")
    if not phase:
        return []
    running = phase in d.DRAIN_IN_PROGRESS
    if not running and not node.unschedulable:
        return []  # a finished drain's record, the node back in service: history, not a hold
    since = _utc(node.annotations.get(d.DRAIN_STARTED), "%Y-%m-%dT%H:%M:%SZ")
    who = node.annotations.get(d.DRAIN_BY, "") or "unknown"
    stuck = ""
    if running:
        renewed = _lease_renewed(node.annotations.get(d.DRAIN_LEASE))
        if renewed is None or now - renewed > d.DRAIN_LEASE_S:
            stuck = ("interrupted: no gputui renews its drain lease (resume it, or abort it)" if renewed is None
                     else f"interrupted: its drain lease was last renewed {now - renewed:.0f}s ago (resume it)")
    why = f"gputui drain by {who}" + ("" if running else f", {phase}; the node is still cordoned")
    return [Disruption(d.GPUTUI, phase, since, why, stuck, cordons=True)]


def _lease_renewed(raw: str | None) -> float | None:
    try:
        renewed = float(json.loads(raw or "")["renewed"])
    except (ValueError, KeyError, TypeError):
        return None
    return renewed if math.isfinite(renewed) else None


def _recorded(record: CordonRecord, now: float) -> Disruption:
    """A person's cordon through gputui: who, why, the ticket and the expiry; stuck once the expiry has passed."""
    if record.problem:
        return Disruption(d.PERSON, "cordoned", None, f"cordoned through gputui: {record.words()}", cordons=True)
    stuck = "" if not record.expired(now) or record.expires is None else \
        f"cordon expired {_age(now - record.expires)} ago: uncordon it, or cordon it again with a new expiry"
    return Disruption(d.PERSON, "cordoned", record.since, f"cordoned through gputui by {record.words(now)}", stuck,
                      cordons=True)
