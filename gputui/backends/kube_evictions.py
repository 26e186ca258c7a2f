"""The EvictionRequest API's objects read from the apiserver (KEP-4563, `lifecycle.k8s.io/v1alpha1`, served by
kube-apiserver 1.37 only with `--feature-gates=EvictionRequestAPI=true` and
`--runtime-config=lifecycle.k8s.io/v1alpha1=true`; docs/disruption-actors.md §5): EvictionRequests and Evictions,
both namespaced, listed and watched cluster-wide (a drained node's pods live in any namespace). The fields are
`k8s.io/api@v0.37.2` lifecycle/v1alpha1/types.go's; the records and rules are gputui.vocabulary.eviction_requests'.

Each kind gets an optional cache of its own in gputui.backends.kube_actors.ActorReader, read as the other actors
are: not installed (not served), read, or unknown (forbidden, failing), never blocking gputui's start."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputui.backends.kube_http import path_of
from gputui.backends.kube_nvsentinel import rfc3339
from gputui.vocabulary import eviction_requests as er
from gputui.vocabulary.disruptions import Condition
from gputui.vocabulary.eviction_requests import EvictionRecord, EvictionRequestRecord, ResponderRecord

REQUESTS_PLURAL = "evictionrequests"
EVICTIONS_PLURAL = "evictions"


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _target(spec: dict[str, Any]) -> tuple[str, str]:
    """spec.target.pod's name and uid ("" when absent: such an object targets no pod gputui drains)."""
    pod = _dict(_dict(spec.get("target")).get("pod"))
    return _str(pod.get("name")), _str(pod.get("uid"))


def _conditions(status: dict[str, Any]) -> tuple[Condition, ...]:
    return tuple(Condition(c["type"], _str(c.get("status")) or "Unknown", _str(c.get("reason")),
                           _str(c.get("message")), rfc3339(c.get("lastTransitionTime")))
                 for c in _list(status.get("conditions")) if isinstance(c, dict) and isinstance(c.get("type"), str))


def eviction_request_record(obj: dict[str, Any]) -> EvictionRequestRecord:
    meta, spec, status = (_dict(obj.get(k)) for k in ("metadata", "spec", "status"))
    pod, uid = _target(spec)
    return EvictionRequestRecord(
        namespace=_str(meta.get("namespace")), name=_str(meta.get("name")), pod=pod, pod_uid=uid,
        requester=_str(spec.get("requester")), intent=_str(spec.get("intent")),
        created=rfc3339(meta.get("creationTimestamp")), conditions=_conditions(status))


def eviction_record(obj: dict[str, Any]) -> EvictionRecord:
    """An Eviction, its responders' states (status.targetResponders) joined by name to their times
    (status.responders: the API keeps the two lists the same length and keys)."""
    meta, spec, status = (_dict(obj.get(k)) for k in ("metadata", "spec", "status"))
    pod, uid = _target(spec)
    times = {r["name"]: r for r in _list(status.get("responders")) if isinstance(r, dict) and isinstance(r.get("name"), str)}
    responders = []
    for t in _list(status.get("targetResponders")):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            continue
        at = _dict(times.get(t["name"]))
        priority = t.get("priority")
        responders.append(ResponderRecord(
            name=t["name"], state=_str(t.get("state")),
            priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else None,
            started=rfc3339(at.get("startTime")), heartbeat=rfc3339(at.get("heartbeatTime")),
            completed=rfc3339(at.get("completionTime")), message=_str(at.get("message"))))
    requesters = tuple((_str(r.get("name")), _str(r.get("intent"))) for r in _list(status.get("requesters"))
                       if isinstance(r, dict))
    return EvictionRecord(namespace=_str(meta.get("namespace")), name=_str(meta.get("name")), pod=pod, pod_uid=uid,
                          responders=tuple(responders), requesters=requesters, conditions=_conditions(status))


def caches(make: Callable[[str, Callable[[dict[str, Any]], Any]], Any], version: str | None) -> dict[str, Any]:
    """The two kinds' caches when the API is served (discovery found both), under their source names."""
    if not version:
        return {}
    return {er.EVICTION_REQUEST: make(path_of(er.GROUP, version, REQUESTS_PLURAL), eviction_request_record),
            er.EVICTION: make(path_of(er.GROUP, version, EVICTIONS_PLURAL), eviction_record)}
