"""NVIDIA NVSentinel's hold on a node, in one row: its quarantine marks on the Node (fault-quarantine's labels and
annotations), its release taint and MaintenanceRequest annotation, and, where the snapshot carries them, its
ExternalRemediationRequests and MaintenanceRequests (gputui.backends.kube_nvsentinel; docs/disruption-actors.md §1).
They are one story: a MaintenanceRequest raises the fault that quarantines and drains the node, and a quarantined
node may then be handed to an external system by an ExternalRemediationRequest. So they merge into one hold per
node (never a row each); the phase is the most telling part's. Pure."""

from __future__ import annotations

import json
import time
from typing import Any

from gputui.policy.disruption_time import seconds as _seconds
from gputui.policy.disruption_time import stale as _stale
from gputui.policy.disruption_time import utc as _utc
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.disruptions import Disruption, MaintenanceRequestRecord, RemediationRecord
from gputui.vocabulary.model import Node
from gputui.vocabulary.scheduling import Taint


def _health_events(raw: str | None) -> list[dict[str, Any]]:
    """The quarantine annotation's HealthEvents: a JSON list (older releases: one object); [] when unreadable."""
    if not raw:
        return []
    try:
        data = json.loads(raw)
    except ValueError:
        return []
    events = data if isinstance(data, list) else [data]
    return [e for e in events if isinstance(e, dict)]


def _event_words(events: list[dict[str, Any]]) -> tuple[str, float | None]:
    """The first event's check and message, and the earliest generatedTimestamp (protobuf's {seconds, nanos})."""
    if not events:
        return "", None
    first = events[0]
    words = ": ".join(str(first[k]) for k in ("checkName", "message") if first.get(k))
    if len(events) > 1:
        words += f" (and {len(events) - 1} more)"
    stamps = []
    for e in events:
        stamp = e.get("generatedTimestamp")
        seconds = stamp.get("seconds") if isinstance(stamp, dict) else None
        if isinstance(seconds, (int, str)) and _seconds(str(seconds)) is not None:
            stamps.append(float(seconds))
    return words, min(stamps) if stamps else None


_NO_REQUESTS: tuple[list[RemediationRecord], list[MaintenanceRequestRecord]] = ([], [])


def nvsentinel_objects(node: str, snapshot: ClusterSnapshot | None
                        ) -> tuple[list[RemediationRecord], list[MaintenanceRequestRecord]]:
    """The node's NVSentinel requests in this snapshot (indexed once per snapshot)."""
    actors = snapshot.actors if snapshot is not None else None
    if actors is None or snapshot is None:
        return _NO_REQUESTS
    return snapshot.derived("nvsentinel_by_node", actors.nvsentinel_by_node).get(node, _NO_REQUESTS)


def nvsentinel_hold(node: Node, taints: tuple[Taint, ...], now: float, remediations: list[RemediationRecord],
                requests: list[MaintenanceRequestRecord]) -> list[Disruption]:
    """NVSentinel's one hold on the node, or none: its open ExternalRemediationRequests, its MaintenanceRequests,
    its quarantine marks, and its release taint and MR annotation where their objects were not read, merged. The
    phase is the first of these that applies (the request's conditions say more than the node's marks), since when
    the earliest dated, why all of them, stuck the first that is."""
    pieces = [_remediation(r, now, node.unschedulable) for r in remediations if r.open]
    pieces += [_maintenance_request(m, now, node.unschedulable) for m in requests]
    quarantine = _quarantine(node, now)
    if quarantine is not None:
        pieces.append(quarantine)
    told = {r.name for r in remediations if r.open}
    for t in taints:
        if t.key == d.NVSENTINEL_EXTERNAL_REMEDIATION and t.value not in told:
            closed = any(r.name == t.value for r in remediations)
            pieces.append(Disruption(d.NVSENTINEL, "external-remediation", None,
                                     f"handed to an external remediation system: ExternalRemediationRequest {t.value}"
                                     f" ({t})" + ("; it reports completion: janitor is taking the node back"
                                                  if closed else "")))
    request = node.annotations.get(d.NVSENTINEL_MAINTENANCE_REQUEST)
    if request and request not in {m.name for m in requests}:
        pieces.append(Disruption(d.NVSENTINEL, "maintenance-request", None,
                                 f"under maintenance: MaintenanceRequest {request}"))
    if not pieces:
        return []
    dated = [p.since for p in pieces if p.since is not None]
    return [Disruption(d.NVSENTINEL, pieces[0].phase, min(dated) if dated else None,
                       "; ".join(p.why for p in pieces), next((p.stuck for p in pieces if p.stuck), ""),
                       cordons=any(p.cordons for p in pieces))]


