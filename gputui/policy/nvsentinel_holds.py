"""NVIDIA NVSentinel's hold on a node, in one row: its quarantine marks on the Node (fault-quarantine's labels and
annotations), its release taint and MaintenanceRequest annotation, and, where the snapshot carries them, its
ExternalRemediationRequests, MaintenanceRequests and its janitor's RebootNodes, TerminateNodes and GPUResets
(gputui.backends.kube_nvsentinel; docs/disruption-actors.md §1). They are one story: a MaintenanceRequest raises the
fault that quarantines and drains the node, and fault-remediation then remediates the quarantined node: by janitor
(reboot it, terminate it, reset its GPUs) or by handing it to an external system (an ExternalRemediationRequest).
So they merge into one hold per node (never a row each); the phase is the most telling part's. Pure."""

from __future__ import annotations

import json
import time
from typing import Any

from gputui.policy.disruption_time import seconds as _seconds
from gputui.policy.disruption_time import stale as _stale
from gputui.policy.disruption_time import utc as _utc
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary import nvsentinel_janitor as nj
from gputui.vocabulary.disruptions import Disruption, MaintenanceRequestRecord, NVSentinelObjects, RemediationRecord
from gputui.vocabulary.model import Condition, Node
from gputui.vocabulary.nvsentinel_janitor import JanitorRecord
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


_NONE = NVSentinelObjects()


def nvsentinel_objects(node: str, snapshot: ClusterSnapshot | None) -> NVSentinelObjects:
    """The node's NVSentinel requests and janitor actions in this snapshot (indexed once per snapshot)."""
    actors = snapshot.actors if snapshot is not None else None
    if actors is None or snapshot is None:
        return _NONE
    return snapshot.derived("nvsentinel_by_node", actors.nvsentinel_by_node).get(node, _NONE)


def nvsentinel_hold(node: Node, taints: tuple[Taint, ...], now: float, objects: NVSentinelObjects) -> list[Disruption]:
    """NVSentinel's one hold on the node, or none: its open ExternalRemediationRequests, its janitor's open actions,
    its MaintenanceRequests, its quarantine marks, and its release taint and MR annotation where their objects were
    not read, merged. The phase is the first of these that applies (what is being done to the node says more than
    what asked for it, and the objects more than the node's marks), since when the earliest dated, why all of them,
    stuck the first that is. A janitor action that is done (completionTime) is history, not a hold."""
    remediations, requests = objects.remediations, objects.requests
    pieces = [_remediation(r, now, node.unschedulable) for r in remediations if r.open]
    pieces += [_janitor(j, now, node.unschedulable)
               for j in sorted(objects.janitor, key=lambda j: j.started or j.created or 0.0) if j.open]
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


def _janitor(j: JanitorRecord, now: float, cordoned: bool) -> Disruption:
    """An open RebootNode, TerminateNode or GPUReset: janitor acting on the node (docs/disruption-actors.md §1). Since
    janitor took it up (status.startTime), else since it was created; stuck when janitor waits on someone else
    (manual mode), a step failed, or one step has lasted over a day (janitor's own timeouts, 25 minutes by its
    chart, would have ended it: janitor is not acting on it)."""
    phase, detail, stuck, step_since = _gpu_reset_step(j) if j.kind == nj.GPU_RESET else _signal_step(j)
    what = {nj.REBOOT_NODE: "reboot the node", nj.TERMINATE_NODE: "terminate the node (its instance deleted, the "
            "Node removed)", nj.GPU_RESET: f"reset {', '.join(j.gpus) if j.gpus else 'every GPU on the node'}"}
    why = f"{j.kind} {j.name}: janitor is to {what.get(j.kind, 'act on the node')}" + (" (forced)" if j.force else "")
    why += f"; {detail}" if detail else ""
    if j.deleting:
        why += "; being deleted" + ("" if j.kind != nj.GPU_RESET else ": janitor restores the GPU services first")
    since = j.started or j.created
    stuck = stuck or _stale(step_since or since, now, f"{j.kind} {j.name} in {phase}")
    return Disruption(d.NVSENTINEL, phase, since, why, stuck, cordons=cordoned)


