"""NVIDIA NVSentinel's own requests, read from its custom resources: ExternalRemediationRequests (fault-remediation
creates them, janitor hands the node to an external system) and MaintenanceRequests (a requester creates them,
lifecycle-manager raises the fault that quarantines and drains the node). Both nvsentinel.dgxc.nvidia.com/v1,
cluster-scoped (issue 40 item 1; docs/disruption-actors.md §1). And its janitor's actions: RebootNode, TerminateNode
and GPUReset (janitor.dgxc.nvidia.com/v1alpha1, cluster-scoped; fault-remediation creates them, janitor carries them
out), written by controller-runtime as Kubernetes objects (RFC3339 times, metav1.Condition).

NVSentinel writes them through protojson (its Go types wrap proto messages: lifecycle-manager/api/v1alpha1
maintenancerequest_register.go), so a Timestamp is RFC3339 with up to nine fractional digits, an int64 such as a
condition's observedGeneration is a JSON string, and an enum such as recommendedAction is its name ("RESTART_VM")
unless someone wrote the number. Everything here is data from outside: the HealthEvent's text is whatever its
writer put there, so it is cut to bounds (gputui.vocabulary.disruptions.EVENT_TEXT_MAX) and shown made visible."""

from __future__ import annotations

from typing import Any

from gputui.backends.kube_objects import rfc3339
from gputui.vocabulary import disruptions as d
from gputui.vocabulary import nvsentinel_janitor as j
from gputui.vocabulary.disruptions import Condition, HealthEventWhy, MaintenanceRequestRecord, RemediationRecord
from gputui.vocabulary.nvsentinel_janitor import JanitorRecord

REMEDIATION = "ExternalRemediationRequest"  # the sources' names
MAINTENANCE_REQUEST = "MaintenanceRequest"
REMEDIATION_PLURAL = "externalremediationrequests"
MAINTENANCE_REQUEST_PLURAL = "maintenancerequests"
ERR_NODE_LABEL = "nvsentinel.dgxc.nvidia.com/node"  # on the ERR (commons pkg/managed), when the spec lacks a node
_ERR_TYPES = frozenset({d.ERR_RELEASED, d.ERR_COMPLETE})
_MR_TYPES = frozenset({d.MR_EMITTED})


def _text(value: object) -> str:
    """A scalar as text, cut to the bound; "" for anything else (a list or object where text belongs)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ""
    text = str(value)
    return text if len(text) <= d.EVENT_TEXT_MAX else text[:d.EVENT_TEXT_MAX] + "…"


def _conditions(status: object, wanted: frozenset[str]) -> tuple[Condition, ...]:
    out = []
    items = status.get("conditions") if isinstance(status, dict) else None
    for c in items if isinstance(items, list) else []:
        if isinstance(c, dict) and c.get("type") in wanted:
            out.append(Condition(str(c["type"]), _text(c.get("status")) or "Unknown", _text(c.get("reason")),
                                 _text(c.get("message")), rfc3339(c.get("lastTransitionTime"))))
    return tuple(out)


def health_event_why(event: object) -> HealthEventWhy:
    """The why of a spec.healthEvent (data-models health_event.proto HealthEvent)."""
    if not isinstance(event, dict):
        return HealthEventWhy()
    codes = event.get("errorCode")
    return HealthEventWhy(
        check=_text(event.get("checkName")), message=_text(event.get("message")),
        action=_text(event.get("recommendedAction")), custom_action=_text(event.get("customRecommendedAction")),
        error_codes=tuple(t for t in (_text(c) for c in codes[:d.EVENT_CODES_MAX]) if t)
        if isinstance(codes, list) else ())


def _parts(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """metadata, spec, spec.healthEvent and status, each {} when absent or not an object."""
    meta, spec, status = (obj.get(k) for k in ("metadata", "spec", "status"))
    meta, spec = meta if isinstance(meta, dict) else {}, spec if isinstance(spec, dict) else {}
    event = spec.get("healthEvent")
    return meta, spec, event if isinstance(event, dict) else {}, status if isinstance(status, dict) else {}


def remediation_record(obj: dict[str, Any]) -> RemediationRecord:
    meta, _spec, event, status = _parts(obj)
    labels = meta.get("labels")
    labels = labels if isinstance(labels, dict) else {}
    return RemediationRecord(
        name=str(meta.get("name") or ""), node=_text(event.get("nodeName")) or _text(labels.get(ERR_NODE_LABEL)),
        created=rfc3339(meta.get("creationTimestamp")), deleting=bool(meta.get("deletionTimestamp")),
        completed=rfc3339(status.get("completionTime")),
        conditions=_conditions(status, _ERR_TYPES), event=health_event_why(event))


def maintenance_request_record(obj: dict[str, Any]) -> MaintenanceRequestRecord:
    meta, spec, event, status = _parts(obj)
    return MaintenanceRequestRecord(
        name=str(meta.get("name") or ""), node=_text(event.get("nodeName")),
        created=rfc3339(meta.get("creationTimestamp")), deleting=bool(meta.get("deletionTimestamp")),
        start=rfc3339(spec.get("startTime")), conditions=_conditions(status, _MR_TYPES),
        event=health_event_why(event))


def _gpus(spec: dict[str, Any]) -> tuple[str, ...]:
    """A GPUReset's spec.selector: its GPU UUIDs, then its PCI bus IDs, at most GPUS_MAX (the rest counted)."""
    selector = spec.get("selector")
    selector = selector if isinstance(selector, dict) else {}
    ids = [t for key in ("uuids", "pciBusIDs") if isinstance(selector.get(key), list)
           for t in (_text(v) for v in selector[key]) if t]
    if len(ids) > j.GPUS_MAX:
        return (*ids[:j.GPUS_MAX], f"(and {len(ids) - j.GPUS_MAX} more)")
    return tuple(ids)


def janitor_record(kind: str, obj: dict[str, Any]) -> JanitorRecord:
    """A RebootNode, TerminateNode or GPUReset as janitor leaves it (janitor/api/v1alpha1)."""
    meta, spec, _event, status = _parts(obj)
    return JanitorRecord(
        kind=kind, name=str(meta.get("name") or ""), node=_text(spec.get("nodeName")),
        force=spec.get("force") is True, created=rfc3339(meta.get("creationTimestamp")),
        started=rfc3339(status.get("startTime")), completed=rfc3339(status.get("completionTime")),
        deleting=bool(meta.get("deletionTimestamp")), phase=_text(status.get("phase")),
        conditions=_conditions(status, j.WANTED[kind]), gpus=_gpus(spec) if kind == j.GPU_RESET else ())