def _remediation(r: RemediationRecord, now: float, cordoned: bool) -> Disruption:
    """An open ExternalRemediationRequest: janitor releasing the node (Initializing), then the external system
    repairing it (AwaitingExternalSystem), or that system having stopped (Complete False: stuck, the node stays
    released until a person deletes the request)."""
    released, done = r.condition(d.ERR_RELEASED), r.condition(d.ERR_COMPLETE)
    stuck = ""
    if not r.conditions:
        phase = "Uninitialized"  # janitor has not seen it yet
    elif done is not None and done.status == "False":
        phase = done.reason or "ExternalRemediationFailed"
        stuck = (f"the external system stopped work on the node ({done.message or done.reason or 'no reason given'})"
                 f": the node stays released until a person deletes ExternalRemediationRequest {r.name}")
    elif released is None or released.status != "True":
        phase = (released.reason if released is not None else "") or "Initializing"
        if released is not None and released.status == "False":
            stuck = f"janitor could not release the node ({released.message or released.reason})"
    else:
        phase = (done.reason if done is not None else "") or "AwaitingExternalSystem"
    why = f"ExternalRemediationRequest {r.name}"
    if r.event.words():
        why += f" for {r.event.words()}"
    if r.deleting:
        why += "; being removed: janitor returns the node to NVSentinel"
    return Disruption(d.NVSENTINEL, phase, r.created, why, stuck or _stale(r.created, now, phase), cordons=cordoned)


def _maintenance_request(m: MaintenanceRequestRecord, now: float, cordoned: bool) -> Disruption:
    """A MaintenanceRequest: present = the node is under maintenance (NVSentinel quarantines and drains it once
    lifecycle-manager has emitted its event); only its deletion ends it, so a day-old one looks forgotten."""
    emitted = m.condition(d.MR_EMITTED)
    phase = (emitted.reason or emitted.status) if emitted is not None else "Uninitialized"
    why = f"MaintenanceRequest {m.name}"
    if m.event.words():
        why += f" for {m.event.words()}"
    if emitted is not None and emitted.status != "True" and emitted.message:
        why += f"; {emitted.message}"
    if m.start is not None:
        why += f"; window opens {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(m.start))}"
    if m.deleting:
        why += "; being removed: lifecycle-manager clears its fault, then NVSentinel uncordons the node"
    stuck = _stale(m.created, now, f"under maintenance ({phase})")
    if stuck:
        stuck += ": NVSentinel keeps the node until the MaintenanceRequest is deleted"
    return Disruption(d.NVSENTINEL, phase, m.created, why, stuck, cordons=cordoned)


def _quarantine(node: Node, now: float) -> Disruption | None:
    """The quarantine fault-quarantine wrote on the Node (labels, annotations), or None when there is none."""
    labels, notes = node.labels, node.annotations
    state = labels.get(d.NVSENTINEL_STATE, "")
    events = _health_events(notes.get(d.NVSENTINEL_EVENT))
    cordoned_by = labels.get(d.NVSENTINEL_CORDON_BY, "")
    if not (state or events or cordoned_by or notes.get(d.NVSENTINEL_IS_CORDONED) == "True"):
        return None
    words, event_time = _event_words(events)
    reason = labels.get(d.NVSENTINEL_CORDON_REASON, "")
    since = _utc(labels.get(d.NVSENTINEL_CORDON_TIMESTAMP), d.NVSENTINEL_TIMESTAMP_FORMAT) or event_time
    parts = [f"quarantined by {cordoned_by or 'NVSentinel'}"]
    parts += [p for p in (words, reason if reason and reason not in words else "") if p]
    if notes.get(d.NVSENTINEL_APPLIED_TAINTS):
        parts.append(f"taints {_applied_taints(notes[d.NVSENTINEL_APPLIED_TAINTS])}")
    if notes.get(d.NVSENTINEL_CORDON_PRE_EXISTING) == "True":
        parts.append("the node was already cordoned before")
    if notes.get(d.NVSENTINEL_UNCORDONED_MANUALLY) == "True":
        parts.append("a person uncordoned it by hand since")
    stuck = (f"NVSentinel's {state.split('-')[0]} failed: it leaves the node to a person"
             if state in d.NVSENTINEL_FAILED_STATES else _stale(since, now, f"{state or 'quarantined'}"))
    # It cordons on every shipped rule set; cordon-by and IsCordoned say it did (the state label alone may
    # outlive a hand uncordon, which it then marks).
    claims = bool(cordoned_by) or notes.get(d.NVSENTINEL_IS_CORDONED) == "True"
    return Disruption(d.NVSENTINEL, state or "quarantined", since, "; ".join(parts), stuck, cordons=claims)


def _applied_taints(raw: str) -> str:
    try:
        data = json.loads(raw)
        return ", ".join(str(Taint(str(t["Key"]), str(t.get("Value") or ""), str(t["Effect"]))) for t in data) \
            or "none"
    except (ValueError, KeyError, TypeError):
        return "unreadable"