def _failed(c: Condition | None) -> bool:
    """A condition janitor set False for a reason other than its seed (Initializing is Unknown, never False)."""
    return c is not None and c.status == "False" and c.reason not in ("", "Initializing")


_ACTION = {nj.REBOOT_NODE: "reboot", nj.TERMINATE_NODE: "terminate"}


def _signal_step(j: JanitorRecord) -> tuple[str, str, str, float | None]:
    """RebootNode's and TerminateNode's step: (phase, detail, stuck, since when in it). Initializing until janitor
    has sent the signal to the cloud provider, SignalSent while it waits for the node, or ManualMode: janitor sends
    nothing, an outside actor must."""
    signal, manual = j.condition(nj.SIGNAL_SENT), j.condition(nj.MANUAL_MODE)
    done = j.condition(nj.DONE_CONDITION.get(j.kind, ""))
    failed = signal if _failed(signal) else done if _failed(done) else None
    if failed is not None:  # janitor sets completionTime with these; without it, it has not finished failing
        return (failed.reason, f"{failed.type} {failed.reason}" + (f": {failed.message}" if failed.message else ""),
                f"janitor's {failed.type} is {failed.reason} ({failed.message or 'no message'})", failed.since)
    if signal is not None and signal.status == "True":
        if j.kind == nj.REBOOT_NODE:
            ref = f" (request {signal.message})" if signal.message else ""
            wait = f"signal sent to the cloud provider{ref}; waiting for the node to be Ready again"
        else:
            wait = "signal sent to the cloud provider; waiting for the node to go NotReady (janitor then deletes it)"
        return nj.SIGNAL_SENT, wait, "", signal.since
    if manual is not None and manual.status == "True":
        return (nj.MANUAL_MODE, manual.message or manual.reason,
                f"janitor is in manual mode: it sends no {_ACTION.get(j.kind, j.kind)} signal; a person or an "
                f"outside system must act on the node and set {nj.SIGNAL_SENT}", manual.since)
    if not j.conditions:
        return "Uninitialized", "janitor has not taken it up (it acts on a node one action at a time)", "", None
    return (signal.reason if signal is not None and signal.reason else "Initializing"), "signal not sent yet", "", \
        signal.since if signal is not None else None


def _gpu_reset_step(j: JanitorRecord) -> tuple[str, str, str, float | None]:
    """GPUReset's step: the first of its steps not yet True, by that condition's reason (Pending,
    TearingDownServices, ResetJobRunning, RestoringServices, …), else status.phase; a failure's reason (on any
    condition, or phase Failed) is stuck: janitor ends a failed reset at once."""
    if not j.conditions and not j.phase:
        return "Uninitialized", "janitor has not taken it up", "", None
    failed = next((c for c in j.conditions if c.reason in nj.GR_FAILURES), None)
    if failed is None and j.phase == "Failed":
        failed = j.condition(nj.GR_COMPLETE)
    if failed is not None or j.phase == "Failed":
        reason, message = (failed.reason, failed.message) if failed is not None else (j.phase, "")
        return (reason, reason + (f": {message}" if message else ""),
                f"janitor's GPU reset failed: {reason} ({message or 'no message'})",
                failed.since if failed is not None else None)
    terminating = j.condition(nj.GR_TERMINATING)
    if terminating is not None:
        return terminating.reason or nj.GR_TERMINATING, terminating.message, "", terminating.since
    last: Condition | None = None
    for step in nj.GR_STEPS:
        c = j.condition(step)
        if c is not None and c.status != "True":
            return c.reason or j.phase or step, c.message, "", c.since
        if c is None:
            return j.phase or "Pending", f"next step {step}", "", last.since if last is not None else None
        last = c
    return j.phase or "InProgress", "", "", last.since if last is not None else None


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
