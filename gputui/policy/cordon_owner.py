"""Who holds a cordoned node, and whether an uncordon would undo another actor's hold (issue 40 item 2). Pure.

Another actor holds the cordon when uncordoning would undo its step: NVSentinel's quarantine (or its external
remediation, or a maintenance request), the GPU Operator from cordon-required on (it uncordons the node itself at
the end), Karpenter's disruption taint, the cluster autoscaler deleting the node, a gputui drain whose holder still
renews its lease, and a person's cordon recorded through gputui by another identity. Not another actor: a gputui
cordon by the same identity; a failed GPU Operator upgrade (the operator left the node to a person); a cluster
autoscaler deletion candidate (a soft taint, no cordon); a drain nobody renews (interrupted: uncordoning is one way
to give it up); a plain `kubectl cordon` with no record (said, not refused: nobody is known to hold it); and a
NodeMaintenance gputui requested (the uncordon withdraws it). A NodeMaintenance another requestor made holds the
cordon from the operator's Cordon step on.
An identity gputui does not know ("" or "unknown") owns no record: every record is then another's (fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.policy.cordon_record import CordonRecord, read_record, shown_time
from gputui.policy.disruptions import node_disruptions
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.disruptions import Disruption
from gputui.vocabulary.model import UPGRADE_IN_PROGRESS, Node

UNRECORDED = "cordoned by someone outside gputui (no reason recorded)"
_UPGRADE_HOLDS = frozenset(UPGRADE_IN_PROGRESS[1:])  # from cordon-required on: the operator cordoned it
_LEADS = {
    d.NVSENTINEL: "NVSentinel quarantined it", d.GPU_OPERATOR: "the GPU Operator is upgrading its driver",
    d.KARPENTER: "Karpenter is disrupting it", d.CLUSTER_AUTOSCALER: "the cluster autoscaler is deleting it",
    d.GPUTUI: "a gputui drain is running on it", d.PERSON: "cordoned through gputui by another user",
    d.NODE_LIFECYCLE: "another writer marks it", d.MAINTENANCE_OPERATOR: "the maintenance-operator holds it",
}


@dataclass(frozen=True, slots=True)
class CordonOwner:
    """Who holds one node's cordon, as an uncordon sees it."""

    holders: tuple[Disruption, ...]  # other actors' holds: an uncordon asks first (TUI) or is refused (headless)
    record: CordonRecord | None  # gputui's cordon record on the node, whoever wrote it
    note: str = ""  # what the plan says when nobody else holds it ("" when nothing to say)
    # gputui's own NodeMaintenances that cordon the node ("namespace/name"): an uncordon withdraws them (deletes
    # them: the operator ends the maintenance) as well as uncordoning.
    requests: tuple[str, ...] = ()

    @property
    def foreign(self) -> bool:
        return bool(self.holders)

    def words(self) -> str:
        """`NVSentinel quarantined it: GpuXidError: XID 79 … (since 2026-12-01 10:00 UTC)`, one per holder."""
        return "; ".join(holder_words(h) for h in self.holders)

    def to_dict(self) -> dict[str, object]:
        return {"foreign": self.foreign, "holders": [{**h.to_dict(), "words": holder_words(h)} for h in self.holders],
                "record": self.record.to_dict() if self.record is not None else None, "note": self.note or None}


def holder_words(hold: Disruption) -> str:
    since = f" (since {shown_time(hold.since)})" if hold.since is not None else ""
    lead = _LEADS.get(hold.actor, hold.actor)
    why = hold.why
    if hold.actor == d.NVSENTINEL:  # one hold merges its quarantine, remediation and maintenance requests
        parts = why.split("; ")
        quarantined = "quarantined by NVSentinel" in parts
        why = "; ".join(p for p in parts if p != "quarantined by NVSentinel")
        lead = lead if quarantined else "NVSentinel holds it"
        lead += f" ({hold.phase})" if hold.phase != "quarantined" else ""
    elif hold.actor == d.GPU_OPERATOR:  # its why is the same words but for the note on an earlier cordon
        why = why.removeprefix("driver upgrade (GPU Operator)").removeprefix("; ")
        lead += f" (state {hold.phase})"
    elif hold.actor == d.NODE_LIFECYCLE:  # the lead says who; the condition and its writer's words say why
        why = why.removeprefix("node lifecycle condition ")
    elif hold.actor == d.PERSON:
        why = why.removeprefix("cordoned through gputui by ")
    return f"{lead}: {why}{since}" if why else f"{lead}{since}"


def _holds(hold: Disruption, record: CordonRecord | None, identity: str) -> bool:
    """Whether `hold` is another actor's, one that an uncordon would undo."""
    if hold.actor == d.GPU_OPERATOR:
        return hold.phase in _UPGRADE_HOLDS
    if hold.actor == d.CLUSTER_AUTOSCALER:
        return hold.phase == "deleting"
    if hold.actor == d.GPUTUI:
        return hold.phase in d.DRAIN_IN_PROGRESS and not hold.stuck  # a live lease: someone is draining it now
    if hold.actor == d.PERSON:
        if record is None:
            return False  # kubectl cordon, no record: nobody known holds it (said in the plan, not refused)
        return bool(record.problem) or identity in ("", "unknown") or record.by != identity
    if hold.actor == d.NODE_LIFECYCLE:  # someone's drain or maintenance under way (KEP-5683), not its aftermath
        return hold.phase in (d.LC_DRAIN_IN_PROGRESS, d.LC_MAINTENANCE_IN_PROGRESS)
    if hold.actor == d.MAINTENANCE_OPERATOR:  # its cordon, for another requestor (gputui's own is withdrawn)
        return hold.cordons and hold.requestor != d.GPUTUI_REQUESTOR
    return hold.actor in (d.NVSENTINEL, d.KARPENTER)


def cordon_owner(node: Node, identity: str, now: float, snapshot: ClusterSnapshot | None = None) -> CordonOwner:
    """Who holds `node`'s cordon, for an uncordon by `identity` (the audit log's) at `now`. A node that is not
    cordoned is held by nobody (an uncordon changes nothing another actor did)."""
    record = read_record(node.annotations)
    if not node.unschedulable:
        return CordonOwner((), record)
    found = node_disruptions(node, now, snapshot)
    holders = tuple(h for h in found if _holds(h, record, identity))
    note = ""
    if not holders:
        if record is not None:
            note = f"cordoned through gputui by {record.words(now)}"
        elif any(h.actor == d.PERSON for h in found):
            note = UNRECORDED
    ours = tuple(h.ref for h in found if h.actor == d.MAINTENANCE_OPERATOR and h.cordons
                 and h.requestor == d.GPUTUI_REQUESTOR)
    if ours and not note:
        note = f"cordoned by the maintenance-operator for a gputui drain (NodeMaintenance {', '.join(ours)}: the uncordon deletes it)"
    return CordonOwner(holders, record, note, ours)
